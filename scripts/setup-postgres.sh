#!/usr/bin/env bash
# Installs what the PostgreSQL store's tests and benchmark need, and nothing
# when it is already there (prints one line either way): the server's
# programs (initdb, postgres) from Debian's `postgresql` package. The tests
# start a private server of their own (scripts/postgres-server.mjs):
# no cluster is created or started here, and none is used.
#
# The tests find the programs in $PBN_PG_BIN, else in the newest
# /usr/lib/postgresql/<version>/bin, else through `pg_config --bindir`.
set -euo pipefail

found() {
  [ -n "${PBN_PG_BIN:-}" ] && [ -x "$PBN_PG_BIN/initdb" ] && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
  command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]
}

if found; then
  echo "setup-postgres: ok (already set up: $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -1 || true))"
  exit 0
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Debian's package makes and starts a "main" cluster unless told not to;
  # the tests need none. Only a machine without this file gets it.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  echo "setup-postgres: ok (installed postgresql: $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -1))"
else
  echo "setup-postgres: the PostgreSQL server is missing; install it (Debian: apt-get install postgresql) or set PBN_PG_BIN to its bin folder" >&2
  exit 1
fi
