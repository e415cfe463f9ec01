//! Pinned sessions never freeze the proxy: logins never wait for a pool connection,
//! stateless statements are always served, and a session that cannot get a backend to pin
//! hears so clearly, before anything it asked for runs. Every test logs in to the backend
//! with an application account that has grants on its own database only.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn, ServerError};
use sluice::config::BackendLimit;
use sluice::ProxyHandle;

use crate::admin::{admin, admin_config, cell, http_get, num, parse_metrics, rows};
use crate::harness::*;

/// Bounds every step that used to hang, so a regression fails instead of stalling the suite.
const STEP: Duration = Duration::from_secs(60);

/// An account as deployments use it: `GRANT ALL ON <db>.*`, nothing global.
struct AppAccount {
    user: String,
    password: String,
    db: String,
}

/// Creates (afresh) `user` with all privileges on database `db` only, through `admin`.
async fn app_account(admin: &mut Conn, user: &str, db: &str) -> AppAccount {
    let password = format!("{user}-pw");
    for sql in [
        format!("DROP USER IF EXISTS '{user}'@'%'"),
        format!("DROP DATABASE IF EXISTS `{db}`"),
        format!("CREATE DATABASE `{db}`"),
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON `{db}`.* TO '{user}'@'%'"),
    ] {
        admin
            .query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    AppAccount {
        user: user.into(),
        password,
        db: db.into(),
    }
}

/// `app` on the shared test server (created through its privileged account).
async fn shared_app(user: &str, db: &str) -> AppAccount {
    let mut root = direct_root(None).await;
    let app = app_account(&mut root, user, db).await;
    root.disconnect().await.unwrap();
    app
}

/// A private server with `max_connections` and an application account on it.
async fn private_app(
    max_connections: u32,
    user: &str,
    db: &str,
) -> (dbkit::LocalServer, AppAccount) {
    let server = private_server_with(vec![format!("--max-connections={max_connections}")]).await;
    let mut root = Conn::new(opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    ))
    .await
    .expect("privileged connection to the private server");
    let app = app_account(&mut root, user, db).await;
    root.disconnect().await.unwrap();
    (server, app)
}

/// sluice's `app`/`secret` client logs in to `backend` as `app`.
fn app_config(backend: String, app: &AppAccount, pool_size: u32) -> sluice::Config {
    config_for(backend, &app.user, &app.password, pool_size)
}

/// The application account straight to `addr` (a server, not sluice).
/// sluice with its admin console and metrics, logging in to the (shared) server as `app`.
fn admin_app_config(app: &AppAccount, pool_size: u32) -> sluice::Config {
    let mut cfg = admin_config(pool_size);
    cfg.users[0].backend_user = Some(app.user.clone());
    cfg.users[0].backend_password = Some(sluice::config::Secret::new(app.password.clone()));
    cfg
}

async fn direct_app(addr: std::net::SocketAddr, app: &AppAccount, db: Option<&str>) -> Conn {
    Conn::new(opts_at(addr, &app.user, &app.password, db))
        .await
        .expect("direct login as the application account")
}

async fn login(proxy: &ProxyHandle, db: Option<&str>) -> Conn {
    within("a login", Conn::new(opts(proxy, "app", "secret", db)))
        .await
        .expect("login through sluice")
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {STEP:?}"))
}

fn server_error(e: mysql_async::Error) -> ServerError {
    match e {
        mysql_async::Error::Server(s) => s,
        other => panic!("expected a server error, got {other}"),
    }
}

/// What the server is running besides the sampler itself, read from PROCESSLIST in one
/// snapshot (the status variable Threads_running counts the sampler too, and a second query
/// to see what ran came too late to name it): `(statements, others)`. Statements are what
/// the execution slots bound; the others are sluice's login checks on a control connection
/// (Init DB) and backends being opened (Connect), which a login must never queue behind.
async fn threads_running(c: &mut Conn) -> (u32, u32, String) {
    let rows: Vec<(String, Option<String>)> = c
        .query(
            "SELECT COMMAND, INFO FROM information_schema.PROCESSLIST \
             WHERE COMMAND NOT IN ('Sleep', 'Daemon') AND ID <> CONNECTION_ID()",
        )
        .await
        .expect("PROCESSLIST");
    let statements = rows
        .iter()
        .filter(|(cmd, _)| matches!(cmd.as_str(), "Query" | "Execute" | "Fetch" | "Prepare"))
        .count() as u32;
    let others = rows.len() as u32 - statements;
    (statements, others, format!("{rows:?}"))
}

/// Percentile of a sorted list.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The measurement at the defaults (pool_size 4): 64 sessions each hold a temporary
/// table; then a 65th CREATE TEMPORARY TABLE, a login naming a default database and a
/// stateless statement all complete. (Before the fix each of the three waited out
/// queue_timeout and got 9001.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_pinned_sessions_at_the_defaults_freeze_nothing() {
    let app = shared_app("pin_app64", "pin_db64").await;
    let proxy = start(app_config(backend_addr(), &app, 4)).await;
    let mut pinned = Vec::new();
    for i in 0..64 {
        let mut c = login(&proxy, Some(&app.db)).await;
        within(
            "CREATE TEMPORARY TABLE",
            c.query_drop(format!(
                "CREATE TEMPORARY TABLE t (id INT) SELECT {i} AS id"
            )),
        )
        .await
        .unwrap_or_else(|e| panic!("session {i}: {e}"));
        pinned.push(c);
    }
    let mut c65 = login(&proxy, Some(&app.db)).await;
    within(
        "the 65th CREATE TEMPORARY TABLE",
        c65.query_drop("CREATE TEMPORARY TABLE t (id INT) SELECT 65 AS id"),
    )
    .await
    .unwrap();
    let mut plain = login(&proxy, Some(&app.db)).await;
    let one: Option<u32> = within("a stateless statement", plain.query_first("SELECT 1"))
        .await
        .unwrap();
    assert_eq!(one, Some(1));
    for (i, c) in pinned.iter_mut().enumerate() {
        let id: Option<u32> = within(
            "reading a temporary table",
            c.query_first("SELECT id FROM t"),
        )
        .await
        .unwrap();
        assert_eq!(
            id,
            Some(i as u32),
            "session {i} kept its own temporary table"
        );
    }
    assert_eq!(proxy.context().pool.pinned(), 65);
    for c in pinned.into_iter().chain([c65, plain]) {
        c.disconnect().await.unwrap();
    }
    assert_drained(&proxy, Duration::from_secs(10)).await;
    assert_eq!(
        proxy.context().pool.pinned(),
        0,
        "every place was given back"
    );
    proxy.shutdown().await;
}

const PINNED: usize = 1_000;
const STATELESS: usize = 100;
const P: u32 = 4;

/// The acceptance run: 1,000 sessions each holding a temporary table, beside 100
/// stateless clients, through P=4 against a server with max_connections 2000. Everyone is
/// served, the server never runs more than P statements of sluice's at once, and besides them
/// at most one login check or backend login (Threads_running <= P + 1 not counting the
/// sampler; under a loaded host a login's Init DB on its control connection was seen beside
/// four running statements), and every login completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_pinned_sessions_beside_a_hundred_stateless_clients_are_all_served() {
    let fds = dbkit::raise_nofile_limit();
    let needed = 4 * (PINNED + STATELESS) as u64;
    assert!(
        fds >= needed,
        "RLIMIT_NOFILE is {fds}; this test needs {needed}: raise the hard limit"
    );
    let (server, app) = private_app(2000, "pin_app1k", "pin_db1k").await;
    let mut cfg = app_config(server.addr().to_string(), &app, P);
    cfg.queue_timeout = Duration::from_secs(120);
    let proxy = Arc::new(start(cfg).await);
    let ctx = proxy.context().clone();
    assert_eq!(ctx.pool.max_open(), 1800, "auto: 2000 less a tenth");

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, addr) = (stop.clone(), server.addr());
        let mut c = direct_app(addr, &app, None).await;
        tokio::spawn(async move {
            let (mut max, mut samples, mut seen) = (0, 0u64, None);
            let mut max_statements = 0;
            while !stop.load(Ordering::Relaxed) {
                let (statements, others, rows) = threads_running(&mut c).await;
                let n = statements + others;
                if (n > P + 1 || statements > P) && seen.is_none() {
                    seen = Some(format!("{n}: {rows}"));
                }
                max_statements = max_statements.max(statements);
                max = max.max(n);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            c.disconnect().await.unwrap();
            (max, max_statements, samples, seen)
        })
    };
    let served = Arc::new(AtomicU64::new(0));
    let stateless: Vec<_> = (0..STATELESS as u64)
        .map(|i| {
            let (proxy, stop, served) = (proxy.clone(), stop.clone(), served.clone());
            tokio::spawn(async move {
                let mut c = login(&proxy, None).await;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let want = i * 1_000_000 + n;
                    let got: Option<u64> = c.query_first(format!("SELECT {want}")).await.unwrap();
                    assert_eq!(got, Some(want), "stateless client {i}");
                    n += 1;
                    served.fetch_add(1, Ordering::Relaxed);
                }
                c.disconnect().await.unwrap();
                n
            })
        })
        .collect();

    let ready = Arc::new(AtomicUsize::new(0));
    let (release, _) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let pinned: Vec<_> = (0..PINNED)
        .map(|i| {
            let (proxy, ready, db) = (proxy.clone(), ready.clone(), app.db.clone());
            let mut go = release.subscribe();
            tokio::spawn(async move {
                let t = Instant::now();
                let mut c = login(&proxy, Some(&db)).await;
                let login_time = t.elapsed();
                c.query_drop(format!(
                    "CREATE TEMPORARY TABLE t (id INT) SELECT {i} AS id"
                ))
                .await
                .unwrap_or_else(|e| panic!("pinned session {i}: {e}"));
                ready.fetch_add(1, Ordering::Relaxed);
                go.wait_for(|go| *go).await.unwrap();
                let id: Option<usize> = c.query_first("SELECT id FROM t").await.unwrap();
                assert_eq!(id, Some(i), "pinned session {i} kept its own table");
                c.disconnect().await.unwrap();
                login_time
            })
        })
        .collect();
    assert!(
        eventually(STEP, || ready.load(Ordering::Relaxed) == PINNED).await,
        "only {} of {PINNED} sessions pinned within {STEP:?}",
        ready.load(Ordering::Relaxed)
    );
    let all_pinned = started.elapsed();
    // Everyone pinned at once: stateless statements still flow, and a new login naming the
    // database gets through.
    let before = served.load(Ordering::Relaxed);
    let t = Instant::now();
    let mut late = login(&proxy, Some(&app.db)).await;
    let late_login = t.elapsed();
    assert_eq!(
        late.query_first::<u8, _>("SELECT 7").await.unwrap(),
        Some(7)
    );
    assert!(
        eventually(STEP, || served.load(Ordering::Relaxed) > before + 1000).await,
        "stateless statements stopped while {PINNED} sessions were pinned"
    );
    let snap = ctx.pool.snapshot();
    assert_eq!(snap.pinned, PINNED as u32);
    assert_eq!(snap.pinned_max, 1800 - P);
    release.send_replace(true);

    let mut logins = Vec::with_capacity(PINNED);
    for t in pinned {
        logins.push(t.await.expect("pinned session"));
    }
    stop.store(true, Ordering::Relaxed);
    let mut per_client = Vec::new();
    for t in stateless {
        per_client.push(t.await.expect("stateless client"));
    }
    let (max_running, max_statements, samples, seen) = sampler.await.unwrap();
    late.disconnect().await.unwrap();
    logins.sort();
    let total = served.load(Ordering::Relaxed);
    eprintln!(
        "{PINNED} pinned + {STATELESS} stateless through P={P}: all pinned after {all_pinned:?}; \
         logins p50 {:?} p99 {:?} max {:?}; a login while all were pinned {late_login:?}; \
         {total} stateless statements (min per client {}); running besides the sampler: at most {max_running}, \
         of them statements {max_statements}, over {samples} samples",
        pct(&logins, 0.5),
        pct(&logins, 0.99),
        logins[logins.len() - 1],
        per_client.iter().min().unwrap(),
    );
    assert!(
        per_client.iter().all(|n| *n > 0),
        "a stateless client was never served"
    );
    assert!(samples > 10, "the sampler ran");
    assert!(
        max_running <= P + 1 && max_statements <= P,
        "the server ran {max_running} threads besides the sampler, {max_statements} of them \
         statements (P = {P}; +1 for a login check or a backend being opened); first seen \
         {seen:?}"
    );
    assert_drained(&proxy, Duration::from_secs(30)).await;
    // The 1,000 backends went back dirty; their deferred resets drain once slots are free.
    assert!(
        eventually(STEP, || ctx.pool.snapshot().to_reset == 0).await,
        "deferred resets never drained: {:?}",
        ctx.pool.snapshot()
    );
    Arc::try_unwrap(proxy)
        .ok()
        .expect("sole owner")
        .shutdown()
        .await;
}

/// 200 concurrent sessions that each hold a temporary table, user variables and
/// transactions: all served through P=4, each seeing only its own state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_with_tables_variables_and_transactions_are_all_served() {
    const N: usize = 200;
    let app = shared_app("pin_app200", "pin_db200").await;
    let mut d = direct_app(server_addr(), &app, Some(&app.db)).await;
    d.query_drop("CREATE TABLE ledger (session INT, n INT) ENGINE=InnoDB")
        .await
        .unwrap();
    let mut cfg = app_config(backend_addr(), &app, 4);
    cfg.queue_timeout = Duration::from_secs(120);
    let proxy = Arc::new(start(cfg).await);
    let ready = Arc::new(AtomicUsize::new(0));
    let (release, _) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let (proxy, ready, db) = (proxy.clone(), ready.clone(), app.db.clone());
            let mut go = release.subscribe();
            tokio::spawn(async move {
                let mut c = login(&proxy, Some(&db)).await;
                c.query_drop("CREATE TEMPORARY TABLE mine (n INT)")
                    .await
                    .unwrap();
                c.query_drop(format!("SET @me = {i}, @tag = 'session-{i}'"))
                    .await
                    .unwrap();
                for n in 0..3 {
                    c.query_drop("BEGIN").await.unwrap();
                    c.query_drop(format!("INSERT INTO mine VALUES ({n})"))
                        .await
                        .unwrap();
                    c.query_drop(format!("INSERT INTO ledger VALUES ({i}, {n})"))
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    c.query_drop("COMMIT").await.unwrap();
                }
                ready.fetch_add(1, Ordering::Relaxed);
                go.wait_for(|go| *go).await.unwrap();
                let mine: Option<(u64, u64)> = c
                    .query_first("SELECT COUNT(*), SUM(n) FROM mine")
                    .await
                    .unwrap();
                assert_eq!(mine, Some((3, 3)), "session {i}'s temporary table");
                let vars: Option<(u64, String)> = c.query_first("SELECT @me, @tag").await.unwrap();
                assert_eq!(vars, Some((i as u64, format!("session-{i}"))));
                let rows: Option<u64> = c
                    .query_first(format!("SELECT COUNT(*) FROM ledger WHERE session = {i}"))
                    .await
                    .unwrap();
                assert_eq!(rows, Some(3), "session {i}'s committed rows");
                c.disconnect().await.unwrap();
            })
        })
        .collect();
    assert!(
        eventually(STEP, || ready.load(Ordering::Relaxed) == N).await,
        "only {} of {N} sessions got through their transactions",
        ready.load(Ordering::Relaxed)
    );
    assert_eq!(
        proxy.context().pool.pinned(),
        N as u32,
        "all {N} pinned at once"
    );
    release.send_replace(true);
    for t in tasks {
        within("a session", t).await.expect("session task");
    }
    let total: Option<u64> = d.query_first("SELECT COUNT(*) FROM ledger").await.unwrap();
    assert_eq!(total, Some(3 * N as u64));
    d.disconnect().await.unwrap();
    assert_drained(&proxy, Duration::from_secs(10)).await;
    Arc::try_unwrap(proxy)
        .ok()
        .expect("sole owner")
        .shutdown()
        .await;
}

fn server_addr() -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    backend_addr()
        .to_socket_addrs()
        .expect("test server address")
        .next()
        .expect("an address")
}

/// At a small cap (max_backend_connections 4, pool_size 2: two pinned places), a third
/// session's pinning statements are refused with 9005 after pin_wait, with a message that
/// names the setting and who holds the places, and nothing they asked for ran; its stateless
/// statements, transactions and new logins go on; once a place frees, it may pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_cannot_pin_hears_why_and_nothing_it_asked_for_runs() {
    let app = shared_app("pin_app_cap", "pin_db_cap").await;
    let mut cfg = admin_app_config(&app, 2);
    cfg.max_backend_connections = BackendLimit::Fixed(4);
    cfg.pin_wait = Duration::from_millis(300);
    let proxy = start(cfg).await;
    let db = Some(app.db.as_str());
    let mut s1 = login(&proxy, db).await;
    s1.query_drop("CREATE TEMPORARY TABLE t1 (x INT)")
        .await
        .unwrap();
    let mut s2 = login(&proxy, db).await;
    s2.query_drop("SET @a = 1").await.unwrap();
    let mut s3 = login(&proxy, db).await;

    let t = Instant::now();
    let err = server_error(
        s3.query_drop("CREATE TEMPORARY TABLE t3 (x INT)")
            .await
            .unwrap_err(),
    );
    let waited = t.elapsed();
    assert_eq!(
        (err.code, err.state.as_str()),
        (9005, "HY000"),
        "{}",
        err.message
    );
    for part in [
        "for its temporary_table",
        "all 2 connections that pinned sessions may use are taken",
        "max_backend_connections=4",
        "pool_size=2",
        "2 sessions are pinned (user_variable 1, temporary_table 1)",
        "(pin_wait)",
        "The statement did not run",
        "Raise max_backend_connections",
    ] {
        assert!(
            err.message.contains(part),
            "{part:?} missing from: {}",
            err.message
        );
    }
    assert!(
        waited >= Duration::from_millis(300),
        "refused after pin_wait, not before: {waited:?}"
    );
    let missing = server_error(s3.query_drop("SELECT * FROM t3").await.unwrap_err());
    assert_eq!(
        missing.code, 1146,
        "the refused CREATE did not run: {}",
        missing.message
    );
    let err = server_error(s3.query_drop("SET @x = 5").await.unwrap_err());
    assert_eq!(err.code, 9005);
    let x: Option<Option<u32>> = s3.query_first("SELECT @x").await.unwrap();
    assert_eq!(x, Some(None), "the refused SET did not run");
    let err = server_error(
        s3.query_drop("SELECT GET_LOCK('pin_cap_lock', 0)")
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 9005, "{}", err.message);
    let free: Option<u8> = s3
        .query_first("SELECT IS_FREE_LOCK('pin_cap_lock')")
        .await
        .unwrap();
    assert_eq!(free, Some(1), "the refused GET_LOCK took no lock");
    // A transaction whose statement finds no pinned place free keeps its execution slot
    // instead: never refused.
    s3.query_drop("BEGIN").await.unwrap();
    s3.query_drop("CREATE TABLE IF NOT EXISTS kept (x INT)")
        .await
        .unwrap();
    s3.query_drop("BEGIN").await.unwrap();
    s3.query_drop("INSERT INTO kept VALUES (1)").await.unwrap();
    s3.query_drop("COMMIT").await.unwrap();
    // Warnings keep a backend only while a place is free; the backend then goes back reset,
    // so no other client reads them.
    let _: Option<Option<i64>> = s3
        .query_first("SELECT CAST('12pin_cap' AS SIGNED)")
        .await
        .unwrap();
    let mut s4 = login(&proxy, db).await;
    let seen: Vec<mysql_async::Row> = s4.query("SHOW WARNINGS").await.unwrap();
    assert!(
        seen.iter().all(|r| !format!("{r:?}").contains("12pin_cap")),
        "another session read s3's warnings: {seen:?}"
    );
    assert_eq!(s4.query_first::<u8, _>("SELECT 1").await.unwrap(), Some(1));

    let mut a = admin(&proxy).await;
    let pools = rows(&mut a, "SHOW POOLS").await;
    let p = &pools[0];
    assert_eq!(
        (
            num(p, "pinned_backends"),
            num(p, "pinned_max"),
            num(p, "max_open")
        ),
        (2, 2, 4)
    );
    assert_eq!(
        cell(p, "pinned_by"),
        Some("user_variable=1,temporary_table=1")
    );
    assert_eq!(cell(p, "max_open_from"), Some("config"));
    let (_, body) = http_get(proxy.metrics_addr().unwrap(), "/metrics").await;
    let m = parse_metrics(&body);
    assert_eq!(m["sluice_pinned_backends{reason=\"temporary_table\"}"], 1.0);
    assert_eq!(m["sluice_pinned_backends{reason=\"user_variable\"}"], 1.0);
    assert_eq!(m["sluice_pinned_backends_max"], 2.0);
    assert_eq!(m["sluice_pin_refusals_total"], 3.0);

    // A place frees up: the same statement now pins.
    s1.disconnect().await.unwrap();
    let t = Instant::now();
    loop {
        match s3.query_drop("CREATE TEMPORARY TABLE t3 (x INT)").await {
            Ok(()) => break,
            Err(e) if t.elapsed() < STEP => assert_eq!(server_error(e).code, 9005),
            Err(e) => panic!("{e}"),
        }
    }
    s3.query_drop("INSERT INTO t3 VALUES (3)").await.unwrap();
    assert_eq!(
        s3.query_first::<u8, _>("SELECT x FROM t3").await.unwrap(),
        Some(3)
    );
    for c in [s2, s3, s4, a] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// One session stalled inside a transaction on a long statement, another pinned and idle:
/// the admin console, new logins naming a database, and stateless statements are all served
/// while the stalled statement still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_and_a_pinned_session_block_no_login_statement_or_admin_command() {
    let app = shared_app("pin_app_stall", "pin_db_stall").await;
    let proxy = start(admin_app_config(&app, 2)).await;
    let db = Some(app.db.as_str());
    let mut pinned = login(&proxy, db).await;
    pinned
        .query_drop("CREATE TEMPORARY TABLE held (x INT)")
        .await
        .unwrap();
    let mut stalled = login(&proxy, db).await;
    stalled
        .query_drop("CREATE TEMPORARY TABLE mine (x INT)")
        .await
        .unwrap();
    stalled.query_drop("BEGIN").await.unwrap();
    let long = tokio::spawn(async move {
        stalled.query_drop("SELECT SLEEP(8)").await.unwrap();
        stalled
    });
    let ctx = proxy.context().clone();
    assert!(
        eventually(STEP, || ctx.pool.snapshot().slots_in_use == 1).await,
        "the stalled statement holds its slot"
    );
    let mut a = admin(&proxy).await;
    assert_eq!(
        num(&rows(&mut a, "SHOW POOLS").await[0], "pinned_backends"),
        2
    );
    for i in 0..10u32 {
        let mut c = login(&proxy, db).await;
        assert_eq!(
            c.query_first::<u32, _>(format!("SELECT {i}"))
                .await
                .unwrap(),
            Some(i)
        );
        c.disconnect().await.unwrap();
    }
    assert_eq!(
        pinned
            .query_first::<u8, _>("SELECT COUNT(*) FROM held")
            .await
            .unwrap(),
        Some(0)
    );
    assert!(
        !long.is_finished(),
        "everything above was served while the stalled statement ran"
    );
    let mut stalled = long.await.unwrap();
    stalled.query_drop("COMMIT").await.unwrap();
    for c in [pinned, stalled, a] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

/// A login's default database is checked with the server as the application account: the
/// server's own error for a database the account may not use or that does not exist
/// (compared with a direct login), a database created a moment ago is found at once, and
/// COM_CHANGE_USER is checked the same way. Logins naming a database need no execution slot:
/// 100 of them get through while the only slot is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_database_checks_answer_as_the_server_and_need_no_slot() {
    let app = shared_app("pin_app_db", "pin_db_db").await;
    let mut root = direct_root(None).await;
    root.query_drop("CREATE DATABASE IF NOT EXISTS pin_not_granted")
        .await
        .unwrap();
    let proxy = start(app_config(backend_addr(), &app, 1)).await;
    for db in ["pin_not_granted", "pin_no_such_db"] {
        let direct_err = server_error(
            Conn::new(opts_at(server_addr(), &app.user, &app.password, Some(db)))
                .await
                .unwrap_err(),
        );
        let via = server_error(
            Conn::new(opts(&proxy, "app", "secret", Some(db)))
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (via.code, via.state.as_str(), via.message.as_str()),
            (
                direct_err.code,
                direct_err.state.as_str(),
                direct_err.message.as_str()
            ),
            "{db}: sluice answers as the server does"
        );
        assert_eq!(via.code, 1044, "{db}: {}", via.message);
    }
    // The account's own database, dropped: the server's 1049, and no refusal is remembered.
    root.query_drop(format!("DROP DATABASE `{}`", app.db))
        .await
        .unwrap();
    let gone = server_error(
        Conn::new(opts(&proxy, "app", "secret", Some(&app.db)))
            .await
            .unwrap_err(),
    );
    assert_eq!(gone.code, 1049, "{}", gone.message);
    root.query_drop(format!("CREATE DATABASE `{}`", app.db))
        .await
        .unwrap();
    let mut c = login(&proxy, Some(&app.db)).await;
    assert_eq!(
        c.query_first::<String, _>("SELECT DATABASE()")
            .await
            .unwrap(),
        Some(app.db.clone())
    );
    let err = server_error(
        c.change_user(ChangeUserOpts::default().with_db_name(Some("pin_not_granted".into())))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 1044, "COM_CHANGE_USER: {}", err.message);
    c.change_user(ChangeUserOpts::default().with_db_name(Some(app.db.clone())))
        .await
        .unwrap();
    assert_eq!(
        c.query_first::<String, _>("SELECT DATABASE()")
            .await
            .unwrap(),
        Some(app.db.clone())
    );
    // The one execution slot is busy for seconds: logins naming a database still complete.
    let busy = tokio::spawn(async move {
        c.query_drop("SELECT SLEEP(5)").await.unwrap();
        c
    });
    let ctx = proxy.context().clone();
    assert!(eventually(STEP, || ctx.pool.snapshot().slots_in_use == 1).await);
    let logins: Vec<_> = (0..100)
        .map(|_| {
            let o = opts(&proxy, "app", "secret", Some(&app.db));
            tokio::spawn(async move { Conn::new(o).await })
        })
        .collect();
    let mut conns = Vec::new();
    for l in logins {
        conns.push(
            within("a login while the slot is busy", l)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(!busy.is_finished(), "the logins did not wait for the slot");
    for c in conns {
        c.disconnect().await.unwrap();
    }
    busy.await.unwrap().disconnect().await.unwrap();
    root.query_drop("DROP DATABASE pin_not_granted")
        .await
        .unwrap();
    root.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// `max_backend_connections = auto` follows the server's max_connections (300 here: 270),
/// also when sluice started before its server (read at first contact); a number overrides
/// it, live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_backend_connections_auto_follows_the_servers_max_connections() {
    let (mut server, app) = private_app(300, "pin_app_auto", "pin_db_auto").await;
    server.stop();
    let mut cfg = admin_app_config(&app, 2);
    cfg.backend = sluice::config::Endpoint::parse(&server.addr().to_string());
    cfg.backend_down_wait = Duration::from_secs(1);
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    // While the server is down, a login naming a database hears so after backend_down_wait.
    let down = server_error(
        Conn::new(opts(&proxy, "app", "secret", Some(&app.db)))
            .await
            .unwrap_err(),
    );
    assert_eq!(down.code, 9003, "{}", down.message);
    assert!(
        down.message.contains("cannot reach its backend"),
        "{}",
        down.message
    );
    let p = rows(&mut a, "SHOW POOLS").await.remove(0);
    assert_eq!(
        num(&p, "max_open"),
        136,
        "151 assumed until the server is read"
    );
    assert_eq!(
        cell(&p, "max_open_from"),
        Some("auto: server not read yet, assuming max_connections=151")
    );
    let server = tokio::task::spawn_blocking(move || {
        server.restart().expect("the server starts again");
        server
    })
    .await
    .unwrap();
    // First contact: the reconnect loop's (or the first checkout's) connection reads it.
    let mut c = login(&proxy, None).await;
    within("the first statement after the server came up", async {
        while c.query_drop("SELECT 1").await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let p = rows(&mut a, "SHOW POOLS").await.remove(0);
    assert_eq!((num(&p, "max_open"), num(&p, "pinned_max")), (270, 268));
    assert_eq!(
        cell(&p, "max_open_from"),
        Some("auto: server max_connections=300")
    );
    // A number overrides it, live, and `auto` comes back.
    a.query_drop("SET max_backend_connections = 64")
        .await
        .unwrap();
    let p = rows(&mut a, "SHOW POOLS").await.remove(0);
    assert_eq!(
        (num(&p, "max_open"), cell(&p, "max_open_from")),
        (64, Some("config"))
    );
    a.query_drop("SET max_backend_connections = auto")
        .await
        .unwrap();
    assert_eq!(num(&rows(&mut a, "SHOW POOLS").await[0], "max_open"), 270);
    // Logins naming a database work now that the server is up.
    let mut d = login(&proxy, Some(&app.db)).await;
    assert_eq!(d.query_first::<u8, _>("SELECT 1").await.unwrap(), Some(1));
    for conn in [c, d, a] {
        conn.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
    drop(server);
}

/// After pinned sessions leave, their backends are reset and idle; health checks (one at a
/// time, each under a free slot) close the ones the server has dropped and keep the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_close_dead_idle_backends_and_keep_the_rest() {
    let app = shared_app("pin_app_health", "pin_db_health").await;
    let mut cfg = app_config(backend_addr(), &app, 2);
    cfg.health_check_interval = Duration::from_secs(1);
    let proxy = start(cfg).await;
    let ctx = proxy.context().clone();
    let mut sessions = Vec::new();
    for i in 0..6 {
        let mut c = login(&proxy, Some(&app.db)).await;
        c.query_drop(format!("CREATE TEMPORARY TABLE t{i} (x INT)"))
            .await
            .unwrap();
        sessions.push(c);
    }
    for c in sessions {
        c.disconnect().await.unwrap();
    }
    assert!(
        eventually(STEP, || ctx.pool.snapshot().idle == 6).await,
        "the six backends came back reset: {:?}",
        ctx.pool.snapshot()
    );
    let mut threads = Vec::new();
    ctx.pool.for_each_idle(|b| threads.push(b.thread_id));
    // The application account may kill its own user's connections, as any user may.
    let mut d = direct_app(server_addr(), &app, None).await;
    for t in &threads[..2] {
        d.query_drop(format!("KILL {t}")).await.unwrap();
    }
    let closed = || {
        ctx.stats
            .backend_closes_by(sluice::stats::BackendCloseReason::HealthCheck)
    };
    assert!(
        eventually(STEP, || closed() == 2).await,
        "health checks closed {} backends",
        closed()
    );
    assert!(
        eventually(STEP, || ctx.pool.snapshot().idle == 4).await,
        "the live ones stay idle: {:?}",
        ctx.pool.snapshot()
    );
    assert_eq!(closed(), 2, "and are not closed");
    let mut c = login(&proxy, None).await;
    assert_eq!(c.query_first::<u8, _>("SELECT 1").await.unwrap(), Some(1));
    c.disconnect().await.unwrap();
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// COM_RESET_CONNECTION and COM_CHANGE_USER drop the session's locks and temporary tables
/// before its next statement, as the server does: the reset of its old backend is waited
/// for, not raced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_session_finds_its_locks_and_tables_gone_at_once() {
    let app = shared_app("pin_app_reset", "pin_db_reset").await;
    let proxy = start(app_config(backend_addr(), &app, 2)).await;
    let mut c = login(&proxy, Some(&app.db)).await;
    let mut other = login(&proxy, Some(&app.db)).await;
    for round in 0..20 {
        let got: Option<u8> = c
            .query_first("SELECT GET_LOCK('pin_reset_lock', 0)")
            .await
            .unwrap();
        assert_eq!(got, Some(1), "round {round}: the lock is free again");
        c.query_drop("CREATE TEMPORARY TABLE gone (x INT)")
            .await
            .unwrap();
        if round % 2 == 0 {
            c.reset().await.unwrap();
        } else {
            c.change_user(ChangeUserOpts::default()).await.unwrap();
        }
        let free: Option<u8> = c
            .query_first("SELECT IS_FREE_LOCK('pin_reset_lock')")
            .await
            .unwrap();
        assert_eq!(free, Some(1), "round {round}: the reset released the lock");
        let seen: Option<u8> = other
            .query_first("SELECT IS_FREE_LOCK('pin_reset_lock')")
            .await
            .unwrap();
        assert_eq!(seen, Some(1), "round {round}: for everyone");
        let err = server_error(c.query_drop("SELECT * FROM gone").await.unwrap_err());
        assert_eq!(err.code, 1146, "round {round}: the temporary table is gone");
    }
    c.disconnect().await.unwrap();
    other.disconnect().await.unwrap();
    proxy.shutdown().await;
}
