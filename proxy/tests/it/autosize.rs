//! `pool_size = auto` against the real MariaDB: the limit moves from where it started, stays
//! within its bounds, says why it moved, and the admin console switches it on and off live.
//! No timing-based performance asserts: how well it finds the knee is measured by loadgen's
//! experiment E.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use sluice::config::PoolSize;

use crate::admin::{admin, admin_config, cell, finish, load, num, rows};
use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_pool_moves_its_limit_within_bounds_and_says_why() {
    let mut cfg = admin_config(1);
    cfg.pool_size = PoolSize::Auto;
    cfg.min_pool_size = 2;
    cfg.max_pool_size = 12;
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(32);
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let first = rows(&mut a, "SHOW POOLS").await;
    assert_eq!(num(&first[0], "pool_size"), 2, "starts at min_pool_size");
    assert_eq!(cell(&first[0], "pool_mode"), Some("auto"));

    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    // Statements that spend their time waiting, not computing: more slots, more throughput,
    // so the limiter has a reason to grow.
    let tasks = load(&proxy, 64, 0.02, "autosize", &stop, &done);
    let mut seen = Vec::new();
    let mut reason = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let pools = rows(&mut a, "SHOW POOLS").await;
        let size = num(&pools[0], "pool_size");
        seen.push(size);
        reason = cell(&pools[0], "limit_reason").map(str::to_string);
        if size > 4 && seen.len() >= 8 {
            break;
        }
    }
    eprintln!("limits seen: {seen:?}; last reason: {reason:?}");
    assert!(
        seen.iter().any(|&s| s > 2),
        "the limit never moved from 2: {seen:?}"
    );
    assert!(
        seen.iter().all(|&s| (2..=12).contains(&s)),
        "out of bounds: {seen:?}"
    );
    let reason = reason.expect("an auto pool explains its limit");
    assert!(!reason.is_empty());

    // The console switches to a fixed size and back, live.
    let set = rows(&mut a, "SET pool_size = 3").await;
    assert_eq!(cell(&set[0], "new"), Some("3"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let pools = rows(&mut a, "SHOW POOLS").await;
    assert_eq!(
        (num(&pools[0], "pool_size"), cell(&pools[0], "pool_mode")),
        (3, Some("fixed"))
    );
    assert_eq!(cell(&pools[0], "limit_reason"), None);
    a.query_drop("SET pool_size = auto").await.unwrap();
    let mut back = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let pools = rows(&mut a, "SHOW POOLS").await;
        if cell(&pools[0], "pool_mode") == Some("auto") {
            back = cell(&pools[0], "limit_reason").is_some_and(|r| !r.is_empty());
            break;
        }
    }
    assert!(back, "SET pool_size = auto turned the limiter back on");

    let errors = finish(&stop, tasks).await;
    assert_eq!(errors, 0, "no client saw an error while the limit moved");
    assert!(done.load(Ordering::Relaxed) > 0);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}
