//! The monitor task ([`sluice::topology::task`]) against a real dbkit [`Cluster`] (a primary
//! and two GTID replicas): it finds the roles, excludes a stopped replica with its reason
//! and NULL lag, sees a delayed replica's lag, follows a switchover within a few intervals,
//! and refuses a returning writable old primary (split brain); and [`route`] over the
//! snapshots it publishes sends reads to replicas and unsafe statements to the writer.
//!
//! The monitor logs in with dbkit's monitor account (SLAVE MONITOR only), writes use the
//! application account; neither is root.

mod common;
use common::{blocking, cluster_with, WAIT};

use std::sync::Arc;
use std::time::Duration;

use dbkit::replication::{Threads, APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER};
use dbkit::Cluster;
use sluice::classify::classify;
use sluice::conn::backend::{BackendConn, BackendTarget, PoolKey};
use sluice::protocol::request::query as query_payload;
use sluice::topology::task::{self, BackendConnect, MonitorSettings, Snapshot};
use sluice::topology::{
    route, Exclusion, Flavor, Limits, MinGtid, NoWriter, ReadWriteSplit, Role, Route, RouteConfig,
    RouteInput, SessionFacts, Transaction, Verdict,
};
use tokio::sync::watch;

const INTERVAL: Duration = Duration::from_millis(100);

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

/// Waits (up to `WAIT`) for a snapshot that satisfies `pred`; panics with the last one.
async fn until(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    pred: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let current = rx.borrow_and_update().clone();
        if current.round > 0 && pred(&current) {
            return current;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => panic!("{what}: not seen within {WAIT:?}; last: {current:#?}"),
        }
    }
}

fn roles(s: &Snapshot) -> Vec<Role> {
    s.topology.servers.iter().map(|v| v.role).collect()
}

/// Where `sql` would go for an autocommit session with the split on.
fn route_of(s: &Snapshot, sql: &str, tie_break: usize) -> Route {
    let config = RouteConfig {
        read_write_split: ReadWriteSplit::On,
        ..RouteConfig::default()
    };
    let input = RouteInput {
        statement: classify(sql.as_bytes()).read,
        session: SessionFacts {
            pinned: false,
            transaction: Transaction::None,
            last_write: None,
            min_gtid: MinGtid::None,
        },
        config: &config,
        topology: &s.topology,
        queued: &[],
        tie_break,
    };
    route(&input)
}

/// An autocommit INSERT as the application on `index`.
async fn insert(cluster: &Cluster, index: usize, id: u32) {
    let key = PoolKey {
        user: Arc::from(APP_USER),
        caps: 0,
        collation: 45,
        globals: 0,
    };
    let mut conn = BackendConn::connect(&target(cluster, index, APP_USER, APP_PASSWORD), key)
        .await
        .expect("app login");
    let sql = format!("INSERT INTO app.t VALUES ({id})");
    conn.run_simple(&query_payload(sql.as_bytes()))
        .await
        .expect("io")
        .expect("insert");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_monitor_task_follows_a_real_cluster() {
    let mut cluster = cluster_with(&[]).await;
    let settings = MonitorSettings {
        interval: INTERVAL,
        check_timeout: Duration::from_secs(5),
        limits: Limits {
            max_replica_lag: Duration::from_secs(1),
        },
    };
    let connect = BackendConnect {
        targets: (0..cluster.len())
            .map(|i| target(&cluster, i, MONITOR_USER, MONITOR_PASSWORD))
            .collect(),
    };
    let (mut rx, handle) = task::spawn(settings, connect);
    assert_eq!(rx.borrow().round, 0);
    assert_eq!(
        rx.borrow().topology.writer(),
        None,
        "no writer before the first round"
    );

    // Roles as the servers report them; reads spread over the replicas, the rest to the writer.
    let s = until(&mut rx, "roles", |s| {
        roles(s) == [Role::Writer, Role::Replica, Role::Replica]
    })
    .await;
    assert_eq!(s.flavors, vec![Some(Flavor::MariaDb); 3]);
    assert_eq!(
        route_of(&s, "SELECT id FROM app.t", 0),
        Route::Replica { index: 1 }
    );
    assert_eq!(
        route_of(&s, "SELECT id FROM app.t", 1),
        Route::Replica { index: 2 }
    );
    for sql in [
        "SELECT id FROM app.t FOR UPDATE",
        "INSERT INTO app.t VALUES (9)",
        "SELECT GET_LOCK('x', 0)",
    ] {
        assert!(
            matches!(route_of(&s, sql, 0), Route::Writer { index: 0, .. }),
            "{sql}"
        );
    }

    // A delayed replica: its lag is seen and bans it.
    blocking(|| cluster.set_delay(1, Duration::from_secs(3))).expect("delay");
    blocking(|| cluster.wait_replicating(1, WAIT)).expect("replicating");
    insert(&cluster, 0, 1).await;
    let s = until(&mut rx, "replica 1 lagging", |s| {
        matches!(
            s.topology.servers[1].role,
            Role::Excluded(Exclusion::LagTooHigh { .. })
        )
    })
    .await;
    assert!(s.topology.servers[1]
        .lag
        .is_some_and(|l| l > Duration::from_secs(1)));
    assert_eq!(
        route_of(&s, "SELECT 1 FROM app.t", 0),
        Route::Replica { index: 2 }
    );
    blocking(|| cluster.set_delay(1, Duration::ZERO)).expect("undelay");
    blocking(|| cluster.wait_replicating(1, WAIT)).expect("replicating");

    // A stopped replica: excluded with its reason, its NULL lag never read as zero.
    blocking(|| cluster.stop_replication(2, Threads::Sql)).expect("stop sql");
    let s = until(&mut rx, "replica 2 SQL thread stopped", |s| {
        s.topology.servers[2].role == Role::Excluded(Exclusion::SqlThreadStopped)
    })
    .await;
    assert_eq!(
        s.topology.servers[2].lag, None,
        "NULL lag is unknown, not zero"
    );
    blocking(|| cluster.start_replication(2, Threads::Both)).expect("start");
    blocking(|| cluster.wait_replicating(2, WAIT)).expect("replicating");
    until(&mut rx, "all healthy again", |s| {
        roles(s) == [Role::Writer, Role::Replica, Role::Replica]
    })
    .await;

    // A switchover to server 1 is followed within a few intervals of its end.
    blocking(|| cluster.switchover(1, WAIT)).expect("switchover");
    let ended = rx.borrow().round;
    let s = until(&mut rx, "writer 1 after the switchover", |s| {
        roles(s) == [Role::Replica, Role::Writer, Role::Replica]
    })
    .await;
    assert!(
        s.round <= ended + 5,
        "seen at round {} (switchover ended at {ended})",
        s.round
    );

    // The old primary comes back writable and replicating from nobody: split brain. It gets
    // no writes and no reads.
    blocking(|| cluster.stop_replication(0, Threads::Both)).expect("stop");
    blocking(|| cluster.exec(0, "RESET SLAVE ALL")).expect("reset");
    blocking(|| cluster.set_read_only(0, false)).expect("writable");
    let s = until(&mut rx, "split brain", |s| {
        s.topology.servers[0].role == Role::Excluded(Exclusion::CompetingWriter)
    })
    .await;
    assert!(!s.topology.alerts().is_empty(), "{:?}", s.topology);
    match route_of(&s, "INSERT INTO app.t VALUES (5)", 0) {
        Route::Writer { index: 1, .. } => {}
        Route::NoWriter {
            state: NoWriter::Ambiguous { .. },
            ..
        } => {}
        other => panic!("a write during split brain went to {other:?}"),
    }
    for tie in 0..4 {
        assert_ne!(route_of(&s, "SELECT 1", tie), Route::Replica { index: 0 });
    }
    assert!(matches!(
        s.topology.verdict,
        Verdict::Writer { index: 1, .. } | Verdict::NoWriter(_)
    ));

    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the task ends when its receivers are gone")
        .expect("task");
}
