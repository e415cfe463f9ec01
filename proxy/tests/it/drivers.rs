//! Real drivers (mysql_async; PyMySQL, mysqlclient, mysql-connector-python pure and C
//! extension, node mysql2 from the registries; PHP's PDO and mysqli and MariaDB Connector/J
//! from Debian) run their own prepared-statement, session-variable and identity checks once
//! directly and once through sluice at P=4, while other clients keep its backends busy; each
//! prints a canonical transcript and the two must be equal line for line. Connection ids
//! differ between the two runs, so a transcript prints whether CONNECTION_ID() is the id the
//! driver got in its handshake (its own accessor: `thread_id()`, `connection_id`, `threadId`,
//! mysqli's `thread_id`, `getServerThreadId()`, `Conn::id()`), with the column's name and type.
//!
//! A missing Python or Node driver is installed (pip / npm); the Debian ones are installed by
//! `.ci/run`. A test skips, saying why, only when its driver cannot be had on this machine
//! (and fails instead under CI=true).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use sluice::stats::PinReason;
use sluice::ProxyHandle;
use tokio::process::Command;

use crate::harness::*;

/// A driver check: how to make the driver importable, and how to run its script.
struct Driver {
    name: &'static str,
    /// `python3`, `node`, `php` or `java`.
    program: &'static str,
    /// Under `proxy/tests/clients/` (for Java, the source file under `java/`).
    script: &'static str,
    install: Install,
    /// Lines the direct transcript must contain, so that an empty or truncated run cannot
    /// pass (one of them says CONNECTION_ID() is the handshake's id, directly).
    expect: &'static [&'static str],
    /// Pins the checks cause on purpose (user variables, FOUND_ROWS(), cursors).
    allowed_pins: &'static [PinReason],
}

enum Install {
    /// Python code that imports the driver (and fails without it), and the pip package that
    /// provides it.
    Pip {
        probe: &'static str,
        package: &'static str,
    },
    /// `npm ci` (or `npm install`) in `proxy/tests/clients/node`.
    Npm,
    /// PHP with the mysqli and pdo_mysql extensions (Debian: php-cli, php-mysql).
    Php,
    /// javac and MariaDB Connector/J (Debian: default-jdk-headless, libmariadb-java); the
    /// check is compiled into a temporary directory.
    Jdbc,
}

/// Where Debian's libmariadb-java puts the driver.
const JDBC_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

fn jdbc_classes() -> PathBuf {
    std::env::temp_dir().join(format!("sluice-jdbc-check-{}", std::process::id()))
}

impl Driver {
    /// The arguments before HOST PORT USER PASSWORD DATABASE.
    fn leading_args(&self) -> Vec<String> {
        match self.install {
            Install::Jdbc => vec![
                "-cp".into(),
                format!("{JDBC_JAR}:{}", jdbc_classes().display()),
                "JdbcCheck".into(),
            ],
            _ => vec![clients_dir().join(self.script).display().to_string()],
        }
    }
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `program args` in `dir`; `Err` carries a printable reason.
async fn try_run(program: &str, args: &[&str], dir: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        // No __pycache__ next to the scripts in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(format!(
            "`{program} {}` failed: {}{}",
            args.join(" "),
            text(&out.stdout),
            text(&out.stderr)
        ))
    }
}

/// Makes the driver usable; `Err` is the reason the test must skip.
async fn ensure_installed(driver: &Driver) -> Result<(), String> {
    let dir = clients_dir();
    match driver.install {
        Install::Pip { probe, package } => {
            if try_run("python3", &["-c", probe], &dir).await.is_ok() {
                return Ok(());
            }
            try_run(
                "python3",
                &["-m", "pip", "install", "--quiet", package],
                &dir,
            )
            .await?;
            try_run("python3", &["-c", probe], &dir).await.map(drop)
        }
        Install::Npm => {
            let node = dir.join("node");
            let check = ["-e", "require('mysql2/promise')"];
            if try_run("node", &check, &node).await.is_ok() {
                return Ok(());
            }
            // The lock file pins the version; fall back to `install` if `ci` is unavailable.
            if try_run("npm", &["ci", "--no-audit", "--no-fund"], &node)
                .await
                .is_err()
            {
                try_run("npm", &["install", "--no-audit", "--no-fund"], &node).await?;
            }
            try_run("node", &check, &node).await.map(drop)
        }
        Install::Php => {
            let probe =
                "exit(extension_loaded('mysqli') && extension_loaded('pdo_mysql') ? 0 : 1);";
            try_run("php", &["-r", probe], &dir)
                .await
                .map(drop)
                .map_err(|e| format!("php with mysqli and pdo_mysql is missing (apt-get install php-cli php-mysql): {e}"))
        }
        Install::Jdbc => {
            if !Path::new(JDBC_JAR).exists() {
                return Err(format!(
                    "{JDBC_JAR} is missing (apt-get install libmariadb-java)"
                ));
            }
            let out = jdbc_classes().display().to_string();
            let src = dir.join("java").join(driver.script).display().to_string();
            try_run("javac", &["-d", &out, "-cp", JDBC_JAR, &src], &dir)
                .await
                .map(drop)
        }
    }
}

/// Host, port, user, password of the server directly, then of sluice.
fn endpoints(proxy: &ProxyHandle) -> [(String, u16, String, String); 2] {
    let s = server();
    let addr = proxy.local_addr();
    let (user, password) = login_for(proxy, "app", "secret");
    [
        (s.host.clone(), s.port, APP_USER.into(), APP_PASSWORD.into()),
        (
            addr.ip().to_string(),
            addr.port(),
            user.into(),
            password.into(),
        ),
    ]
}

/// Clients that keep sluice's backends busy (a statement every few milliseconds each), so
/// that a driver's statements land on whichever backend is free, not always the same one.
struct Stirrers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<u64>>,
}

impl Stirrers {
    fn start(proxy: &ProxyHandle, n: usize) -> Stirrers {
        let o = opts(proxy, "app", "secret", None);
        Stirrers::start_with(o, n, "DO 1", std::time::Duration::from_millis(3))
    }

    /// `n` clients logged in with `o`, each running `sql` every `pause` until stopped.
    fn start_with(o: Opts, n: usize, sql: &'static str, pause: std::time::Duration) -> Stirrers {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..n)
            .map(|_| {
                let (stop, o) = (stop.clone(), o.clone());
                tokio::spawn(async move {
                    let mut c = Conn::new(o).await.expect("a stirring client connects");
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        c.query_drop(sql).await.expect("a stirring statement");
                        n += 1;
                        tokio::time::sleep(pause).await;
                    }
                    c.disconnect().await.expect("disconnect");
                    n
                })
            })
            .collect();
        Stirrers { stop, tasks }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            assert!(t.await.expect("stirring task") > 0, "a stirrer ran nothing");
        }
    }
}

/// Checks that the direct transcript has `expect` and that sluice's equals it; that sluice
/// pinned for nothing but `allowed_pins`.
fn assert_same(
    name: &str,
    outputs: &[String],
    expect: &[&str],
    proxy: &ProxyHandle,
    allowed_pins: &[PinReason],
) {
    for line in expect {
        assert!(
            outputs[0].contains(line),
            "{name}: the direct run lacks {line:?}:\n{}",
            outputs[0]
        );
    }
    assert_eq!(
        outputs[1], outputs[0],
        "{name}: transcript through sluice (left) differs from direct (right)"
    );
    for reason in PinReason::ALL {
        if !allowed_pins.contains(reason) {
            let n = proxy.context().stats.pins_by(*reason);
            assert_eq!(n, 0, "{name}: pinned for {reason}");
        }
    }
}

/// The shared runner: installs the driver (or skips), runs its script directly and through
/// a fresh in-process sluice (P=4, with other clients stirring its backends), and asserts
/// that both transcripts are equal.
async fn transcripts_match(driver: Driver, db: &str) {
    if let Err(reason) = ensure_installed(&driver).await {
        skip_or_fail(&format!(
            "{}: the driver cannot be installed: {reason}",
            driver.name
        ));
        return;
    }
    fresh_db(db).await;
    let proxy = start(config(4)).await;
    let leading = driver.leading_args();
    let mut outputs = Vec::new();
    for (host, port, user, password) in endpoints(&proxy) {
        let via_sluice = port == proxy.local_addr().port();
        let stirrers = via_sluice.then(|| Stirrers::start(&proxy, 3));
        let port = port.to_string();
        let mut args: Vec<&str> = leading.iter().map(String::as_str).collect();
        args.extend([host.as_str(), &port, &user, &password, db]);
        let out = try_run(driver.program, &args, &clients_dir())
            .await
            .unwrap_or_else(|e| panic!("{} via {host}:{port}: {e}", driver.name));
        if let Some(s) = stirrers {
            s.stop().await;
        }
        outputs.push(out);
    }
    assert_same(
        driver.name,
        &outputs,
        driver.expect,
        &proxy,
        driver.allowed_pins,
    );
    proxy.shutdown().await;
}

fn pymysql() -> Driver {
    Driver {
        name: "PyMySQL",
        program: "python3",
        script: "pymysql_check.py",
        install: Install::Pip {
            probe: "import pymysql",
            package: "pymysql",
        },
        expect: &[
            "error 1062\nerror 1146\nerror 1064\n",
            "after errors: CONNECTION_ID() is the handshake's id [True, True, 1, True]",
        ],
        allowed_pins: &[PinReason::UserVariable],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn pymysql_sees_the_same_results_as_direct() {
    transcripts_match(pymysql(), "t_drv_pymysql").await;
}

fn mysqlclient() -> Driver {
    Driver {
        name: "mysqlclient",
        program: "python3",
        script: "mysqlclient_check.py",
        // Builds against libmariadb-dev + pkg-config (apt, see .ci/run).
        install: Install::Pip {
            probe: "import MySQLdb",
            package: "mysqlclient",
        },
        expect: &[
            "after select_db and ping: CONNECTION_ID() is the handshake's id [True, True, 1, True]",
            // The last check: COM_SET_OPTION turned multi-statements back on.
            "multi-statements on: [((1,),), ((2,),)]",
        ],
        allowed_pins: &[PinReason::UserVariable],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mysqlclient_sees_the_same_results_as_direct() {
    transcripts_match(mysqlclient(), "t_drv_mysqlclient").await;
}

fn connector_python() -> Driver {
    Driver {
        name: "mysql-connector-python",
        program: "python3",
        script: "connector_check.py",
        install: Install::Pip {
            probe: "import mysql.connector",
            package: "mysql-connector-python",
        },
        expect: &[
            "implementation MySQLConnection\n",
            "prepared error 1062",
            "after reset: prepared CONNECTION_ID() is the handshake's id [True, 1]",
        ],
        allowed_pins: &[PinReason::UserVariable],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mysql_connector_python_sees_the_same_results_as_direct() {
    transcripts_match(connector_python(), "t_drv_connector").await;
}

fn connector_python_c() -> Driver {
    Driver {
        name: "mysql-connector-python C extension",
        program: "python3",
        script: "connector_cext_check.py",
        // The import order matters: see the script's docstring.
        install: Install::Pip {
            probe: "import _mysql_connector, mysql.connector; assert mysql.connector.HAVE_CEXT",
            package: "mysql-connector-python",
        },
        expect: &[
            "implementation CMySQLConnection\n",
            "prepared error 1062",
            "after reset: prepared CONNECTION_ID() is the handshake's id [True, 1]",
        ],
        allowed_pins: &[PinReason::UserVariable],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mysql_connector_python_c_extension_sees_the_same_results_as_direct() {
    transcripts_match(connector_python_c(), "t_drv_connector_c").await;
}

fn node_mysql2() -> Driver {
    Driver {
        name: "mysql2",
        program: "node",
        script: "node/mysql2_check.js",
        install: Install::Npm,
        expect: &[
            "changeUser wrong password 1045",
            "after reset binary: CONNECTION_ID() is the handshake's id [true,true,\"1\"]",
        ],
        allowed_pins: &[PinReason::UserVariable],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn node_mysql2_sees_the_same_results_as_direct() {
    transcripts_match(node_mysql2(), "t_drv_mysql2").await;
}

fn php() -> Driver {
    Driver {
        name: "PHP PDO + mysqli",
        program: "php",
        script: "php_check.php",
        install: Install::Php,
        expect: &[
            "mysqli change_user wrong password: \"error 1045\"",
            "mysqli after change_user (prepared): CONNECTION_ID() is the handshake's id: [true,[]]",
            "server at the end: CONNECTION_ID() is the first one: [true,",
        ],
        allowed_pins: &[
            PinReason::UserVariable,
            PinReason::FoundRows,
            PinReason::Cursor,
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn php_pdo_and_mysqli_see_the_same_results_as_direct() {
    transcripts_match(php(), "t_drv_php").await;
}

fn connector_j() -> Driver {
    Driver {
    name: "MariaDB Connector/J",
    program: "java",
    script: "JdbcCheck.java",
    install: Install::Jdbc,
    expect: &[
        "[useServerPrepStmts=true&cachePrepStmts=true] callable: [21] out 42",
        "[useServerPrepStmts=true&cachePrepStmts=true] CONNECTION_ID() is still the handshake's id: true 1",
    ],
    // The 3 MB parameter goes as COM_STMT_SEND_LONG_DATA: pinned until its EXECUTE.
    allowed_pins: &[PinReason::PreparedStatement],
}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mariadb_connector_j_sees_the_same_results_as_direct() {
    transcripts_match(connector_j(), "t_drv_jdbc").await;
}

/// Every driver against a primary and its replica, directly against the primary and through
/// sluice with the split on: the same transcripts, while reads (text and prepared) run on
/// the replica and each session reads its own writes back wherever its reads go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_driver_sees_the_same_results_over_a_primary_and_its_replica() {
    let drivers = [
        pymysql(),
        mysqlclient(),
        connector_python(),
        connector_python_c(),
        node_mysql2(),
        php(),
        connector_j(),
    ];
    for d in &drivers {
        if let Err(reason) = ensure_installed(d).await {
            skip_or_fail(&format!(
                "{}: the driver cannot be installed: {reason}",
                d.name
            ));
            return;
        }
    }
    let options = dbkit::ClusterOptions {
        replicas: 1,
        ..Default::default()
    };
    let cluster = tokio::task::spawn_blocking(move || dbkit::Cluster::start(options))
        .await
        .expect("start task")
        .unwrap_or_else(|e| panic!("cluster: {e}"));
    use dbkit::replication::{
        APP_PASSWORD as PW, APP_USER as USER, MONITOR_PASSWORD, MONITOR_USER,
    };
    let mut cfg = sluice::Config::for_backend(cluster.addr(0).to_string(), USER, PW);
    cfg.servers = (0..cluster.len())
        .map(|i| sluice::config::Endpoint::parse(&cluster.addr(i).to_string()))
        .collect();
    cfg.monitor_user = Some(MONITOR_USER.into());
    cfg.monitor_password = Some(sluice::config::Secret::new(MONITOR_PASSWORD.into()));
    cfg.monitor_interval = std::time::Duration::from_millis(100);
    cfg.read_write_split = sluice::config::ReadWriteSplit::On;
    cfg.backend_tls = sluice::config::BackendTlsMode::Disabled;
    cfg.pool_size = sluice::config::PoolSize::Fixed(4);
    let proxy = start(cfg).await;
    let usable = eventually(std::time::Duration::from_secs(30), || {
        let t = proxy.context().topology();
        t.topology.writer() == Some(0) && t.topology.usable_replicas().count() == 1
    })
    .await;
    assert!(
        usable,
        "writer and replica: {:#?}",
        proxy.context().topology()
    );
    let primary = cluster.addr(0);
    let through = proxy.local_addr();
    for d in &drivers {
        let mut outputs = Vec::new();
        for addr in [primary, through] {
            let mut args: Vec<String> = d.leading_args();
            args.extend([addr.ip().to_string(), addr.port().to_string()]);
            args.extend([USER.into(), PW.into(), "app".into()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = try_run(d.program, &args, &clients_dir())
                .await
                .unwrap_or_else(|e| panic!("{} via {addr}: {e}", d.name));
            outputs.push(out);
        }
        assert_same(d.name, &outputs, d.expect, &proxy, &ALL_DRIVERS_PINS);
    }
    let routed = proxy.context().stats.routed_snapshot();
    let on = |route: &str| -> u64 {
        routed
            .iter()
            .filter(|((_, r, _), _)| *r == route)
            .map(|(_, n)| n)
            .sum()
    };
    assert!(on("replica") > 20, "reads ran on the replica: {routed:?}");
    assert!(on("writer") > 100, "writes ran on the primary: {routed:?}");
    proxy.shutdown().await;
}

/// The pins any of the driver checks causes on purpose.
const ALL_DRIVERS_PINS: [PinReason; 4] = [
    PinReason::UserVariable,
    PinReason::FoundRows,
    PinReason::Cursor,
    PinReason::PreparedStatement,
];

/// A row's values in full (mysql_async's `Debug` of a value abbreviates long bytes).
fn values(row: mysql_async::Row) -> Vec<String> {
    row.unwrap()
        .into_iter()
        .map(|v| match v {
            mysql_async::Value::Bytes(b) => format!("{:?}", String::from_utf8_lossy(&b)),
            other => format!("{other:?}"),
        })
        .collect()
}

/// CONNECTION_ID() against `Conn::id()` (the handshake's id), over text and binary, with the
/// columns' names, types and flags.
async fn mysql_async_identity(c: &mut Conn, label: &str, out: &mut Vec<String>) {
    const SQL: &str = "SELECT CONNECTION_ID(), CONNECTION_ID() + 0, CONNECTION_ID() IS NOT NULL";
    let me = u64::from(c.id());
    let text: mysql_async::Row = c.query_first(SQL).await.unwrap().unwrap();
    let stmt = c.prep(SQL).await.unwrap();
    let binary: mysql_async::Row = c.exec_first(&stmt, ()).await.unwrap().unwrap();
    c.close(stmt).await.unwrap();
    for (proto, row) in [("text", text), ("binary", binary)] {
        let columns: Vec<String> = row
            .columns_ref()
            .iter()
            .map(|col| {
                format!(
                    "{} {:?} {:?}",
                    col.name_str(),
                    col.column_type(),
                    col.flags()
                )
            })
            .collect();
        let (id, plus, not_null): (u64, u64, u8) = mysql_async::from_row(row);
        out.push(format!(
            "{label} {proto}: CONNECTION_ID() is the handshake's id {:?}, columns {columns:?}",
            (id == me, plus == me, not_null)
        ));
    }
}

/// mysql_async's transcript: value types over both protocols, prepared batches, errors,
/// transactions, multi-statement results, session variables, warnings, LAST_INSERT_ID(),
/// user variables, temporary tables, named locks, COM_RESET_CONNECTION, COM_CHANGE_USER, and
/// CONNECTION_ID() after each.
async fn mysql_async_transcript(o: Opts) -> Vec<String> {
    let mut c = Conn::new(o.clone()).await.expect("connect");
    let mut out = Vec::new();
    mysql_async_identity(&mut c, "at login", &mut out).await;
    const TYPES: &str = "SELECT 1 + 1, NULL, 'ünïcødé 𝄞', CAST(-9223372036854775808 AS SIGNED), \
        CAST(18446744073709551615 AS UNSIGNED), 3.25, DATE('2024-02-29'), 1e300, X'00FF'";
    let text: mysql_async::Row = c.query_first(TYPES).await.unwrap().unwrap();
    let binary: mysql_async::Row = c.exec_first(TYPES, ()).await.unwrap().unwrap();
    out.push(format!("types text {:?}", values(text)));
    out.push(format!("types binary {:?}", values(binary)));
    // Plain reads in the login's state: the ones a busy sluice pipelines with others'.
    let mut plain = Vec::new();
    for i in 0..20 {
        let row: (i64, String) = c
            .query_first(format!("SELECT {i} * 3, CONCAT('r', {i})"))
            .await
            .unwrap()
            .unwrap();
        plain.push(format!("{}={}", row.0, row.1));
    }
    out.push(format!("plain reads {}", plain.join(" ")));
    c.query_drop(
        "CREATE TABLE ma_t (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20), v DECIMAL(10,2))",
    )
    .await
    .unwrap();
    c.exec_batch(
        "INSERT INTO ma_t (name, v) VALUES (?, ?)",
        (1..=30).map(|i| (format!("n-{i}-ß"), format!("{i}.{:02}", i % 100))),
    )
    .await
    .unwrap();
    for (lo, hi) in [(1, 3), (28, 40)] {
        let rows: Vec<(i32, String, String)> = c
            .exec(
                "SELECT id, name, v FROM ma_t WHERE id BETWEEN ? AND ? ORDER BY id",
                (lo, hi),
            )
            .await
            .unwrap();
        out.push(format!("range {lo} {hi} {rows:?}"));
    }
    for (sql, binary) in [
        ("INSERT INTO ma_t (id) VALUES (1)", true),
        ("SELECT * FROM no_such_table", false),
        ("SELEKT 1", false),
    ] {
        let err = if binary {
            c.exec_drop(sql, ()).await.unwrap_err()
        } else {
            c.query_drop(sql).await.unwrap_err()
        };
        out.push(format!("error {:?} {:?}", code_of(&err), state_of(&err)));
    }
    mysql_async_identity(&mut c, "after errors", &mut out).await;
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    tx.query_drop("INSERT INTO ma_t (name) VALUES ('rolled back')")
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM ma_t WHERE name = 'rolled back'")
        .await
        .unwrap();
    out.push(format!("after rollback {n:?}"));
    let mut result = c.query_iter("SELECT 1; SELECT 2, 'x'; DO 1").await.unwrap();
    let mut sets = Vec::new();
    while !result.is_empty() {
        let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
        sets.push(rows.into_iter().map(values).collect::<Vec<_>>());
    }
    drop(result);
    out.push(format!("multi {sets:?}"));
    c.query_drop("SET time_zone = '+05:30', SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    let mut stable = true;
    for i in 0..20u32 {
        let row: (String, String, u32) = c
            .exec_first("SELECT @@time_zone, @@sql_mode, ?", (i,))
            .await
            .unwrap()
            .unwrap();
        if i == 0 || i == 19 {
            out.push(format!("state {row:?}"));
        }
        let id: Option<u64> = c.query_first("SELECT CONNECTION_ID()").await.unwrap();
        stable &= id == Some(u64::from(c.id()));
    }
    out.push(format!(
        "CONNECTION_ID() stayed the handshake's id {stable}"
    ));
    c.query_drop("SELECT CAST('abc' AS UNSIGNED)")
        .await
        .unwrap();
    let warnings: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.unwrap();
    out.push(format!("warnings {warnings:?}"));
    c.query_drop("INSERT INTO ma_t (name) VALUES ('last')")
        .await
        .unwrap();
    let driver_id = c.last_insert_id();
    let last: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    out.push(format!(
        "LAST_INSERT_ID() is the OK's {}",
        last == driver_id
    ));
    c.query_drop("SET @mine = 7").await.unwrap();
    c.query_drop("CREATE TEMPORARY TABLE ma_tmp (a INT)")
        .await
        .unwrap();
    c.query_drop("INSERT INTO ma_tmp VALUES (1), (2)")
        .await
        .unwrap();
    let locks: Option<(u8, u8, u8)> = c
        .query_first("SELECT GET_LOCK('ma', 0), RELEASE_LOCK('ma'), IS_FREE_LOCK('ma')")
        .await
        .unwrap();
    let row: Option<(Option<u64>, u64)> = c
        .query_first("SELECT @mine, (SELECT COUNT(*) FROM ma_tmp)")
        .await
        .unwrap();
    out.push(format!(
        "user variable, temporary table {row:?}, locks {locks:?}"
    ));
    assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION is used");
    let after: Option<Option<u64>> = c.query_first("SELECT @mine").await.unwrap();
    out.push(format!("after reset @mine {after:?}"));
    mysql_async_identity(&mut c, "after reset", &mut out).await;
    let user = o.user().unwrap_or_default().to_string();
    let pass = o.pass().unwrap_or_default().to_string();
    c.change_user(
        mysql_async::ChangeUserOpts::new()
            .with_user(Some(user))
            .with_pass(Some(pass))
            .with_db_name(o.db_name().map(str::to_string)),
    )
    .await
    .unwrap();
    mysql_async_identity(&mut c, "after change_user", &mut out).await;
    c.query_drop("DROP TABLE ma_t").await.unwrap();
    c.disconnect().await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn mysql_async_sees_the_same_results_as_direct() {
    let db = "t_drv_mysql_async";
    fresh_db(db).await;
    let proxy = start(config(4)).await;
    let server_addr = backend_addr().parse().expect("the server's address");
    let direct_opts = opts_at(server_addr, APP_USER, APP_PASSWORD, Some(db));
    let direct_run = mysql_async_transcript(direct_opts.into()).await;
    let stirrers = Stirrers::start(&proxy, 3);
    let sluice_run = mysql_async_transcript(opts(&proxy, "app", "secret", Some(db))).await;
    stirrers.stop().await;
    let outputs = [direct_run.join("\n"), sluice_run.join("\n")];
    let expect = [
        "after change_user binary: CONNECTION_ID() is the handshake's id (true, true, 1)",
        "LAST_INSERT_ID() is the OK's true",
    ];
    assert_same(
        "mysql_async",
        &outputs,
        &expect,
        &proxy,
        &[PinReason::UserVariable, PinReason::TemporaryTable],
    );
    proxy.shutdown().await;
}

/// The same transcript at P=1, with clients of the same database and character set
/// running reads all the time: the transcript's stateless reads queue behind theirs and are
/// pipelined with them (its session's own count says so), and what mysql_async sees is
/// still what it sees directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_sees_the_same_results_with_its_reads_pipelined() {
    let db = "t_drv_mysql_async_pipe";
    fresh_db(db).await;
    let mut cfg = config(1);
    // The transcript logs in as its own user (same backend account, so same pool key).
    let mut tx = sluice::config::UserConfig::new("tx", "tx-pw");
    tx.backend_user = cfg.users[0].backend_user.clone();
    tx.backend_password = cfg.users[0].backend_password.clone();
    cfg.users.push(tx);
    let proxy = start(cfg).await;
    let server_addr = backend_addr().parse().expect("the server's address");
    let direct_opts = opts_at(server_addr, APP_USER, APP_PASSWORD, Some(db));
    let direct_run = mysql_async_transcript(direct_opts.into()).await;
    let pause = std::time::Duration::from_micros(200);
    let readers = opts(&proxy, "app", "secret", Some(db));
    let stirrers = Stirrers::start_with(readers, 6, "SELECT 1", pause);
    // Keeps the transcript's session record, which its disconnect takes off the registry.
    let ctx = proxy.context().clone();
    let watching = Arc::new(AtomicBool::new(true));
    let watch = watching.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        while watch.load(Ordering::Relaxed) {
            if seen.is_empty() {
                seen = ctx
                    .registry
                    .all()
                    .into_iter()
                    .filter(|c| c.user() == "tx")
                    .collect();
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        seen
    });
    let sluice_run = mysql_async_transcript(opts(&proxy, "tx", "tx-pw", Some(db))).await;
    watching.store(false, Ordering::Relaxed);
    stirrers.stop().await;
    let sessions = watcher.await.unwrap();
    assert_eq!(sessions.len(), 1, "the transcript's session was seen");
    let own = sessions[0].pipelined_statements.load(Ordering::Relaxed);
    eprintln!("mysql_async transcript at P=1 beside 6 readers: {own} of its statements pipelined");
    assert!(own > 0, "the transcript's own reads were pipelined");
    let outputs = [direct_run.join("\n"), sluice_run.join("\n")];
    assert_same(
        "mysql_async (pipelined)",
        &outputs,
        &["LAST_INSERT_ID() is the OK's true"],
        &proxy,
        &[PinReason::UserVariable, PinReason::TemporaryTable],
    );
    proxy.shutdown().await;
}
