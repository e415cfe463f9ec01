//! Diagnostics (SHOW WARNINGS / ERRORS, SHOW COUNT(*), @@warning_count, @@error_count,
//! GET DIAGNOSTICS) are the session's own or empty, never another session's: against
//! direct MariaDB with many sessions at once (`reference`). Each session's conditions
//! name it (its own missing table, its own value), so another session's would show.
//!
//! MariaDB keeps a statement's diagnostics through later statements that touch no table
//! and raise nothing; an error reply carries no warning count. Without pipelining (and with
//! pinned places free) a session sees exactly what it sees directly; a pipelined read that
//! was not the last of its batch may find its warnings gone (empty), as may a session whose
//! backend could not stay with it.

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;
use crate::reference::*;

const DB: &str = "t_diag_ref";

/// Every way a client reads the diagnostics area.
async fn diagnostics(c: &mut Conn, out: &mut Seen, step: &str) {
    for (what, sql) in [
        ("warnings", "SHOW WARNINGS"),
        ("errors", "SHOW ERRORS"),
        ("count", "SHOW COUNT(*) WARNINGS"),
        ("vars", "SELECT @@warning_count, @@error_count"),
    ] {
        out.push(seen_query(c, &format!("{step} {what}"), sql).await);
    }
}

/// Warnings and errors, then table-less statements, then every diagnostics read; the
/// session's conditions carry its index.
async fn own_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    let mut out = Vec::new();
    diagnostics(c, &mut out, "fresh").await;
    // A warning that names the session: CAST('<i>x' AS SIGNED) truncates '<i>x'.
    let warn = format!("SELECT CAST('{i}x' AS SIGNED)");
    let fail = format!("SELECT * FROM no_such_{i}");
    out.push(seen_query(c, "warn", &warn).await);
    diagnostics(c, &mut out, "after warning").await;
    out.push(seen_ok(c, "fail", &fail).await);
    diagnostics(c, &mut out, "after error").await;
    out.push(seen_ok(c, "fail", &fail).await);
    c.query_drop("SELECT 2").await.unwrap();
    c.query_drop("DO 3").await.unwrap();
    diagnostics(c, &mut out, "after error and table-less").await;
    out.push(seen_query(c, "warn", &warn).await);
    c.query_drop("SET @@SESSION.sql_notes = 1").await.unwrap();
    diagnostics(c, &mut out, "after warning and SET").await;
    out.push(seen_query(c, "warn", &warn).await);
    c.query_drop("SELECT COUNT(*) FROM seq_1_to_3")
        .await
        .unwrap();
    diagnostics(c, &mut out, "after warning and a table").await;
    // Prepared: the warning and the reads.
    out.push(seen_exec(c, "prepared warn", &warn).await);
    out.push(seen_exec(c, "prepared warnings", "SELECT @@warning_count").await);
    out.push(seen_ok(c, "fail", &fail).await);
    out.push(seen_exec(c, "prepared errors", "SELECT @@error_count").await);
    out
}

/// Reads of a session that never raised anything, while others fail around it: empty.
async fn bystander_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    let mut out = Vec::new();
    for round in 0..4 {
        if i.is_multiple_of(2) {
            let _ = c.query_drop(format!("SELECT * FROM no_such_{i}")).await;
            let _ = c.query_drop(format!("SELECT CAST('{i}y' AS SIGNED)")).await;
            c.query_drop("DO 1").await.unwrap();
            out.push(format!("failer {round}"));
        } else {
            c.query_drop("SELECT 1").await.unwrap();
            diagnostics(c, &mut out, &format!("bystander {round}")).await;
        }
    }
    out
}

/// An empty diagnostics read may stand for the session's own conditions (they were lost
/// with its backend, or a later batch member replaced them); nothing else may differ.
fn own_or_empty(direct: &str, sluice: &str) -> bool {
    if direct == sluice {
        return true;
    }
    let Some((label, _)) = direct.split_once(": ") else {
        return false;
    };
    let empty = [
        format!("{label}: "),
        format!("{label}: 0"),
        format!("{label}: 0|0"),
    ];
    (label.contains("warnings")
        || label.contains("errors")
        || label.contains("count")
        || label.contains("vars"))
        && empty.iter().any(|e| e == sluice)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_diagnostics_are_its_own() {
    fresh_db(DB).await;
    // Without pipelining the session keeps its backend while its conditions are there.
    let reference = observe(Target::Direct, DB, SESSIONS, "d", &own_script).await;
    let mut failed = Vec::new();
    for (pool, depth) in CELLS {
        let proxy = sluice_at(pool, depth).await;
        let seen = observe(Target::Sluice(&proxy), DB, SESSIONS, "s", &own_script).await;
        proxy.shutdown().await;
        let diff = if depth == 1 {
            differences(&reference, &seen, equal)
        } else {
            differences(&reference, &seen, own_or_empty)
        };
        if !diff.is_empty() {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}: {}",
                diff.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_diagnostics_never_show() {
    fresh_db("t_diag_by").await;
    matches_direct("bystanders", "t_diag_by", &bystander_script, equal).await;
}

/// Fresh sessions logging in while others fail: their first reads are empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_read_empty_diagnostics() {
    fresh_db("t_diag_new").await;
    for (pool, depth) in CELLS {
        let proxy = sluice_at(pool, depth).await;
        let mut failers = Vec::new();
        for _ in 0..8 {
            failers.push(connect(&proxy, Some("t_diag_new")).await);
        }
        for round in 0..6 {
            let fails = failers.iter_mut().enumerate().map(|(i, c)| async move {
                let _ = c.query_drop(format!("SELECT * FROM no_such_{i}")).await;
                let _ = c.query_drop(format!("SELECT CAST('{i}z' AS SIGNED)")).await;
                let _ = c.query_drop("DO 1").await;
            });
            futures_util::future::join_all(fails).await;
            let mut fresh = connect(&proxy, Some("t_diag_new")).await;
            let mut out = Vec::new();
            diagnostics(&mut fresh, &mut out, "new").await;
            assert_eq!(
                out,
                [
                    "new warnings: ",
                    "new errors: ",
                    "new count: 0",
                    "new vars: 0|0"
                ],
                "pool_size {pool}, pipeline_depth {depth}, round {round}: a new session read another's diagnostics"
            );
            fresh.disconnect().await.unwrap();
        }
        for c in failers {
            c.disconnect().await.unwrap();
        }
        proxy.shutdown().await;
    }
}

/// With one pinned place for many failing sessions, most cannot keep their backend: their
/// reads are their own or empty, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_free_place_diagnostics_are_own_or_empty() {
    fresh_db("t_diag_cap").await;
    let reference = observe(Target::Direct, "t_diag_cap", 12, "d", &own_script).await;
    for depth in [1, 16] {
        let mut cfg = config(2);
        cfg.pipeline_depth = depth;
        cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(3);
        let proxy = start(cfg).await;
        let seen = observe(Target::Sluice(&proxy), "t_diag_cap", 12, "s", &own_script).await;
        proxy.shutdown().await;
        let diff = differences(&reference, &seen, own_or_empty);
        assert!(
            diff.is_empty(),
            "pipeline_depth {depth}: {}",
            diff.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}
