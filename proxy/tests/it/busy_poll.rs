//! Busy polling (`backend_busy_poll`): a lone statement's wait for its reply polls the
//! backend instead of sleeping while that has been measured quicker on its backend
//! connection (`conn::busy_poll`'s unit tests cover that choice); a second command in flight
//! stops it. The budget here is long (10ms) so that a `SELECT 1` answers within it even on a
//! loaded host: what is tested is the wiring, not the speed.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use mysql_async::prelude::*;
use sluice::ProxyHandle;

use crate::harness::*;

/// (hits, misses, skipped).
fn counts(proxy: &ProxyHandle) -> (u64, u64, u64) {
    let s = &proxy.context().stats.busy_poll;
    (
        s.hits.load(Relaxed),
        s.misses.load(Relaxed),
        s.skipped.load(Relaxed),
    )
}

async fn proxy(pool_size: u32, budget: Duration) -> ProxyHandle {
    let mut cfg = config(pool_size);
    cfg.backend_busy_poll = budget;
    start(cfg).await
}

#[tokio::test]
async fn every_lone_wait_polls_or_sleeps_and_both_ways_keep_being_measured() {
    let proxy = proxy(1, Duration::from_millis(10)).await;
    let mut c = connect(&proxy, None).await;
    let before = counts(&proxy);
    for i in 0..40u32 {
        let v: u32 = c.query_first(format!("SELECT {i}")).await.unwrap().unwrap();
        assert_eq!(v, i);
    }
    let after = counts(&proxy);
    let (polled, slept) = (after.0 + after.1 - before.0 - before.1, after.2 - before.2);
    assert_eq!(
        polled + slept,
        40,
        "each statement's wait for its reply counts once: {before:?} -> {after:?}"
    );
    // Which way wins depends on this host (polling loses where it shares a CPU with the
    // server); every 16th wait goes the other way whichever it is.
    assert!(
        polled >= 2 && slept >= 2,
        "both ways are tried: {polled} polled, {slept} slept"
    );
    drop(c);
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_second_command_in_flight_stops_polling() {
    let proxy = proxy(2, Duration::from_millis(10)).await;
    let mut slow = connect(&proxy, None).await;
    let mut quick = connect(&proxy, None).await;
    quick.query_drop("SELECT 1").await.unwrap();
    let held = tokio::spawn(async move {
        slow.query_drop("DO SLEEP(1)").await.unwrap();
        slow
    });
    // Past the slow statement's own 10ms poll, which missed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = counts(&proxy);
    for i in 0..20u32 {
        let v: u32 = quick
            .query_first(format!("SELECT {i}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(v, i);
    }
    let after = counts(&proxy);
    assert!(
        !held.is_finished(),
        "the slow statement was in flight throughout"
    );
    assert_eq!(
        before, after,
        "with another command in flight no wait polls (nor counts)"
    );
    let _slow = held.await.unwrap();
    drop(quick);
    proxy.shutdown().await;
}

#[tokio::test]
async fn zero_never_polls() {
    let proxy = proxy(1, Duration::ZERO).await;
    let mut c = connect(&proxy, None).await;
    for i in 0..10u32 {
        let v: u32 = c.query_first(format!("SELECT {i}")).await.unwrap().unwrap();
        assert_eq!(v, i);
    }
    assert_eq!(counts(&proxy), (0, 0, 0));
    drop(c);
    proxy.shutdown().await;
}
