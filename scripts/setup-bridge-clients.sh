#!/usr/bin/env bash
# Installs what the agentlane-bridge client tests and examples need, and
# nothing when it is already there (prints one line either way):
#   .venv-clients  Python 3.12 (the interpreter of .venv, made by
#                  setup-python.sh) with the Connect client (connectrpc) and
#                  the code generators protoc-gen-py, protoc-gen-connectrpc
#   go             Debian's golang-go, for examples/clients/go (standard
#                  library only), when no `go` is on PATH
# curl and Node are expected on the machine; the npm packages come from
# `npm ci`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv-clients"
packages=(connectrpc==0.13.0 protoc-gen-py==0.7.0 protoc-gen-connectrpc==0.13.0)
done_what=()

if ! "$venv/bin/python" -c 'import connectrpc, protobuf' >/dev/null 2>&1 \
   || [ "$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("connectrpc"))' 2>/dev/null)" != "0.13.0" ]; then
  base="$("$repo/.venv/bin/python" -c 'import sys; print(sys._base_executable)')"
  "$base" -m venv --clear "$venv"
  "$venv/bin/python" -m pip install -q "${packages[@]}"
  done_what+=("installed ${packages[*]} into .venv-clients")
fi

if ! command -v go >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
    done_what+=("installed golang-go")
  else
    echo "setup-bridge-clients: go is missing; install Go (Debian: apt-get install golang-go)" >&2
    exit 1
  fi
fi

command -v curl >/dev/null 2>&1 || { echo "setup-bridge-clients: curl is missing" >&2; exit 1; }

if [ ${#done_what[@]} -eq 0 ]; then
  echo "setup-bridge-clients: ok (already set up: .venv-clients, $(go version | cut -d' ' -f3), curl)"
else
  printf 'setup-bridge-clients: ok (%s)\n' "$(IFS=';'; echo "${done_what[*]}")"
fi
