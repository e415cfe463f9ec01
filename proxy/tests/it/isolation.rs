//! Isolation stress: 200 clients over P=4, each with its own session state (time zone,
//! sql_mode, prepared statements, user variables, temporary tables) and its own
//! transactions, randomly interleaved. Nothing may cross from one session to another, and
//! the clients that keep no pinning state never push backend connections above P, besides
//! the one each open transaction keeps between its statements.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice::stats::{PinReason, RecycleOutcome};
use sluice::ProxyHandle;

use crate::admin::{admin, admin_config, num, rows};
use crate::harness::*;

const P: u32 = 4;
const DB: &str = "t_iso";
const ROUNDS: usize = 12;

/// What a client keeps in its session, and so what it checks after every step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// SET time_zone and sql_mode, text queries: replayed, never pinned.
    Settings,
    /// The same SETs, binary prepared statements: virtualised, never pinned.
    Prepared,
    /// Transactions that commit or roll back at random: a backend only until they end.
    Transactions,
    /// A user variable and a temporary table: pinned for the session's life.
    Pinned,
}

fn zone(i: u32) -> String {
    format!("+{:02}:{:02}", i / 60, i % 60)
}

fn mode(i: u32) -> &'static str {
    [
        "ANSI_QUOTES",
        "NO_ZERO_DATE",
        "PIPES_AS_CONCAT",
        "IGNORE_SPACE",
    ][i as usize % 4]
}

async fn nap(rng: &mut StdRng) {
    if rng.gen_bool(0.3) {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..4))).await;
    }
}

/// One client's whole life; panics (failing the test) on the first answer that is not its own.
async fn client(proxy: Arc<ProxyHandle>, i: u32, kind: Kind, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut c = connect(&proxy, Some(DB)).await;
    let my_id: u64 = c
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    c.query_drop(format!(
        "SET time_zone = '{}', SESSION sql_mode = '{}'",
        zone(i),
        mode(i)
    ))
    .await
    .unwrap();
    if let Kind::Pinned = kind {
        c.query_drop(format!("SET @mine = {i}")).await.unwrap();
        c.query_drop("CREATE TEMPORARY TABLE mine (x INT)")
            .await
            .unwrap();
        for x in 0..=i % 7 {
            c.query_drop(format!("INSERT INTO mine VALUES ({x})"))
                .await
                .unwrap();
        }
    }
    let mut committed = 0u64;
    for round in 0..ROUNDS {
        nap(&mut rng).await;
        let (tz, sql_mode, id): (String, String, u64) = c
            .query_first("SELECT @@time_zone, @@sql_mode, CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            tz,
            zone(i),
            "client {i} ({kind:?}) round {round}: time_zone"
        );
        assert_eq!(
            sql_mode,
            mode(i),
            "client {i} ({kind:?}) round {round}: sql_mode"
        );
        assert_eq!(id, my_id, "client {i}: CONNECTION_ID() is stable");
        match kind {
            Kind::Settings => {
                let v: Option<Option<i64>> = c.query_first("SELECT @mine").await.unwrap();
                assert_eq!(v, Some(None), "client {i} sees no one's user variable");
            }
            Kind::Prepared => {
                let (n, tz): (u32, String) = c
                    .exec_first("SELECT ? + 0, @@time_zone", (i,))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    (n, tz.as_str()),
                    (i, zone(i).as_str()),
                    "client {i}: prepared"
                );
                let rows: Vec<(u32, u64)> = c
                    .exec(
                        "SELECT client, COUNT(*) FROM iso WHERE client = ? GROUP BY client",
                        (i,),
                    )
                    .await
                    .unwrap();
                assert!(rows.is_empty(), "client {i} never wrote rows: {rows:?}");
            }
            Kind::Transactions => {
                c.query_drop("BEGIN").await.unwrap();
                c.query_drop(format!("INSERT INTO iso VALUES ({i}, {round})"))
                    .await
                    .unwrap();
                nap(&mut rng).await;
                let n: u64 = c
                    .query_first(format!("SELECT COUNT(*) FROM iso WHERE client = {i}"))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(n, committed + 1, "client {i} sees its own uncommitted row");
                if rng.gen_bool(0.5) {
                    c.query_drop("COMMIT").await.unwrap();
                    committed += 1;
                } else {
                    c.query_drop("ROLLBACK").await.unwrap();
                }
                let n: u64 = c
                    .query_first(format!("SELECT COUNT(*) FROM iso WHERE client = {i}"))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(n, committed, "client {i}: after COMMIT/ROLLBACK");
            }
            Kind::Pinned => {
                let (v, rows): (Option<i64>, u64) = c
                    .query_first("SELECT @mine, (SELECT COUNT(*) FROM mine)")
                    .await
                    .unwrap_or_else(|e| panic!("client {i}: {e}"))
                    .unwrap();
                assert_eq!(v, Some(i64::from(i)), "client {i}: its user variable");
                assert_eq!(
                    rows,
                    u64::from(i % 7 + 1),
                    "client {i}: its temporary table"
                );
            }
        }
    }
    c.disconnect().await.unwrap();
}

fn spawn_clients(
    proxy: &Arc<ProxyHandle>,
    ids: std::ops::Range<u32>,
    kind_of: impl Fn(u32) -> Kind,
) -> Vec<tokio::task::JoinHandle<()>> {
    ids.map(|i| tokio::spawn(client(proxy.clone(), i, kind_of(i), u64::from(i) * 7919)))
        .collect()
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        if let Err(e) = t.await {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn isolation_stress_200_clients_over_p4_nothing_crosses_sessions() {
    fresh_db(DB).await;
    let mut d = direct(Some(DB)).await;
    d.query_drop("CREATE TABLE iso (client INT, n INT, KEY (client)) ENGINE=InnoDB")
        .await
        .unwrap();
    let mut cfg = admin_config(P);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(80);
    cfg.queue_timeout = Duration::from_secs(60);
    let proxy = Arc::new(start(cfg).await);

    // Phase 1: 150 clients that keep only movable state. A sampler watches the open backend
    // connections in-process and, now and then, through the admin port.
    let stop = Arc::new(AtomicBool::new(false));
    let max_open = Arc::new(AtomicU32::new(0));
    let sampler = {
        let (proxy, stop, max_open) = (proxy.clone(), stop.clone(), max_open.clone());
        tokio::spawn(async move {
            let mut a = admin(&proxy).await;
            let mut admin_max = 0;
            let mut tick = 0u32;
            while !stop.load(Ordering::Relaxed) {
                max_open.fetch_max(proxy.context().pool.snapshot().open, Ordering::Relaxed);
                if tick.is_multiple_of(25) {
                    let pools = rows(&mut a, "SHOW POOLS").await;
                    admin_max = admin_max.max(pools.iter().map(|p| num(p, "open")).sum::<u64>());
                }
                tick += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            admin_max
        })
    };
    let kinds = [Kind::Settings, Kind::Prepared, Kind::Transactions];
    join_all(spawn_clients(&proxy, 0..150, |i| kinds[i as usize % 3])).await;
    stop.store(true, Ordering::Relaxed);
    let admin_max = sampler.await.unwrap();
    let open = max_open.load(Ordering::Relaxed);
    let stats = proxy.context().stats.clone();
    // A transaction keeps its backend between its statements (on a pinned place), without
    // an execution slot: one backend per transaction client at most, beside the P others.
    let bound = P
        + (0..150)
            .filter(|i| kinds[i % 3] == Kind::Transactions)
            .count() as u32;
    assert!(
        open <= bound && admin_max <= u64::from(bound),
        "stateless clients opened {open} backends (admin port saw {admin_max}), P = {P}; \
         recycles: reset {} close {}; backend connects {}; closes {:?}",
        stats.recycles_by(RecycleOutcome::Reset),
        stats.recycles_by(RecycleOutcome::Close),
        stats.backend_connects.load(Ordering::Relaxed),
        sluice::stats::BackendCloseReason::ALL
            .iter()
            .map(|r| format!("{r}={}", stats.backend_closes_by(*r)))
            .collect::<Vec<_>>(),
    );
    for r in PinReason::ALL {
        assert_eq!(stats.pins_by(*r), 0, "no stateless session pinned ({r})");
    }

    // Phase 2: the same mix again, now beside 50 pinned sessions with user variables and
    // temporary tables of their own.
    let mut tasks = spawn_clients(&proxy, 150..200, |_| Kind::Pinned);
    tasks.extend(spawn_clients(&proxy, 200..350, |i| kinds[i as usize % 3]));
    join_all(tasks).await;
    assert_eq!(stats.pins_by(PinReason::UserVariable), 50);

    // Every transaction ended; no backend was handed on dirty (innodb_trx needs PROCESS).
    let mut root = direct_root(Some(DB)).await;
    let open: Vec<(u64, String)> = root
        .query(
            "SELECT t.trx_mysql_thread_id, t.trx_state FROM information_schema.innodb_trx t \
             JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id WHERE p.db = 't_iso'",
        )
        .await
        .unwrap();
    assert!(open.is_empty(), "transactions left open: {open:?}");
    assert_drained(&proxy, Duration::from_secs(5)).await;
    Arc::into_inner(proxy)
        .expect("every client task ended")
        .shutdown()
        .await;
}

/// The server keys temporary tables by pseudo_thread_id, which sluice sets to present each
/// client's own CONNECTION_ID(): a table must stay visible to its session however often
/// the ids change hands on the backend (P=1, so both clients share it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_tables_survive_connection_id_presentation() {
    fresh_db("t_iso_tmp").await;
    let proxy = start(config(1)).await;
    let mut other = connect(&proxy, Some("t_iso_tmp")).await;
    let mut owner = connect(&proxy, Some("t_iso_tmp")).await;
    let other_id: u64 = other
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    owner
        .query_drop("CREATE TEMPORARY TABLE mine (x INT)")
        .await
        .unwrap();
    owner
        .query_drop("INSERT INTO mine VALUES (1), (2)")
        .await
        .unwrap();
    let (id, n): (u64, u64) = owner
        .query_first("SELECT CONNECTION_ID(), (SELECT COUNT(*) FROM mine)")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(id, other_id);
    assert_eq!(n, 2, "the temporary table is still there");
    // The binary protocol presents the id too.
    let via_exec: u64 = owner
        .exec_first("SELECT CONNECTION_ID()", ())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        via_exec, id,
        "a prepared CONNECTION_ID() is the sluice id as well"
    );
    // Two unpinned sessions taking turns on one backend: each sees its own id, text or binary.
    let mut third = connect(&proxy, Some("t_iso_tmp")).await;
    for _ in 0..3 {
        let t: u64 = third
            .query_first("SELECT CONNECTION_ID()")
            .await
            .unwrap()
            .unwrap();
        let o: u64 = other
            .exec_first("SELECT CONNECTION_ID()", ())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(o, other_id);
        assert_ne!(t, other_id);
    }
    owner.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    third.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Sessions with and without a default database share one pool: a session without one
/// never sees another's schema, and alternating between them does not churn connections
/// (each kind keeps its own idle backends instead of closing the other kind's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_without_a_database_never_see_one_and_do_not_churn_backends() {
    fresh_db("t_iso_nodb").await;
    let proxy = start(config(2)).await;
    let mut with_db = connect(&proxy, Some("t_iso_nodb")).await;
    let mut without = connect(&proxy, None).await;
    for _ in 0..50 {
        let db: Option<String> = with_db
            .query_first("SELECT DATABASE()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(db.as_deref(), Some("t_iso_nodb"));
        let none: Option<String> = without
            .query_first("SELECT DATABASE()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(none, None, "a session without a database sees none");
    }
    let stats = &proxy.context().stats;
    let connects = stats.backend_connects.load(Ordering::Relaxed);
    assert!(
        connects <= 4,
        "{connects} backend connections opened for 100 alternating statements"
    );
    with_db.disconnect().await.unwrap();
    without.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// SHOW WARNINGS leaves the warnings it shows on the backend: a session that read its own
/// must keep that backend until its next statement replaces them, or the next session to
/// run SHOW WARNINGS there would read them (P=1, so both would share it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn warnings_read_by_one_session_never_reach_the_next() {
    let mut cfg = config(1);
    cfg.pipeline_depth = 1;
    let proxy = start(cfg).await;
    let mut warned = connect(&proxy, None).await;
    let mut other = connect(&proxy, None).await;
    let v: Option<i64> = warned
        .query_first("SELECT CAST('5z' AS SIGNED)")
        .await
        .unwrap();
    assert_eq!(v, Some(5));
    for _ in 0..2 {
        let own: Vec<(String, u32, String)> = warned.query("SHOW WARNINGS").await.unwrap();
        assert_eq!(
            own.len(),
            1,
            "its own warning, as often as it asks: {own:?}"
        );
    }
    let seen: Vec<(String, u32, String)> = other.query("SHOW WARNINGS").await.unwrap();
    assert!(seen.is_empty(), "another session's warnings: {seen:?}");
    let count: Option<u64> = other.query_first("SELECT @@warning_count").await.unwrap();
    assert_eq!(count, Some(0));
    // What later statements leave of them is the server's rule: as on a direct session.
    let mut direct_warned = direct(None).await;
    let mut seen_after = Vec::new();
    for c in [&mut warned, &mut direct_warned] {
        c.query_drop("SELECT CAST('5z' AS SIGNED)").await.unwrap();
        let mut shown = Vec::new();
        for sql in ["DO 1", "SELECT COUNT(*) FROM information_schema.ENGINES"] {
            c.query_drop(sql).await.unwrap();
            let w: Vec<(String, u32, String)> = c.query("SHOW WARNINGS").await.unwrap();
            shown.push(w);
        }
        seen_after.push(shown);
    }
    assert_eq!(seen_after[0], seen_after[1], "through sluice as direct");
    direct_warned.disconnect().await.unwrap();
    warned.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}
