#!/usr/bin/env bash
# Installs what the tests need on a Debian/Ubuntu machine, and only what is missing. Used by
# `just test` and `.ci/run`, so the two can never drift; `just bench` uses `--server-only`,
# `loadgen overhead` (in `just bench-all` and `just overhead`) `--overhead`, `loadgen sysbench`
# (in `just bench-all` and `just sysbench`) `--sysbench`.
#
#   scripts/install-test-deps.sh                 # everything the tests use
#   scripts/install-test-deps.sh --server-only   # mariadb-server alone (the benchmark)
#   scripts/install-test-deps.sh --overhead      # haproxy, strace, valgrind (loadgen overhead)
#   scripts/install-test-deps.sh --sysbench      # sysbench, haproxy (loadgen sysbench)
#   scripts/install-test-deps.sh --check         # say what is missing, install nothing
#
# What it installs when missing:
#   apt:  mariadb-server mariadb-client (mariadbd, the mariadb CLI, mysqlslap), mariadb-test
#         (mariadb-client-test, mariadb-test-run), sysbench, libmariadb-dev + pkg-config (to build
#         mysqlclient), nodejs + npm, php-cli + php-mysql (PDO, mysqli), libmariadb-java +
#         default-jdk-headless (Connector/J), haproxy (the C relay loadgen overhead measures
#         sluice against), strace and valgrind (its syscall and instruction counts)
#   pip:  pymysql, mysqlclient, mysql-connector-python (with Debian's own python3, which
#         refuses pip installs: python3-pymysql and python3-mysqldb from apt, and
#         mysql-connector-python, which Debian does not package, with --break-system-packages)
#   npm:  `npm ci` in proxy/tests/clients/node (mysql2)
#   just: apt's `just`, else `pip install rust-just`, else `cargo install just --locked`
# apt runs only as root (it says so first) or through passwordless sudo; otherwise the script
# prints the command to run and goes on, and the tests that need the missing tool say so.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
case "${1:-}" in
  "") ;;
  --server-only) mode=server ;;
  --overhead) mode=overhead ;;
  --sysbench) mode=sysbench ;;
  --check) mode=check ;;
  *) echo "usage: $0 [--server-only|--overhead|--sysbench|--check]" >&2; exit 2 ;;
esac

say() { echo "install-test-deps: $*"; }
have() { command -v "$1" >/dev/null 2>&1; }
have_sbin() { have "$1" || [ -x "/usr/sbin/$1" ] || [ -x "/usr/local/sbin/$1" ]; }

# How to run apt-get here, or nothing when we may not.
sudo=()
apt_ok=false
if have apt-get; then
  if [ "$(id -u)" = 0 ]; then
    apt_ok=true
  elif have sudo && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
    apt_ok=true
  fi
fi

apt_install() {
  [ $# -gt 0 ] || return 0
  if [ "$mode" = check ]; then
    say "missing: $* (apt-get install -y $*)"
    return 0
  fi
  if ! $apt_ok; then
    say "missing: $*; install them with: sudo apt-get install -y $*"
    return 0
  fi
  if [ "$(id -u)" = 0 ]; then
    say "you are root: installing $* with apt-get"
  else
    say "installing $* with sudo apt-get"
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $apt_updated; then
    "${sudo[@]}" apt-get update -q
    apt_updated=true
  fi
  "${sudo[@]}" apt-get install -y -q "$@"
}
apt_updated=false

# Debian starts the packaged server (and haproxy); the tests and the benchmark run their own
# private ones.
stop_packaged_service() {
  if have systemctl && [ "$mode" != check ]; then
    "${sudo[@]}" systemctl disable --now "$1" >/dev/null 2>&1 || true
  fi
}
stop_packaged_server() { stop_packaged_service mariadb; }

# loadgen overhead: HAProxy in TCP mode is the C relay sluice is measured against; strace
# counts the relays' syscalls, valgrind (callgrind) their instructions (--cost-counts).
overhead_tools() {
  local tools=()
  have_sbin haproxy || tools+=(haproxy)
  have strace || tools+=(strace)
  have valgrind || tools+=(valgrind)
  [ ${#tools[@]} -eq 0 ] || printf '%s\n' "${tools[@]}"
}

if [ "$mode" = server ]; then
  if ! have_sbin mariadbd && ! have_sbin mysqld; then
    apt_install mariadb-server
    stop_packaged_server
  fi
  exit 0
fi
if [ "$mode" = overhead ]; then
  mapfile -t tools < <(overhead_tools)
  if [ ${#tools[@]} -gt 0 ]; then
    apt_install "${tools[@]}"
    [[ " ${tools[*]} " == *" haproxy "* ]] && stop_packaged_service haproxy
  fi
  exit 0
fi
if [ "$mode" = sysbench ]; then
  # loadgen sysbench: sysbench drives the load; HAProxy is the relay it compares sluice with.
  tools=()
  have sysbench || tools+=(sysbench)
  have_sbin haproxy || tools+=(haproxy)
  if [ ${#tools[@]} -gt 0 ]; then
    apt_install "${tools[@]}"
    [[ " ${tools[*]} " == *" haproxy "* ]] && stop_packaged_service haproxy
  fi
  exit 0
fi

need=()
have_sbin mariadbd || need+=(mariadb-server)
have mariadb || need+=(mariadb-client)
have mariadb-client-test || need+=(mariadb-test)
have sysbench || need+=(sysbench)
# mysqlclient (MySQLdb) builds against libmariadb with pkg-config; node runs the mysql2 check.
[ -f /usr/include/mariadb/mysql.h ] || need+=(libmariadb-dev)
have pkg-config || need+=(pkg-config)
have node || need+=(nodejs)
have npm || need+=(npm)
# PHP (PDO + mysqli) and MariaDB Connector/J run their own driver checks.
php -r 'exit(extension_loaded("mysqli") && extension_loaded("pdo_mysql") ? 0 : 1);' 2>/dev/null \
  || need+=(php-cli php-mysql)
[ -f /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)
have javac || need+=(default-jdk-headless)
have python3 || need+=(python3)
mapfile -t tools < <(overhead_tools)
need+=("${tools[@]}")
py_missing() { ! python3 -c "import $1" 2>/dev/null; }
installed_server=false
[[ " ${need[*]} " == *" mariadb-server "* ]] && installed_server=true
apt_install "${need[@]}"
$installed_server && stop_packaged_server
[[ " ${tools[*]} " == *" haproxy "* ]] && stop_packaged_service haproxy

# Python drivers: pip into whatever python3 is first on PATH (a venv, pyenv, or the system's).
# Debian's own python3 has no pip or refuses pip installs (PEP 668): then its python3-*
# package, and pip past PEP 668 (as root only) for a driver Debian does not package.
apt_has() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [^(]'; }
py_install() {
  local module=$1 pip_name=$2 deb=$3 log
  py_missing "$module" || return 0
  if [ "$mode" = check ]; then
    say "missing python module $module (pip install $pip_name)"
    return 0
  fi
  if python3 -m pip --version >/dev/null 2>&1; then
    say "installing $pip_name with pip"
    log=$(python3 -m pip install -q "$pip_name" 2>&1) && return 0
    if ! grep -q externally-managed <<<"$log"; then
      echo "$log" >&2
      say "pip could not install $pip_name; the test that uses it will say so"
      return 0
    fi
  fi
  if [ -n "$deb" ] && $apt_ok && apt_has "$deb"; then
    apt_install "$deb"
    return 0
  fi
  if ! $apt_ok; then
    say "missing python module $module: pip install $pip_name (in a venv, or with --break-system-packages)"
    return 0
  fi
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  say "$pip_name has no Debian package: installing it with pip --break-system-packages"
  "${sudo[@]}" python3 -m pip install -q --break-system-packages "$pip_name" \
    || say "pip could not install $pip_name; the test that uses it will say so"
}
if have python3; then
  py_install pymysql pymysql python3-pymysql
  py_install MySQLdb mysqlclient python3-mysqldb
  py_install mysql.connector mysql-connector-python ""
fi

# Node's mysql2, pinned by package-lock.json.
node_dir=proxy/tests/clients/node
if have npm && [ -f "$node_dir/package-lock.json" ] && [ ! -d "$node_dir/node_modules/mysql2" ]; then
  if [ "$mode" = check ]; then
    say "missing $node_dir/node_modules (npm ci)"
  else
    say "installing mysql2 with npm ci in $node_dir"
    (cd "$node_dir" && npm ci --no-audit --no-fund -q) || say "npm ci failed; the node client test will say so"
  fi
fi

# just itself, for .ci/run (`just test` only gets here through just).
if ! have just; then
  if [ "$mode" = check ]; then
    say "missing just"
  elif $apt_ok && apt_has just; then
    apt_install just
  elif have python3 && python3 -m pip install -q rust-just 2>/dev/null; then
    say "installed just with pip (rust-just)"
  elif have cargo; then
    say "installing just with cargo install --locked"
    cargo install --locked -q just
  else
    say "missing just; install it with: cargo install just --locked"
  fi
fi
exit 0
