//! A client that stops reading, or a statement that runs long, never holds up another
//! client's statement: not one batched behind it (`pipeline_depth` 16), and not one queued
//! for the execution slot it holds (`pipeline_depth` 1). Direct MariaDB answers `SELECT 1`
//! at once whatever another connection does; through sluice it may wait for a slot, never
//! for another client's reading speed.
//!
//! The stalled reader is a raw client that sends a 150 MiB SELECT and reads nothing for
//! 12 s. The assertions are "far below the stall" (a couple of seconds against 12), as the
//! host is small and noisy.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::ProxyHandle;

use crate::harness::*;

/// 150 rows of 1 MiB from the sequence engine: far more than the sockets between the server,
/// sluice and the client buffer.
const HUGE: &str = "SELECT REPEAT('x', 1 << 20) FROM test.seq_1_to_150";
/// How long the stalled reader reads nothing.
const STALL: Duration = Duration::from_secs(12);

async fn proxy(pool_size: u32, depth: u32) -> ProxyHandle {
    ensure_test_db().await;
    let mut cfg = config(pool_size);
    cfg.pipeline_depth = depth;
    cfg.client_write_timeout = Duration::from_secs(60);
    start(cfg).await
}

/// The sequence engine's tables are named in database `test` (the application account's).
async fn ensure_test_db() {
    let mut root = direct_root(None).await;
    root.query_drop("CREATE DATABASE IF NOT EXISTS test")
        .await
        .unwrap();
    root.disconnect().await.unwrap();
}

/// Holds every slot for `secs` with statements that are never pipelined.
async fn hold_slots(proxy: &ProxyHandle, n: u32, secs: f64) -> Vec<tokio::task::JoinHandle<Conn>> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut c = connect(proxy, None).await;
        held.push(tokio::spawn(async move {
            c.query_drop(format!("DO SLEEP({secs})")).await.unwrap();
            c
        }));
    }
    held
}

/// A client sends `HUGE`, takes its column definitions and then reads nothing for `STALL`
/// (mysql_async reads rows only when asked). The task ends once it has dropped the result.
fn stalled_reader(mut c: Conn) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let result = c.query_iter(HUGE).await.expect("the huge read starts");
        tokio::time::sleep(STALL).await;
        drop(result);
        drop(c);
    })
}

/// `SELECT 1` from a fresh connection (logged in beforehand): how long it waited.
async fn timed_select(mut c: Conn) -> (Conn, Duration) {
    let at = Instant::now();
    let v: Option<u32> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(v, Some(1));
    (c, at.elapsed())
}

/// Every slot busy, R's huge read queued first and F's `SELECT 1` behind it (batched with
/// it at depth 16, queued for the same slot at depth 1); R then reads nothing for `STALL`.
async fn a_stalled_reader_holds_up_nobody(pool_size: u32, depth: u32) {
    let proxy = proxy(pool_size, depth).await;
    let f = connect(&proxy, None).await;
    let r = connect(&proxy, None).await;
    let held = hold_slots(&proxy, pool_size, 0.5).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let stalled = stalled_reader(r);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let fast = tokio::spawn(timed_select(f));
    let (f, waited) = tokio::time::timeout(STALL, fast)
        .await
        .unwrap_or_else(|_| {
            panic!("P={pool_size} depth={depth}: SELECT 1 waited out the whole stall")
        })
        .unwrap();
    eprintln!(
        "P={pool_size} depth={depth}: SELECT 1 behind a stalled 150 MiB reader took {waited:?} \
         (the slots were held 0.5 s); batches {}, cut {}",
        proxy
            .context()
            .stats
            .pipeline
            .batches
            .load(std::sync::atomic::Ordering::Relaxed),
        proxy
            .context()
            .stats
            .pipeline
            .retries
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(
        waited < Duration::from_secs(2),
        "P={pool_size} depth={depth}: SELECT 1 waited {waited:?} on a client that reads nothing"
    );
    // Another statement meanwhile (the stalled reader still holds its backend).
    let (f, again) = timed_select(f).await;
    assert!(
        again < Duration::from_secs(1),
        "the next one took {again:?}"
    );
    assert!(!stalled.is_finished(), "the reader still stalls");
    stalled.await.unwrap();
    for h in held {
        h.await.unwrap().disconnect().await.unwrap();
    }
    f.disconnect().await.unwrap();
    assert_drained(&proxy, Duration::from_secs(20)).await;
    assert_still_serves(&proxy).await;
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_holds_up_nobody_p1_depth16() {
    a_stalled_reader_holds_up_nobody(1, 16).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_holds_up_nobody_p1_depth1() {
    a_stalled_reader_holds_up_nobody(1, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_holds_up_nobody_p4_depth16() {
    a_stalled_reader_holds_up_nobody(4, 16).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_holds_up_nobody_p4_depth1() {
    a_stalled_reader_holds_up_nobody(4, 1).await;
}

/// Every stalled reader gives its slot up: with as many stalled readers as slots, and then
/// twice as many, a `SELECT 1` still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_stalled_readers_than_slots_hold_up_nobody() {
    for depth in [1, 16] {
        let proxy = proxy(2, depth).await;
        let f = connect(&proxy, None).await;
        let mut stalled = Vec::new();
        for _ in 0..4 {
            stalled.push(stalled_reader(connect(&proxy, None).await));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (f, waited) = tokio::time::timeout(STALL, timed_select(f))
            .await
            .expect("SELECT 1 waited out the stall");
        eprintln!("depth={depth}: SELECT 1 beside 4 stalled readers on P=2 took {waited:?}");
        assert!(waited < Duration::from_secs(2), "depth={depth}: {waited:?}");
        for s in stalled {
            s.await.unwrap();
        }
        f.disconnect().await.unwrap();
        assert_drained(&proxy, Duration::from_secs(20)).await;
        proxy.shutdown().await;
    }
}

/// A read batched behind a statement that runs for seconds on the server runs elsewhere
/// once a slot frees, instead of waiting for that statement (P=4, depth 16). How long it
/// waits first scales with the pool's mean statement time (`Session::answer_patience`), so
/// the pool first serves some ordinary reads, as a deployed one has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_batched_behind_a_long_statement_does_not_wait_for_it() {
    const LONG: &str = "SELECT SUM(a.seq * b.seq) FROM test.seq_1_to_8000 a, test.seq_1_to_8000 b";
    let proxy = proxy(4, 16).await;
    let mut long = connect(&proxy, None).await;
    let f = connect(&proxy, None).await;
    // How long the statement takes directly (no batch, no queue).
    let mut d = direct(None).await;
    let at = Instant::now();
    d.query_drop(LONG).await.unwrap();
    let long_direct = at.elapsed();
    d.disconnect().await.unwrap();
    let mut warm = connect(&proxy, None).await;
    for i in 0..300u32 {
        let v: Option<u32> = warm.query_first(format!("SELECT {i}")).await.unwrap();
        assert_eq!(v, Some(i));
    }
    warm.disconnect().await.unwrap();
    let held = hold_slots(&proxy, 4, 0.3).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let long_task = tokio::spawn(async move {
        let at = Instant::now();
        long.query_drop(LONG).await.unwrap();
        (long, at.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (f, waited) = timed_select(f).await;
    let (long, long_took) = long_task.await.unwrap();
    eprintln!(
        "SELECT 1 batched behind a {long_direct:?} statement (via sluice {long_took:?}) took \
         {waited:?}; retries {}",
        proxy
            .context()
            .stats
            .pipeline
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(
        long_direct > Duration::from_secs(2),
        "the long statement is long: {long_direct:?}"
    );
    assert!(
        waited < long_direct / 2,
        "{waited:?} against {long_direct:?}"
    );
    assert!(
        waited < Duration::from_millis(1500),
        "SELECT 1 waited {waited:?} for another statement's server time"
    );
    for h in held {
        h.await.unwrap().disconnect().await.unwrap();
    }
    for c in [f, long] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}
