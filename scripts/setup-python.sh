#!/usr/bin/env bash
# Create <repo>/.venv (Python 3.12) with agentlane==0.22.0, the real backend
# used by examples/backend and the end-to-end tests, and uv (from PyPI) in it;
# then sync the uv projects the tests run through `uv run` (the default
# launcher of an { app, projectDir } backend): examples/backend and
# tests/e2e/uv-project, each with its own .venv made by uv.
#
# Idempotent: does nothing when .venv already imports agentlane_process_bridge
# with agentlane 0.22.0 installed and has uv 0.13.9 (then the uv syncs take
# a moment each). Python 3.12 is looked up in this order:
#   1. $PYTHON312 (path to an interpreter)
#   2. $(pyenv root)/versions/3.12*/bin/python3.12 (highest 3.12.x)
#   3. python3.12 on PATH
# Prints one line on success; pip runs quietly.
set -euo pipefail

AGENTLANE_VERSION="0.22.0"
UV_VERSION="0.13.9"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
venv_python="$venv/bin/python"

say() { printf 'setup-python: %s\n' "$*"; }
die() { printf 'setup-python: error: %s\n' "$*" >&2; exit 1; }

# True if "$1" runs and is CPython 3.12.
is_py312() {
  [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1
}

# True if the venv has the bridge module, exactly the pinned agentlane, and
# the pinned uv.
venv_ready() {
  is_py312 "$venv_python" && "$venv_python" - "$AGENTLANE_VERSION" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
import agentlane_process_bridge  # noqa: F401
sys.exit(version("agentlane") != sys.argv[1])
PY
  [ "$("$venv/bin/uv" --version 2>/dev/null | cut -d' ' -f1-2)" = "uv $UV_VERSION" ]
}

# Syncs the uv projects with the interpreter of .venv (uv must not fetch one).
sync_uv_projects() {
  local project
  for project in examples/backend tests/e2e/uv-project; do
    UV_PYTHON="$venv_python" UV_PYTHON_DOWNLOADS=never "$venv/bin/uv" sync --quiet --project "$repo/$project" \
      || die "uv sync of $project failed."
  done
}

find_py312() {
  local tried=() candidate root
  if [ -n "${PYTHON312:-}" ]; then
    is_py312 "$PYTHON312" && { echo "$PYTHON312"; return; }
    die "PYTHON312=$PYTHON312 is not a working Python 3.12 interpreter."
  fi
  tried+=("\$PYTHON312 (unset)")

  if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
    while IFS= read -r candidate; do
      is_py312 "$candidate" && { echo "$candidate"; return; }
    done < <(ls -d "$root"/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV)
    tried+=("pyenv ($root/versions has no working 3.12.x)")
  else
    tried+=("pyenv (not installed)")
  fi

  if candidate="$(command -v python3.12 2>/dev/null)" && is_py312 "$candidate"; then
    echo "$candidate"
    return
  fi
  tried+=("python3.12 on PATH (not found or not working)")

  local joined
  joined="$(printf '%s; ' "${tried[@]}")"
  die "Python 3.12 not found. Tried: ${joined%; }. Install Python 3.12 or set PYTHON312=/path/to/python3.12."
}

if venv_ready; then
  sync_uv_projects
  say "ok, $venv_python (agentlane $AGENTLANE_VERSION, uv $UV_VERSION, already set up)"
  exit 0
fi

base_python="$(find_py312)"
if [ -e "$venv" ] && ! is_py312 "$venv_python"; then
  # Wrong or broken interpreter in an existing .venv: rebuild it from scratch.
  "$base_python" -m venv --clear "$venv"
elif [ ! -e "$venv" ]; then
  "$base_python" -m venv "$venv"
fi

"$venv_python" -m pip install -q "agentlane==$AGENTLANE_VERSION" "uv==$UV_VERSION"
venv_ready || die "agentlane $AGENTLANE_VERSION and uv $UV_VERSION installed into $venv but the check still fails."
sync_uv_projects
say "ok, $venv_python (agentlane $AGENTLANE_VERSION, uv $UV_VERSION, from $base_python)"
