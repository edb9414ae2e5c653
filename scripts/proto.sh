#!/usr/bin/env bash
# The bridge contract's tooling (buf from npm; the Python generators from
# .venv-clients, see setup-bridge-clients.sh):
#
#   scripts/proto.sh          lint, then regenerate everything checked in:
#                             proto/agentlane-bridge-v1.binpb (the descriptor
#                             set the server is built from), the Node client
#                             code (examples/clients/node/gen) and the Python
#                             client code (examples/clients/python/agentlane_bridge_v1)
#   scripts/proto.sh --check  lint, buf breaking against proto/released/v1.binpb
#                             (the contract as released; replace it at a
#                             release), and fail if anything checked in
#                             differs from what the .proto files give
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
buf=node_modules/.bin/buf
mode="${1:-generate}"

generate_into() { # <root>: writes every generated file under <root>
  local root="$1"
  mkdir -p "$root/proto"
  "$buf" build proto -o "$root/proto/agentlane-bridge-v1.binpb"
  rm -rf "$root/examples/clients/node/gen" "$root/.proto-gen"
  "$buf" generate proto --template proto/buf.gen.yaml -o "$root"
  # Python: buf writes the proto package path (agentlane/bridge/v1); the
  # modules import each other relatively, so they move to a package of
  # their own that cannot shadow the real `agentlane` package.
  local py="$root/examples/clients/python/agentlane_bridge_v1"
  rm -rf "$py"
  mkdir -p "$py"
  cp "$root"/.proto-gen/python/agentlane/bridge/v1/bridge_{pb,connect}.py "$py/"
  printf '"""Generated from proto/agentlane/bridge/v1/bridge.proto by scripts/proto.sh. DO NOT EDIT."""\n' > "$py/__init__.py"
  rm -rf "$root/.proto-gen"
}

"$buf" lint proto
case "$mode" in
  generate)
    generate_into .
    echo "proto: regenerated the descriptor set and the Node and Python client code"
    ;;
  --check)
    "$buf" breaking proto --against proto/released/v1.binpb
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    generate_into "$tmp"
    stale=0
    cmp -s "$tmp/proto/agentlane-bridge-v1.binpb" proto/agentlane-bridge-v1.binpb || { echo "proto: stale proto/agentlane-bridge-v1.binpb"; stale=1; }
    for dir in examples/clients/node/gen examples/clients/python/agentlane_bridge_v1; do
      diff -r -x __pycache__ "$tmp/$dir" "$dir" >/dev/null || { echo "proto: stale $dir"; stale=1; }
    done
    [ "$stale" = 0 ] || { echo "proto: run scripts/proto.sh and commit the result"; exit 1; }
    echo "proto: lint ok, no breaking change against proto/released/v1.binpb, generated code current"
    ;;
  *) echo "usage: scripts/proto.sh [--check]" >&2; exit 2 ;;
esac
