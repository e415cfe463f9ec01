//! The topology monitor against real MariaDB replication (dbkit's [`Cluster`]): what
//! [`observe`] reads (roles, lag with MASTER_DELAY, NULL lag after STOP SLAVE, read_only,
//! GTID positions) and what [`decide`] makes of it through a failover and a returning old
//! primary; plus the write GTID a backend's OK reports, and read-your-writes replica choice.
//!
//! Every check logs in with dbkit's monitor account (SLAVE MONITOR only); writes use the
//! application account (its own database only).

mod common;
use common::{blocking, cluster_with, WAIT};

use std::sync::Arc;
use std::time::{Duration, Instant};

use dbkit::replication::{Threads, APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER};
use dbkit::{Cluster, ClusterOptions};
use sluice::conn::backend::{BackendConn, BackendTarget, PoolKey};
use sluice::protocol::request::query as query_payload;
use sluice::protocol::{last_write_gtid, Capabilities, GtidReport};
use sluice::topology::monitor::{failure_of, observe};
use sluice::topology::{
    choose_replica, decide, Candidate, CheckFailure, Exclusion, Flavor, GtidPosition, IoThread,
    Limits, Memory, NoWriter, Observation, Role, Verdict,
};

const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
const LIMITS: Limits = Limits {
    max_replica_lag: Duration::from_secs(1),
};

fn target(cluster: &Cluster, index: usize, user: &str, password: &str) -> BackendTarget {
    BackendTarget {
        addr: sluice::config::Endpoint::parse(&cluster.addr(index).to_string()),
        user: user.into(),
        password: password.into(),
        connect_timeout: Duration::from_secs(10),
        max_payload: 64 << 20,
        tls: None,
        identity: Arc::default(),
        credentials: None,
    }
}

/// A backend connection; `deprecate_eof` picks which result terminators the server sends.
async fn connect(
    cluster: &Cluster,
    index: usize,
    user: &str,
    password: &str,
    deprecate_eof: bool,
) -> Result<BackendConn, sluice::conn::Error> {
    let caps = if deprecate_eof {
        Capabilities::CLIENT_DEPRECATE_EOF.bits()
    } else {
        0
    };
    let key = PoolKey {
        user: Arc::from(user),
        caps,
        collation: 45,
        globals: 0,
    };
    BackendConn::connect(&target(cluster, index, user, password), key).await
}

/// One round: a fresh monitor connection per server (as after a restart), then a check.
async fn observe_all(cluster: &Cluster) -> Vec<Observation> {
    let mut out = Vec::new();
    for index in 0..cluster.len() {
        let observation = match connect(
            cluster,
            index,
            MONITOR_USER,
            MONITOR_PASSWORD,
            index % 2 == 0,
        )
        .await
        {
            Ok(mut conn) => observe(&mut conn, Flavor::MariaDb, CHECK_TIMEOUT).await,
            Err(e) => Err(failure_of(&e)),
        };
        out.push(observation);
    }
    out
}

fn roles(observations: &[Observation], memory: &Memory) -> (Verdict, Vec<Role>, Memory) {
    let t = decide(memory, observations, &LIMITS);
    let roles = t.servers.iter().map(|s| s.role).collect();
    (t.verdict, roles, t.memory)
}

/// Inserts `id` as the application on `index` through a sluice backend connection and
/// returns the GTID its OK reported.
async fn write(cluster: &Cluster, index: usize, id: u32) -> GtidPosition {
    let mut conn = connect(cluster, index, APP_USER, APP_PASSWORD, true)
        .await
        .expect("app login");
    let sql = format!("INSERT INTO app.t VALUES ({id})");
    let ok = conn
        .run_simple(&query_payload(sql.as_bytes()))
        .await
        .expect("io")
        .expect("insert");
    let report = last_write_gtid(&ok.session_state).expect("a GTID report");
    let GtidReport::MariaDbLastGtid(text) = report else {
        panic!("MariaDB reported {report:?}");
    };
    // The read-only last_gtid must not become replayable session state (error 1238).
    assert!(!conn.state.vars.contains_key(&b"last_gtid"[..]));
    GtidPosition::parse(Flavor::MariaDb, std::str::from_utf8(text).expect("utf8"))
        .expect("last_gtid parses")
}

fn replica_status(o: &Observation) -> sluice::topology::ReplicaStatus {
    o.as_ref()
        .expect("observed")
        .replication
        .clone()
        .expect("replicating")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_reads_real_replicas_through_delay_stop_and_failover() {
    let mut cluster = cluster_with(&[]).await;

    // A healthy cluster: server ids, read_only, sources and positions as the servers say.
    let obs = observe_all(&cluster).await;
    let (verdict, r, memory) = roles(&obs, &Memory::default());
    assert_eq!(
        verdict,
        Verdict::Writer {
            index: 0,
            rivals: vec![]
        }
    );
    assert_eq!(r, vec![Role::Writer, Role::Replica, Role::Replica]);
    for (index, o) in obs.iter().enumerate() {
        let s = o.as_ref().expect("observed");
        assert_eq!(s.server_id, cluster.server_id(index));
        assert_eq!(s.read_only, index != 0);
        let expected = blocking(|| cluster.gtid_binlog_pos(0)).expect("pos");
        assert_eq!(s.position.to_string(), expected, "server {index}");
    }
    let status = replica_status(&obs[1]);
    assert_eq!((status.io, status.sql_running), (IoThread::Running, true));
    assert_eq!(status.lag, Some(Duration::ZERO));
    assert_eq!(status.source_server_id, Some(1));
    assert_eq!(status.source_port, cluster.addr(0).port());

    // Read-your-writes: the write's GTID from the OK, and which replica may serve the read.
    blocking(|| cluster.set_delay(1, Duration::from_secs(3))).expect("delay");
    blocking(|| cluster.wait_replicating(1, WAIT)).expect("replicating");
    let gtid = write(&cluster, 0, 1).await;
    assert!(gtid.to_string().starts_with("0-1-"), "{gtid}");
    let position = blocking(|| cluster.gtid_binlog_pos(0)).expect("pos");
    blocking(|| cluster.wait_for_position(2, &position, WAIT)).expect("replica 2");
    let obs = observe_all(&cluster).await;
    let have = |i: usize| &obs[i].as_ref().expect("observed").position;
    assert!(have(0).covers(&gtid), "the writer has its own write");
    assert!(!have(1).covers(&gtid), "the delayed replica has it already");
    assert!(have(2).covers(&gtid));
    let candidates: Vec<Candidate<'_>> = [1, 2]
        .iter()
        .map(|&index| Candidate {
            index,
            queued: 0,
            lag: Duration::ZERO,
            position: Some(have(index)),
        })
        .collect();
    for tie in 0..4 {
        assert_eq!(choose_replica(&candidates, Some(&gtid), tie), Some(2));
    }
    // Without a requirement the two replicas share the reads.
    let picked: Vec<_> = (0..4)
        .map(|t| choose_replica(&candidates, None, t))
        .collect();
    assert_eq!(picked, vec![Some(1), Some(2), Some(1), Some(2)]);

    // MASTER_DELAY shows as lag while the delayed write waits: the replica is banned.
    let started = Instant::now();
    let mut banned = false;
    while started.elapsed() < WAIT {
        let obs = observe_all(&cluster).await;
        let (_, r, _) = roles(&obs, &memory);
        if let Role::Excluded(Exclusion::LagTooHigh { lag }) = r[1] {
            assert!(lag >= Duration::from_secs(2), "{lag:?}");
            banned = true;
        }
        if obs[1].as_ref().expect("observed").position.covers(&gtid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(banned, "the delayed replica was never banned for lag");
    assert!(started.elapsed() < WAIT, "the delayed write never arrived");
    blocking(|| cluster.set_delay(1, Duration::ZERO)).expect("clear delay");
    blocking(|| cluster.wait_replicating(1, WAIT)).expect("replicating");

    // STOP SLAVE: NULL lag (never zero) and the stopped thread, each excluded.
    blocking(|| cluster.stop_replication(1, Threads::Sql)).expect("stop sql");
    blocking(|| cluster.stop_replication(2, Threads::Io)).expect("stop io");
    let obs = observe_all(&cluster).await;
    assert_eq!(replica_status(&obs[1]).lag, None);
    assert!(!replica_status(&obs[1]).sql_running);
    assert_eq!(replica_status(&obs[2]).lag, None);
    assert_eq!(replica_status(&obs[2]).io, IoThread::Stopped);
    let (_, r, _) = roles(&obs, &memory);
    assert_eq!(
        r,
        vec![
            Role::Writer,
            Role::Excluded(Exclusion::SqlThreadStopped),
            Role::Excluded(Exclusion::IoThreadStopped)
        ]
    );
    blocking(|| cluster.start_replication(1, Threads::Both)).expect("start");
    blocking(|| cluster.start_replication(2, Threads::Both)).expect("start");
    blocking(|| cluster.wait_replicating(1, WAIT)).expect("replicating");
    blocking(|| cluster.wait_replicating(2, WAIT)).expect("replicating");

    // SET GLOBAL read_only=0 on a replica: excluded, and not taken for a writer.
    blocking(|| cluster.set_read_only(2, false)).expect("ro off");
    let obs = observe_all(&cluster).await;
    let (verdict, r, memory) = roles(&obs, &memory);
    assert_eq!(
        verdict,
        Verdict::Writer {
            index: 0,
            rivals: vec![]
        }
    );
    assert_eq!(r[2], Role::Excluded(Exclusion::WritableReplica));
    blocking(|| cluster.set_read_only(2, true)).expect("ro on");

    // A monitor without SLAVE MONITOR: the check fails with the server's 1227.
    let mut app = connect(&cluster, 1, APP_USER, APP_PASSWORD, false)
        .await
        .expect("app login");
    assert_eq!(
        observe(&mut app, Flavor::MariaDb, CHECK_TIMEOUT).await,
        Err(CheckFailure::Refused { code: 1227 })
    );

    // kill -9 of the primary: its connection is lost, a new one unreachable; writes wait.
    let mut old = connect(&cluster, 0, MONITOR_USER, MONITOR_PASSWORD, true)
        .await
        .expect("monitor");
    cluster.kill(0);
    assert_eq!(
        observe(&mut old, Flavor::MariaDb, CHECK_TIMEOUT).await,
        Err(CheckFailure::Lost)
    );
    let obs = observe_all(&cluster).await;
    let (verdict, _, memory) = roles(&obs, &memory);
    assert_eq!(obs[0], Err(CheckFailure::Unreachable));
    assert_eq!(
        verdict,
        Verdict::NoWriter(NoWriter::Unreachable { writer: 0 })
    );

    // Failover to server 1 (by "the operator"): followed.
    blocking(|| cluster.failover(1, WAIT)).expect("failover");
    // Right after the repoint MariaDB may report a lag counted from an old event for a
    // moment (seen once: 6 s); the replica is banned until it settles, which is the safe
    // side. So poll for a few rounds.
    let started = Instant::now();
    let mut seen = Vec::new();
    let (obs, verdict, r, memory) = loop {
        let obs = observe_all(&cluster).await;
        let (verdict, r, m) = roles(&obs, &memory);
        seen.push(r[2]);
        if r[2] == Role::Replica || started.elapsed() > Duration::from_secs(40) {
            break (obs, verdict, r, m);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        verdict,
        Verdict::Writer {
            index: 1,
            rivals: vec![]
        }
    );
    assert_eq!(r[2], Role::Replica, "server 2 after the failover: {seen:?}");
    assert_eq!(replica_status(&obs[2]).source_server_id, Some(2));

    // The old primary returns writable: split brain, so there is no writer at all (writes
    // on either side could be lost): neither side gets writes or reads; the alert names both.
    blocking(|| cluster.restart(0)).expect("restart");
    let obs = observe_all(&cluster).await;
    let (verdict, r, memory) = roles(&obs, &memory);
    assert_eq!(
        verdict,
        Verdict::NoWriter(sluice::topology::NoWriter::Ambiguous {
            candidates: vec![0, 1]
        })
    );
    assert_eq!(r[0], Role::Excluded(Exclusion::CompetingWriter));
    assert_eq!(r[1], Role::Excluded(Exclusion::CompetingWriter));
    // Rejoined as a replica of the new primary: a replica again.
    blocking(|| cluster.rejoin(0, WAIT)).expect("rejoin");
    let gtid = write(&cluster, 1, 2).await;
    blocking(|| cluster.sync_replicas(WAIT)).expect("sync");
    let obs = observe_all(&cluster).await;
    let (verdict, r, _) = roles(&obs, &memory);
    assert_eq!(
        verdict,
        Verdict::Writer {
            index: 1,
            rivals: vec![]
        }
    );
    assert_eq!(r, vec![Role::Replica, Role::Writer, Role::Replica]);
    assert!(gtid.to_string().starts_with("0-2-"), "{gtid}");
    for o in &obs {
        assert!(o.as_ref().expect("observed").position.covers(&gtid));
    }
}

/// With the binary log on, MariaDB reports `last_gtid` after every write. It is read-only,
/// so it must not become session state that sluice replays when the backend moves to
/// another session (`SET @@SESSION.last_gtid=...` fails with 1238).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_gtid_is_not_replayed_between_sessions_on_a_binlog_server() {
    use mysql_async::prelude::Queryable;
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(ClusterOptions {
            replicas: 0,
            ..ClusterOptions::default()
        })
    })
    .await
    .expect("start task")
    .unwrap_or_else(|e| panic!("cluster: {e}"));
    blocking(|| cluster.exec(0, "CREATE TABLE app.g (id INT PRIMARY KEY)")).expect("create");
    let mut cfg = sluice::Config::for_backend(cluster.addr(0).to_string(), "client", "pw");
    cfg.users[0].backend_user = Some(APP_USER.into());
    cfg.users[0].backend_password = Some(sluice::config::Secret::new(APP_PASSWORD.into()));
    // One backend connection: the two sessions take turns on it.
    cfg.pool_size = sluice::config::PoolSize::Fixed(1);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(1);
    let proxy = sluice::Proxy::bind(cfg).await.expect("sluice starts");
    let opts = |db: &str| -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname(proxy.local_addr().ip().to_string())
            .tcp_port(proxy.local_addr().port())
            .user(Some("client"))
            .pass(Some("pw"))
            .db_name(Some(db))
            .prefer_socket(false)
            .into()
    };
    let mut writer = mysql_async::Conn::new(opts("app")).await.expect("writer");
    let mut reader = mysql_async::Conn::new(opts("app")).await.expect("reader");
    for id in 1..=20 {
        writer
            .query_drop(format!("INSERT INTO g VALUES ({id})"))
            .await
            .expect("insert");
        let n: Option<u32> = reader
            .query_first("SELECT COUNT(*) FROM g")
            .await
            .expect("the other session's statement after a write");
        assert_eq!(n, Some(id));
    }
    let last: Option<String> = writer.query_first("SELECT @@last_gtid").await.expect("q");
    assert_eq!(last.as_deref(), Some("0-1-21"));
    drop((writer, reader));
    proxy.shutdown().await;
}
