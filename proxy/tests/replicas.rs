//! sluice in front of a real dbkit [`Cluster`] (a MariaDB primary and two GTID replicas) with
//! `servers` and `read_write_split = on`: where statements run (checked by `@@server_id`),
//! read-your-writes against delayed replicas, replica exclusion, a switchover, no writer,
//! and split brain; prepared statements in `prepared`, the `sluice:min_gtid` token in `token`,
//! query rules' routes in `rules`.
//!
//! Clients and sluice's data path use the application account (`app`), the monitor its own
//! (`monitor`, SLAVE MONITOR only); the all-privileges account only drives the servers
//! (delays, read_only, replication), as an operator would.

mod common;
#[path = "replicas/prepared.rs"]
mod prepared;
#[path = "replicas/rules.rs"]
mod rules;
#[path = "replicas/token.rs"]
mod token;
use common::{blocking, cluster_with, WAIT};

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use dbkit::replication::{Threads, APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER};
use dbkit::Cluster;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use sluice::config::{Endpoint, ReadWriteSplit, ReadYourWrites, Secret};
use sluice::{Config, Proxy, ProxyHandle};

/// Inserts each id and reads it straight back through the same session: read-your-writes.
async fn writes_read_back(c: &mut Conn, ids: std::ops::Range<i32>, lost: &str) {
    for id in ids {
        c.query_drop(format!("INSERT INTO t VALUES ({id})"))
            .await
            .expect("insert");
        let got: Option<i32> = c
            .query_first(format!("SELECT id FROM t WHERE id = {id}"))
            .await
            .expect("select");
        assert_eq!(got, Some(id), "{lost} {id}");
    }
}

/// sluice over every server of `cluster`, split on, a 100 ms monitor.
async fn start(cluster: &Cluster, tweak: impl FnOnce(&mut Config)) -> ProxyHandle {
    let mut cfg = Config::for_backend(cluster.addr(0).to_string(), APP_USER, APP_PASSWORD);
    cfg.servers = (0..cluster.len())
        .map(|i| Endpoint::parse(&cluster.addr(i).to_string()))
        .collect();
    cfg.monitor_user = Some(MONITOR_USER.into());
    cfg.monitor_password = Some(Secret::new(MONITOR_PASSWORD.into()));
    cfg.monitor_interval = Duration::from_millis(100);
    cfg.read_write_split = ReadWriteSplit::On;
    cfg.writer_wait_timeout = Duration::from_secs(1);
    cfg.backend_tls = sluice::config::BackendTlsMode::Disabled;
    tweak(&mut cfg);
    let proxy = Proxy::bind(cfg).await.expect("sluice starts");
    until(&proxy, "writer 0 and two usable replicas", |p| {
        let t = p.context().topology();
        t.topology.writer() == Some(0) && t.topology.usable_replicas().count() == 2
    })
    .await;
    proxy
}

async fn until(proxy: &ProxyHandle, what: &str, pred: impl Fn(&ProxyHandle) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !pred(proxy) {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}; last topology: {:#?}",
            proxy.context().topology()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn client(proxy: &ProxyHandle) -> Conn {
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(proxy.local_addr().port())
        .user(Some(APP_USER))
        .pass(Some(APP_PASSWORD))
        .db_name(Some("app"))
        .prefer_socket(false);
    Conn::new(opts).await.expect("client login through sluice")
}

async fn server_id(conn: &mut Conn, sql: &str) -> u32 {
    conn.query_first::<u32, _>(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .expect("a row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_to_replicas_and_everything_else_to_the_primary() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let primary = cluster.server_id(0);
    let replicas: BTreeSet<u32> = [cluster.server_id(1), cluster.server_id(2)].into();
    let mut c = client(&proxy).await;

    // Autocommit reads spread over both replicas, never the primary.
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        seen.insert(server_id(&mut c, "SELECT @@server_id").await);
    }
    assert_eq!(seen, replicas, "reads by server_id");

    // Writes, locking reads, lock functions and read-write transactions: the primary.
    c.query_drop("INSERT INTO t VALUES (1)")
        .await
        .expect("insert");
    let on_primary: Vec<String> = blocking(|| cluster.query(0, "SELECT id FROM app.t"))
        .expect("read primary")
        .iter()
        .map(|r| format!("{r:?}"))
        .collect();
    assert_eq!(on_primary.len(), 1, "the insert reached the primary");
    let writer_only = [
        "SELECT @@server_id FROM t LIMIT 1 FOR UPDATE",
        "SELECT @@server_id FROM t LIMIT 1 LOCK IN SHARE MODE",
        "SELECT @@server_id + GET_LOCK('sluice_replicas', 0) * 0",
    ];
    // Its own session: the named lock pins it to the primary until it ends.
    let mut locker = client(&proxy).await;
    for sql in writer_only {
        assert_eq!(server_id(&mut locker, sql).await, primary, "{sql}");
    }
    drop(locker);
    c.query_drop("BEGIN").await.expect("begin");
    assert_eq!(server_id(&mut c, "SELECT @@server_id").await, primary);
    c.query_drop("COMMIT").await.expect("commit");

    // A READ ONLY transaction runs on one replica from start to end (once the replicas
    // are seen to have this session's insert: read-your-writes sends it to the writer
    // before).
    blocking(|| cluster.sync_replicas(WAIT)).expect("sync");
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.query_drop("START TRANSACTION READ ONLY")
        .await
        .expect("begin ro");
    let first = server_id(&mut c, "SELECT @@server_id").await;
    assert!(
        replicas.contains(&first),
        "READ ONLY transaction on {first}"
    );
    for _ in 0..5 {
        assert_eq!(server_id(&mut c, "SELECT @@server_id").await, first);
    }
    c.query_drop("COMMIT").await.expect("commit ro");

    // Session state moves with the session: a variable set once is seen on every server.
    c.query_drop("SET SESSION time_zone = '+03:00'")
        .await
        .expect("set");
    for _ in 0..6 {
        let tz: String = c
            .query_first("SELECT @@session.time_zone")
            .await
            .expect("tz")
            .expect("row");
        assert_eq!(tz, "+03:00");
    }

    let routed = proxy.context().stats.routed_snapshot();
    let count = |route: &str| -> u64 {
        routed
            .iter()
            .filter(|((_, r, _), _)| *r == route)
            .map(|(_, n)| n)
            .sum()
    };
    assert!(count("replica") >= 40, "{routed:?}");
    assert!(count("writer") >= 5, "{routed:?}");
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_its_own_writes_from_delayed_replicas() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    blocking(|| {
        for i in [1, 2] {
            cluster.set_delay(i, Duration::from_secs(3)).expect("delay");
        }
    });
    let mut c = client(&proxy).await;
    writes_read_back(&mut c, 0..1000, "read-your-writes lost row").await;
    assert!(
        proxy
            .context()
            .stats
            .ryw_fallbacks
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0,
        "the delayed replicas lacked the writes: reads fell back to the writer"
    );
    drop(c);
    proxy.shutdown().await;

    // The same with read_your_writes = off misses rows: the test can fail.
    let proxy = start(&cluster, |c| c.read_your_writes = ReadYourWrites::Off).await;
    let mut c = client(&proxy).await;
    let mut missing = 0;
    for id in 10_000..10_020 {
        c.query_drop(format!("INSERT INTO t VALUES ({id})"))
            .await
            .expect("insert");
        let got: Option<i32> = c
            .query_first(format!("SELECT id FROM t WHERE id = {id}"))
            .await
            .expect("select");
        missing += usize::from(got.is_none());
    }
    assert!(
        missing > 0,
        "without read-your-writes a delayed replica misses rows"
    );
    drop(c);
    proxy.shutdown().await;

    // `wait`: close replicas wait for the write (MASTER_GTID_WAIT) and serve the read.
    blocking(|| {
        for i in [1, 2] {
            cluster.set_delay(i, Duration::ZERO).expect("no delay");
        }
        cluster.sync_replicas(WAIT).expect("sync");
    });
    let proxy = start(&cluster, |c| {
        c.read_your_writes = ReadYourWrites::Wait;
        c.gtid_wait_timeout = Duration::from_secs(2);
    })
    .await;
    let mut c = client(&proxy).await;
    writes_read_back(&mut c, 20_000..20_200, "wait mode lost row").await;
    let routed = proxy.context().stats.routed_snapshot();
    assert!(
        routed
            .iter()
            .any(|((_, r, _), n)| *r == "wait_replica" && *n > 0),
        "some reads waited on a replica: {routed:?}"
    );
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_replicas_and_null_lag_take_no_reads() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let mut c = client(&proxy).await;
    // SQL thread stopped on replica 1, IO thread stopped (lag NULL) on replica 2 in turn.
    for (stopped, threads) in [(1, Threads::Sql), (2, Threads::Io)] {
        blocking(|| cluster.stop_replication(stopped, threads)).expect("stop");
        until(&proxy, "the stopped replica excluded", |p| {
            p.context().topology().topology.usable_replicas().count() == 1
        })
        .await;
        let other = cluster.server_id(3 - stopped);
        for _ in 0..10 {
            assert_eq!(server_id(&mut c, "SELECT @@server_id").await, other);
        }
        blocking(|| cluster.start_replication(stopped, threads)).expect("start");
        until(&proxy, "both replicas back", |p| {
            p.context().topology().topology.usable_replicas().count() == 2
        })
        .await;
    }
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_no_writer_and_split_brain() {
    let mut cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let mut idle = client(&proxy).await;
    idle.query_drop("SET SESSION time_zone = '+02:00'")
        .await
        .expect("set");
    let stmt = idle
        .prep("INSERT INTO t VALUES (?)")
        .await
        .expect("prepare");
    idle.exec_drop(&stmt, (1,)).await.expect("insert before");

    // A switchover: the idle session keeps its state and prepared statement, and its
    // writes go to the new primary.
    blocking(|| cluster.switchover(1, WAIT)).expect("switchover");
    until(&proxy, "writer 1", |p| {
        p.context().topology().topology.writer() == Some(1)
    })
    .await;
    idle.exec_drop(&stmt, (2,)).await.expect("insert after");
    let tz: String = idle
        .query_first("SELECT @@session.time_zone")
        .await
        .expect("tz")
        .expect("row");
    assert_eq!(tz, "+02:00", "state replayed after the switchover");
    let n: Vec<u32> = blocking(|| cluster.query(1, "SELECT id FROM app.t WHERE id = 2"))
        .expect("read new primary")
        .iter()
        .map(|_| 1)
        .collect();
    assert_eq!(n.len(), 1, "the write went to the new primary");

    // No writer: writes wait writer_wait_timeout, then a read-only error.
    blocking(|| cluster.set_read_only(1, true)).expect("read_only");
    until(&proxy, "no writer", |p| {
        p.context().topology().topology.writer().is_none()
    })
    .await;
    let started = Instant::now();
    let err = idle
        .query_drop("INSERT INTO t VALUES (3)")
        .await
        .expect_err("no writer");
    assert!(started.elapsed() >= Duration::from_millis(900), "waited");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!((e.code, e.state.as_str()), (1290, "HY000"), "{e:?}");
            assert!(e.message.contains("no writer"), "{}", e.message);
            assert!(e.message.contains("writer_wait_timeout"), "{}", e.message);
        }
        other => panic!("expected 1290, got {other:?}"),
    }
    // Reads still work meanwhile.
    server_id(&mut idle, "SELECT @@server_id").await;
    blocking(|| cluster.set_read_only(1, false)).expect("writable again");
    until(&proxy, "writer 1 again", |p| {
        p.context().topology().topology.writer() == Some(1)
    })
    .await;
    idle.query_drop("INSERT INTO t VALUES (4)")
        .await
        .expect("writes resume");

    // Split brain: replica 2 made a writable primary of its own while 1 still is: no
    // writes anywhere.
    blocking(|| {
        cluster.exec(2, "STOP SLAVE")?;
        cluster.exec(2, "RESET SLAVE ALL")?;
        cluster.exec(2, "SET GLOBAL read_only = 0")
    })
    .expect("second primary");
    until(&proxy, "split brain: no writer", |p| {
        p.context().topology().topology.writer().is_none()
    })
    .await;
    let err = idle
        .query_drop("INSERT INTO t VALUES (5)")
        .await
        .expect_err("split brain");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1290, "{e:?}");
            assert!(e.message.contains("split brain"), "{}", e.message);
        }
        other => panic!("expected 1290, got {other:?}"),
    }
    for i in [1, 2] {
        let rows = blocking(|| cluster.query(i, "SELECT id FROM app.t WHERE id = 5")).expect("q");
        assert!(rows.is_empty(), "server {i} got the write");
    }
    drop(idle);
    proxy.shutdown().await;
}

/// Many sessions' reads over one slot per server: they are pipelined on the replicas (each
/// server has its own batches), every client gets its own answer from a replica, in its own
/// session state (four time zones among the readers: only sessions in the same one may
/// share a batch), and a session that writes meanwhile still reads its writes back and
/// writes only on the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_many_sessions_are_pipelined_on_the_replicas() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |c| {
        c.pool_size = sluice::config::PoolSize::Fixed(1);
        c.pipeline_depth = 8;
    })
    .await;
    let replicas: BTreeSet<u32> = [cluster.server_id(1), cluster.server_id(2)].into();
    let mut readers = Vec::new();
    for client_no in 0..12u64 {
        let mut c = client(&proxy).await;
        let zone = format!("+0{}:00", client_no % 4);
        c.query_drop(format!("SET time_zone = '{zone}'"))
            .await
            .expect("set time_zone");
        readers.push(tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            for n in 0..150u64 {
                let sql =
                    format!("SELECT @@server_id, {client_no} * 1000 + {n}, @@session.time_zone");
                let (id, v, tz): (u32, u64, String) =
                    c.query_first(&sql).await.expect(&sql).expect("a row");
                assert_eq!(v, client_no * 1000 + n, "every answer is the client's own");
                assert_eq!(tz, zone, "client {client_no}: its own time zone");
                seen.insert(id);
            }
            seen
        }));
    }
    let mut writer = client(&proxy).await;
    writes_read_back(
        &mut writer,
        100..140,
        "a write read back while reads are batched:",
    )
    .await;
    let mut seen = BTreeSet::new();
    for r in readers {
        seen.extend(r.await.expect("reader"));
    }
    assert_eq!(seen, replicas, "the readers' reads by server_id");
    let on_primary = blocking(|| cluster.query(0, "SELECT COUNT(*) FROM app.t WHERE id >= 100"))
        .expect("count on the primary");
    assert_eq!(
        on_primary,
        vec![vec![Some("40".to_string())]],
        "the writes are on the primary"
    );
    let pipeline = &proxy.context().stats.pipeline;
    let batches = pipeline.batches.load(std::sync::atomic::Ordering::Relaxed);
    assert!(batches > 0, "no batch on the replicas");
    drop(writer);
    proxy.shutdown().await;
}

/// KILL QUERY from a session whose last statement ran on the primary reaches the replica the
/// victim's read runs on: backend thread ids are per server, so the primary's thread of
/// the same id (if any) is somebody else's and must not be the one asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_reaches_the_server_the_statement_runs_on() {
    let cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |_| {}).await;
    let mut victim = client(&proxy).await;
    let id = victim.id();
    let long_read = tokio::spawn(async move {
        // About 9e8 rows: many seconds on any server here, and a replica's read.
        let sql = "SELECT SUM(a.seq * b.seq) FROM seq_1_to_30000 a, seq_1_to_30000 b";
        let r: Result<Option<i64>, _> = victim.query_first(sql).await;
        (victim, r)
    });
    let mut killer = client(&proxy).await;
    killer
        .query_drop("INSERT INTO t VALUES (900)")
        .await
        .expect("insert on the primary");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let kill_at = Instant::now();
    killer
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .expect("kill");
    let (mut victim, result) = tokio::time::timeout(Duration::from_secs(30), long_read)
        .await
        .expect("the read returns")
        .expect("reader");
    let after = kill_at.elapsed();
    match &result {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("the read was not interrupted: {other:?} after {after:?}"),
    }
    assert!(after < Duration::from_secs(3), "KILL QUERY took {after:?}");
    let routed = proxy.context().stats.routed_snapshot();
    let replica_reads: u64 = routed
        .iter()
        .filter(|((_, r, _), _)| *r == "replica")
        .map(|(_, n)| n)
        .sum();
    assert!(replica_reads >= 1, "the read ran on a replica: {routed:?}");
    // Only the query died: the session goes on.
    assert!(replicas_of(&cluster).contains(&server_id(&mut victim, "SELECT @@server_id").await));
    drop((victim, killer));
    proxy.shutdown().await;
}

fn replicas_of(cluster: &Cluster) -> BTreeSet<u32> {
    (1..cluster.len()).map(|i| cluster.server_id(i)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_costs_no_read_errors() {
    let mut cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |c| {
        c.pool_size = sluice::config::PoolSize::Fixed(8);
    })
    .await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..32 {
        let mut c = client(&proxy).await;
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let (mut ok, mut errors) = (0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match c.query_first::<u32, _>("SELECT @@server_id").await {
                    Ok(Some(_)) => ok += 1,
                    Ok(None) => errors.push("no row".to_string()),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (ok, errors)
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    blocking(|| cluster.kill(2));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut ok, mut errors) = (0, Vec::new());
    for r in readers {
        let (o, e) = r.await.expect("reader");
        ok += o;
        errors.extend(e);
    }
    assert!(ok > 100, "reads ran: {ok}");
    // The reads were pipelined (16 sessions on each replica's 8 slots), so the kill also
    // failed batches, whose reads ran again elsewhere (seen: 5,843 batches, 91 reruns).
    let batches = &proxy.context().stats.pipeline.batches;
    assert!(
        batches.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no batch"
    );
    assert!(
        errors.is_empty(),
        "{} read errors, e.g. {:?}",
        errors.len(),
        errors.first()
    );
    let mut c = client(&proxy).await;
    for _ in 0..10 {
        assert_eq!(
            server_id(&mut c, "SELECT @@server_id").await,
            cluster.server_id(1)
        );
    }
    drop(c);
    proxy.shutdown().await;
}

/// The writer dies (kill -9) and a replica is promoted: the client whose statement was running
/// on it loses its connection, as it would directly (never replayed), an idle session keeps
/// its connection, its session state and its prepared statement, and its next write goes to
/// the new writer once the monitor sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writer_fails_its_running_statement_and_idle_sessions_follow_the_new_one() {
    let mut cluster = cluster_with(&[]).await;
    let proxy = start(&cluster, |cfg| {
        cfg.writer_wait_timeout = Duration::from_secs(20);
    })
    .await;
    let mut idle = client(&proxy).await;
    idle.query_drop("SET SESSION time_zone = '+03:00'")
        .await
        .expect("set");
    let stmt = idle
        .prep("INSERT INTO t VALUES (?)")
        .await
        .expect("prepare");
    idle.exec_drop(&stmt, (10,)).await.expect("insert before");
    blocking(|| cluster.sync_replicas(WAIT)).expect("sync");

    // A statement running on the writer when it dies (SLEEP never goes to a replica).
    let mut busy = client(&proxy).await;
    let running = tokio::spawn(async move {
        let r = busy.query_drop("SELECT SLEEP(30)").await;
        (r, busy)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    blocking(|| cluster.kill(0));
    let (result, _busy) = running.await.expect("task");
    match result {
        Err(mysql_async::Error::Server(e)) => {
            panic!("the running statement's connection should be lost, as directly; got {e:?}")
        }
        Err(_) => {}
        Ok(()) => panic!("the running statement's server died under it, yet it succeeded"),
    }

    blocking(|| cluster.failover(1, WAIT)).expect("failover");
    until(&proxy, "writer 1 after the failover", |p| {
        p.context().topology().topology.writer() == Some(1)
    })
    .await;
    idle.exec_drop(&stmt, (11,))
        .await
        .expect("the idle session's prepared insert after the failover");
    let tz: String = idle
        .query_first("SELECT @@session.time_zone")
        .await
        .expect("tz")
        .expect("row");
    assert_eq!(tz, "+03:00", "session state replayed on the new writer");
    let rows = blocking(|| cluster.query(1, "SELECT id FROM app.t WHERE id = 11"))
        .expect("read the new writer");
    assert_eq!(rows.len(), 1, "the write went to the new writer, once");
    let old = blocking(|| cluster.query(1, "SELECT id FROM app.t WHERE id = 10"))
        .expect("read the new writer");
    assert_eq!(old.len(), 1, "the write before the failover was replicated");
    proxy.shutdown().await;
}
