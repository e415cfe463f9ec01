//! Real clients through sluice, compared with the same client talking to MariaDB directly:
//! the `mariadb` CLI, mysqlslap, sysbench, and mysql_async's binary protocol,
//! LOCAL INFILE, COM_CHANGE_USER and COM_RESET_CONNECTION (other drivers: `drivers.rs`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn, Row, Value, WhiteListFsHandler};
use sluice::config::UserConfig;
use sluice::ProxyHandle;
use tokio::process::Command;

use crate::harness::*;

/// Where a command-line client connects, and as whom.
struct Endpoint {
    addr: SocketAddr,
    user: String,
    password: String,
}

impl Endpoint {
    fn sluice(proxy: &ProxyHandle) -> Endpoint {
        let (user, password) = login_for(proxy, "app", "secret");
        Endpoint {
            addr: proxy.local_addr(),
            user: user.into(),
            password: password.into(),
        }
    }

    fn direct() -> Endpoint {
        let s = server();
        Endpoint {
            addr: format!("{}:{}", s.host, s.port)
                .parse()
                .expect("test server address"),
            user: APP_USER.into(),
            password: APP_PASSWORD.into(),
        }
    }

    /// `mariadb`/`mysqlslap` connection flags (always TCP, never the server's socket).
    fn cli_args(&self) -> Vec<String> {
        vec![
            "--protocol=TCP".into(),
            format!("--host={}", self.addr.ip()),
            format!("--port={}", self.addr.port()),
            format!("--user={}", self.user),
            format!("--password={}", self.password),
        ]
    }

    fn sysbench_args(&self, db: &str) -> Vec<String> {
        vec![
            format!("--mysql-host={}", self.addr.ip()),
            format!("--mysql-port={}", self.addr.port()),
            format!("--mysql-user={}", self.user),
            format!("--mysql-password={}", self.password),
            format!("--mysql-db={db}"),
        ]
    }
}

async fn run(program: &str, args: &[String], stdin: Option<&Path>) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args).kill_on_drop(true);
    if let Some(path) = stdin {
        cmd.stdin(std::fs::File::open(path).expect("stdin file"));
    }
    cmd.output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The CLI in batch mode: several statements per line, a server-side multi-statement, a
/// procedure with two result sets, `SELECT DATABASE()` before and after `USE`, `source` of a
/// file, an error that `--force` steps over. Output must equal the direct run's byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mariadb_cli_batch_output_matches_direct() {
    fresh_db("t_cli").await;
    let mut d = direct(Some("t_cli")).await;
    d.query_drop("CREATE PROCEDURE two() BEGIN SELECT 1 AS a; SELECT 'b' AS b, NULL AS c; END")
        .await
        .unwrap();
    d.disconnect().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sourced = dir.path().join("sourced.sql");
    std::fs::write(
        &sourced,
        "DROP TABLE IF EXISTS cli_t;\n\
         CREATE TABLE cli_t (id INT PRIMARY KEY, v VARCHAR(20)) CHARSET utf8mb4;\n\
         INSERT INTO cli_t VALUES (1, 'one'), (2, 'zwei'), (3, 'трі'), (4, '😀');\n\
         SELECT * FROM cli_t ORDER BY id;\n",
    )
    .unwrap();
    let script = dir.path().join("script.sql");
    std::fs::write(
        &script,
        format!(
            "SELECT DATABASE() AS no_db;\n\
             SELECT 1 AS one; SELECT 'two' AS two, NULL AS nothing, 2.50 AS dec_val;\n\
             USE t_cli;\n\
             SELECT DATABASE() AS db;\n\
             source {}\n\
             DELIMITER //\n\
             SELECT COUNT(*) AS n FROM cli_t; SELECT MAX(v) AS m FROM cli_t//\n\
             DELIMITER ;\n\
             CALL two();\n\
             SELECT * FROM no_such_table;\n\
             SET @x = 41; SELECT @x + 1 AS x;\n\
             SELECT id, v FROM cli_t WHERE id > 2 ORDER BY id DESC;\n",
            sourced.display()
        ),
    )
    .unwrap();
    let proxy = start(config(2)).await;
    let mut outputs = Vec::new();
    for ep in [Endpoint::direct(), Endpoint::sluice(&proxy)] {
        let mut args = ep.cli_args();
        args.extend([
            "--batch".into(),
            "--force".into(),
            "--default-character-set=utf8mb4".into(),
        ]);
        let out = run("mariadb", &args, Some(&script)).await;
        outputs.push((text(&out.stdout), text(&out.stderr)));
    }
    let (direct_out, direct_err) = &outputs[0];
    let (sluice_out, sluice_err) = &outputs[1];
    assert!(
        direct_out.starts_with("no_db\nNULL\none\n1\n"),
        "direct run: {direct_out}\n{direct_err}"
    );
    assert!(
        direct_err.contains("1146"),
        "the bad statement fails directly too: {direct_err}"
    );
    assert_eq!(
        sluice_out, direct_out,
        "stdout differs (stderr through sluice: {sluice_err})"
    );
    assert_eq!(sluice_err, direct_err);
    assert!(sluice_out.contains("db\nt_cli\n") && sluice_out.contains("4\t😀\n3\tтрі\n"));
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysqlslap_with_50_concurrent_clients_has_no_errors() {
    let proxy = start(config(4)).await;
    let mut args = Endpoint::sluice(&proxy).cli_args();
    args.extend(
        [
            "--concurrency=50",
            "--iterations=2",
            "--auto-generate-sql",
            "--auto-generate-sql-load-type=mixed",
            "--number-of-queries=1000",
            "--create-schema=t_slap",
        ]
        .map(String::from),
    );
    let out = run("mysqlslap", &args, None).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "mysqlslap failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("Number of clients running queries: 50"),
        "{stdout}"
    );
    assert!(!stderr.to_lowercase().contains("error"), "{stderr}");
    proxy.shutdown().await;
}

/// sysbench's MySQL driver uses server-side prepared statements: 16 threads, each pinned to
/// its backend, queue for 4 execution slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_oltp_read_only_runs_with_zero_errors() {
    fresh_db("t_sysbench").await;
    let mut cfg = config(4);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(32);
    let proxy = start(cfg).await;
    let ep = Endpoint::sluice(&proxy);
    let common = |phase: &str, extra: &[&str]| {
        let mut a = vec!["oltp_read_only".to_string()];
        a.extend(ep.sysbench_args("t_sysbench"));
        a.extend(["--tables=2", "--table-size=2000"].map(String::from));
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(phase.to_string());
        a
    };
    let out = run("sysbench", &common("prepare", &[]), None).await;
    assert!(
        out.status.success(),
        "prepare: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(
        "sysbench",
        &common("run", &["--threads=16", "--time=4", "--db-ps-mode=auto"]),
        None,
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "run: {stdout}\n{}", text(&out.stderr));
    let number = |label: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no '{label}' in {stdout}"));
        line[line.find(':').expect("colon") + 1..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a number")
    };
    assert!(number("transactions:") > 0, "{stdout}");
    assert_eq!(number("ignored errors:"), 0, "{stdout}");
    assert_eq!(number("reconnects:"), 0, "{stdout}");
    let out = run("sysbench", &common("cleanup", &[]), None).await;
    assert!(
        out.status.success(),
        "cleanup: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let snap = proxy.context().pool.snapshot();
    assert!(
        snap.open <= 32,
        "backends capped by max_backend_connections: {}",
        snap.open
    );
    proxy.shutdown().await;
}

/// Binary protocol: several prepared statements with typed parameters and results (NULLs,
/// extremes, utf8mb4, dates, decimals, blobs), compared value by value with a direct run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mysql_async_binary_protocol_matches_direct() {
    fresh_db("t_binary").await;
    let mut d = direct(Some("t_binary")).await;
    d.query_drop(
        "CREATE TABLE types (id INT PRIMARY KEY, i BIGINT, u BIGINT UNSIGNED, f DOUBLE, s VARCHAR(100), \
         dt DATETIME(6), dec_val DECIMAL(20,6), b BLOB, t TIME) CHARSET utf8mb4",
    )
    .await
    .unwrap();
    let proxy = start(config(2)).await;
    let mut c = connect(&proxy, Some("t_binary")).await;
    let insert = "INSERT INTO types VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
    let rows: Vec<Vec<Value>> = vec![
        vec![
            1.into(),
            i64::MIN.into(),
            u64::MAX.into(),
            f64::MAX.into(),
            "𝄞 ünï 中文".into(),
            "2024-02-29 23:59:59.999999".into(),
            "-99999999999999.999999".into(),
            vec![0u8, 255, 0, 10].into(),
            "-838:59:59".into(),
        ],
        vec![
            2.into(),
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
        ],
        vec![
            3.into(),
            0.into(),
            0u64.into(),
            (-0.5f64).into(),
            "".into(),
            "1000-01-01 00:00:00".into(),
            "0.000001".into(),
            Vec::<u8>::new().into(),
            "00:00:00".into(),
        ],
    ];
    for r in &rows {
        c.exec_drop(insert, r.clone()).await.unwrap();
    }
    c.exec_batch(
        "INSERT INTO types (id, i, s) VALUES (?, ?, ?)",
        (10..40).map(|i| (i, i * 1000, format!("row {i}"))),
    )
    .await
    .unwrap();
    let queries: [(&str, Vec<Value>); 4] = [
        (
            "SELECT * FROM types WHERE id < ? ORDER BY id",
            vec![10.into()],
        ),
        (
            "SELECT id, i, s FROM types WHERE id BETWEEN ? AND ? ORDER BY id",
            vec![12.into(), 30.into()],
        ),
        (
            "SELECT COUNT(*), SUM(i), MAX(s), ? FROM types",
            vec!["param ✓".into()],
        ),
        (
            "SELECT ? + 1, ?, ?, CAST(? AS DATE)",
            vec![
                41.into(),
                Value::NULL,
                vec![1u8, 2, 3].into(),
                "2000-01-02".into(),
            ],
        ),
    ];
    for (sql, params) in &queries {
        let via_sluice: Vec<Row> = c.exec(*sql, params.clone()).await.unwrap();
        let via_direct: Vec<Row> = d.exec(*sql, params.clone()).await.unwrap();
        let values = |rows: Vec<Row>| rows.into_iter().map(Row::unwrap).collect::<Vec<_>>();
        let (s, dv) = (values(via_sluice), values(via_direct));
        assert!(!s.is_empty(), "{sql}");
        assert_eq!(s, dv, "{sql}");
    }
    // The same prepared statement many times, interleaved with text queries.
    let stmt = c.prep("SELECT s FROM types WHERE id = ?").await.unwrap();
    for i in 10..40 {
        let s: Option<String> = c.exec_first(&stmt, (i,)).await.unwrap();
        assert_eq!(s.as_deref(), Some(format!("row {i}").as_str()));
        let n: u32 = c
            .query_first(format!("SELECT {i} * 2"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, i * 2);
    }
    c.close(stmt).await.unwrap();
    c.disconnect().await.unwrap();
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_local_infile_goes_through() {
    fresh_db("t_infile").await;
    let mut d = direct(Some("t_infile")).await;
    d.query_drop("CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(40)) CHARSET utf8mb4")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    // ~200 KB: several packets of file data.
    let body: String = (1..=5000)
        .map(|i| format!("{i},name number {i} ✓\n"))
        .collect();
    std::fs::write(&file, &body).unwrap();
    let proxy = start(config(2)).await;
    let opts = opts_at(proxy.local_addr(), "app", "secret", Some("t_infile"))
        .local_infile_handler(Some(WhiteListFsHandler::new(&[file.clone()][..])));
    let mut c = Conn::new(opts).await.unwrap();
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ','",
        file.display()
    );
    // A multi-row INSERT's OK carries an info string too.
    c.query_drop("INSERT INTO loaded VALUES (-1, 'a'), (-2, 'b')")
        .await
        .unwrap();
    assert_eq!(
        (c.affected_rows(), c.info().into_owned()),
        (2, "Records: 2  Duplicates: 0  Warnings: 0".to_string())
    );
    c.query_drop("DELETE FROM loaded").await.unwrap();
    c.query_drop(&sql).await.unwrap();
    let through_sluice = (c.affected_rows(), c.info().into_owned());
    // The same load directly (into a copy) reports the same OK.
    d.query_drop("CREATE TABLE loaded_direct LIKE loaded")
        .await
        .unwrap();
    let mut dl = Conn::new(
        mysql_async::OptsBuilder::from_opts(d.opts().clone())
            .local_infile_handler(Some(WhiteListFsHandler::new(&[file.clone()][..]))),
    )
    .await
    .unwrap();
    dl.query_drop(sql.replace("TABLE loaded ", "TABLE loaded_direct "))
        .await
        .unwrap();
    assert_eq!(through_sluice, (dl.affected_rows(), dl.info().into_owned()));
    dl.disconnect().await.unwrap();
    let (n, max): (u64, String) = c
        .query_first("SELECT COUNT(*), MAX(name) FROM loaded")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((n, max.as_str()), (5000, "name number 999 ✓"));
    let n: u64 = c
        .query_first("SELECT COUNT(*) FROM loaded")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 5000, "the session is in sync after the file transfer");
    c.disconnect().await.unwrap();
    let n: u64 = d
        .query_first("SELECT COUNT(*) FROM loaded")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 5000);
    d.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_verifies_the_password_and_starts_a_fresh_session() {
    let mut cfg = config(2);
    let mut second = UserConfig::new("app2", "secret2");
    second.backend_user = cfg.users[0].backend_user.clone();
    second.backend_password = cfg.users[0].backend_password.clone();
    cfg.users.push(second);
    let proxy = start(cfg).await;
    let mut c = connect(&proxy, None).await;
    c.query_drop("SET @before = 'old session'").await.unwrap();
    c.change_user(
        ChangeUserOpts::new()
            .with_user(Some("app2".into()))
            .with_pass(Some("secret2".into())),
    )
    .await
    .unwrap();
    let v: Option<Option<String>> = c.query_first("SELECT @before").await.unwrap();
    assert_eq!(v, Some(None), "COM_CHANGE_USER starts a fresh session");
    assert_eq!(c.query_first::<u8, _>("SELECT 5").await.unwrap(), Some(5));
    // With a database.
    c.change_user(
        ChangeUserOpts::new()
            .with_user(Some("app".into()))
            .with_pass(Some("secret".into()))
            .with_db_name(Some("information_schema".into())),
    )
    .await
    .unwrap();
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap().unwrap();
    assert_eq!(db.as_deref(), Some("information_schema"));
    // A wrong password, and an unknown user: 1045, as MySQL.
    for (user, pass) in [("app", "wrong"), ("nobody", "secret")] {
        let mut c = connect(&proxy, None).await;
        let err = c
            .change_user(
                ChangeUserOpts::new()
                    .with_user(Some(user.into()))
                    .with_pass(Some(pass.into())),
            )
            .await
            .unwrap_err();
        assert_eq!(code_of(&err), Some(1045), "{user}: {err}");
        assert_eq!(state_of(&err).as_deref(), Some("28000"));
    }
    c.disconnect().await.unwrap();
    let mut fresh = connect(&proxy, None).await;
    assert_eq!(
        fresh.query_first::<u8, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
    fresh.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn reset_connection_clears_user_variables_and_session_state() {
    let proxy = start(config(2)).await;
    let mut c = connect(&proxy, None).await;
    let default_tz: String = c.query_first("SELECT @@time_zone").await.unwrap().unwrap();
    c.query_drop("SET @x = 5, time_zone = '+03:00'")
        .await
        .unwrap();
    c.query_drop("CREATE TEMPORARY TABLE tmp_reset (a INT)")
        .await
        .unwrap_or_else(|e| {
            // No default database: a temporary table needs one.
            assert_eq!(code_of(&e), Some(1046), "{e}");
        });
    let (x, tz): (Option<i64>, String) = c
        .query_first("SELECT @x, @@time_zone")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((x, tz.as_str()), (Some(5), "+03:00"));
    assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION was used");
    let (x, tz): (Option<i64>, String) = c
        .query_first("SELECT @x, @@time_zone")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((x, tz), (None, default_tz));
    // The session goes on normally (and can pin again).
    c.query_drop("SET @y = 6").await.unwrap();
    assert_eq!(c.query_first::<i64, _>("SELECT @y").await.unwrap(), Some(6));
    c.disconnect().await.unwrap();
    proxy.shutdown().await;
}
