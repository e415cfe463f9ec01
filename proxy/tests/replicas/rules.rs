//! Query rules' `route` with replicas, by `@@server_id`: a regex rule sends a read to the
//! writer; a `route = replica` rule sends reads to the replicas, but not inside a
//! transaction, where the read stays with the transaction on the primary and the rule's
//! `overridden` counter says so.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Relaxed;

use mysql_async::prelude::*;
use sluice::Config;

use super::common::cluster_with;
use super::{client, replicas_of, server_id, start};

const RULES: &str = r#"
backend = "127.0.0.1:3306"

[[users]]
name = "only here to make the rules' file valid"
password = "x"

[[rules]]
name = "reports read the writer"
match_digest = "AS from_writer$"
route = "writer"

[[rules]]
name = "to the replicas"
match_digest = "AS to_replica$"
route = "replica"
"#;

/// The counters of rule `i`: (hits, overridden).
fn counted(proxy: &sluice::ProxyHandle, i: usize) -> (u64, u64) {
    let rules = proxy.context().rules().expect("rules in force");
    let c = &rules.rules()[i].counters;
    (c.hits.load(Relaxed), c.overridden.load(Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_route_reads_where_correctness_allows() {
    let cluster = cluster_with(&[]).await;
    let rules = Config::from_toml_str(RULES).expect("rules").rules;
    let proxy = start(&cluster, |cfg| cfg.rules = rules).await;
    let primary = cluster.server_id(0);
    let mut c = client(&proxy).await;

    // Without a rule a read goes to a replica; the regex rule sends this one to the writer.
    let plain = server_id(&mut c, "SELECT @@server_id").await;
    assert!(replicas_of(&cluster).contains(&plain), "{plain}");
    for _ in 0..10 {
        assert_eq!(
            server_id(&mut c, "SELECT @@server_id AS from_writer").await,
            primary
        );
    }
    assert_eq!(counted(&proxy, 0), (10, 0));

    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        seen.insert(server_id(&mut c, "SELECT @@server_id AS to_replica").await);
    }
    assert_eq!(seen, replicas_of(&cluster), "route = replica");
    assert_eq!(counted(&proxy, 1), (20, 0));

    // In a transaction the read stays where the transaction is: overridden, and counted.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("INSERT INTO t VALUES (7)").await.unwrap();
    assert_eq!(
        server_id(&mut c, "SELECT @@server_id AS to_replica").await,
        primary
    );
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(counted(&proxy, 1), (21, 1));
    // The writer is always a correct place: a rule's route there is never overridden.
    c.query_drop("BEGIN").await.unwrap();
    assert_eq!(
        server_id(&mut c, "SELECT @@server_id AS from_writer").await,
        primary
    );
    c.query_drop("COMMIT").await.unwrap();
    assert_eq!(counted(&proxy, 0), (11, 0));
    drop(c);
    proxy.shutdown().await;
}
