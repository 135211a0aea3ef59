#!/usr/bin/env bash
# Makes the PostgreSQL server the @brine/returners tests use ready, idempotently: installs Debian's
# postgresql with apt when no server binary is present, starts the cluster, creates role brine
# (password brine) and database brine_test, and prints the URL. Run as root on Debian/Ubuntu.
# When BRINE_TEST_PG_URL names a server that already answers (a CI service container), it does nothing.
set -euo pipefail

URL_DEFAULT="postgres://brine:brine@127.0.0.1:5432/brine_test"
URL="${BRINE_TEST_PG_URL:-$URL_DEFAULT}"
say() { echo "ensure-postgres: $*" >&2; }
die() { say "$*"; exit 1; }

reachable() {
  command -v psql >/dev/null 2>&1 && psql "$URL" -Atqc 'SELECT 1' >/dev/null 2>&1
}

if reachable; then
  echo "postgres ready: $URL"
  exit 0
fi
[ "$URL" = "$URL_DEFAULT" ] || die "BRINE_TEST_PG_URL=$URL does not answer, and this script only sets up $URL_DEFAULT"
[ "$(id -u)" = 0 ] || die "no PostgreSQL at $URL; run this script as root (it installs and starts Debian's postgresql)"

export DEBIAN_FRONTEND=noninteractive
server_bin() { ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(server_bin)" ]; then
  say "installing postgresql with apt-get"
  # apt-get update only when the package lists cannot provide it (fresh images ship without lists).
  if ! apt-get install -y -q postgresql >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q postgresql >/dev/null
  fi
fi
BIN="$(server_bin)"
[ -n "$BIN" ] || die "postgresql installed but no /usr/lib/postgresql/*/bin/postgres found"
VER="$(basename "$(dirname "$(dirname "$BIN")")")"

# Containers often install packages without starting or even creating the cluster.
if ! pg_lsclusters -h | awk -v v="$VER" '$1 == v && $2 == "main"' | grep -q .; then
  say "creating cluster $VER/main"
  pg_createcluster "$VER" main >/dev/null
fi
PORT="$(pg_lsclusters -h | awk -v v="$VER" '$1 == v && $2 == "main" { print $3 }')"
[ "$PORT" = 5432 ] || die "cluster $VER/main listens on port $PORT, not 5432; set BRINE_TEST_PG_URL to a server that answers"
if ! pg_lsclusters -h | awk -v v="$VER" '$1 == v && $2 == "main" { print $4 }' | grep -q online; then
  say "starting cluster $VER/main"
  # Exit status 2 is "already running" (another run won the race): fine.
  pg_ctlcluster "$VER" main start || [ $? = 2 ] || die "pg_ctlcluster $VER main start failed; see /var/log/postgresql/postgresql-$VER-main.log"
fi

as_postgres() { runuser -u postgres -- "$@"; }
for _ in $(seq 1 60); do
  as_postgres pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 0.5
done
as_postgres pg_isready -q -h 127.0.0.1 -p 5432 || die "PostgreSQL $VER did not accept connections on 127.0.0.1:5432 within 30 s"

psql_admin() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
if [ "$(psql_admin -Atc "SELECT 1 FROM pg_roles WHERE rolname = 'brine'")" != 1 ]; then
  psql_admin -c "CREATE ROLE brine LOGIN PASSWORD 'brine'" || true # a concurrent run may have made it
fi
if [ "$(psql_admin -Atc "SELECT 1 FROM pg_database WHERE datname = 'brine_test'")" != 1 ]; then
  psql_admin -c "CREATE DATABASE brine_test OWNER brine" || true
fi

reachable || die "PostgreSQL is running but $URL does not answer (check pg_hba.conf allows password logins from 127.0.0.1)"
echo "postgres ready: $URL"
