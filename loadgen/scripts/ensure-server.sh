#!/usr/bin/env bash
# Used by `just bench`, `just bench-all`, `just bench-quick` and `just soak`: when no
# MySQL/MariaDB server binary exists, no Docker engine answers and no --mysql-url/MYSQL_URL is
# given, install mariadb-server with scripts/install-test-deps.sh --server-only (apt-get as root
# on Debian/Ubuntu, saying so first; otherwise it prints the command). Then loadgen explains the
# three ways out if there is still no server.
set -euo pipefail

for arg in "$@"; do
  case "$arg" in --mysql-url|--mysql-url=*|--server=external) exit 0 ;; esac
done
[ -n "${MYSQL_URL:-}" ] && exit 0
for bin in mariadbd mysqld; do
  command -v "$bin" >/dev/null 2>&1 && exit 0
  for dir in /usr/sbin /usr/local/sbin; do [ -x "$dir/$bin" ] && exit 0; done
done
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then exit 0; fi

echo "bench: no mariadbd/mysqld found, no Docker engine and no --mysql-url."
exec "$(dirname "$0")/../../scripts/install-test-deps.sh" --server-only
