#!/usr/bin/env bash
# primary 23510 + replica 23511, primary on CPU 0, replica on CPU 1; app:pw on sbtest, mon:pw monitor
declare -A CPU_OF=([23510]=0 [23511]=1)
start() { # port id
  D=/tmp/prof/c$1; rm -rf $D; mkdir -p $D
  mariadb-install-db --no-defaults --datadir=$D --user=root --auth-root-authentication-method=normal >/dev/null 2>&1
  taskset -c ${CPU_OF[$1]:-0} mariadbd --no-defaults --datadir=$D --user=root --port=$1 --bind-address=127.0.0.1 --socket=$D/sock --innodb-buffer-pool-size=64M --log-bin=$D/bin --server-id=$2 --log-slave-updates --max-connections=500 > $D/err.log 2>&1 &
  for i in $(seq 50); do mariadb -uroot -S $D/sock -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
  mariadb -uroot -S $D/sock -e "DELETE FROM mysql.global_priv WHERE User=''; FLUSH PRIVILEGES; RESET MASTER;"
}
start 23510 1; start 23511 2
mariadb -uroot -S /tmp/prof/c23510/sock -e "CREATE USER repl@'%' IDENTIFIED BY 'pw'; GRANT REPLICATION SLAVE ON *.* TO repl@'%'; CREATE DATABASE sbtest; CREATE USER app@'%' IDENTIFIED BY 'pw'; GRANT ALL ON sbtest.* TO app@'%'; CREATE USER mon@'%' IDENTIFIED BY 'pw'; GRANT SLAVE MONITOR, REPLICATION CLIENT ON *.* TO mon@'%';"
mariadb -uroot -S /tmp/prof/c23511/sock -e "SET GLOBAL read_only=1; CHANGE MASTER TO master_host='127.0.0.1', master_port=23510, master_user='repl', master_password='pw', master_use_gtid=slave_pos; START SLAVE;"
sleep 1; mariadb -uroot -S /tmp/prof/c23511/sock -e "SHOW SLAVE STATUS\G" | grep -E "Running|Gtid_IO"
