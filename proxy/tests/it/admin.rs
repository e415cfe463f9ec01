//! The admin console (mysql_async and the mariadb CLI as clients), live SET / PAUSE / RELOAD /
//! SHUTDOWN under load, and the Prometheus endpoint, against the real MariaDB.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use sluice::config::UserConfig;
use sluice::{Config, ProxyHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;

pub(crate) fn admin_config(pool_size: u32) -> Config {
    let mut cfg = config(pool_size);
    cfg.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.admin_users = vec![UserConfig::new("admin", "s3cret")];
    cfg
}

fn admin_opts(proxy: &ProxyHandle, user: &str, password: &str) -> Opts {
    let addr = proxy.admin_addr().expect("admin console is on");
    OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        .max_allowed_packet(Some(64 << 20))
        .wait_timeout(Some(28800))
        .stmt_cache_size(0)
        .into()
}

pub(crate) async fn admin(proxy: &ProxyHandle) -> Conn {
    Conn::new(admin_opts(proxy, "admin", "s3cret"))
        .await
        .expect("admin login")
}

/// A result set as maps of column -> text (NULL as None).
pub(crate) async fn rows(conn: &mut Conn, cmd: &str) -> Vec<HashMap<String, Option<String>>> {
    let rows: Vec<Row> = conn
        .query(cmd)
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    rows.into_iter()
        .map(|row| {
            let names: Vec<String> = row
                .columns_ref()
                .iter()
                .map(|c| c.name_str().into_owned())
                .collect();
            names
                .into_iter()
                .enumerate()
                .map(|(i, name)| (name, row.get::<Option<String>, _>(i).flatten()))
                .collect()
        })
        .collect()
}

pub(crate) fn cell<'a>(row: &'a HashMap<String, Option<String>>, col: &str) -> Option<&'a str> {
    row.get(col)
        .unwrap_or_else(|| panic!("no column {col} in {row:?}"))
        .as_deref()
}

pub(crate) fn num(row: &HashMap<String, Option<String>>, col: &str) -> u64 {
    cell(row, col)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{col} is not a number in {row:?}"))
}

/// The `stat` -> `value` pairs of SHOW STATS.
async fn stats(conn: &mut Conn) -> HashMap<String, u64> {
    rows(conn, "SHOW STATS")
        .await
        .iter()
        .map(|r| (cell(r, "stat").unwrap_or("").to_string(), num(r, "value")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_commands_report_pools_clients_servers_stats_and_latency() {
    let mut cfg = admin_config(3);
    // Never used (the user has its own), but SHOW CONFIG must mask it.
    cfg.backend_password = Some(sluice::config::Secret::new(server().password.clone()));
    let proxy = start(cfg).await;
    let mut plain = connect(&proxy, None).await;
    let mut pinned = connect(&proxy, None).await;
    pinned.query_drop("SET @mine = 7").await.unwrap();
    for _ in 0..5 {
        assert_eq!(
            plain.query_first::<u8, _>("SELECT 1").await.unwrap(),
            Some(1)
        );
    }
    let mut a = admin(&proxy).await;

    let clients = rows(&mut a, "show clients;").await;
    assert_eq!(
        clients.len(),
        2,
        "the admin session is not a client: {clients:?}"
    );
    assert!(
        clients
            .iter()
            .all(|c| cell(c, "user") == Some("app") && cell(c, "state") == Some("idle")),
        "{clients:?}"
    );
    let pins: Vec<_> = clients.iter().filter_map(|c| cell(c, "pinned")).collect();
    assert_eq!(pins, vec!["user_variable"]);
    assert_eq!(clients.iter().map(|c| num(c, "queries")).max(), Some(5));

    let pools = rows(&mut a, "SHOW POOLS").await;
    assert!(!pools.is_empty());
    let p = &pools[0];
    assert_eq!(num(p, "pool_size"), 3);
    assert_eq!(num(p, "active"), 0);
    assert_eq!(num(p, "waiting"), 0);
    assert_eq!(cell(p, "backend"), Some(backend_addr().as_str()));
    assert_eq!(pools.iter().map(|p| num(p, "pinned")).sum::<u64>(), 1);
    // One backend is pinned (checked out), an idle one served `plain`.
    assert_eq!(num(p, "open"), 2, "{pools:?}");
    assert_eq!(pools.iter().map(|p| num(p, "idle")).sum::<u64>(), 1);
    // server_cpus = auto: MariaDB said, with its max_connections.
    assert!(num(p, "server_cpus") >= 1, "{pools:?}");
    assert_eq!(
        cell(p, "server_cpus_from"),
        Some("auto: server thread_pool_size")
    );

    let servers = rows(&mut a, "SHOW SERVERS").await;
    let idle: Vec<_> = servers
        .iter()
        .filter(|s| cell(s, "state") == Some("idle"))
        .collect();
    assert_eq!(idle.len(), 1, "{servers:?}");
    assert!(num(idle[0], "thread_id") > 0);
    assert!(num(idle[0], "statements") >= 5, "{servers:?}");
    let backend = servers
        .iter()
        .find(|s| cell(s, "state") == Some("backend_up"))
        .expect("the backend server's row");
    assert_eq!(cell(backend, "last_error"), None, "{servers:?}");
    assert_eq!(cell(backend, "backend"), Some(backend_addr().as_str()));
    let out = servers
        .iter()
        .find(|s| cell(s, "state") == Some("checked_out"))
        .expect("checked-out summary");
    assert_eq!(num(out, "count"), 1);

    let s = stats(&mut a).await;
    assert_eq!(s["statements"], 6);
    assert_eq!(s["pins.user_variable"], 1);
    assert_eq!(s["clients_connected"], 2);

    let latency = rows(&mut a, "SHOW LATENCY").await;
    let backend = latency
        .iter()
        .find(|r| cell(r, "metric") == Some("backend_time"))
        .unwrap();
    assert_eq!(num(backend, "count"), 6);
    assert!(num(backend, "p50_us") > 0 && num(backend, "p99_us") >= num(backend, "p50_us"));
    assert!(latency
        .iter()
        .any(|r| cell(r, "metric") == Some("queue_wait")));

    let config = rows(&mut a, "SHOW CONFIG").await;
    let setting = |name: &str| {
        config
            .iter()
            .find(|r| cell(r, "setting") == Some(name))
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(cell(setting("pool_size"), "value"), Some("3"));
    assert_eq!(cell(setting("pool_size"), "live"), Some("yes"));
    assert_eq!(cell(setting("listen"), "live"), Some("no"));
    assert_eq!(cell(setting("backend_password"), "value"), Some("***"));
    assert_eq!(
        cell(setting("users"), "value"),
        Some("[app] (passwords masked)")
    );
    let all = format!("{config:?}");
    assert!(
        !all.contains("s3cret") && !all.contains(&server().password),
        "a secret leaked: {all}"
    );

    // What the mariadb CLI asks at connect in interactive mode.
    let comment: Option<String> = a
        .query_first("select @@version_comment limit 1")
        .await
        .unwrap();
    assert_eq!(comment.as_deref(), Some("sluice admin console"));
    let version = rows(&mut a, "SHOW VERSION").await;
    assert_eq!(cell(&version[0], "sluice"), Some(env!("CARGO_PKG_VERSION")));

    let err = a.query_drop("FLUSH EVERYTHING").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1064));
    assert!(
        err.to_string().contains("SHOW POOLS") && err.to_string().contains("PAUSE"),
        "{err}"
    );
    let err = a.query_drop("KILL 999999").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1094), "{err}");
    let err = a.query_drop("SET pool_size = 0").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1231), "{err}");
    assert_eq!(
        rows(&mut a, "SHOW POOLS").await[0]["pool_size"].as_deref(),
        Some("3"),
        "a refused SET changes nothing"
    );

    // KILL ends that client only.
    let victim = clients
        .iter()
        .find(|c| cell(c, "pinned").is_some())
        .map(|c| num(c, "id"))
        .unwrap();
    a.query_drop(format!("KILL {victim}")).await.unwrap();
    assert!(
        pinned.query_drop("SELECT 1").await.is_err(),
        "the killed client is disconnected"
    );
    assert_eq!(
        plain.query_first::<u8, _>("SELECT 2").await.unwrap(),
        Some(2)
    );

    // A running statement shows its backend thread and the server that thread is on.
    let running = tokio::spawn(async move {
        plain.query_drop("DO SLEEP(1)").await.unwrap();
        plain
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let clients = rows(&mut a, "SHOW CLIENTS").await;
    let active = clients
        .iter()
        .find(|c| cell(c, "state") == Some("active"))
        .unwrap_or_else(|| panic!("the sleeping client is active: {clients:?}"));
    assert!(num(active, "backend_thread") > 0, "{active:?}");
    assert_eq!(cell(active, "backend_server"), Some("0"), "{active:?}");
    let plain = running.await.unwrap();
    let idle = rows(&mut a, "SHOW CLIENTS").await;
    assert_eq!(cell(&idle[0], "backend_server"), None, "{idle:?}");

    plain.disconnect().await.unwrap();
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_admin_credentials_get_1045() {
    let proxy = start(admin_config(2)).await;
    for (user, password) in [
        ("admin", "wrong"),
        ("app", "secret"),
        ("nobody", "s3cret"),
        ("admin", ""),
    ] {
        let err = Conn::new(admin_opts(&proxy, user, password))
            .await
            .unwrap_err();
        assert_eq!(code_of(&err), Some(1045), "{user}: {err}");
        assert_eq!(state_of(&err).as_deref(), Some("28000"), "{user}");
        assert!(
            err.to_string()
                .contains(&format!("Access denied for user '{user}'")),
            "{err}"
        );
    }
    // The right password still works after the failures.
    let mut a = admin(&proxy).await;
    assert_eq!(rows(&mut a, "SHOW VERSION").await.len(), 1);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

async fn mariadb_cli(proxy: &ProxyHandle, password: &str, sql: &str) -> std::process::Output {
    let addr = proxy.admin_addr().unwrap();
    tokio::process::Command::new("mariadb")
        .args([
            "-h",
            &addr.ip().to_string(),
            "-P",
            &addr.port().to_string(),
            "-uadmin",
        ])
        .arg(format!("-p{password}"))
        .args(["--batch", "-e", sql])
        .output()
        .await
        .expect("mariadb CLI runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_cli_is_an_admin_client() {
    let proxy = start(admin_config(2)).await;
    let mut c = connect(&proxy, None).await;
    c.query_drop("SELECT 1").await.unwrap();

    let out = mariadb_cli(&proxy, "s3cret", "SHOW POOLS").await;
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    assert_eq!(
        &header[..5],
        &["backend", "user", "caps", "collation", "pool_size"],
        "{stdout}"
    );
    let first: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    assert_eq!(first[4], "2", "{stdout}");

    let out = mariadb_cli(&proxy, "s3cret", "show clients; SHOW LATENCY").await;
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("id\tuser\taddr\tstate\tpinned\tqueries"),
        "{stdout}"
    );
    assert!(stdout.contains("\tapp\t127.0.0.1:"), "{stdout}");
    assert!(
        stdout.contains("queue_wait\t") && stdout.contains("backend_time\t"),
        "{stdout}"
    );

    let out = mariadb_cli(&proxy, "nope", "SHOW POOLS").await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ERROR 1045 (28000)"), "{stderr}");

    let out = mariadb_cli(&proxy, "s3cret", "SHOW TABLES").await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERROR 1064"));

    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Statements of `tag` running on the server right now (the processlist, so other tests
/// sharing the server do not count), and the server's global Threads_running.
async fn running_on_server(direct: &mut Conn, tag: &str) -> (u64, u64) {
    let mine: u64 = direct
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE CONCAT('SELECT SLEEP%', ?, '%')",
            (tag,),
        )
        .await
        .unwrap()
        .unwrap_or(0);
    let (_, threads): (String, u64) = direct
        .query_first("SHOW GLOBAL STATUS LIKE 'Threads_running'")
        .await
        .unwrap()
        .unwrap();
    (mine, threads)
}

/// Max of the samples taken over `window`.
async fn sample_max(direct: &mut Conn, tag: &str, window: Duration) -> (u64, u64) {
    let end = Instant::now() + window;
    let mut max = (0, 0);
    while Instant::now() < end {
        let (mine, threads) = running_on_server(direct, tag).await;
        max = (max.0.max(mine), max.1.max(threads));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    max
}

/// `clients` sessions looping `SELECT SLEEP(secs) /* tag */` until `stop`; each returns its
/// error count.
pub(crate) fn load(
    proxy: &ProxyHandle,
    clients: usize,
    secs: f64,
    tag: &str,
    stop: &Arc<AtomicBool>,
    done: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..clients)
        .map(|_| {
            let (opts, stop, done) = (
                opts(proxy, "app", "secret", None),
                stop.clone(),
                done.clone(),
            );
            let sql = format!("SELECT SLEEP({secs}) /* {tag} */");
            tokio::spawn(async move {
                let mut conn = Conn::new(opts).await.expect("load client connects");
                let mut errors = 0;
                while !stop.load(Ordering::Relaxed) {
                    match conn.query_drop(&sql).await {
                        Ok(()) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            eprintln!("load client error: {e}");
                            errors += 1;
                        }
                    }
                }
                let _ = conn.disconnect().await;
                errors
            })
        })
        .collect()
}

pub(crate) async fn finish(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<u64>>) -> u64 {
    stop.store(true, Ordering::Relaxed);
    let mut errors = 0;
    for t in tasks {
        errors += t.await.expect("load task");
    }
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_pool_size_under_load_moves_threads_running_without_errors() {
    let proxy = start(admin_config(2)).await;
    let mut a = admin(&proxy).await;
    let mut direct = direct(None).await;
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let tasks = load(&proxy, 32, 0.1, "admin_resize", &stop, &done);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (at2, threads2) = sample_max(&mut direct, "admin_resize", Duration::from_secs(1)).await;
    let set = rows(&mut a, "SET pool_size = 8").await;
    assert_eq!(
        (cell(&set[0], "old"), cell(&set[0], "new")),
        (Some("2"), Some("8"))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (at8, threads8) = sample_max(&mut direct, "admin_resize", Duration::from_secs(1)).await;
    a.query_drop("SET pool_size = 2").await.unwrap();
    // Statements already running on the extra slots finish (100 ms) before the pool shrinks.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (back2, _) = sample_max(&mut direct, "admin_resize", Duration::from_secs(1)).await;

    let errors = finish(&stop, tasks).await;
    eprintln!("running at P=2: {at2} (Threads_running {threads2}), P=8: {at8} ({threads8}), back at P=2: {back2}");
    assert_eq!(errors, 0, "no client saw an error");
    assert!(
        (1..=2).contains(&at2),
        "P=2: {at2} statements on the server"
    );
    assert!(
        (6..=8).contains(&at8),
        "P=8: {at8} statements on the server"
    );
    assert!(back2 <= 2, "back at P=2: {back2} statements on the server");
    // Threads_running is server-wide (other tests share the server) but must reflect ours.
    assert!(
        threads8 >= at8 && threads8 > threads2.min(at2 + 1),
        "Threads_running {threads2} -> {threads8}"
    );
    assert_eq!(
        rows(&mut a, "SHOW POOLS").await[0]["pool_size"].as_deref(),
        Some("2")
    );
    assert!(done.load(Ordering::Relaxed) > 0);
    a.disconnect().await.unwrap();
    direct.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_waits_for_running_statements_and_resume_continues_without_errors() {
    let proxy = start(admin_config(4)).await;
    let mut a = admin(&proxy).await;
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let tasks = load(&proxy, 16, 0.05, "admin_pause", &stop, &done);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let paused = rows(&mut a, "PAUSE").await;
    assert_eq!(
        num(&paused[0], "running"),
        0,
        "PAUSE returns once nothing runs: {paused:?}"
    );
    // A client whose answer left sluice just before PAUSE returned may count it a moment
    // later (its task runs on another thread): count from after that settles.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = done.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        done.load(Ordering::Relaxed),
        before,
        "no statement completes while paused"
    );
    assert_eq!(proxy.context().pool.slots().in_use(), 0);
    let waiting = rows(&mut a, "SHOW CLIENTS")
        .await
        .iter()
        .filter(|c| cell(c, "state") == Some("waiting"))
        .count();
    assert_eq!(waiting, 16, "every client waits for RESUME");

    a.query_drop("RESUME").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        done.load(Ordering::Relaxed) > before,
        "statements run again after RESUME"
    );
    let errors = finish(&stop, tasks).await;
    assert_eq!(errors, 0, "PAUSE costs latency, not errors");
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

fn config_file(queue_timeout: &str, listen: &str) -> String {
    server();
    format!(
        "listen = \"{listen}\"\nbackend = \"{}\"\npool_size = 1\nqueue_timeout = \"{queue_timeout}\"\n\
         admin_listen = \"127.0.0.1:0\"\n\n[[users]]\nname = \"app\"\npassword = \"secret\"\n\
         backend_user = \"{APP_USER}\"\nbackend_password = \"{APP_PASSWORD}\"\n\n[[admin_users]]\nname = \"admin\"\npassword = \"s3cret\"\n",
        backend_addr(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_a_new_queue_timeout_and_keeps_running_on_a_broken_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, config_file("10s", "127.0.0.1:0")).unwrap();
    let mut cfg = Config::from_toml_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg.config_path = Some(path.clone());
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;

    // The one slot is held by a long statement, so the next statement must queue.
    let mut holder = connect(&proxy, None).await;
    let ctx = proxy.context().clone();
    let long = tokio::spawn(async move {
        holder.query_drop("DO SLEEP(2)").await.unwrap();
        holder
    });
    assert!(
        eventually(Duration::from_secs(5), || ctx.pool.snapshot().slots_in_use
            == 1)
        .await
    );

    std::fs::write(&path, config_file("300ms", "127.0.0.1:1")).unwrap();
    let changes = rows(&mut a, "RELOAD").await;
    let change = |name: &str| {
        changes
            .iter()
            .find(|c| cell(c, "setting") == Some(name))
            .unwrap_or_else(|| panic!("{name}: {changes:?}"))
    };
    assert_eq!(cell(change("queue_timeout"), "applied"), Some("yes"));
    assert_eq!(cell(change("queue_timeout"), "new"), Some("\"300ms\""));
    assert_eq!(
        cell(change("listen"), "applied"),
        Some("no: needs a restart")
    );

    let mut waiter = connect(&proxy, None).await;
    let t = Instant::now();
    let err = waiter.query_drop("SELECT 1").await.unwrap_err();
    assert_eq!(code_of(&err), Some(9001), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "the new queue_timeout applies: waited {:?}",
        t.elapsed()
    );

    std::fs::write(&path, "pool_size = [broken\n").unwrap();
    let err = a.query_drop("RELOAD").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1105), "{err}");
    assert!(err.to_string().contains("unchanged"), "{err}");
    let config = rows(&mut a, "SHOW CONFIG").await;
    let value = |name: &str| {
        config
            .iter()
            .find(|r| cell(r, "setting") == Some(name))
            .and_then(|r| cell(r, "value"))
            .map(str::to_string)
    };
    assert_eq!(
        value("queue_timeout").as_deref(),
        Some("300ms"),
        "the running config stays"
    );
    assert_eq!(
        value("listen"),
        Some(proxy.context().config().listen.to_string()),
        "restart-only settings keep their running value"
    );
    assert_ne!(value("listen").as_deref(), Some("127.0.0.1:1"));

    let holder = long.await.unwrap();
    assert_eq!(
        waiter.query_first::<u8, _>("SELECT 1").await.unwrap(),
        Some(1),
        "still serving"
    );
    for c in [holder, waiter, a] {
        c.disconnect().await.unwrap();
    }
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_from_the_console_drains_running_statements() {
    let proxy = start(admin_config(2)).await;
    let addr = proxy.local_addr();
    let mut a = admin(&proxy).await;
    let mut busy = connect(&proxy, None).await;
    let running = tokio::spawn(async move {
        let r: Option<u8> = busy.query_first("SELECT 1 + SLEEP(1)").await.unwrap();
        (r, busy)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.query_drop("SHUTDOWN").await.unwrap();
    tokio::time::timeout(Duration::from_secs(1), proxy.wait_shutdown())
        .await
        .expect("the owner sees the request");
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        Conn::new(opts(&proxy, "app", "secret", None)),
    )
    .await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "no new clients after SHUTDOWN ({addr})"
    );
    proxy.shutdown().await;
    let (r, busy) = running.await.unwrap();
    assert_eq!(r, Some(1), "the running statement finished");
    drop(busy);
    drop(a);
}

/// `name{labels}` -> value from Prometheus text, checking every sample line parses.
pub(crate) fn parse_metrics(body: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        assert!(key.starts_with("sluice_"), "{line}");
        out.insert(key.to_string(), value);
    }
    out
}

pub(crate) async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: sluice\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_prometheus_text_that_moves() {
    let proxy = start(admin_config(2)).await;
    let addr = proxy.metrics_addr().expect("metrics on");
    let mut c = connect(&proxy, None).await;
    c.query_drop("SET @pin = 1").await.unwrap();
    for _ in 0..4 {
        c.query_drop("SELECT 1").await.unwrap();
    }
    let mut quitter = connect(&proxy, None).await;
    quitter.query_drop("SELECT 1").await.unwrap();
    quitter.disconnect().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let (head, body) = http_get(addr, "/metrics").await;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    for family in [
        "# TYPE sluice_clients gauge",
        "# TYPE sluice_backends gauge",
        "# TYPE sluice_pinned_sessions gauge",
        "# TYPE sluice_queue_length gauge",
        "# TYPE sluice_statements counter",
        "# TYPE sluice_queue_timeouts counter",
        "# TYPE sluice_client_disconnects counter",
        "# TYPE sluice_backend_disconnects counter",
        "# TYPE sluice_recycles counter",
        "# TYPE sluice_queue_wait_seconds histogram",
        "# TYPE sluice_backend_time_seconds histogram",
    ] {
        assert!(body.contains(family), "{family} missing:\n{body}");
    }
    let m = parse_metrics(&body);
    assert_eq!(m["sluice_statements_total"], 6.0);
    assert_eq!(m["sluice_clients{state=\"idle\"}"], 1.0);
    assert_eq!(m["sluice_pinned_sessions{reason=\"user_variable\"}"], 1.0);
    assert_eq!(m["sluice_pins_total{reason=\"user_variable\"}"], 1.0);
    assert_eq!(m["sluice_client_disconnects_total{reason=\"quit\"}"], 1.0);
    assert_eq!(m["sluice_pool_size"], 2.0);
    assert_eq!(m["sluice_backend_time_seconds_count"], 6.0);
    assert_eq!(m["sluice_backend_time_seconds_bucket{le=\"+Inf\"}"], 6.0);
    assert!(m["sluice_backend_time_seconds_sum"] > 0.0);
    assert!(m.contains_key("sluice_client_sent_bytes_total"));
    assert_eq!(m["sluice_backend_up"], 1.0);
    assert_eq!(
        m["sluice_backend_connect_failures_total{kind=\"refused\"}"],
        0.0
    );

    c.query_drop("SELECT 2").await.unwrap();
    let (_, body) = http_get(addr, "/metrics").await;
    let m2 = parse_metrics(&body);
    assert_eq!(m2["sluice_statements_total"], 7.0, "the counter moved");
    assert_eq!(m2["sluice_queue_wait_seconds_count"], 7.0);

    let (head, _) = http_get(addr, "/").await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// One of each error the console can send, through a real admin connection: the code,
/// SQLSTATE and message each time, and the console still answers afterwards (opensrv panics
/// on codes it does not know; sluice must never hand it one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_error_has_its_code_and_the_console_keeps_answering() {
    let proxy = start(admin_config(2)).await;
    let mut a = admin(&proxy).await;
    let cases: [(&str, u16, &str, &str); 8] = [
        (
            "FROBNICATE",
            1064,
            "42000",
            "unknown admin command \"FROBNICATE\"",
        ),
        (
            "SET pool_size",
            1064,
            "42000",
            "SET needs a setting and a value",
        ),
        ("SET backend = x:1", 1064, "42000", "cannot SET \"backend\""),
        ("KILL abc", 1064, "42000", "\"abc\" is not a client id"),
        (
            "SET pool_size = many",
            1231,
            "42000",
            "invalid value \"many\" for pool_size",
        ),
        (
            "SET max_backend_connections = 1",
            1231,
            "42000",
            "SET max_backend_connections refused, nothing changed",
        ),
        ("RELOAD", 1105, "HY000", "RELOAD needs a config file"),
        ("KILL 4000000", 1094, "HY000", "Unknown thread id: 4000000"),
    ];
    for (cmd, code, state, text) in cases {
        let err = a.query_drop(cmd).await.unwrap_err();
        assert_eq!(code_of(&err), Some(code), "{cmd}: {err}");
        assert_eq!(state_of(&err).as_deref(), Some(state), "{cmd}: {err}");
        assert!(err.to_string().contains(text), "{cmd}: {err}");
        assert_eq!(rows(&mut a, "SHOW VERSION").await.len(), 1, "after {cmd}");
    }
    let err = a.prep("SHOW POOLS").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1295), "prepare: {err}");
    assert_eq!(state_of(&err).as_deref(), Some("HY000"), "prepare: {err}");
    assert!(err.to_string().contains("no prepared statements"), "{err}");
    assert_eq!(
        rows(&mut a, "SHOW VERSION").await.len(),
        1,
        "after a prepare"
    );

    let err = Conn::new(admin_opts(&proxy, "admin", "wrong"))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1045), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("28000"), "{err}");
    assert!(
        err.to_string()
            .contains("Access denied for user 'admin'@'127.0.0.1' (using password: YES)"),
        "{err}"
    );
    // Neither the refused login nor the errors before it cost the open session anything.
    assert_eq!(
        rows(&mut a, "SHOW VERSION").await.len(),
        1,
        "after a refused login"
    );
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}
