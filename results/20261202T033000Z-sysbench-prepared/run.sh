#!/usr/bin/env bash
# sysbench oltp_point_select (prepared statements) at 64 threads: direct, HAProxy, sluice P=4/P=64.
# Proxy CPU per query from /proc/<pid>/stat (utime+stime) over the run.
set -euo pipefail
export PATH=/usr/sbin:$PATH
SLUICE=${SLUICE:-/work/main/target/release/sluice}
D=/tmp/psb; rm -rf $D/data; mkdir -p $D
mariadb-install-db --no-defaults --user=root --datadir=$D/data --auth-root-authentication-method=normal >/dev/null 2>&1
taskset -c 0 mariadbd --no-defaults --user=root --datadir=$D/data --socket=$D/s --port=23400 --bind-address=127.0.0.1 --innodb-buffer-pool-size=256M --max-connections=500 >$D/db.log 2>&1 &
DBPID=$!
trap 'kill $DBPID 2>/dev/null; kill $(jobs -p) 2>/dev/null' EXIT
for i in $(seq 50); do mariadb -S $D/s -e "select 1" >/dev/null 2>&1 && break; sleep 0.2; done
mariadb -S $D/s -e "CREATE DATABASE sbtest; CREATE USER app@'%' IDENTIFIED BY 'pw'; GRANT ALL ON sbtest.* TO app@'%'; CREATE USER app@'localhost' IDENTIFIED BY 'pw'; GRANT ALL ON sbtest.* TO app@'localhost';"
SB="sysbench oltp_point_select --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=pw --mysql-db=sbtest --tables=1 --table-size=10000"
$SB --mysql-port=23400 prepare > $D/prep.log 2>&1 || { cat $D/prep.log; exit 1; }
cat > $D/haproxy.cfg <<H
global
  nbthread 1
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
listen db
  bind 127.0.0.1:23401
  server s 127.0.0.1:23400
H
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # name port pid
  local name=$1 port=$2 pid=${3:-}
  $SB --mysql-port=$port --threads=64 --time=3 run >/dev/null 2>&1 || true
  local c0=0; [ -n "$pid" ] && c0=$(cpu $pid)
  local out; out=$(taskset -c 1 $SB --mysql-port=$port --threads=64 --time=${SECS:-10} --percentile=99 run)
  local c1=0; [ -n "$pid" ] && c1=$(cpu $pid)
  local q; q=$(echo "$out" | awk '/queries:/ {gsub(/\(/,"",$3); print $3}')
  local n; n=$(echo "$out" | awk '/queries:/ {print $2}')
  local p99; p99=$(echo "$out" | awk '/99th percentile:/ {print $3}')
  local us="-"; [ -n "$pid" ] && us=$(echo "$c0 $c1 $n" | awk '{printf "%.1f", ($2-$1)*10000/$3}')
  printf "%-14s QPS %8s  p99 %6s ms  proxy CPU us/q %s\n" $name $q $p99 $us
}
run direct 23400
taskset -c 1 haproxy -f $D/haproxy.cfg -db >/dev/null 2>&1 & HP=$!; sleep 0.5
run haproxy 23401 $HP; kill $HP
for P in 4 64; do
  for depth in 8 1; do
    taskset -c 1 $SLUICE --listen 127.0.0.1:23402 --backend 127.0.0.1:23400 --user app:pw --pool-size $P --pipeline-depth $depth >/dev/null 2>&1 & SP=$!; sleep 1
    run sluice_p${P}_d${depth} 23402 $SP; kill $SP; wait $SP 2>/dev/null || true
  done
done
