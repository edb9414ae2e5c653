#!/usr/bin/env bash
# The two-step check with curl (and bash): the unary calls and the guards,
# and a real conversation whose approval is answered while the Prompt
# stream is still being read (the stream goes to a file in the background;
# Approve is a second curl).
#
#   AGENTLANE_BRIDGE=/path/to/agentlane-bridge bash check.sh -- \
#       --app demo_app:create_backend --project-dir ../../backend --python ../../../.venv/bin/python
#
# Every call is a POST of JSON with `Authorization: Bearer <token>`; a
# server stream's request and response are enveloped (1 flag byte, a 4-byte
# big-endian length, the message; flag 2 marks the final EndStreamResponse).
set -euo pipefail
[ "${1:-}" = "--" ] && shift

fail() { echo "check: FAILED: $*"; exit 1; }
trap 'echo "check: FAILED: line $LINENO exited with $?"' ERR

coproc BRIDGE { exec "${AGENTLANE_BRIDGE:-agentlane-bridge}" "$@"; }
bridge_pid=$BRIDGE_PID
exec 3>&"${BRIDGE[1]}" # the bridge's stdin, held open until the end
read -r discovery <&"${BRIDGE[0]}" || fail "no discovery line"
case "$discovery" in "agentlane-bridge ready "*) ;; *) fail "agentlane-bridge did not start: $discovery" ;; esac
url=$(printf '%s' "$discovery" | sed 's/.*"url":"\([^"]*\)".*/\1/')
port=$(printf '%s' "$discovery" | sed 's/.*"port":\([0-9]*\).*/\1/')
token=$(cat "$(printf '%s' "$discovery" | sed 's/.*"tokenFile":"\([^"]*\)".*/\1/')")
work=$(mktemp -d)
trap 'rm -rf "$work"; kill "$bridge_pid" 2>/dev/null || true' EXIT

# call METHOD JSON [curl options…]: prints the HTTP status, body in $work/body.
call() {
  local method="$1" body="$2"; shift 2
  curl -s -o "$work/body" -w '%{http_code}' -X POST "$@" \
    -H 'Content-Type: application/json' --data "$body" "$url/agentlane.bridge.v1.$method"
}
auth=(-H "Authorization: Bearer $token")

# Step 1: the control path and the guards.
[ "$(call BridgeControlService/Ping '{}' "${auth[@]}")" = 200 ] && grep -q '"message":"pong"' "$work/body" || fail "Ping: $(cat "$work/body")"
[ "$(call BridgeControlService/GetVersion '{}' "${auth[@]}")" = 200 ] || fail "GetVersion: $(cat "$work/body")"
grep -q '"api":"agentlane.bridge.v1"' "$work/body" && grep -q '"protocolVersion":"1\.' "$work/body" || fail "GetVersion: $(cat "$work/body")"
agentlane=$(sed 's/.*\\"version\\":\\"\([^\\]*\)\\".*/\1/' "$work/body")
[ "$(call BridgeControlService/Ping '{}')" = 401 ] && grep -q '"code":"unauthenticated"' "$work/body" || fail "no token: $(cat "$work/body")"
[ "$(call BridgeControlService/Ping '{}' -H "Authorization: Bearer wrong")" = 401 ] || fail "wrong token accepted"
[ "$(call BridgeControlService/Ping '{}' "${auth[@]}" -H 'Origin: http://example.com')" = 403 ] && grep -q '"code":"permission_denied"' "$work/body" || fail "Origin: $(cat "$work/body")"
[ "$(call BridgeControlService/Ping '{}' "${auth[@]}" -H 'Host: evil.example')" = 403 ] || fail "foreign Host accepted"
[ "$(call BridgeControlService/Ping '{}' "${auth[@]}" -H "Host: localhost:$port")" = 200 ] || fail "localhost refused"
[ "$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$url/agentlane.bridge.v1.BridgeControlService/Ping")" = 405 ] || fail "GET accepted"
echo "step 1: ok (pong; agentlane $agentlane; no/wrong token -> 401 unauthenticated; Origin, foreign Host -> 403; GET -> 405)"

# envelope JSON: the enveloped request of a server stream.
envelope() {
  local n=${#1}
  printf "\\x00\\x$(printf %02x $(((n >> 24) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $((n & 255)))"
  printf '%s' "$1"
}

# Step 2: a real conversation, allowed once and denied once.
for decision in allow deny; do
  envelope '{"text":"Please save a note: remember milk."}' > "$work/prompt"
  : > "$work/stream" # there before the poll below looks
  curl -s -N -X POST "${auth[@]}" -H 'Content-Type: application/connect+json' \
    --data-binary @"$work/prompt" "$url/agentlane.bridge.v1.AgentService/Prompt" > "$work/stream" &
  stream=$!
  id=""
  for _ in $(seq 1 300); do # the run waits for the answer: poll the stream, up to 30 s
    # A pending record: take its request_id (no answer yet, so no resolved one).
    if grep -aq 'status\\":\\"pending' "$work/stream"; then
      id=$(grep -ao 'request_id\\":\\"[^\\]*' "$work/stream" | head -1 | sed 's/request_id\\":\\"//' || true)
    fi
    [ -n "$id" ] && break
    sleep 0.1
  done
  [ -n "$id" ] || fail "no approval request in the stream"
  if [ "$decision" = allow ]; then answer="{\"id\":\"$id\",\"allowed\":true}"; else answer="{\"id\":\"$id\",\"allowed\":false,\"reason\":\"Denied by curl.\"}"; fi
  [ "$(call AgentService/Approve "$answer" "${auth[@]}")" = 200 ] || fail "Approve: $(cat "$work/body")"
  grep -q "outcome\\\\\":\\\\\"$decision" "$work/body" || fail "Approve resolved otherwise: $(cat "$work/body")"
  wait "$stream" || fail "the Prompt stream's curl exited with $?"
  grep -aq '\\"type\\":\\"run_complete\\"' "$work/stream" || fail "no run_complete in the stream"
  tail -c 3 "$work/stream" | grep -q '{}' || fail "the stream did not end OK"
  final=$(grep -ao 'final_output\\":\\"[^\\]*' "$work/stream" | tail -1 | sed 's/final_output\\":\\"//')
  if [ "$decision" = allow ]; then
    case "$final" in *"Saved note"*) ;; *) fail "the final answer does not reflect the approval: $final" ;; esac
  else
    case "$final" in *"Denied by curl."*) ;; *) fail "the final answer does not reflect the denial: $final" ;; esac
  fi
  echo "step 2: ok ($decision: final answer \"$final\")"
done

[ "$(call BridgeControlService/Shutdown '{}' "${auth[@]}")" = 200 ] || fail "Shutdown: $(cat "$work/body")"
exec 3>&-
wait "$bridge_pid" || fail "agentlane-bridge exited with $?"
echo "check: passed"
