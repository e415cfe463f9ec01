//! `max_queue_wait` against the real MariaDB: a burst far beyond what the slots can serve in
//! time gets the retryable ERR 9002 instead of a long wait, the statements it lets in wait
//! about the target, and a session inside a transaction is never shed.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_max_queue_wait_is_shed_fast_and_transactions_are_not() {
    let mut cfg = config(1);
    cfg.max_queue_wait = Some(Duration::from_millis(300));
    let proxy = start(cfg).await;
    // A session in a transaction: its statements go ahead of the queue and are never shed.
    let mut tx = connect(&proxy, None).await;
    tx.query_drop("BEGIN").await.unwrap();
    tx.query_drop("SELECT SLEEP(0.05)").await.unwrap();

    // 40 clients, each statement 50 ms, one slot: serving them all takes 2 s, far beyond 300 ms.
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let opts = opts(&proxy, "app", "secret", None);
            tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await.expect("connect");
                let started = Instant::now();
                let r = c.query_drop("SELECT SLEEP(0.05) /* admission */").await;
                let took = started.elapsed();
                let _ = c.disconnect().await;
                (r, took)
            })
        })
        .collect();
    // The burst queues; the transaction goes on regardless.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        tx.query_drop("SELECT SLEEP(0.05)")
            .await
            .expect("a transaction is never shed");
    }
    tx.query_drop("COMMIT").await.unwrap();
    let (mut ok, mut shed, mut slowest_shed, mut slowest_ok) =
        (0, 0, Duration::ZERO, Duration::ZERO);
    for t in tasks {
        match t.await.unwrap() {
            (Ok(()), took) => {
                ok += 1;
                slowest_ok = slowest_ok.max(took);
            }
            (Err(e), took) => {
                assert_eq!(code_of(&e), Some(9002), "{e}");
                assert_eq!(state_of(&e).as_deref(), Some("HY000"));
                assert!(e.to_string().contains("max_queue_wait"), "{e}");
                shed += 1;
                slowest_shed = slowest_shed.max(took);
            }
        }
    }
    eprintln!("ok {ok} (slowest {slowest_ok:?}), shed {shed} (slowest {slowest_shed:?})");
    assert!(ok >= 1 && shed >= 1, "ok {ok}, shed {shed}");
    // Admitted statements waited about the target, not the 2 s the whole burst needs.
    assert!(slowest_ok < Duration::from_millis(1500), "{slowest_ok:?}");
    assert!(
        slowest_shed < Duration::from_millis(1000),
        "{slowest_shed:?}"
    );
    tx.disconnect().await.unwrap();
    proxy.shutdown().await;
}
