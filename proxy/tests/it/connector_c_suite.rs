//! MariaDB's own C API test suite (`mariadb-client-test`, Debian package mariadb-test), run
//! through sluice for the cases that found differences: bulk execution (COM_STMT_BULK_EXECUTE
//! with RETURNING, auto-increment, REPLACE, DELETE), `mariadb_stmt_execute_direct`
//! (PREPARE and EXECUTE(-1) pipelined), COM_CHANGE_USER, and a refused client character set.
//! Each case also runs directly first, so a case this server cannot pass is reported as such.

use mysql_async::prelude::Queryable;
use tokio::process::Command;

use crate::harness::*;

const PROGRAM: &str = "mariadb-client-test";

const CASES: &[&str] = &[
    "test_bulk_autoinc",
    "test_bulk_delete",
    "test_bulk_delete_returning",
    "test_bulk_insert_returning",
    "test_bulk_replace",
    "test_mdev_24411",
    "test_mdev_34718_ad",
    "test_mdev_34718_au",
    "test_execute_direct",
    "test_mdev19838",
    "test_bug30472",
    "test_bug31418",
    "test_bug58036",
];

/// Cases that need a privileged account (test_bug20023 sets `@@global.max_join_size`,
/// test_mdev4326 selects the database `mysql`): run
/// with the server's privileged account, directly and through a sluice that logs in with it.
const PRIVILEGED_CASES: &[&str] = &["test_bug20023", "test_mdev4326"];

/// Runs one case; `Err` carries its output.
async fn run(case: &str, host: &str, port: u16, user: &str, password: &str) -> Result<(), String> {
    let out = Command::new(PROGRAM)
        .args([
            "--no-defaults",
            &format!("--host={host}"),
            &format!("--port={port}"),
            &format!("--user={user}"),
            &format!("--password={password}"),
            "--database=test",
            "-c",
            case,
        ])
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {PROGRAM} (Debian package mariadb-test): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_client_test_cases_pass_through_sluice() {
    ensure_test_database().await;
    run_cases(CASES, config(4), APP_USER, APP_PASSWORD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privileged_mariadb_client_test_cases_pass_through_sluice() {
    ensure_test_database().await;
    let s = server();
    run_cases(PRIVILEGED_CASES, config_privileged(4), &s.user, &s.password).await;
}

async fn ensure_test_database() {
    let mut root = direct_root(None).await;
    root.query_drop("CREATE DATABASE IF NOT EXISTS test")
        .await
        .unwrap();
    root.disconnect().await.unwrap();
}

/// Runs each case directly as `user` (it must pass there), then through a sluice started
/// with `cfg` (its `app` user), and fails with every case that differs.
async fn run_cases(cases: &[&str], cfg: sluice::Config, user: &str, password: &str) {
    // Every case uses the database client_test_db: one test at a time.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let s = server();
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let mut failures = Vec::new();
    // One case at a time: they all use the database client_test_db.
    for case in cases {
        run(case, &s.host, s.port, user, password)
            .await
            .unwrap_or_else(|e| panic!("{case} fails directly against the server:\n{e}"));
        if let Err(e) = run(case, &addr.ip().to_string(), addr.port(), "app", "secret").await {
            failures.push(format!("{case}:\n{e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "through sluice:\n{}",
        failures.join("\n")
    );
    proxy.shutdown().await;
}
