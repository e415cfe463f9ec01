#!/usr/bin/env bash
# usage: cpu.sh label threads secs -- sluice args...   (sluice on CPU1, sysbench on CPU1)
label=$1; th=$2; secs=$3; shift 4
SLUICE=${SLUICE:-/work/main/target/release/sluice}
LUA=${LUA:-/tmp/prof/select1.lua}
taskset -c 1 $SLUICE --listen 127.0.0.1:23502 --backend 127.0.0.1:23500 --user app:pw --metrics-listen 127.0.0.1:23509 "$@" >/tmp/prof/sluice.$label.log 2>&1 & SP=$!
sleep 1
SB="sysbench $LUA --mysql-host=127.0.0.1 --mysql-port=23502 --mysql-user=app --mysql-password=pw --mysql-db=sbtest --tables=1 --table-size=10000"
$SB --threads=$th --time=2 run >/dev/null 2>&1
c0=$(awk '{print $14+$15}' /proc/$SP/stat)
out=$(taskset -c 1 $SB --threads=$th --time=$secs --percentile=99 run)
c1=$(awk '{print $14+$15}' /proc/$SP/stat)
n=$(echo "$out" | awk '/queries:/ {print $2}'); q=$(echo "$out" | awk '/queries:/ {gsub(/\(/,"",$3); print $3}')
p99=$(echo "$out" | awk '/99th percentile:/ {print $3}')
printf "%-16s th=%-3s n=%s QPS %8s p99 %6s  CPU us/q %s  " $label $th $n $q $p99 $(echo "$c0 $c1 $n" | awk '{printf "%.1f", ($2-$1)*10000/$3}')
curl -s 127.0.0.1:23509/metrics | grep -E "^sluice_pipelined_statements" | tr "\n" " "; echo; kill $SP; wait $SP 2>/dev/null
