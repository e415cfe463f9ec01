#!/usr/bin/env bash
# usage: ps.sh label sluice-binary threads secs [sysbench args...]: sysbench oltp_read_only (server-side
# prepared statements, autocommit) through sluice over the 23510/23511 cluster, split on, P=4 per server.
label=$1; bin=$2; th=$3; secs=$4; shift 4
$bin --listen 127.0.0.1:23502 --server 127.0.0.1:23510 --server 127.0.0.1:23511 --read-write-split on \
  --monitor-user mon --monitor-password pw --user app:pw --pool-size 4 --metrics-listen 127.0.0.1:23509 >/tmp/prof/ps.$label.log 2>&1 & SP=$!
sleep 2
SB="sysbench oltp_read_only --mysql-host=127.0.0.1 --mysql-port=23502 --mysql-user=app --mysql-password=pw --mysql-db=sbtest --tables=4 --table-size=20000 --skip_trx=on $*"
$SB --threads=$th --time=2 run >/dev/null 2>&1
cpu() { awk '{print $14+$15}' /proc/$(pgrep -f "mariadbd.*port=$1")/stat; }
p0=$(cpu 23510); r0=$(cpu 23511); s0=$(awk '{print $14+$15}' /proc/$SP/stat)
out=$($SB --threads=$th --time=$secs --percentile=99 run)
p1=$(cpu 23510); r1=$(cpu 23511); s1=$(awk '{print $14+$15}' /proc/$SP/stat)
q=$(echo "$out" | awk '/queries:/ {gsub(/\(/,"",$3); print $3}'); e=$(echo "$out" | awk '/ignored errors:/ {print $3}')
p99=$(echo "$out" | awk '/99th percentile:/ {print $3}')
printf "%-10s th=%-3s QPS %9s p99 %7s ms errors %s  CPU s: primary %.1f replica %.1f sluice %.1f\n" $label $th $q $p99 "$e" \
  $(echo "$p0 $p1 $r0 $r1 $s0 $s1" | awk '{print ($2-$1)/100, ($4-$3)/100, ($6-$5)/100}')
curl -s 127.0.0.1:23509/metrics | grep -E "^sluice_routed" | sed "s/^/  /"
kill $SP; wait $SP 2>/dev/null
