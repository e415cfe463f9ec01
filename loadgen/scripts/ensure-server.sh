#!/usr/bin/env bash
# Used by `just bench` / `just bench-quick`: when no MySQL/MariaDB server binary exists, no
# Docker engine answers and no --mysql-url/MYSQL_URL is given, install mariadb-server with
# apt-get -- but only as root on Debian/Ubuntu, and say so first. Otherwise do nothing and
# let loadgen explain the three ways out.
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

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "bench: no mariadbd/mysqld found and no Docker engine: installing mariadb-server with apt-get (you are root on a Debian/Ubuntu system)."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq mariadb-server >/dev/null
  # Debian starts the packaged service; the benchmark runs its own private server.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now mariadb >/dev/null 2>&1 || true; fi
  echo "bench: mariadb-server installed."
fi
