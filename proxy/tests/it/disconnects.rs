//! A server-side disconnect looks to the client as it does directly: its connection is lost
//! (mysql_async reports an I/O error, Connector/C 2013 or 2006), so that its driver's
//! reconnect logic runs, never an error on a socket that stays open. Each case runs directly
//! first, as the reference, then through sluice at pool sizes 1 and 4.
//!
//! A private server: the test finds the backend thread of a session in PROCESSLIST and
//! kills it, so no other test's connections may be there.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;

/// How a session ends its part in a case before the server cuts its connection.
#[derive(Clone, Copy, Debug)]
enum Case {
    /// KILL CONNECTION of the thread while an autocommit statement runs on it.
    KilledMidStatement,
    /// KILL CONNECTION while the session is idle inside a transaction.
    KilledIdleInTransaction,
    /// KILL CONNECTION while the session is idle and pinned (a user variable).
    KilledIdlePinned,
    /// `idle_transaction_timeout` ends the idle transaction's connection.
    IdleTransactionTimeout,
}

/// What the client saw: the error of the statement that met the disconnect, and of the one
/// after it.
#[derive(Debug)]
struct Seen {
    first: mysql_async::Error,
    second: Option<mysql_async::Error>,
}

fn lost(e: &mysql_async::Error) -> bool {
    !matches!(e, mysql_async::Error::Server(_))
}

/// The id of the server thread running a statement that contains `marker`.
async fn thread_running(root: &mut Conn, marker: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let id: Option<u64> = root
            .exec_first(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
                (format!("%{marker}%"),),
            )
            .await
            .unwrap();
        if let Some(id) = id {
            return id;
        }
        assert!(Instant::now() < deadline, "{marker} never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `case` on `c` (a session of the application account), with `root` to find and kill
/// its thread.
async fn run_case(case: Case, mut c: Conn, root: &mut Conn, marker: &str) -> Seen {
    let first = match case {
        Case::KilledMidStatement => {
            let sql = format!("SELECT SLEEP(5) /* {marker} */");
            let task = tokio::spawn(async move {
                let r = c.query_drop(sql).await;
                (c, r)
            });
            let thread = thread_running(root, marker).await;
            root.query_drop(format!("KILL CONNECTION {thread}"))
                .await
                .unwrap();
            let (back, r) = tokio::time::timeout(Duration::from_secs(4), task)
                .await
                .expect("the running statement got an answer")
                .unwrap();
            c = back;
            r.expect_err("the killed statement fails")
        }
        Case::KilledIdleInTransaction | Case::KilledIdlePinned | Case::IdleTransactionTimeout => {
            match case {
                Case::KilledIdlePinned => c.query_drop("SET @held = 1").await.unwrap(),
                Case::IdleTransactionTimeout => {
                    c.query_drop("SET SESSION idle_transaction_timeout = 1")
                        .await
                        .unwrap();
                    c.query_drop("BEGIN").await.unwrap();
                }
                _ => c.query_drop("BEGIN").await.unwrap(),
            }
            // Marks the connection, so that the test finds its thread.
            let sql = format!("SELECT SLEEP(0.3) /* {marker} */");
            let task = tokio::spawn(async move {
                c.query_drop(sql).await.unwrap();
                c
            });
            let thread = thread_running(root, marker).await;
            c = task.await.unwrap();
            if let Case::IdleTransactionTimeout = case {
                tokio::time::sleep(Duration::from_millis(2500)).await;
            } else {
                root.query_drop(format!("KILL CONNECTION {thread}"))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            c.query_drop("SELECT 1")
                .await
                .expect_err("the next statement meets the lost connection")
        }
    };
    let second = c.query_drop("SELECT 2").await.err();
    Seen { first, second }
}

async fn every_case_looks_as_it_does_directly(pool_size: u32, depth: u32) {
    let server = private_server().await;
    let mut root = Conn::new(opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    ))
    .await
    .unwrap();
    let mut cfg = config_for_local(&server, pool_size);
    cfg.pipeline_depth = depth;
    let proxy = start(cfg).await;
    let cases = [
        Case::KilledMidStatement,
        Case::KilledIdleInTransaction,
        Case::KilledIdlePinned,
        Case::IdleTransactionTimeout,
    ];
    for (i, case) in cases.into_iter().enumerate() {
        let d = Conn::new(opts_at(server.addr(), APP_USER, APP_PASSWORD, None))
            .await
            .unwrap();
        let direct = run_case(case, d, &mut root, &format!("direct-{i}-{pool_size}")).await;
        let c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
            .await
            .unwrap();
        let via = run_case(case, c, &mut root, &format!("via-{i}-{pool_size}")).await;
        eprintln!("P={pool_size} depth={depth} {case:?}: directly {direct:?}; via sluice {via:?}");
        assert!(
            lost(&direct.first),
            "{case:?}: directly the connection is lost"
        );
        assert!(
            lost(&via.first),
            "{case:?}: through sluice the client must see its connection lost, as directly, \
             not an error on a live socket: {:?}",
            via.first
        );
        assert!(
            via.second.as_ref().is_some_and(lost),
            "{case:?}: the connection stays lost: {:?}",
            via.second
        );
        // A new connection works at once (what a driver's reconnect does).
        let mut again = connect(&proxy, None).await;
        let v: Option<u32> = again.query_first("SELECT 5").await.unwrap();
        assert_eq!(v, Some(5));
        again.disconnect().await.unwrap();
    }
    assert_drained(&proxy, Duration::from_secs(5)).await;
    proxy.shutdown().await;
    root.disconnect().await.unwrap();
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_disconnect_is_a_lost_connection_as_directly_p1() {
    every_case_looks_as_it_does_directly(1, 16).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_disconnect_is_a_lost_connection_as_directly_p4_unpipelined() {
    every_case_looks_as_it_does_directly(4, 1).await;
}
