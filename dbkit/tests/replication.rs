//! Real-server tests for dbkit's replication [`Cluster`]: replication flows, the accounts'
//! privileges are minimal, MASTER_DELAY and stopped threads show, a switchover under write
//! load loses and doubles nothing, kill -9 and restart, failover and a returning old primary.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dbkit::replication::{Threads, APP_DB, MONITOR_PASSWORD, MONITOR_USER, REPL_PASSWORD};
use dbkit::replication::{APP_PASSWORD, APP_USER, REPL_USER};
use dbkit::{Cluster, ClusterOptions, Error};
use mysql::prelude::Queryable;

const WAIT: Duration = Duration::from_secs(60);

fn cluster() -> Cluster {
    Cluster::start(ClusterOptions::default()).unwrap_or_else(|e| panic!("cluster start: {e}"))
}

/// A blocking connection as `user` to server `port`.
fn login(port: u16, user: &str, password: &str) -> mysql::Conn {
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false);
    mysql::Conn::new(opts).unwrap_or_else(|e| panic!("{user} on {port}: {e}"))
}

fn app(c: &Cluster, index: usize) -> mysql::Conn {
    let mut conn = login(c.addr(index).port(), APP_USER, APP_PASSWORD);
    conn.query_drop(format!("USE {APP_DB}")).expect("USE app");
    conn
}

/// The server's error code for `sql`, or `None` if it succeeded.
fn error_code(conn: &mut mysql::Conn, sql: &str) -> Option<u16> {
    match conn.query_drop(sql) {
        Ok(()) => None,
        Err(mysql::Error::MySqlError(e)) => Some(e.code),
        Err(other) => panic!("{sql}: not a server error: {other}"),
    }
}

fn ids(c: &Cluster, index: usize, table: &str) -> BTreeSet<u64> {
    c.query(index, &format!("SELECT id FROM {APP_DB}.{table}"))
        .expect("select ids")
        .into_iter()
        .map(|r| r[0].as_deref().unwrap_or("0").parse().expect("id"))
        .collect()
}

fn status(c: &Cluster, index: usize, field: &str) -> Option<String> {
    c.slave_status(index)
        .expect("slave status")
        .and_then(|s| s.get(field).cloned().flatten())
}

#[test]
fn replicas_follow_the_primary_with_distinct_ids_and_refuse_app_writes() {
    let c = cluster();
    assert_eq!((c.len(), c.primary(), c.replicas()), (3, 0, vec![1, 2]));
    let mut primary = app(&c, 0);
    primary
        .query_drop("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .expect("create");
    primary
        .query_drop("INSERT INTO t VALUES (1), (2), (3)")
        .expect("insert");
    c.sync_replicas(WAIT).expect("sync");
    let position = c.gtid_binlog_pos(0).expect("pos");
    assert!(position.starts_with("0-1-"), "{position}");
    for index in 0..3 {
        assert_eq!(
            ids(&c, index, "t"),
            BTreeSet::from([1, 2, 3]),
            "server {index}"
        );
        let id: u32 = app(&c, index)
            .query_first("SELECT @@server_id")
            .expect("q")
            .expect("row");
        assert_eq!(id, c.server_id(index));
        for (var, want) in [
            ("log_bin", "1"),
            ("log_slave_updates", "1"),
            ("gtid_strict_mode", "1"),
            ("binlog_format", "ROW"),
            ("read_only", if index == 0 { "0" } else { "1" }),
        ] {
            let got = c.global(index, var).expect("var");
            assert_eq!(got.as_deref(), Some(want), "{var} on server {index}");
        }
        if index > 0 {
            assert_eq!(c.gtid_slave_pos(index).expect("pos"), position);
            assert_eq!(
                status(&c, index, "Using_Gtid").as_deref(),
                Some("Slave_Pos")
            );
            assert_eq!(status(&c, index, "Master_Server_Id").as_deref(), Some("1"));
            // The application account is subject to read_only on a replica.
            assert_eq!(
                error_code(&mut app(&c, index), "INSERT INTO t VALUES (9)"),
                Some(1290)
            );
        }
    }
    // The init file's accounts were not binlogged: only the test's transactions exist.
    assert_eq!(position, "0-1-2");
}

#[test]
fn each_account_has_only_the_privileges_it_needs() {
    let c = cluster();
    app(&c, 0)
        .query_drop("CREATE TABLE secret (id INT PRIMARY KEY)")
        .expect("create");
    c.sync_replicas(WAIT).expect("sync");
    let grants = |user: &str| -> Vec<String> {
        c.query(0, &format!("SHOW GRANTS FOR '{user}'@'%'"))
            .expect("grants")
            .into_iter()
            .map(|r| {
                let g = r[0].clone().unwrap_or_default();
                // Drop the password hash, keep the privileges.
                g.split(" IDENTIFIED BY").next().unwrap_or("").to_string()
            })
            .collect()
    };
    assert_eq!(
        grants(MONITOR_USER),
        vec!["GRANT SLAVE MONITOR ON *.* TO `monitor`@`%`"]
    );
    assert_eq!(
        grants(REPL_USER),
        vec!["GRANT REPLICATION SLAVE ON *.* TO `repl`@`%`"]
    );
    assert_eq!(
        grants(APP_USER),
        vec![
            "GRANT USAGE ON *.* TO `app`@`%`".to_string(),
            "GRANT ALL PRIVILEGES ON `app`.* TO `app`@`%`".to_string()
        ]
    );

    // The monitor reads everything a topology check needs, on a replica and the primary...
    let port = c.addr(1).port();
    let mut monitor = login(port, MONITOR_USER, MONITOR_PASSWORD);
    for sql in [
        "SHOW SLAVE STATUS",
        "SHOW REPLICA STATUS",
        "SHOW ALL SLAVES STATUS",
    ] {
        let rows: Vec<mysql::Row> = monitor.query(sql).expect(sql);
        assert_eq!(rows.len(), 1, "{sql}");
    }
    let (ro, slave_pos, current_pos): (u8, String, String) = monitor
        .query_first("SELECT @@read_only, @@gtid_slave_pos, @@gtid_current_pos")
        .expect("vars")
        .expect("row");
    assert_eq!((ro, slave_pos.as_str()), (1, current_pos.as_str()));
    let mut on_primary = login(c.addr(0).port(), MONITOR_USER, MONITOR_PASSWORD);
    let none: Vec<mysql::Row> = on_primary.query("SHOW SLAVE STATUS").expect("status");
    assert!(none.is_empty());
    // ...and nothing else.
    for sql in [
        "SELECT * FROM app.secret",
        "STOP SLAVE",
        "SET GLOBAL read_only=OFF",
        "CREATE DATABASE m",
    ] {
        assert!(error_code(&mut monitor, sql).is_some(), "monitor may {sql}");
    }
    // SLAVE MONITOR is needed: an account without it (REPLICATION CLIENT is not enough).
    for stmt in [
        "CREATE USER 'rc'@'%' IDENTIFIED BY 'rc'",
        "GRANT REPLICATION CLIENT ON *.* TO 'rc'@'%'",
    ] {
        c.exec(0, stmt).expect(stmt);
    }
    c.sync_replicas(WAIT).expect("sync");
    let mut rc = login(port, "rc", "rc");
    assert_eq!(error_code(&mut rc, "SHOW SLAVE STATUS"), Some(1227));

    // The application account sees its own database only.
    let mut a = app(&c, 0);
    assert_eq!(error_code(&mut a, "SELECT * FROM secret"), None);
    for sql in [
        "SELECT * FROM bench.nothing",
        "CREATE DATABASE other",
        "SET GLOBAL read_only=ON",
        "SHOW SLAVE STATUS",
        "SELECT * FROM mysql.user",
    ] {
        assert!(error_code(&mut a, sql).is_some(), "app may {sql}");
    }
    let dbs: Vec<String> = a.query("SHOW DATABASES").expect("dbs");
    assert_eq!(dbs, vec!["app", "information_schema"]);
    // The replication account cannot read data.
    let mut repl = login(port, REPL_USER, REPL_PASSWORD);
    assert!(error_code(&mut repl, "SELECT * FROM app.secret").is_some());
}

#[test]
fn delay_and_stopped_threads_show_and_bound_the_waits() {
    let c = cluster();
    let mut primary = app(&c, 0);
    primary
        .query_drop("CREATE TABLE d (id BIGINT PRIMARY KEY)")
        .expect("create");
    c.sync_replicas(WAIT).expect("sync");

    c.set_delay(1, Duration::from_secs(3)).expect("delay");
    c.wait_replicating(1, WAIT).expect("replicating");
    assert_eq!(status(&c, 1, "SQL_Delay").as_deref(), Some("3"));
    primary
        .query_drop("INSERT INTO d VALUES (1)")
        .expect("insert");
    let written = Instant::now();
    let position = c.gtid_binlog_pos(0).expect("pos");
    c.wait_for_position(2, &position, WAIT)
        .expect("undelayed replica");
    // The delayed replica holds the row back and reports the lag.
    assert!(
        ids(&c, 1, "d").is_empty(),
        "the delayed replica has the row"
    );
    let mut max_lag = 0;
    while ids(&c, 1, "d").is_empty() && written.elapsed() < WAIT {
        let lag = status(&c, 1, "Seconds_Behind_Master");
        max_lag = max_lag.max(lag.and_then(|l| l.parse().ok()).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(100));
    }
    // Events carry whole-second timestamps, so a 3 s delay holds a row back for 2 to 3 s.
    let held = written.elapsed();
    assert!(held >= Duration::from_millis(1900), "no delay: {held:?}");
    assert!(max_lag >= 1, "lag never showed: {max_lag}");
    c.set_delay(1, Duration::ZERO).expect("clear delay");
    assert_eq!(status(&c, 1, "SQL_Delay").as_deref(), Some("0"));

    // A stopped SQL thread: NULL lag, nothing applied, and a GTID wait times out.
    c.stop_replication(2, Threads::Sql).expect("stop sql");
    assert_eq!(status(&c, 2, "Slave_SQL_Running").as_deref(), Some("No"));
    assert_eq!(status(&c, 2, "Seconds_Behind_Master"), None);
    primary
        .query_drop("INSERT INTO d VALUES (2)")
        .expect("insert");
    let position = c.gtid_binlog_pos(0).expect("pos");
    let started = Instant::now();
    let err = c
        .wait_for_position(2, &position, Duration::from_millis(500))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    c.start_replication(2, Threads::Sql).expect("start sql");
    c.wait_for_position(2, &position, WAIT).expect("caught up");

    // A stopped IO thread: nothing fetched, NULL lag too.
    c.stop_replication(2, Threads::Io).expect("stop io");
    assert_eq!(status(&c, 2, "Slave_IO_Running").as_deref(), Some("No"));
    assert_eq!(status(&c, 2, "Seconds_Behind_Master"), None);
    c.start_replication(2, Threads::Both).expect("start");
    c.wait_replicating(2, WAIT).expect("replicating");
    assert!(
        c.set_delay(0, Duration::from_secs(1)).is_err(),
        "delay on the primary"
    );
    assert!(c.wait_for_position(1, "0-1-1'; DROP", WAIT).is_err());
    assert!(c.global(1, "read_only; DROP").is_err());
}

/// Inserts ids 1, 2, 3... as the application into whichever server `port` names, and records
/// each id the server acknowledged. Refused writes (read_only) are retried with the same id.
fn write_load(port: Arc<AtomicU16>, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<u64>>>) {
    let mut next = 1u64;
    let mut conn: Option<(u16, mysql::Conn)> = None;
    while !stop.load(Ordering::Relaxed) {
        let target = port.load(Ordering::Relaxed);
        if conn.as_ref().map(|(p, _)| *p) != Some(target) {
            let mut c = login(target, APP_USER, APP_PASSWORD);
            c.query_drop(format!("USE {APP_DB}")).expect("use");
            conn = Some((target, c));
        }
        let Some((_, c)) = conn.as_mut() else {
            continue;
        };
        match c.query_drop(format!("INSERT INTO ledger VALUES ({next})")) {
            Ok(()) => {
                acked.lock().expect("ledger").push(next);
                next += 1;
            }
            Err(mysql::Error::MySqlError(e)) if e.code == 1290 => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("insert {next}: {e}"),
        }
    }
}

#[test]
fn switchover_under_write_load_keeps_every_acknowledged_row_once() {
    let mut c = cluster();
    app(&c, 0)
        .query_drop("CREATE TABLE ledger (id BIGINT PRIMARY KEY)")
        .expect("create");
    let port = Arc::new(AtomicU16::new(c.addr(0).port()));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (port, stop, acked) = (port.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || write_load(port, stop, acked))
    };
    let count = || acked.lock().expect("ledger").len();
    let wait_for_writes = |at_least: usize| {
        let deadline = Instant::now() + WAIT;
        while count() < at_least && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for_writes(50);

    let position = c.switchover(1, WAIT).expect("switchover to 1");
    assert_eq!((c.primary(), c.replicas()), (1, vec![0, 2]));
    port.store(c.addr(1).port(), Ordering::Relaxed);
    assert!(position.starts_with("0-1-"), "{position}");
    let before = count();
    wait_for_writes(before + 50);
    assert!(count() >= before + 50, "no writes after the switchover");
    let pos = c.gtid_binlog_pos(1).expect("pos");
    assert!(pos.starts_with("0-2-"), "the new primary's writes: {pos}");
    // The old primary now replicates from the new one, read-only.
    assert_eq!(c.global(0, "read_only").expect("ro").as_deref(), Some("1"));
    assert_eq!(c.global(1, "read_only").expect("ro").as_deref(), Some("0"));
    assert_eq!(status(&c, 0, "Master_Server_Id").as_deref(), Some("2"));
    assert_eq!(status(&c, 2, "Master_Server_Id").as_deref(), Some("2"));
    assert!(c.slave_status(1).expect("status").is_none());

    // And back again: the demoted primary can be promoted.
    c.switchover(0, WAIT).expect("switchover back to 0");
    port.store(c.addr(0).port(), Ordering::Relaxed);
    let before = count();
    wait_for_writes(before + 50);
    assert!(
        count() >= before + 50,
        "no writes after the second switchover"
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer thread");
    c.sync_replicas(WAIT).expect("sync");

    let acked: BTreeSet<u64> = acked.lock().expect("ledger").iter().copied().collect();
    let last = *acked.last().expect("some writes");
    assert_eq!(acked, (1..=last).collect(), "the ledger has gaps");
    for index in 0..3 {
        let rows = c
            .query(index, "SELECT COUNT(*), COUNT(DISTINCT id) FROM app.ledger")
            .expect("count");
        assert_eq!(
            rows[0],
            vec![Some(acked.len().to_string()), Some(acked.len().to_string())]
        );
        assert_eq!(ids(&c, index, "ledger"), acked, "server {index}");
    }
    // Each primary's writes carry its own server id in the one domain.
    let pos = c.gtid_binlog_pos(0).expect("pos");
    assert!(pos.starts_with("0-1-"), "{pos}");
}

#[test]
fn kill_restart_failover_and_a_returning_old_primary() {
    let mut c = cluster();
    let mut primary = app(&c, 0);
    primary
        .query_drop("CREATE TABLE k (id BIGINT PRIMARY KEY)")
        .expect("create");
    primary
        .query_drop("INSERT INTO k VALUES (1)")
        .expect("insert");
    c.sync_replicas(WAIT).expect("sync");

    // kill -9 of a replica, writes meanwhile, restart on the same port: it catches up.
    let port = c.addr(2).port();
    let pid = c.server(2).pid();
    c.kill(2);
    primary
        .query_drop("INSERT INTO k VALUES (2)")
        .expect("insert");
    c.restart(2).expect("restart replica");
    assert_eq!(c.addr(2).port(), port);
    assert_ne!(c.server(2).pid(), pid);
    c.wait_replicating(2, WAIT).expect("replicating again");
    c.sync_replicas(WAIT).expect("sync");
    assert_eq!(ids(&c, 2, "k"), BTreeSet::from([1, 2]));
    assert_eq!(c.global(2, "read_only").expect("ro").as_deref(), Some("1"));

    // kill -9 of the primary, then a failover to server 1; server 2 follows it.
    drop(primary);
    c.kill(0);
    c.failover(1, WAIT).expect("failover");
    assert_eq!(c.primary(), 1);
    app(&c, 1)
        .query_drop("INSERT INTO k VALUES (3)")
        .expect("insert on the new primary");
    c.wait_for_position(2, &c.gtid_binlog_pos(1).expect("pos"), WAIT)
        .expect("server 2 follows");
    assert_eq!(ids(&c, 2, "k"), BTreeSet::from([1, 2, 3]));
    assert_eq!(status(&c, 2, "Master_Server_Id").as_deref(), Some("2"));

    // The old primary returns as it was configured: writable and replicating from nobody.
    c.restart(0).expect("restart old primary");
    assert_eq!(c.global(0, "read_only").expect("ro").as_deref(), Some("0"));
    assert!(c.slave_status(0).expect("status").is_none());
    assert_eq!(ids(&c, 0, "k"), BTreeSet::from([1, 2]));
    c.rejoin(0, WAIT).expect("rejoin");
    c.sync_replicas(WAIT).expect("sync");
    assert_eq!(ids(&c, 0, "k"), BTreeSet::from([1, 2, 3]));
    assert_eq!(c.global(0, "read_only").expect("ro").as_deref(), Some("1"));

    // A replica restarted without read_only (the configuration mistake) comes back writable.
    c.restart_with_read_only(2, false).expect("restart");
    assert_eq!(c.global(2, "read_only").expect("ro").as_deref(), Some("0"));
    c.wait_replicating(2, WAIT).expect("still replicating");
}
