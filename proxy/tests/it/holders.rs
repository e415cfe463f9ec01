//! Sessions that keep their backend between statements for a transaction or a lock give
//! their execution slot back after each statement: no number of idle transactions holds up
//! another client's statement. Their next statement goes ahead of the statements of sessions
//! that hold nothing, and when every slot is held by statements waiting on their locks, it
//! runs beyond pool_size (an overflow slot) instead of waiting for
//! innodb_lock_wait_timeout.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use sluice::ProxyHandle;

use crate::admin::{admin, admin_config, cell, http_get, num, parse_metrics, rows};
use crate::harness::*;
use crate::reference::Target;

const TRANSACTIONS: usize = 50;
/// How long any one wait here may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);
const READERS: usize = 50;

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: still waiting after {PATIENCE:?}"))
}

/// What the many-transactions script saw: each reader's and each transaction's answers.
#[derive(Debug, PartialEq)]
struct ManySeen {
    readers: Vec<(i64, i64)>,
    transactions: Vec<(i64, i64)>,
    total: i64,
}

/// `TRANSACTIONS` sessions each open a transaction that updates its own row and then idle;
/// `READERS` autocommit sessions read meanwhile (the committed values: MVCC); then every
/// transaction reads its row and commits. `between` runs while the transactions idle, before
/// the readers start. Returns what everyone saw and how long the slowest reader took.
async fn many_transactions(
    target: Target<'_>,
    db: &str,
    between: impl std::future::Future<Output = ()>,
) -> (ManySeen, Duration) {
    let mut setup = target.connect(Some(db)).await;
    setup
        .query_drop("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        .await
        .unwrap();
    let rows: Vec<String> = (1..=TRANSACTIONS).map(|i| format!("({i}, 0)")).collect();
    setup
        .query_drop(format!("INSERT INTO t VALUES {}", rows.join(",")))
        .await
        .unwrap();
    let mut txs = Vec::new();
    for i in 1..=TRANSACTIONS {
        let mut c = target.connect(Some(db)).await;
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop(format!("UPDATE t SET v = v + 1 WHERE id = {i}"))
            .await
            .unwrap();
        txs.push(c);
    }
    between.await;
    let mut readers = Vec::new();
    for _ in 0..READERS {
        readers.push(target.connect(Some(db)).await);
    }
    let reads = readers.iter_mut().enumerate().map(|(i, c)| async move {
        let started = Instant::now();
        let row: (i64, i64) = c
            .query_first(format!(
                "SELECT COUNT(*), (SELECT v FROM t WHERE id = {}) FROM t",
                i % TRANSACTIONS + 1
            ))
            .await
            .unwrap_or_else(|e| panic!("reader {i}: {e}"))
            .unwrap();
        (row, started.elapsed())
    });
    let read = futures_util::future::join_all(reads).await;
    let slowest = read.iter().map(|r| r.1).max().unwrap_or_default();
    let commits = txs.iter_mut().enumerate().map(|(i, c)| async move {
        let row: (i64, i64) = c
            .query_first(format!(
                "SELECT COUNT(*), (SELECT v FROM t WHERE id = {}) FROM t",
                i + 1
            ))
            .await
            .unwrap_or_else(|e| panic!("transaction {i}: {e}"))
            .unwrap();
        c.query_drop("COMMIT")
            .await
            .unwrap_or_else(|e| panic!("COMMIT {i}: {e}"));
        row
    });
    let transactions = futures_util::future::join_all(commits).await;
    let total: i64 = setup
        .query_first("SELECT SUM(v) FROM t")
        .await
        .unwrap()
        .unwrap();
    for c in txs.into_iter().chain(readers).chain([setup]) {
        c.disconnect().await.unwrap();
    }
    let seen = ManySeen {
        readers: read.into_iter().map(|r| r.0).collect(),
        transactions,
        total,
    };
    (seen, slowest)
}

/// pool_size 1: fifty transactions idle between their statements while fifty autocommit
/// readers run. Every reader answers at once, as directly (the transactions hold no slot
/// while idle: SHOW POOLS shows them pinned, by `transaction`, with no slot in use), and
/// every transaction reads its own write and commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_transactions_hold_up_no_reader_at_pool_size_1() {
    let db = "t_hold_many";
    fresh_db(db).await;
    let (direct, _) = many_transactions(Target::Direct, db, async {}).await;
    assert_eq!(
        direct.readers,
        vec![(50, 0); READERS],
        "the direct reference"
    );
    let proxy = start(admin_config(1)).await;
    let mut a = admin(&proxy).await;
    let idle = async {
        let pools = rows(&mut a, "SHOW POOLS").await;
        assert_eq!(num(&pools[0], "active"), 0, "{pools:?}");
        assert_eq!(num(&pools[0], "pinned_backends"), TRANSACTIONS as u64);
        assert_eq!(cell(&pools[0], "pinned_by"), Some("transaction=50"));
    };
    let (through, slowest) = many_transactions(Target::Sluice(&proxy), db, idle).await;
    assert_eq!(through, direct);
    assert!(
        slowest < Duration::from_secs(3),
        "the slowest reader took {slowest:?}"
    );
    assert_eq!(proxy.context().stats.slots_kept.load(Relaxed), 0);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Waits until `n` statements run on the proxy's slots and the server shows `n` sessions
/// waiting for a row lock.
async fn until_blocked(proxy: &ProxyHandle, n: u32) {
    let ctx = proxy.context().clone();
    assert!(
        eventually(Duration::from_secs(5), || ctx.pool.slots().running() == n).await,
        "{n} statements hold the slots"
    );
    // The server's view of lock waits needs PROCESS: observed, never compared.
    let mut d = direct_root(None).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let waiting: i64 = d
            .query_first(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
                 WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE 'UPDATE t_hold_%'",
            )
            .await
            .unwrap()
            .unwrap();
        if waiting >= i64::from(n) {
            break;
        }
        assert!(Instant::now() < deadline, "{waiting} of {n} UPDATEs wait");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.disconnect().await.unwrap();
}

/// pool_size 2: A holds a row lock in an open transaction; two sessions' UPDATEs of that
/// row wait on it, holding both slots. A's COMMIT gets no slot back from them, so after its
/// patience it runs beyond pool_size: it completes far sooner than innodb_lock_wait_timeout,
/// and the UPDATEs then succeed. SHOW STATS and /metrics count the overflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lock_blocks_every_slot_still_commits() {
    let db = "t_hold_deadlock";
    fresh_db(db).await;
    let mut d = direct(Some(db)).await;
    d.query_drop("CREATE TABLE t_hold_rows (id INT PRIMARY KEY, n INT) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t_hold_rows VALUES (1, 0)")
        .await
        .unwrap();
    d.disconnect().await.unwrap();
    let proxy = start(admin_config(2)).await;
    let mut holder = connect(&proxy, Some(db)).await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("UPDATE t_hold_rows SET n = n + 1 WHERE id = 1")
        .await
        .unwrap();
    let mut blocked = Vec::new();
    for _ in 0..2 {
        let mut c = connect(&proxy, Some(db)).await;
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 30")
            .await
            .unwrap();
        blocked.push(tokio::spawn(async move {
            let started = Instant::now();
            c.query_drop("UPDATE t_hold_rows SET n = n + 1 WHERE id = 1")
                .await
                .unwrap();
            (c, started.elapsed())
        }));
    }
    until_blocked(&proxy, 2).await;
    let before = proxy.context().stats.slot_overflows.load(Relaxed);
    let started = Instant::now();
    holder.query_drop("COMMIT").await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "COMMIT took {took:?}");
    for b in blocked {
        let (c, waited) = within("a blocked UPDATE", b).await.unwrap();
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        c.disconnect().await.unwrap();
    }
    let n: i64 = holder
        .query_first("SELECT n FROM t_hold_rows WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 3);
    let overflows = proxy.context().stats.slot_overflows.load(Relaxed);
    assert!(overflows > before, "the COMMIT ran beyond pool_size");
    let mut a = admin(&proxy).await;
    let shown = rows(&mut a, "SHOW STATS").await;
    let stat = shown
        .iter()
        .find(|r| cell(r, "stat") == Some("slot_overflows"))
        .expect("SHOW STATS has slot_overflows");
    assert!(num(stat, "value") >= overflows);
    let (_, body) = http_get(proxy.metrics_addr().unwrap(), "/metrics").await;
    assert!(parse_metrics(&body)["sluice_slot_overflows_total"] >= overflows as f64);
    assert_eq!(proxy.context().pool.slots().overflowing(), 0);
    for c in [holder, a] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// pool_size 1 with 200 readers of SLEEP(0.01) queued (two seconds of work): each statement
/// of a session in a transaction waits for at most the statement running, not for the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holders_statement_goes_ahead_of_a_long_queue() {
    let db = "t_hold_first";
    fresh_db(db).await;
    let mut d = direct(Some(db)).await;
    d.query_drop("CREATE TABLE t_hold_first (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        .await
        .unwrap();
    d.query_drop("INSERT INTO t_hold_first VALUES (1, 0)")
        .await
        .unwrap();
    d.disconnect().await.unwrap();
    let proxy = start(config(1)).await;
    let mut holder = connect(&proxy, Some(db)).await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("UPDATE t_hold_first SET v = v + 1 WHERE id = 1")
        .await
        .unwrap();
    let mut readers = Vec::new();
    for _ in 0..200 {
        readers.push(connect(&proxy, Some(db)).await);
    }
    let queue: Vec<_> = readers
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                c.query_drop("SELECT SLEEP(0.01)").await.unwrap();
                c.disconnect().await.unwrap();
            })
        })
        .collect();
    let pool = proxy.context().pool.clone();
    assert!(eventually(Duration::from_secs(5), || pool.snapshot().waiting >= 100).await);
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let queued = pool.snapshot().waiting;
        let started = Instant::now();
        let v: i64 = holder
            .query_first(format!(
                "SELECT v + {i} - {i} FROM t_hold_first WHERE id = 1"
            ))
            .await
            .unwrap()
            .unwrap();
        let took = started.elapsed();
        assert_eq!(v, 1);
        assert!(queued >= 20, "statement {i}: only {queued} queued");
        slowest = slowest.max(took);
        // The client thinks between its statements, as sysbench's clients do.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        slowest < Duration::from_millis(400),
        "the holder's slowest statement took {slowest:?}"
    );
    holder.query_drop("COMMIT").await.unwrap();
    for q in queue {
        within("a reader", q).await.unwrap();
    }
    holder.disconnect().await.unwrap();
    proxy.shutdown().await;
}
