//! What the replica tests (replicas, route, servers_view, topology) share: a dbkit cluster
//! (a MariaDB primary and GTID replicas) with the application's table, started off the
//! async runtime, and a way to run dbkit's blocking calls from a test.

// Each test binary includes this module and uses the parts it needs.
#![allow(dead_code)]

pub mod wire;

use std::time::Duration;

use dbkit::{Cluster, ClusterOptions};

/// How long replicas get to catch up.
pub const WAIT: Duration = Duration::from_secs(60);

/// Runs dbkit's blocking calls without stalling the runtime's other tasks.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A default cluster with `app.t (id INT PRIMARY KEY)` and the statements of `then` run on
/// the primary, every replica caught up.
pub async fn cluster_with(then: &[&str]) -> Cluster {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(ClusterOptions::default()))
        .await
        .expect("start task")
        .unwrap_or_else(|e| panic!("cluster: {e}"));
    blocking(|| {
        cluster
            .exec(0, "CREATE TABLE app.t (id INT PRIMARY KEY)")
            .expect("create");
        for sql in then {
            cluster.exec(0, sql).expect("setup statement");
        }
        cluster.sync_replicas(WAIT).expect("sync");
    });
    cluster
}
