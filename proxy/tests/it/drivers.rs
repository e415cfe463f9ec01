//! Real drivers (PyMySQL, mysqlclient, mysql-connector-python, node mysql2 from the
//! registries; PHP's PDO and mysqli and MariaDB Connector/J from Debian) run their own
//! prepared-statement and session-variable checks once directly and once through sluice;
//! each script prints a canonical transcript and the two must be equal.
//!
//! A missing Python or Node driver is installed (pip / npm); the Debian ones are installed by
//! `.ci/run`. A test skips, saying why, only when its driver cannot be had on this machine.

use std::path::{Path, PathBuf};

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
    /// A line the direct transcript must contain, so an empty or truncated run cannot pass.
    expect: &'static str,
    /// Pins the checks cause on purpose (user variables, FOUND_ROWS(), cursors).
    allowed_pins: &'static [PinReason],
}

enum Install {
    /// A Python module and the pip package that provides it.
    Pip {
        module: &'static str,
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
        Install::Pip { module, package } => {
            let import = format!("import {module}");
            if try_run("python3", &["-c", &import], &dir).await.is_ok() {
                return Ok(());
            }
            try_run(
                "python3",
                &["-m", "pip", "install", "--quiet", package],
                &dir,
            )
            .await?;
            try_run("python3", &["-c", &import], &dir).await.map(drop)
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
    [
        (s.host.clone(), s.port, APP_USER.into(), APP_PASSWORD.into()),
        (
            addr.ip().to_string(),
            addr.port(),
            "app".into(),
            "secret".into(),
        ),
    ]
}

/// The shared runner: installs the driver (or skips), runs its script directly and through
/// a fresh in-process sluice (pool of 2, so statements move between backends), and asserts
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
    let proxy = start(config(2)).await;
    let leading = driver.leading_args();
    let mut outputs = Vec::new();
    for (host, port, user, password) in endpoints(&proxy) {
        let port = port.to_string();
        let mut args: Vec<&str> = leading.iter().map(String::as_str).collect();
        args.extend([host.as_str(), &port, &user, &password, db]);
        let out = try_run(driver.program, &args, &clients_dir())
            .await
            .unwrap_or_else(|e| panic!("{} via {host}:{port}: {e}", driver.name));
        outputs.push(out);
    }
    assert!(
        outputs[0].contains(driver.expect),
        "{}: the direct run lacks {:?}:\n{}",
        driver.name,
        driver.expect,
        outputs[0]
    );
    assert_eq!(
        outputs[1], outputs[0],
        "{}: transcript through sluice (left) differs from direct (right)",
        driver.name
    );
    for reason in PinReason::ALL {
        if !driver.allowed_pins.contains(reason) {
            let n = proxy.context().stats.pins_by(*reason);
            assert_eq!(n, 0, "{}: pinned for {reason}", driver.name);
        }
    }
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymysql_sees_the_same_results_as_direct() {
    let driver = Driver {
        name: "PyMySQL",
        program: "python3",
        script: "pymysql_check.py",
        install: Install::Pip {
            module: "pymysql",
            package: "pymysql",
        },
        expect: "error 1062\nerror 1146\nerror 1064\n",
        allowed_pins: &[PinReason::UserVariable],
    };
    transcripts_match(driver, "t_drv_pymysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysqlclient_sees_the_same_results_as_direct() {
    let driver = Driver {
        name: "mysqlclient",
        program: "python3",
        script: "mysqlclient_check.py",
        // Builds against libmariadb-dev + pkg-config (apt, see .ci/run).
        install: Install::Pip {
            module: "MySQLdb",
            package: "mysqlclient",
        },
        // The last check: COM_SET_OPTION turned multi-statements back on.
        expect: "multi-statements on: [((1,),), ((2,),)]",
        allowed_pins: &[PinReason::UserVariable],
    };
    transcripts_match(driver, "t_drv_mysqlclient").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_connector_python_sees_the_same_results_as_direct() {
    let driver = Driver {
        name: "mysql-connector-python",
        program: "python3",
        script: "connector_check.py",
        install: Install::Pip {
            module: "mysql.connector",
            package: "mysql-connector-python",
        },
        expect: "prepared error 1062",
        allowed_pins: &[PinReason::UserVariable],
    };
    transcripts_match(driver, "t_drv_connector").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_mysql2_sees_the_same_results_as_direct() {
    let driver = Driver {
        name: "mysql2",
        program: "node",
        script: "node/mysql2_check.js",
        install: Install::Npm,
        expect: "changeUser wrong password 1045",
        allowed_pins: &[PinReason::UserVariable],
    };
    transcripts_match(driver, "t_drv_mysql2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_pdo_and_mysqli_see_the_same_results_as_direct() {
    let driver = Driver {
        name: "PHP PDO + mysqli",
        program: "php",
        script: "php_check.php",
        install: Install::Php,
        expect: "mysqli change_user wrong password: \"error 1045\"",
        allowed_pins: &[
            PinReason::UserVariable,
            PinReason::FoundRows,
            PinReason::Cursor,
        ],
    };
    transcripts_match(driver, "t_drv_php").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_connector_j_sees_the_same_results_as_direct() {
    let driver = Driver {
        name: "MariaDB Connector/J",
        program: "java",
        script: "JdbcCheck.java",
        install: Install::Jdbc,
        expect: "[useServerPrepStmts=true&cachePrepStmts=true] callable: [21] out 42",
        // The 3 MB parameter goes as COM_STMT_SEND_LONG_DATA: pinned until its EXECUTE.
        allowed_pins: &[PinReason::PreparedStatement],
    };
    transcripts_match(driver, "t_drv_jdbc").await;
}
