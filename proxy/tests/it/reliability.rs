//! Reliability under vanishing clients and a failing backend (CI size): a 200-client abort
//! storm, and the ledger test with one backend restart and one SIGSTOP/SIGCONT pause. The
//! network fuzz next to 50 checked clients is `tests/network_fuzz.rs`, a binary of its own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice::stats::RecycleOutcome;

use crate::harness::*;
use crate::wire::Wire;

/// `harness::private_server`, tried twice: `mariadb-install-db` occasionally fails when several
/// initialise at once on this shared machine ("Unknown table 'mysql.tmp_user_sys'"), which is
/// not what these tests are about.
async fn private_server_retried() -> dbkit::LocalServer {
    let start = || {
        tokio::task::spawn_blocking(|| {
            dbkit::LocalServer::start(dbkit::ServerOptions {
                buffer_pool_mb: 32,
                max_connections: 500,
                ..Default::default()
            })
        })
    };
    let server = match start().await.expect("server start task") {
        Ok(server) => server,
        Err(e) => {
            eprintln!("private server failed to start, retrying once: {e}");
            start()
                .await
                .expect("server start task")
                .unwrap_or_else(|e| panic!("dbkit could not start a private server: {e}"))
        }
    };
    add_app_account(&server).await;
    server
}

/// A direct connection to a private server (its `bench` account).
async fn direct_to(server: &dbkit::LocalServer, db: Option<&str>) -> Conn {
    let o = opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        db,
    );
    Conn::new(o)
        .await
        .expect("direct connection to the private server")
}

/// Transactions open on the server, other than the asking connection's own.
async fn open_transactions(d: &mut Conn) -> Vec<(u64, String)> {
    d.query(
        "SELECT trx_mysql_thread_id, trx_state FROM information_schema.innodb_trx \
         WHERE trx_mysql_thread_id <> CONNECTION_ID()",
    )
    .await
    .expect("innodb_trx")
}

/// Waits up to `within` for the server to have no open transaction (rollbacks of abandoned
/// backends may still be running), then fails naming those left.
async fn assert_no_open_transactions_within(d: &mut Conn, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let open = open_transactions(d).await;
        if open.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "transactions left open: {open:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One storm client: logs in, starts something, and vanishes (RST) at a random point.
async fn abort_somewhere(addr: std::net::SocketAddr, c: u32, rng: &mut StdRng) {
    let Some(mut w) = Wire::login(addr, "app", "secret").await else {
        panic!("storm client {c} could not log in");
    };
    let pause = Duration::from_millis(rng.gen_range(0..150));
    let id = c % 200 + 1;
    let q = |s: String| s.into_bytes();
    match c % 5 {
        // Mid-query.
        0 => {
            let _ = w.command(0x03, b"SELECT SLEEP(0.5)").await;
            tokio::time::sleep(pause).await;
        }
        // Mid-result: a big result, partly read.
        1 => {
            let _ = w
                .command(
                    0x03,
                    b"SELECT a.id, REPEAT('x', 2000) FROM t_reliab_abort.t a, t_reliab_abort.t b",
                )
                .await;
            for _ in 0..rng.gen_range(0..50) {
                if w.packet(Duration::from_secs(2)).await.is_none() {
                    break;
                }
            }
        }
        // Mid-transaction: BEGIN and a row lock, then gone (sometimes while the next runs).
        2 | 4 => {
            let _ = w.command(0x03, b"BEGIN").await;
            w.packet(Duration::from_secs(5)).await;
            let sql = if c % 5 == 2 {
                format!("UPDATE t_reliab_abort.t SET v = v + 1 WHERE id = {id}")
            } else {
                format!("SELECT * FROM t_reliab_abort.t WHERE id = {id} FOR UPDATE")
            };
            let _ = w.command(0x03, &q(sql)).await;
            if rng.gen_bool(0.5) {
                w.drain(Duration::from_millis(300)).await;
                let _ = w.command(0x03, b"SELECT SLEEP(0.3)").await;
            }
            tokio::time::sleep(pause).await;
        }
        // Mid-prepare (and sometimes after it, with the statement open).
        _ => {
            let _ = w
                .command(0x16, b"SELECT v FROM t_reliab_abort.t WHERE id = ?")
                .await;
            if rng.gen_bool(0.5) {
                w.drain(Duration::from_millis(200)).await;
            }
        }
    }
    drop(w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_storm_of_200_clients_leaves_no_lock_transaction_or_slot() {
    count_worker_panics();
    let server = private_server_retried().await;
    let mut d = direct_to(&server, None).await;
    d.query_drop("CREATE DATABASE t_reliab_abort")
        .await
        .unwrap();
    d.query_drop("USE t_reliab_abort").await.unwrap();
    d.query_drop(
        "CREATE TABLE t_reliab_abort.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    d.query_drop("INSERT INTO t_reliab_abort.t SELECT seq, 0 FROM seq_1_to_200")
        .await
        .unwrap();
    let pool_size = 8;
    let mut cfg = config_for_local(&server, pool_size);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(16);
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let tasks: Vec<_> = (0..200u32)
        .map(|c| {
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(0xAB07 + u64::from(c));
                abort_somewhere(addr, c, &mut rng).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a storm client panicked");
    }
    let ctx = proxy.context().clone();
    assert!(
        eventually(Duration::from_secs(10), || ctx.registry.is_empty()).await,
        "{} sessions still registered after the storm",
        ctx.registry.len()
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            let s = ctx.pool.snapshot();
            s.slots_in_use == 0 && s.idle == s.open
        })
        .await,
        "the pool did not settle: {:?}",
        {
            let s = ctx.pool.snapshot();
            (s.slots_in_use, s.open, s.idle, s.waiting)
        }
    );
    let snap = ctx.pool.snapshot();
    assert!(snap.open <= 16, "{} backends open", snap.open);
    // No transaction open on the server (the backends' rollbacks may still be running).
    assert_no_open_transactions_within(&mut d, Duration::from_secs(10)).await;
    // No row lock: every touched row can be locked at once without waiting.
    d.query_drop("BEGIN").await.unwrap();
    let locked: Vec<u32> = d
        .query("SELECT id FROM t_reliab_abort.t FOR UPDATE NOWAIT")
        .await
        .expect("a row is still locked");
    assert_eq!(locked.len(), 200);
    d.query_drop("ROLLBACK").await.unwrap();
    // The aborted transactions were rolled back: only committed effects count, and none
    // of the storm's UPDATEs committed.
    let sum: Option<i64> = d
        .query_first("SELECT CAST(SUM(v) AS SIGNED) FROM t_reliab_abort.t")
        .await
        .unwrap();
    assert_eq!(sum, Some(0), "an aborted client's UPDATE was committed");
    let recycled =
        ctx.stats.recycles_by(RecycleOutcome::Reset) + ctx.stats.recycles_by(RecycleOutcome::Close);
    assert!(
        recycled > 0,
        "no backend was reset or closed after 200 aborts"
    );
    eprintln!(
        "abort storm: 200 clients, recycles reset={} close={} release={}, backends open={}",
        ctx.stats.recycles_by(RecycleOutcome::Reset),
        ctx.stats.recycles_by(RecycleOutcome::Close),
        ctx.stats.recycles_by(RecycleOutcome::Release),
        snap.open
    );
    // Sluice still serves.
    let mut c = Conn::new(opts_at(addr, "app", "secret", None))
        .await
        .unwrap();
    assert_eq!(
        c.query_first::<u32, _>("SELECT 41 + 1").await.unwrap(),
        Some(42)
    );
    c.disconnect().await.unwrap();
    assert_no_worker_panics();
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

const ACCOUNTS: u32 = 50;
const START_BALANCE: i64 = 1000;

/// What the ledger clients saw, by transfer uuid.
#[derive(Default)]
struct Book {
    /// COMMIT answered OK.
    committed: HashSet<String>,
    /// COMMIT sent, but no answer (the connection broke): may or may not have committed.
    in_doubt: HashSet<String>,
}

/// One statement with a deadline; Err(true) if the connection is gone (or the answer never
/// came), Err(false) for an ERR answer.
async fn run(conn: &mut Conn, sql: String) -> Result<(), bool> {
    match tokio::time::timeout(Duration::from_secs(10), conn.query_drop(sql)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(mysql_async::Error::Server(_))) => Err(false),
        Ok(Err(_)) | Err(_) => Err(true),
    }
}

/// One transfer; Err(true) if the connection is gone, Err(false) for an ERR answer.
async fn transfer(
    conn: &mut Conn,
    book: &Mutex<Book>,
    uuid: &str,
    rng: &mut StdRng,
) -> Result<(), bool> {
    let from = rng.gen_range(1..=ACCOUNTS);
    let to = (from + rng.gen_range(1..ACCOUNTS) - 1) % ACCOUNTS + 1;
    let amount = rng.gen_range(1..50);
    run(conn, "BEGIN".into()).await?;
    run(
        conn,
        format!("UPDATE accounts SET balance = balance - {amount} WHERE id = {from}"),
    )
    .await?;
    run(
        conn,
        format!("UPDATE accounts SET balance = balance + {amount} WHERE id = {to}"),
    )
    .await?;
    run(
        conn,
        format!("INSERT INTO journal VALUES ('{uuid}', {from}, {to}, {amount})"),
    )
    .await?;
    book.lock().unwrap().in_doubt.insert(uuid.to_string());
    match run(conn, "COMMIT".into()).await {
        Ok(()) => {
            let mut b = book.lock().unwrap();
            b.in_doubt.remove(uuid);
            b.committed.insert(uuid.to_string());
            Ok(())
        }
        // An ERR to COMMIT means the server answered; the transaction did not commit.
        Err(false) => {
            book.lock().unwrap().in_doubt.remove(uuid);
            Err(false)
        }
        Err(true) => Err(true),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_survives_killed_clients_a_backend_restart_and_a_pause() {
    count_worker_panics();
    let mut server = private_server_retried().await;
    let mut d = direct_to(&server, None).await;
    d.query_drop("CREATE DATABASE t_ledger").await.unwrap();
    d.query_drop("USE t_ledger").await.unwrap();
    d.query_drop(
        "CREATE TABLE t_ledger.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    d.query_drop(
        "CREATE TABLE t_ledger.journal (uuid VARCHAR(40) PRIMARY KEY, src INT, dst INT, \
         amount INT) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    d.query_drop(format!(
        "INSERT INTO t_ledger.accounts SELECT seq, {START_BALANCE} FROM seq_1_to_{ACCOUNTS}"
    ))
    .await
    .unwrap();
    d.disconnect().await.unwrap();
    let mut cfg = config_for_local(&server, 8);
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(16);
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let book = Arc::new(Mutex::new(Book::default()));
    let kills = Arc::new(AtomicU64::new(0));
    let broken = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..64u64)
        .map(|c| {
            let (stop, book, kills, broken) =
                (stop.clone(), book.clone(), kills.clone(), broken.clone());
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(0x1ED6 + c);
                let opts = opts_at(addr, "app", "secret", Some("t_ledger"));
                let mut conn: Option<Conn> = None;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut current = match conn.take() {
                        Some(c) => c,
                        None => match Conn::new(opts.clone()).await {
                            Ok(c) => c,
                            Err(_) => {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            }
                        },
                    };
                    n += 1;
                    let uuid = format!("c{c}-{n}");
                    if rng.gen_ratio(1, 25) {
                        // Killed mid-transaction: the connection vanishes after some of the
                        // statements, before COMMIT.
                        // (Only after a BEGIN that worked: otherwise the UPDATE would
                        // autocommit, rightly.)
                        if current.query_drop("BEGIN").await.is_ok() {
                            let _ = current
                                .query_drop(format!(
                                    "UPDATE accounts SET balance = balance - 1 WHERE id = {}",
                                    rng.gen_range(1..=ACCOUNTS)
                                ))
                                .await;
                        }
                        kills.fetch_add(1, Ordering::Relaxed);
                        drop(current);
                        continue;
                    }
                    match transfer(&mut current, &book, &uuid, &mut rng).await {
                        Ok(()) => conn = Some(current),
                        Err(false) => {
                            // Deadlock or lock wait timeout: the server rolled back (or will).
                            let _ = current.query_drop("ROLLBACK").await;
                            conn = Some(current);
                        }
                        Err(true) => {
                            // The connection broke: start over on a new one, as an app would.
                            broken.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                if let Some(c) = conn {
                    let _ = c.disconnect().await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let server = tokio::task::spawn_blocking(move || {
        server.restart().expect("the server restarts on its port");
        server
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(400)).await;
    server.resume();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for t in clients {
        t.await.expect("a ledger client panicked");
    }
    let mut d = direct_to(&server, Some("t_ledger")).await;
    assert_no_open_transactions_within(&mut d, Duration::from_secs(10)).await;
    let total: i64 = d
        .query_first("SELECT CAST(SUM(balance) AS SIGNED) FROM accounts")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        total,
        i64::from(ACCOUNTS) * START_BALANCE,
        "money appeared or vanished"
    );
    let journal: HashSet<String> = d
        .query::<String, _>("SELECT uuid FROM journal")
        .await
        .unwrap()
        .into_iter()
        .collect();
    let book = std::mem::take(&mut *book.lock().unwrap());
    let lost: Vec<_> = book.committed.difference(&journal).collect();
    assert!(
        lost.is_empty(),
        "COMMITs answered OK but not in the journal: {lost:?}"
    );
    let phantom: Vec<_> = journal
        .iter()
        .filter(|u| !book.committed.contains(*u) && !book.in_doubt.contains(*u))
        .collect();
    assert!(
        phantom.is_empty(),
        "journal rows nobody committed: {phantom:?}"
    );
    // Journal and balances agree: each committed transfer moved exactly its amount.
    let net: Vec<(u32, i64)> = d
        .query(format!(
            "SELECT id, CAST(balance - {START_BALANCE} AS SIGNED) FROM accounts ORDER BY id"
        ))
        .await
        .unwrap();
    let moved: Vec<(u32, i64)> = d
        .query(
            "SELECT a.id, CAST(COALESCE((SELECT SUM(amount) FROM journal WHERE dst = a.id), 0) \
             - COALESCE((SELECT SUM(amount) FROM journal WHERE src = a.id), 0) AS SIGNED) \
             FROM accounts a ORDER BY a.id",
        )
        .await
        .unwrap();
    assert_eq!(net, moved, "balances disagree with the journal");
    let committed = book.committed.len();
    eprintln!(
        "ledger: {committed} commits confirmed, {} in doubt ({} of them committed), {} clients \
         killed, {} transfers broken by the restart",
        book.in_doubt.len(),
        book.in_doubt.intersection(&journal).count(),
        kills.load(Ordering::Relaxed),
        broken.load(Ordering::Relaxed)
    );
    assert!(committed > 100, "only {committed} transfers committed");
    // The restart really hit transactions in flight (otherwise this proved little).
    let broken = broken.load(Ordering::Relaxed);
    assert!(broken > 0, "no transfer saw its connection break");
    assert_no_worker_panics();
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
    drop(server);
}
