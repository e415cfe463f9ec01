//! Digests and query rules against an in-process sluice and the real MariaDB, through the
//! statement path: the console's SHOW DIGESTS / RESET DIGESTS / SHOW RULES / RELOAD RULES,
//! /metrics, the normaliser's shapes beside performance_schema's own digests, and a rule's
//! timeout as the server enforces it (or a KILL at the deadline, where it cannot).
//! More of the path (sysbench beside performance_schema, eviction at scale, prepared
//! statements, blocks, gates, per-user limits): `steer_path`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::Conn;
use sluice::classify::{digest, Quoting};
use sluice::config::UserConfig;
use sluice::{Config, ProxyHandle};

use crate::admin::{admin, admin_config, cell, http_get, num, parse_metrics, rows};
use crate::harness::*;

/// The name SHOW DIGESTS shows for the test's `app` login.
fn app_user(proxy: &ProxyHandle) -> &'static str {
    login_for(proxy, "app", "secret").0
}

/// SHOW STATS as `stat` -> `value`.
async fn stats(a: &mut Conn) -> HashMap<String, u64> {
    rows(a, "SHOW STATS")
        .await
        .iter()
        .map(|r| (cell(r, "stat").unwrap().to_string(), num(r, "value")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_digests_orders_limits_and_resets() {
    fresh_db("t_steer").await;
    let mut cfg = admin_config(2);
    let mut report = UserConfig::new("report", "report-pw");
    report.backend_user = Some(APP_USER.into());
    report.backend_password = Some(sluice::config::Secret::new(APP_PASSWORD.into()));
    cfg.users.push(report);
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let empty = rows(&mut a, "SHOW DIGESTS").await;
    assert!(empty.is_empty(), "{empty:?}");

    let mut c = connect(&proxy, Some("t_steer")).await;
    let mut r = Conn::new(opts_at(
        proxy.local_addr(),
        "report",
        "report-pw",
        Some("t_steer"),
    ))
    .await
    .expect("report logs in");
    c.query_drop("CREATE TABLE sbtest1 (id INT PRIMARY KEY, c VARCHAR(20))")
        .await
        .unwrap();
    c.query_drop("INSERT INTO sbtest1 VALUES (0,'a'),(1,'b'),(2,'c'),(3,'d'),(4,'e')")
        .await
        .unwrap();
    a.query_drop("RESET DIGESTS").await.unwrap();
    for id in 0..5 {
        c.query_drop(format!("SELECT c FROM sbtest1 WHERE id={id}"))
            .await
            .unwrap();
    }
    c.query_drop("SELECT SLEEP(0.3)").await.unwrap();
    r.query_drop("SELECT * FROM sbtest1 WHERE id IN (1,2,3)")
        .await
        .unwrap();
    let all = rows(&mut a, "SHOW DIGESTS").await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(
        cell(&all[0], "digest_text"),
        Some("SELECT SLEEP(?)"),
        "total time first"
    );
    let point = all
        .iter()
        .find(|r| cell(r, "digest_text") == Some("SELECT c FROM sbtest1 WHERE id = ?"))
        .expect("the point select's row");
    assert_eq!((num(point, "count"), num(point, "rows_sent")), (5, 5));
    assert_eq!(num(point, "errors"), 0);
    assert_eq!(cell(point, "user"), Some(app_user(&proxy)));
    assert_eq!(cell(point, "schema"), Some("t_steer"));
    assert_eq!(cell(point, "server"), Some("0"));
    // The total is the time queued for a slot and the time on the server (each rounded
    // to a microsecond per statement).
    let (total, queued, on_server) = (
        num(point, "total_time_us"),
        num(point, "queued_us"),
        num(point, "server_us"),
    );
    assert!(on_server > 0, "{point:?}");
    assert!(total.abs_diff(queued + on_server) <= 5, "{point:?}");
    assert!(num(point, "last_seen") >= num(point, "first_seen"));
    let id = cell(point, "digest").unwrap();
    assert!(id.starts_with("0x") && id.len() == 18, "{id}");
    let ours = digest(b"SELECT c FROM sbtest1 WHERE id=0", Quoting::Backslash).id;
    assert_eq!(id, ours.to_string(), "the id of the normalised text");
    let sleep = &all[0];
    assert!(num(sleep, "server_us") >= 300_000, "{sleep:?}");
    let listed = all
        .iter()
        .find(|r| cell(r, "user") == Some("report"))
        .expect("report's row");
    assert_eq!(
        cell(listed, "digest_text"),
        Some("SELECT * FROM sbtest1 WHERE id IN (?+)")
    );
    assert_eq!(num(listed, "rows_sent"), 3);

    let by_count = rows(&mut a, "show digests order by count limit 1").await;
    assert_eq!(by_count.len(), 1);
    assert_eq!(cell(&by_count[0], "digest"), Some(id));
    let err = a
        .query_drop("SHOW DIGESTS ORDER BY name")
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1064), "{err}");
    assert!(
        err.to_string().contains("total_time|count|p99|queued"),
        "{err}"
    );

    a.query_drop("RESET DIGESTS").await.unwrap();
    assert!(rows(&mut a, "SHOW DIGESTS").await.is_empty());
    let stats = stats(&mut a).await;
    assert_eq!(stats.get("digests"), Some(&0));
    assert_eq!(stats.get("digests_evicted"), Some(&0));
    drop((c, r));
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_digest_table_evicts_into_the_overflow_row() {
    let mut cfg = admin_config(2);
    cfg.digest_table_size = 3;
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let mut c = connect(&proxy, None).await;
    // What the client's login ran is gone, its evictions counted already.
    a.query_drop("RESET DIGESTS").await.unwrap();
    let before = stats(&mut a).await["digests_evicted"];
    for i in 0..10 {
        c.query_drop(format!("SELECT {i} AS c_{i}")).await.unwrap();
    }
    let all = rows(&mut a, "SHOW DIGESTS").await;
    assert_eq!(all.len(), 4, "3 rows and the overflow row: {all:?}");
    let overflow = all.last().unwrap();
    assert_eq!(cell(overflow, "digest"), None);
    assert_eq!(num(overflow, "count"), 7);
    assert_eq!(stats(&mut a).await["digests_evicted"] - before, 7);
    drop(c);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

fn rules_file(rules: &str) -> String {
    server();
    format!(
        "backend = \"{}\"\nlisten = \"127.0.0.1:0\"\npool_size = 2\nadmin_listen = \"127.0.0.1:0\"\n\
         metrics_listen = \"127.0.0.1:0\"\n\n[[users]]\nname = \"app\"\npassword = \"secret\"\n\
         backend_user = \"{APP_USER}\"\nbackend_password = \"{APP_PASSWORD}\"\n\n\
         [[admin_users]]\nname = \"admin\"\npassword = \"s3cret\"\n{rules}",
        backend_addr(),
    )
}

const TWO_RULES: &str = "
[[rules]]
name = \"no drops\"
match_digest = \"(?i)^drop table\"
error = \"DROP TABLE is not allowed through sluice\"

[[rules]]
name = \"slow report\"
user = \"report\"
timeout = \"1s\"
max_concurrency = 2
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_rules_lists_the_rules_and_a_broken_reload_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, rules_file(TWO_RULES)).unwrap();
    let mut cfg = Config::from_toml_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg.config_path = Some(path.clone());
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let listed = rows(&mut a, "SHOW RULES").await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(cell(&listed[0], "name"), Some("no drops"));
    assert_eq!(
        cell(&listed[0], "match"),
        Some("match_digest=/(?i)^drop table/")
    );
    assert!(cell(&listed[0], "action").unwrap().starts_with("error="));
    assert_eq!(
        cell(&listed[1], "action"),
        Some("timeout=1s max_concurrency=2")
    );
    for r in &listed {
        for counter in ["hits", "blocked", "timed_out", "throttled", "overridden"] {
            assert_eq!(num(r, counter), 0, "{counter}: {r:?}");
        }
    }
    assert_eq!(num(&listed[1], "running"), 0);
    assert_eq!(cell(&listed[0], "running"), None, "no gate");

    // Hits counted now stay through reloads that keep the rule.
    let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    for _ in 0..3 {
        let err = c.query_drop("DROP TABLE t_nothing.t").await.unwrap_err();
        assert_eq!(code_of(&err), Some(1148), "{err}");
    }
    drop(c);

    let broken = TWO_RULES.replace("(?i)^drop table", "(unclosed");
    std::fs::write(&path, rules_file(&broken)).unwrap();
    for cmd in ["RELOAD RULES", "RELOAD"] {
        let err = a.query_drop(cmd).await.unwrap_err();
        assert_eq!(code_of(&err), Some(1105), "{cmd}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("rules[0].match_digest") && text.contains("unchanged"),
            "{cmd}: {text}"
        );
    }
    let kept = rows(&mut a, "SHOW RULES").await;
    assert_eq!(kept.len(), 2);
    assert_eq!(
        cell(&kept[0], "match"),
        Some("match_digest=/(?i)^drop table/")
    );
    assert_eq!((num(&kept[0], "hits"), num(&kept[0], "blocked")), (3, 3));

    let three =
        format!("{TWO_RULES}\n[[rules]]\nuser = \"batch\"\nroute = \"writer\"\nlog = 0.5\n");
    std::fs::write(&path, rules_file(&three)).unwrap();
    let reloaded = rows(&mut a, "RELOAD RULES").await;
    assert_eq!(reloaded.len(), 3, "{reloaded:?}");
    assert_eq!(
        num(&reloaded[0], "hits"),
        3,
        "an unchanged rule keeps its counters"
    );
    assert_eq!(cell(&reloaded[2], "action"), Some("route=writer log=0.5"));
    assert_eq!(cell(&reloaded[2], "name"), None);

    let (_, body) = http_get(proxy.metrics_addr().unwrap(), "/metrics").await;
    let m = parse_metrics(&body);
    assert_eq!(
        m.get("sluice_rule_hits_total{rule=\"0\",name=\"no drops\"}"),
        Some(&3.0),
        "{body}"
    );
    assert_eq!(
        m.get("sluice_rule_events_total{rule=\"0\",name=\"no drops\",event=\"blocked\"}"),
        Some(&3.0)
    );
    assert_eq!(
        m.get("sluice_rule_hits_total{rule=\"1\",name=\"slow report\"}"),
        Some(&0.0)
    );
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_only_the_top_digests_by_total_time() {
    fresh_db("t_steer_top").await;
    let mut cfg = admin_config(2);
    cfg.metrics_digest_top = 5;
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let mut c = connect(&proxy, Some("t_steer_top")).await;
    a.query_drop("RESET DIGESTS").await.unwrap();
    // Five shapes that take time on the server, 25 that take none to speak of.
    for i in 1..=5 {
        c.query_drop(format!("SELECT SLEEP(0.1) AS slow_{i}"))
            .await
            .unwrap();
    }
    for i in 1..=25 {
        c.query_drop(format!("SELECT {i} AS quick_{i}"))
            .await
            .unwrap();
    }
    let (_, body) = http_get(proxy.metrics_addr().unwrap(), "/metrics").await;
    let m = parse_metrics(&body);
    let series = |family: &str| m.keys().filter(|k| k.starts_with(family)).count();
    assert_eq!(series("sluice_digest_statements_total{"), 5, "{body}");
    assert_eq!(series("sluice_digest_time_seconds_total{"), 5);
    assert_eq!(series("sluice_digest_info{"), 5);
    assert_eq!(m.get("sluice_digests"), Some(&30.0));
    assert_eq!(m.get("sluice_digests_evicted_total"), Some(&0.0));
    let user = app_user(&proxy);
    for i in 1..=5 {
        let slow = digest(
            format!("SELECT SLEEP(0.1) AS slow_{i}").as_bytes(),
            Quoting::Backslash,
        )
        .id;
        let key = format!(
            "sluice_digest_statements_total{{digest=\"{slow}\",user=\"{user}\",schema=\"t_steer_top\",server=\"0\"}}"
        );
        assert_eq!(m.get(&key), Some(&1.0), "{body}");
        assert!(
            body.contains(&format!(
                "digest=\"{slow}\",digest_text=\"SELECT SLEEP(?) AS slow_{i}\""
            )),
            "{body}"
        );
    }
    drop(c);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// Statements in groups of one shape each (as an application writes them: one spelling per
/// statement in the code, literals varying). The normaliser must group them exactly as
/// performance_schema does, except for the differences listed in `DIFFERENT`.
const SHAPES: &[&[&str]] = &[
    &["SELECT c FROM t_ps WHERE id=5012", "SELECT c FROM t_ps WHERE id = 7", "SELECT  c\nFROM t_ps WHERE id=3"],
    &["SELECT c FROM t_ps WHERE id BETWEEN 1 AND 100", "SELECT c FROM t_ps WHERE id BETWEEN 50 AND 149"],
    &["SELECT SUM(k) FROM t_ps WHERE id BETWEEN 1 AND 100", "SELECT SUM(k) FROM t_ps WHERE id BETWEEN 9 AND 10"],
    &["SELECT DISTINCT c FROM t_ps WHERE id BETWEEN 1 AND 100 ORDER BY c"],
    &["UPDATE t_ps SET k=k+1 WHERE id=5", "UPDATE t_ps SET k=k+12 WHERE id=9"],
    &["UPDATE t_ps SET c='abc' WHERE id=6", "UPDATE t_ps SET c='it''s \\' here' WHERE id=60"],
    &["DELETE FROM t_ps WHERE id=9", "DELETE FROM t_ps WHERE id=10000"],
    &["INSERT INTO t_ps (id, k, c, pad) VALUES (9, 1, 'x', 'y')", "INSERT INTO t_ps (id, k, c, pad) VALUES (19, 2, 'xx', 'yy')"],
    &[
        "INSERT INTO t_ps (id, k, c, pad) VALUES (10, 1, 'x', 'y'), (11, 2, 'z', 'w')",
        "INSERT INTO t_ps (id, k, c, pad) VALUES (12, 1, 'x', 'y'), (13, 2, 'z', 'w'), (14, 3, 'a', 'b')",
    ],
    &["SELECT * FROM t_ps WHERE id IN (1,2,3)", "SELECT * FROM t_ps WHERE id IN (4,5,6,7,8,9)"],
    &["SELECT * FROM t_ps WHERE (id, k) IN ((1,2),(3,4))", "SELECT * FROM t_ps WHERE (id, k) IN ((5,6),(7,8),(9,10))"],
    &["SELECT /* a comment */ c FROM t_ps -- another\n WHERE c LIKE 'a%' LIMIT 10", "SELECT c FROM t_ps WHERE c LIKE 'b%' LIMIT 20"],
    &["SELECT COUNT(*) FROM t_ps"],
    &["SELECT `c` FROM `t_ps` WHERE `id`=1", "SELECT `c` FROM `t_ps` WHERE `id`=2"],
    &["SELECT c FROM t_ps WHERE c IS NULL", "SELECT c FROM t_ps WHERE c IS NULL"],
    &["SELECT c FROM t_ps WHERE id >= 5 AND id != 7", "SELECT c FROM t_ps WHERE id >= 9 AND id != 1"],
    &["SELECT /*!40001 SQL_NO_CACHE */ c FROM t_ps WHERE id = 1", "SELECT /*!40001 SQL_NO_CACHE */ c FROM t_ps WHERE id = 2"],
    &["SELECT c FROM t_ps WHERE id = 1.5e3 OR id = .5 OR id = 0x1F", "SELECT c FROM t_ps WHERE id = 2 OR id = 3 OR id = 4"],
    &["SELECT * FROM t_ps WHERE id IN (SELECT id FROM t_ps WHERE k=1)", "SELECT * FROM t_ps WHERE id IN (SELECT id FROM t_ps WHERE k=99)"],
];

/// Pairs where sluice and performance_schema deliberately differ, with which groups.
const DIFFERENT: &[(&str, &str, &str)] = &[
    // One IN list shape whatever its length (performance_schema: `(?)` for one value).
    (
        "SELECT * FROM t_ps WHERE id IN (1)",
        "SELECT * FROM t_ps WHERE id IN (1,2,3)",
        "sluice merges",
    ),
    // Keyword case is kept (performance_schema upper-cases tokens).
    (
        "select c from t_ps where id=1",
        "SELECT c FROM t_ps WHERE id=1",
        "sluice splits",
    ),
    // A list of values outside IN / VALUES keeps its length (performance_schema: `?, ...`).
    (
        "SELECT 1, 2 FROM t_ps",
        "SELECT 1, 2, 3 FROM t_ps",
        "sluice splits",
    ),
    // Quoting is kept (performance_schema quotes every identifier).
    (
        "SELECT `c` FROM t_ps",
        "SELECT c FROM t_ps",
        "sluice splits",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_normalisers_shapes_match_performance_schemas_digests() {
    let server = private_server_with(vec![
        "--performance-schema=ON".into(),
        // The history table is filled only below a current-events consumer.
        "--performance-schema-consumer-events-statements-current=ON".into(),
        "--performance-schema-consumer-events-statements-history=ON".into(),
    ])
    .await;
    let bench = opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    );
    let mut setup = Conn::new(bench)
        .await
        .expect("privileged connection (performance_schema needs it)");
    for sql in [
        "CREATE DATABASE IF NOT EXISTS t_ps",
        "CREATE TABLE IF NOT EXISTS t_ps.t_ps (id INT PRIMARY KEY, k INT, c VARCHAR(100), pad VARCHAR(100))",
        "USE t_ps",
    ] {
        setup.query_drop(sql).await.unwrap();
    }
    let thread: u64 = setup
        .query_first("SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()")
        .await
        .unwrap()
        .expect("performance_schema is on");
    let ours = |sql: &str| digest(sql.as_bytes(), Quoting::Backslash);
    let mut seen: Vec<(String, String, sluice::classify::Digest, usize)> = Vec::new();
    for (group, statements) in SHAPES.iter().enumerate() {
        for sql in *statements {
            let (theirs, their_text) = ps_digest(&mut setup, thread, sql).await;
            seen.push((sql.to_string(), theirs, ours(sql), group));
            println!(
                "{:<60} | {their_text}",
                String::from_utf8_lossy(ours(sql).text()),
            );
        }
    }
    for (a, a_ps, a_ours, ga) in &seen {
        for (b, b_ps, b_ours, gb) in &seen {
            let same_ps = a_ps == b_ps;
            let same_ours = a_ours.id == b_ours.id;
            assert_eq!(
                same_ps,
                ga == gb,
                "performance_schema groups {a:?} and {b:?} otherwise than the table says"
            );
            assert_eq!(
                same_ours, same_ps,
                "sluice groups {a:?} and {b:?} otherwise than performance_schema"
            );
        }
    }
    for (a, b, how) in DIFFERENT {
        let (ps_a, _) = ps_digest(&mut setup, thread, a).await;
        let (ps_b, _) = ps_digest(&mut setup, thread, b).await;
        let same_ours = ours(a).id == ours(b).id;
        match *how {
            "sluice merges" => assert!(same_ours && ps_a != ps_b, "{a} / {b}"),
            _ => assert!(!same_ours && ps_a == ps_b, "{a} / {b}"),
        }
    }
    drop(setup);
}

/// Runs `sql` and reads performance_schema's digest and digest text of it (the thread's
/// last finished statement; the reading query is a text one, so nothing comes between).
async fn ps_digest(c: &mut Conn, thread: u64, sql: &str) -> (String, String) {
    let _ = c.query_drop(sql).await;
    c.query_first(format!(
        "SELECT DIGEST, DIGEST_TEXT FROM performance_schema.events_statements_history \
         WHERE THREAD_ID = {thread} ORDER BY EVENT_ID DESC LIMIT 1"
    ))
    .await
    .unwrap()
    .expect("the statement's history row")
}

const TIMEOUT_RULE: &str = "
[[rules]]
name = \"one second\"
match_digest = \"SLEEP\\\\(\"
timeout = \"1s\"
";

/// Statements running on the server whose text contains `what`, as the application account
/// sees them (sluice's backends log in as that account).
async fn running(watcher: &mut Conn, what: &str) -> u64 {
    watcher
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{what}%' \
             AND ID <> CONNECTION_ID()"
        ))
        .await
        .unwrap()
        .unwrap()
}

/// A rule's 1 s timeout on `SELECT SLEEP(5)`: as a query, the server ends it (MariaDB's
/// `SET STATEMENT max_statement_time=1 FOR`); as a prepared statement's execution, whose
/// text sluice cannot add to, a KILL QUERY at the deadline does, and the client gets the
/// server's own timeout error all the same. Either way its thread leaves PROCESSLIST within
/// 1.5 s and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_timeout_is_enforced_by_the_server() {
    let proxy = start(Config::from_toml_str(&rules_file(TIMEOUT_RULE)).unwrap()).await;
    let mut c = Conn::new(opts_at(proxy.local_addr(), "app", "secret", None))
        .await
        .unwrap();
    let mut watcher = direct(None).await;
    for prepared in [false, true] {
        let started = Instant::now();
        let outcome = if prepared {
            c.exec_drop("SELECT SLEEP(5)", ()).await
        } else {
            c.query_drop("SELECT SLEEP(5)").await
        };
        let took = started.elapsed();
        let err = outcome.expect_err("the deadline ends it");
        assert_eq!(code_of(&err), Some(1969), "prepared {prepared}: {err}");
        assert!(
            err.to_string().contains("max_statement_time exceeded"),
            "{err}"
        );
        assert!(took < Duration::from_millis(1500), "ended after {took:?}");
        while running(&mut watcher, "SLEEP(5)").await > 0 {
            assert!(
                started.elapsed() < Duration::from_millis(1500),
                "prepared {prepared}: still in PROCESSLIST"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let value: Option<u8> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(value, Some(1), "the connection goes on");
    }
    // A statement that ends in time is not touched.
    let slept: Option<u8> = c.query_first("SELECT SLEEP(0.1)").await.unwrap();
    assert_eq!(slept, Some(0));
    let mut a = admin(&proxy).await;
    let listed = rows(&mut a, "SHOW RULES").await;
    assert_eq!(
        (num(&listed[0], "hits"), num(&listed[0], "timed_out")),
        (3, 2)
    );
    drop(c);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("local addr").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_with_a_broken_rule_keeps_the_rules_and_logs_why() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    let (listen, admin_port) = (free_port(), free_port());
    let file = |rules: &str| {
        let f = rules_file(rules)
            .replace(
                "admin_listen = \"127.0.0.1:0\"",
                &format!("admin_listen = \"127.0.0.1:{admin_port}\""),
            )
            .replace("metrics_listen = \"127.0.0.1:0\"\n", "");
        f.replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"127.0.0.1:{listen}\""),
        )
    };
    std::fs::write(&path, file(TWO_RULES)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--config")
        .arg(&path)
        .env_clear()
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the sluice binary starts");
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], admin_port).into();
    let admin_opts = opts_at(addr, "admin", "s3cret", None);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut a = loop {
        match Conn::new(admin_opts.clone()).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the admin console does not answer: {e}"),
        }
    };
    assert_eq!(rows(&mut a, "SHOW RULES").await.len(), 2);
    std::fs::write(
        &path,
        file(&TWO_RULES.replace("(?i)^drop table", "(unclosed")),
    )
    .unwrap();
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kept = rows(&mut a, "SHOW RULES").await;
    assert_eq!(kept.len(), 2);
    assert_eq!(
        cell(&kept[0], "match"),
        Some("match_digest=/(?i)^drop table/")
    );
    drop(a);
    let _ = child.kill();
    let _ = child.wait();
    // The binary logs to stdout.
    let mut log = String::new();
    if let Some(mut out) = child.stdout.take() {
        use std::io::Read;
        let _ = out.read_to_string(&mut log);
    }
    assert!(
        log.contains("SIGHUP") && log.contains("rules[0].match_digest"),
        "the log says why: {log}"
    );
}
