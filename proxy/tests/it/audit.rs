//! An adversarial transparency audit: what a session still observes differently through
//! sluice than against MariaDB directly. Every test runs its script directly and through
//! sluice at pool sizes 1 and 4, pipelining off and on (`reference::CELLS`, or the cells
//! where the difference can show), and asserts exactly what direct MariaDB returns.
//!
//! Scripts that need commands no driver exposes (COM_STMT_RESET, COM_INIT_DB,
//! COM_STMT_FETCH) use a raw client (`Raw`, on `wire::Wire`); the others use mysql_async
//! through `reference`'s framework, with fewer sessions per run to stay quick.

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, Row};

use crate::harness::*;
use crate::reference::*;
use crate::wire::Wire;

/// Sessions per run (fewer than `reference::SESSIONS`: these scripts show their
/// differences with a handful of sessions taking turns on the backends).
const AUDIT_SESSIONS: usize = 8;

/// `matches_direct` with [`AUDIT_SESSIONS`] sessions per run.
async fn audit_matches<S>(name: &str, db: &str, script: &S)
where
    S: AsyncFn(usize, &str, &mut Conn) -> Seen,
{
    let reference = observe(Target::Direct, db, AUDIT_SESSIONS, "d", script).await;
    let mut failed = Vec::new();
    for (n, (pool, depth)) in CELLS.iter().enumerate() {
        let proxy = sluice_at(*pool, *depth).await;
        let prefix = format!("s{n}");
        let seen = observe(Target::Sluice(&proxy), db, AUDIT_SESSIONS, &prefix, script).await;
        proxy.shutdown().await;
        let diff = differences(&reference, &seen, equal);
        if !diff.is_empty() {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}: {} differences, e.g.\n{}",
                diff.len(),
                diff.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: through sluice, sessions saw other values than directly:\n{}",
        failed.join("\n\n")
    );
}

/// `label: code message` of a failing query, `label: rows` otherwise (the message too:
/// what a driver shows its user).
async fn seen_message(c: &mut Conn, label: &str, sql: &str) -> String {
    match c.query::<Row, _>(sql).await {
        Ok(rows) => format!(
            "{label}: {}",
            rows.iter().map(row_text).collect::<Vec<_>>().join(" / ")
        ),
        Err(mysql_async::Error::Server(e)) => format!("{label}: ERR {} {}", e.code, e.message),
        Err(e) => format!("{label}: client error {e}"),
    }
}

/// `label: [column names] rows` of a query.
async fn seen_columns(c: &mut Conn, label: &str, sql: &str) -> String {
    let result = match c.query_iter(sql).await {
        Ok(r) => r,
        Err(e) => return format!("{label}: ERR {:?}", code_of(&e)),
    };
    let names: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|col| col.name_str().into_owned())
        .collect();
    let rows: Vec<Row> = result.collect_and_drop().await.unwrap();
    format!(
        "{label}: {names:?} {}",
        rows.iter().map(row_text).collect::<Vec<_>>().join(" / ")
    )
}

// ---------------------------------------------------------------------------------------
// ROW_COUNT() after a CALL whose procedure returns a result set
// ---------------------------------------------------------------------------------------

/// A CALL answers with its procedure's result sets and a final OK; ROW_COUNT() afterwards
/// is that OK's (0 here), not the -1 a lone SELECT leaves.
async fn call_row_count_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let t = format!("{prefix}_{i}");
    c.query_drop(format!(
        "CREATE OR REPLACE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ))
    .await
    .unwrap();
    c.query_drop(format!("INSERT INTO {t} (v) SELECT seq FROM seq_1_to_20"))
        .await
        .unwrap();
    c.query_drop(format!(
        "CREATE OR REPLACE PROCEDURE {t}_one() SELECT * FROM {t} LIMIT 3"
    ))
    .await
    .unwrap();
    let mut out = Vec::new();
    for round in 0..3 {
        // Another value on the backend first: an UPDATE of 1 + i rows.
        c.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id <= {}", 1 + i))
            .await
            .unwrap();
        c.query_drop(format!("CALL {t}_one()")).await.unwrap();
        out.push(
            seen_query(
                c,
                &format!("after CALL {round}"),
                "SELECT ROW_COUNT(), FOUND_ROWS()",
            )
            .await,
        );
    }
    c.query_drop(format!("DROP PROCEDURE {t}_one"))
        .await
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_count_after_a_call_with_a_result_set_is_its_final_oks() {
    fresh_db("t_audit_call").await;
    audit_matches(
        "ROW_COUNT() after CALL",
        "t_audit_call",
        &call_row_count_script,
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// MariaDB sequences: LASTVAL() / PREVIOUS VALUE FOR are per connection
// ---------------------------------------------------------------------------------------

/// NEXTVAL() sets the session's last value of that sequence; LASTVAL() and
/// `PREVIOUS VALUE FOR` read it back (NULL in a session that never took one).
async fn sequence_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let s = format!("{prefix}_{i}_seq");
    c.query_drop(format!(
        "CREATE OR REPLACE SEQUENCE {s} START WITH {} INCREMENT BY 1",
        100 * i + 1
    ))
    .await
    .unwrap();
    let mut out = Vec::new();
    out.push(seen_query(c, "before", &format!("SELECT LASTVAL({s})")).await);
    out.push(seen_query(c, "next", &format!("SELECT NEXTVAL({s})")).await);
    out.push(seen_query(c, "next again", &format!("SELECT NEXT VALUE FOR {s}")).await);
    for round in 0..3 {
        c.query_drop("SELECT 1").await.unwrap();
        out.push(
            seen_query(
                c,
                &format!("last {round}"),
                &format!("SELECT LASTVAL({s}), PREVIOUS VALUE FOR {s}"),
            )
            .await,
        );
    }
    out.push(
        seen_query(
            c,
            "setval",
            &format!("SELECT SETVAL({s}, {})", 100 * i + 50),
        )
        .await,
    );
    out.push(seen_query(c, "next after setval", &format!("SELECT NEXTVAL({s})")).await);
    c.query_drop("DO 1").await.unwrap();
    out.push(seen_query(c, "last after setval", &format!("SELECT LASTVAL({s})")).await);
    out.push(seen_exec(c, "prepared last", &format!("SELECT LASTVAL({s})")).await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_lastval_is_the_sessions_own() {
    fresh_db("t_audit_seq").await;
    audit_matches("LASTVAL()", "t_audit_seq", &sequence_script).await;
}

// ---------------------------------------------------------------------------------------
// Identity: KILL QUERY of oneself, @@pseudo_thread_id, PROCESSLIST's own row
// ---------------------------------------------------------------------------------------

/// `KILL QUERY <own id>` interrupts the KILL statement itself (1317), and the session goes
/// on; `@@pseudo_thread_id` is the connection id. PROCESSLIST's row of `CONNECTION_ID()` is
/// directly the session's own, running this very statement; through sluice the server lists
/// its backend connections by their own ids (a documented limit, docs/semantics.md), so the
/// script asserts what is documented: the row found is never one of another statement.
async fn identity_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    let id = c.id();
    let mut out = Vec::new();
    out.push(seen_message(c, "kill own query", &format!("KILL QUERY {id}")).await);
    out.push(seen_query(c, "after", "SELECT 'still here'").await);
    out.push(
        seen_query(
            c,
            "pseudo_thread_id",
            "SELECT @@pseudo_thread_id = CONNECTION_ID(), @@session.pseudo_thread_id = CONNECTION_ID()",
        )
        .await,
    );
    // Rows of CONNECTION_ID() that run another statement than this one (its text has the
    // session's mark): none directly, none through sluice.
    let mark = format!("own row of session {i}.");
    out.push(
        seen_query(
            c,
            "another statement's PROCESSLIST row",
            &format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE ID = CONNECTION_ID() AND NOT INFO LIKE '%{mark}%'"
            ),
        )
        .await,
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_id_in_kill_query_pseudo_thread_id_and_processlist() {
    fresh_db("t_audit_id").await;
    audit_matches("identity", "t_audit_id", &identity_script).await;
}

// ---------------------------------------------------------------------------------------
// The statement text as the client sent it: error messages and other spellings
// ---------------------------------------------------------------------------------------

/// A syntax error quotes the statement from where parsing stopped: the client's own text,
/// not sluice's rewrite of LAST_INSERT_ID()/CONNECTION_ID()/ROW_COUNT(); a backquoted
/// function name is the same function; a table value constructor names its column after
/// the client's text.
async fn text_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    // One name in every run (they run one after another): the messages quote it.
    let t = format!("typo_{i}");
    c.query_drop(format!(
        "CREATE OR REPLACE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ))
    .await
    .unwrap();
    c.query_drop(format!("INSERT INTO {t} (v) VALUES (1), (2)"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for sql in [
        format!("SELECT * FORM {t} WHERE id = LAST_INSERT_ID()"),
        format!("SELECT v FROM {t} WHERE id = CONNECTION_ID() ORDER BY v LIMT 1"),
        "SELECT ROW_COUNT() ROW_COUNT()".to_string(),
    ] {
        out.push(seen_message(c, "typo", &sql).await);
    }
    out.push(seen_columns(c, "backquoted", "SELECT `LAST_INSERT_ID`()").await);
    out.push(seen_columns(c, "values", "VALUES (LAST_INSERT_ID())").await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_keep_the_clients_text() {
    fresh_db("t_audit_text").await;
    audit_matches("statement text", "t_audit_text", &text_script).await;
}

// ---------------------------------------------------------------------------------------
// Warnings of pipelined reads
// ---------------------------------------------------------------------------------------

/// Reads that raise a warning, each followed by the session's diagnostics reads: directly
/// the warning is always there (the read names no table, nor do the reads after it).
async fn pipelined_warnings_script(i: usize, _prefix: &str, c: &mut Conn) -> Seen {
    let mut out = Vec::new();
    for round in 0..4 {
        out.push(
            seen_query(
                c,
                &format!("read {round}"),
                &format!("SELECT CAST('{i}x{round}' AS SIGNED)"),
            )
            .await,
        );
        out.push(seen_query(c, &format!("warnings {round}"), "SHOW WARNINGS").await);
        out.push(
            seen_query(
                c,
                &format!("count {round}"),
                "SELECT @@warning_count, @@error_count",
            )
            .await,
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_reads_keep_their_warnings() {
    fresh_db("t_audit_pipew").await;
    // All `reference::SESSIONS` at once, so that reads queue and batch.
    matches_direct(
        "warnings of pipelined reads",
        "t_audit_pipew",
        &pipelined_warnings_script,
        equal,
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// Prepared statements reading ROW_COUNT() / FOUND_ROWS()
// ---------------------------------------------------------------------------------------

/// Prepared statements (as mysql_async, Node mysql2, PDO with native prepares and
/// Connector/J with server prepares send them) that read what the previous statement left.
async fn prepared_outcome_script(i: usize, prefix: &str, c: &mut Conn) -> Seen {
    let t = format!("{prefix}_{i}");
    c.query_drop(format!(
        "CREATE OR REPLACE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ))
    .await
    .unwrap();
    c.query_drop(format!("INSERT INTO {t} (v) SELECT seq FROM seq_1_to_30"))
        .await
        .unwrap();
    let mut out = Vec::new();
    for round in 0..3 {
        c.exec_drop(
            format!("UPDATE {t} SET v = v + 1 WHERE id <= ?"),
            (1 + i + round,),
        )
        .await
        .unwrap();
        out.push(seen_exec(c, &format!("row_count {round}"), "SELECT ROW_COUNT()").await);
        c.exec_drop(format!("SELECT * FROM {t} WHERE id <= ?"), (2 + i + round,))
            .await
            .unwrap();
        out.push(seen_exec(c, &format!("found_rows {round}"), "SELECT FOUND_ROWS()").await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_row_count_and_found_rows_are_the_sessions_own() {
    fresh_db("t_audit_prep").await;
    audit_matches(
        "prepared ROW_COUNT()/FOUND_ROWS()",
        "t_audit_prep",
        &prepared_outcome_script,
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// Raw protocol: COM_STMT_RESET, COM_INIT_DB, COM_STMT_FETCH
// ---------------------------------------------------------------------------------------

const WAIT: Duration = Duration::from_secs(20);
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;

/// One answer of a raw command, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Ok { affected: u64 },
    Err { code: u16, message: String },
    Rows(Vec<Vec<Option<String>>>),
    Eof,
    Lost,
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Ok { affected } => write!(f, "ok rows={affected}"),
            Reply::Err { code, message } => write!(f, "ERR {code} {message}"),
            Reply::Rows(rows) => {
                let rows: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        r.iter()
                            .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                    .collect();
                write!(f, "{}", rows.join(" / "))
            }
            Reply::Eof => write!(f, "eof"),
            Reply::Lost => write!(f, "connection lost"),
        }
    }
}

/// A length-encoded integer at `pos`, and the position after it.
fn lenenc(p: &[u8], pos: usize) -> (u64, usize) {
    match p[pos] {
        0xfc => (
            u64::from(u16::from_le_bytes([p[pos + 1], p[pos + 2]])),
            pos + 3,
        ),
        0xfd => (
            u64::from(u32::from_le_bytes([p[pos + 1], p[pos + 2], p[pos + 3], 0])),
            pos + 4,
        ),
        0xfe => (
            u64::from_le_bytes(p[pos + 1..pos + 9].try_into().unwrap()),
            pos + 9,
        ),
        b => (u64::from(b), pos + 1),
    }
}

/// The first byte of a packet.
fn head(p: &[u8]) -> Option<u8> {
    p.iter().next().copied()
}

fn is_eof(p: &[u8]) -> bool {
    head(p) == Some(0xFE) && p.len() < 9
}

fn err_of(p: &[u8]) -> Reply {
    let code = u16::from_le_bytes([p[1], p[2]]);
    let text = if p.get(3) == Some(&b'#') {
        &p[9..]
    } else {
        &p[3..]
    };
    Reply::Err {
        code,
        message: String::from_utf8_lossy(text).into_owned(),
    }
}

/// A raw client session (no CLIENT_DEPRECATE_EOF, no multi-statements).
struct Raw {
    w: Wire,
}

impl Raw {
    async fn login(target: Target<'_>, db: &str) -> Raw {
        let mut raw = Raw::fresh(target).await;
        let used = raw.query(&format!("USE `{db}`")).await;
        assert_eq!(used, vec![Reply::Ok { affected: 0 }], "USE {db}");
        raw
    }

    /// A session that has run nothing yet (no default database, no statement).
    async fn fresh(target: Target<'_>) -> Raw {
        let w = match target {
            Target::Direct => {
                let s = server();
                let addr = format!("{}:{}", s.host, s.port).parse().unwrap();
                Wire::login(addr, APP_USER, APP_PASSWORD).await
            }
            Target::Sluice(p) => {
                let (user, password) = login_for(p, "app", "secret");
                Wire::login(p.local_addr(), user, password).await
            }
        }
        .expect("raw login");
        Raw { w }
    }

    async fn packet(&mut self) -> Option<Vec<u8>> {
        self.w.packet(WAIT).await.map(|(_, p)| p)
    }

    /// Sends a command and reads its answer (all result sets of it).
    async fn command(&mut self, code: u8, body: &[u8]) -> Vec<Reply> {
        if self.w.command(code, body).await.is_err() {
            return vec![Reply::Lost];
        }
        self.answer().await
    }

    async fn query(&mut self, sql: &str) -> Vec<Reply> {
        self.command(0x03, sql.as_bytes()).await
    }

    /// The first answer of `query`, as text.
    async fn text(&mut self, sql: &str) -> String {
        self.query(sql)
            .await
            .first()
            .map(|r| r.to_string())
            .unwrap_or_default()
    }

    async fn answer(&mut self) -> Vec<Reply> {
        let mut replies = Vec::new();
        loop {
            let Some(first) = self.packet().await else {
                replies.push(Reply::Lost);
                return replies;
            };
            let more = match head(&first) {
                Some(0x00) => {
                    let (affected, pos) = lenenc(&first, 1);
                    let (_, pos) = lenenc(&first, pos);
                    let status = u16::from_le_bytes([first[pos], first[pos + 1]]);
                    replies.push(Reply::Ok { affected });
                    status & SERVER_MORE_RESULTS_EXISTS != 0
                }
                Some(0xFF) => {
                    replies.push(err_of(&first));
                    false
                }
                _ if is_eof(&first) => {
                    replies.push(Reply::Eof);
                    false
                }
                _ => {
                    let (columns, _) = lenenc(&first, 0);
                    for _ in 0..columns {
                        self.packet().await;
                    }
                    self.packet().await; // EOF after the column definitions
                    let mut rows = Vec::new();
                    let status = loop {
                        let Some(p) = self.packet().await else {
                            replies.push(Reply::Lost);
                            return replies;
                        };
                        if head(&p) == Some(0xFF) {
                            replies.push(err_of(&p));
                            return replies;
                        }
                        if is_eof(&p) {
                            break u16::from_le_bytes([p[3], p[4]]);
                        }
                        let mut row = Vec::new();
                        let mut pos = 0;
                        for _ in 0..columns {
                            if p[pos] == 0xFB {
                                row.push(None);
                                pos += 1;
                            } else {
                                let (len, at) = lenenc(&p, pos);
                                let end = at + len as usize;
                                row.push(Some(String::from_utf8_lossy(&p[at..end]).into_owned()));
                                pos = end;
                            }
                        }
                        rows.push(row);
                    };
                    replies.push(Reply::Rows(rows));
                    status & SERVER_MORE_RESULTS_EXISTS != 0
                }
            };
            if !more {
                return replies;
            }
        }
    }

    /// COM_STMT_PREPARE: the statement id the client got, or the error.
    async fn prepare(&mut self, sql: &str) -> Result<u32, Reply> {
        if self.w.command(0x16, sql.as_bytes()).await.is_err() {
            return Err(Reply::Lost);
        }
        let Some(first) = self.packet().await else {
            return Err(Reply::Lost);
        };
        if head(&first) == Some(0xFF) {
            return Err(err_of(&first));
        }
        let id = u32::from_le_bytes(first[1..5].try_into().unwrap());
        let columns = u16::from_le_bytes([first[5], first[6]]);
        let params = u16::from_le_bytes([first[7], first[8]]);
        for n in [params, columns] {
            if n > 0 {
                for _ in 0..=n {
                    self.packet().await; // n definitions and their EOF
                }
            }
        }
        Ok(id)
    }

    async fn stmt_reset(&mut self, id: u32) -> String {
        self.command(0x1A, &id.to_le_bytes())
            .await
            .first()
            .map(|r| r.to_string())
            .unwrap_or_default()
    }

    /// COM_STMT_FETCH of `rows` rows; only its error matters to these tests.
    async fn fetch(&mut self, id: u32, rows: u32) -> String {
        let mut body = id.to_le_bytes().to_vec();
        body.extend_from_slice(&rows.to_le_bytes());
        if self.w.command(0x1C, &body).await.is_err() {
            return Reply::Lost.to_string();
        }
        loop {
            let Some(p) = self.packet().await else {
                return Reply::Lost.to_string();
            };
            if head(&p) == Some(0xFF) {
                return err_of(&p).to_string();
            }
            if is_eof(&p) {
                return "fetched".into();
            }
        }
    }

    async fn init_db(&mut self, db: &str) -> String {
        self.command(0x02, db.as_bytes())
            .await
            .first()
            .map(|r| r.to_string())
            .unwrap_or_default()
    }
}

/// Runs `script` in [`AUDIT_SESSIONS`] raw sessions at once, directly and at every cell,
/// and asserts that each session saw what it saw directly.
async fn raw_matches_direct<S>(name: &str, db: &str, script: &S)
where
    S: AsyncFn(usize, &str, &mut Raw) -> Seen,
{
    async fn run<S>(target: Target<'_>, db: &str, prefix: &str, script: &S) -> Vec<Seen>
    where
        S: AsyncFn(usize, &str, &mut Raw) -> Seen,
    {
        let mut sessions = Vec::new();
        for _ in 0..AUDIT_SESSIONS {
            sessions.push(Raw::login(target, db).await);
        }
        let runs = sessions
            .iter_mut()
            .enumerate()
            .map(|(i, r)| script(i, prefix, r));
        futures_util::future::join_all(runs).await
    }
    let reference = run(Target::Direct, db, "d", script).await;
    let mut failed = Vec::new();
    for (n, (pool, depth)) in CELLS.iter().enumerate() {
        let proxy = sluice_at(*pool, *depth).await;
        let seen = run(Target::Sluice(&proxy), db, &format!("s{n}"), script).await;
        proxy.shutdown().await;
        let diff = differences(&reference, &seen, equal);
        if !diff.is_empty() {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}: {} differences, e.g.\n{}",
                diff.len(),
                diff.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: through sluice, sessions saw other values than directly:\n{}",
        failed.join("\n\n")
    );
}

/// The label of a new session's first FOUND_ROWS().
const FIRST_FOUND_ROWS: &str = "first FOUND_ROWS()";

/// A session's first statement, and its first after COM_RESET_CONNECTION, reads ROW_COUNT()
/// and FOUND_ROWS() as a new connection has them, not as the backend it lands on was left
/// by another session (here one that read three rows and inserted three, just before).
/// Directly, a new connection's first FOUND_ROWS() is 0 on a new server thread and the
/// previous connection's last value on one the server took from its thread cache; through
/// sluice it is always a new thread's 0, so that line is checked on its own.
async fn first_read_script(i: usize, prefix: &str, r: &mut Raw, target: Target<'_>) -> Seen {
    let t = format!("{prefix}_{i}");
    r.query(&format!("CREATE OR REPLACE TABLE {t} (a INT)"))
        .await;
    r.query(&format!("INSERT INTO {t} VALUES (1), (2), (3)"))
        .await;
    let mut out = Vec::new();
    for round in 0..3 {
        r.query(&format!("SELECT * FROM {t}")).await;
        r.query(&format!("INSERT INTO {t} VALUES (4), (5), (6)"))
            .await;
        let mut fresh = Raw::fresh(target).await;
        let first = fresh.text("SELECT ROW_COUNT(), FOUND_ROWS()").await;
        let (row_count, found_rows) = first.split_once('|').unwrap_or((&first, ""));
        out.push(format!("first read {round}: {row_count}"));
        out.push(format!("{FIRST_FOUND_ROWS} {round}: {found_rows}"));
        out.push(format!(
            "second read {round}: {}",
            fresh.text("SELECT ROW_COUNT(), FOUND_ROWS()").await
        ));
        let reset = fresh.command(0x1f, &[]).await;
        out.push(format!("reset {round}: {}", reset[0]));
        out.push(format!(
            "after reset {round}: {}",
            fresh.text("SELECT ROW_COUNT(), FOUND_ROWS()").await
        ));
    }
    out
}

/// Every session's lines but its first FOUND_ROWS() ones.
fn without_found(seen: &[Seen]) -> Vec<Seen> {
    seen.iter()
        .map(|s| {
            s.iter()
                .filter(|l| !l.starts_with(FIRST_FOUND_ROWS))
                .cloned()
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_first_row_count_and_found_rows_are_a_new_connections() {
    fresh_db("t_audit_first").await;
    async fn run(target: Target<'_>, prefix: &str) -> Vec<Seen> {
        let mut sessions = Vec::new();
        for _ in 0..AUDIT_SESSIONS {
            sessions.push(Raw::login(target, "t_audit_first").await);
        }
        let runs = sessions
            .iter_mut()
            .enumerate()
            .map(|(i, r)| first_read_script(i, prefix, r, target));
        futures_util::future::join_all(runs).await
    }
    let reference = run(Target::Direct, "d").await;
    let mut failed = Vec::new();
    for (n, (pool, depth)) in CELLS.iter().enumerate() {
        let proxy = sluice_at(*pool, *depth).await;
        let seen = run(Target::Sluice(&proxy), &format!("s{n}")).await;
        proxy.shutdown().await;
        let found: Vec<&String> = seen
            .iter()
            .flatten()
            .filter(|l| l.starts_with(FIRST_FOUND_ROWS))
            .collect();
        assert_eq!(found.len(), AUDIT_SESSIONS * 3, "{seen:?}");
        for line in found {
            assert!(line.ends_with(": 0"), "pool_size {pool}: {line}");
        }
        let diff = differences(&without_found(&reference), &without_found(&seen), equal);
        if !diff.is_empty() {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}: {}",
                diff.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "a new session's first read differs from a new connection's:\n{}",
        failed.join("\n\n")
    );
}

/// COM_STMT_RESET sets ROW_COUNT() to 0 on the server (mysql-connector-python's prepared
/// cursor sends one before every execution), whether or not the statement ran yet.
async fn stmt_reset_script(i: usize, prefix: &str, r: &mut Raw) -> Seen {
    let t = format!("{prefix}_{i}");
    r.query(&format!("CREATE OR REPLACE TABLE {t} (a INT)"))
        .await;
    let id = r.prepare("SELECT 1").await.expect("prepare");
    let mut out = Vec::new();
    for round in 0..3 {
        r.query(&format!("INSERT INTO {t} VALUES (1), (2), (3)"))
            .await;
        out.push(format!("reset {round}: {}", r.stmt_reset(id).await));
        out.push(format!(
            "after reset {round}: {}",
            r.text("SELECT ROW_COUNT()").await
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stmt_reset_sets_row_count_to_zero() {
    fresh_db("t_audit_reset").await;
    raw_matches_direct("COM_STMT_RESET", "t_audit_reset", &stmt_reset_script).await;
}

/// COM_INIT_DB sets ROW_COUNT() to 0, as COM_PING does.
async fn init_db_script(i: usize, prefix: &str, r: &mut Raw) -> Seen {
    let t = format!("{prefix}_{i}");
    r.query(&format!("CREATE OR REPLACE TABLE {t} (a INT)"))
        .await;
    let mut out = Vec::new();
    for round in 0..2 {
        r.query(&format!("INSERT INTO {t} VALUES (1), (2), (3)"))
            .await;
        out.push(format!(
            "init_db {round}: {}",
            r.init_db("t_audit_initdb").await
        ));
        out.push(format!(
            "after init_db {round}: {}",
            r.text("SELECT ROW_COUNT(), DATABASE()").await
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_db_sets_row_count_to_zero() {
    fresh_db("t_audit_initdb").await;
    raw_matches_direct("COM_INIT_DB", "t_audit_initdb", &init_db_script).await;
}

/// A failed `USE` or COM_INIT_DB leaves its error in the diagnostics area (SHOW ERRORS,
/// @@error_count) through the table-less statements after it (a successful `USE`
/// included), as every failed statement does.
async fn failed_use_script(i: usize, _prefix: &str, r: &mut Raw) -> Seen {
    let nowhere = format!("t_audit_nowhere_{i}");
    let db = "t_audit_use";
    let mut out = Vec::new();
    let mut step = async |r: &mut Raw, label: &str, sql: &str| {
        let seen = r.text(sql).await.replace(&nowhere, "<db>");
        out.push(format!("{label}: {seen}"));
    };
    step(r, "failed use", &format!("USE {nowhere}")).await;
    step(r, "then", "SELECT DATABASE()").await;
    step(r, "use", &format!("USE {db}")).await;
    step(r, "errors", "SHOW ERRORS").await;
    step(r, "failed use", &format!("USE {nowhere}")).await;
    step(r, "right after", "SELECT ROW_COUNT(), @@error_count").await;
    step(r, "failed use", &format!("USE {nowhere}")).await;
    step(r, "errors", "SHOW ERRORS").await;
    let failed = r.init_db(&nowhere).await.replace(&nowhere, "<db>");
    out.push(format!("failed init_db: {failed}"));
    out.push(format!("init_db: {}", r.init_db(db).await));
    out.push(format!("counts: {}", r.text("SELECT @@error_count").await));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_use_leaves_its_error_in_the_diagnostics() {
    fresh_db("t_audit_use").await;
    raw_matches_direct(
        "failed USE / COM_INIT_DB",
        "t_audit_use",
        &failed_use_script,
    )
    .await;
}

/// An error about a prepared statement names it by the id the client knows it by.
async fn stmt_id_script(_i: usize, _prefix: &str, r: &mut Raw) -> Seen {
    let mut out = Vec::new();
    // A few statements first, so that ids differ between the client and a backend.
    for n in 0..3 {
        r.prepare(&format!("SELECT {n}")).await.expect("prepare");
    }
    let id = r
        .prepare("SELECT seq FROM seq_1_to_5")
        .await
        .expect("prepare");
    let fetched = r.fetch(id, 2).await;
    out.push(format!(
        "fetch without a cursor: {}",
        fetched.replace(&format!("({id})"), "(<own id>)")
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_errors_name_the_clients_statement_id() {
    fresh_db("t_audit_stmtid").await;
    raw_matches_direct("statement ids in errors", "t_audit_stmtid", &stmt_id_script).await;
}

// ---------------------------------------------------------------------------------------
// Several cells at once: scenarios that wait (timeouts), each in a sluice of its own
// ---------------------------------------------------------------------------------------

/// Runs `scenario` directly and at every cell at once (each with its own sluice, built by
/// `cfg_for(pool, depth)`), and asserts each cell's transcript equals the direct one.
async fn cells_at_once<S>(name: &str, script: &S, cfg_for: impl Fn(u32, u32) -> sluice::Config)
where
    S: AsyncFn(Target<'_>, &str) -> Seen,
{
    let mut proxies = Vec::new();
    for (pool, depth) in CELLS {
        proxies.push(start(cfg_for(pool, depth)).await);
    }
    let direct = script(Target::Direct, "d");
    let prefixes: Vec<String> = (0..CELLS.len()).map(|n| format!("s{n}")).collect();
    let through = futures_util::future::join_all(
        proxies
            .iter()
            .zip(&prefixes)
            .map(|(p, prefix)| script(Target::Sluice(p), prefix)),
    );
    let (reference, seen) = futures_util::future::join(direct, through).await;
    for p in proxies {
        p.shutdown().await;
    }
    let mut failed = Vec::new();
    for ((pool, depth), seen) in CELLS.iter().zip(seen) {
        if seen != reference {
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}:\n  direct: {reference:?}\n  sluice: {seen:?}"
            ));
        }
    }
    assert!(failed.is_empty(), "{name}:\n{}", failed.join("\n"));
}

fn connect_opts(target: Target<'_>, db: &str) -> Opts {
    match target {
        Target::Direct => {
            let s = server();
            opts_at(
                format!("{}:{}", s.host, s.port).parse().unwrap(),
                APP_USER,
                APP_PASSWORD,
                Some(db),
            )
            .into()
        }
        Target::Sluice(p) => opts(p, "app", "secret", Some(db)),
    }
}

/// Whether a statement got an answer (`ok: ...`), the server's error, or the connection
/// was lost (any client-side error: directly, MariaDB closed it).
async fn outcome(c: &mut Conn, label: &str, sql: &str) -> String {
    match c.query::<Row, _>(sql).await {
        Ok(rows) => format!(
            "{label}: ok {}",
            rows.iter().map(row_text).collect::<Vec<_>>().join(" / ")
        ),
        Err(mysql_async::Error::Server(e)) => format!("{label}: ERR {}", e.code),
        Err(_) => format!("{label}: connection lost"),
    }
}

/// While one session holds a transaction, autocommit-off reads, or a named lock, another
/// session's statements run at once, as directly: a read answers, a row lock conflict ends
/// in the server's lock wait timeout (1205), a held named lock reads as taken. A statement
/// of a session stuck in sluice's slot queue would end in 9001 after `queue_timeout`.
async fn holder_script(target: Target<'_>, prefix: &str) -> Seen {
    let db = "t_audit_hold";
    let t = format!("{prefix}_rows");
    let lock = format!("t_audit_hold_{prefix}");
    let mut a = Conn::new(connect_opts(target, db)).await.unwrap();
    let mut b = Conn::new(connect_opts(target, db)).await.unwrap();
    a.query_drop(format!(
        "CREATE OR REPLACE TABLE {t} (id INT PRIMARY KEY, v INT)"
    ))
    .await
    .unwrap();
    a.query_drop(format!("INSERT INTO {t} VALUES (1, 1), (2, 2)"))
        .await
        .unwrap();
    let mut out = Vec::new();
    // A transaction that wrote a row.
    a.query_drop("BEGIN").await.unwrap();
    a.query_drop(format!("UPDATE {t} SET v = 10 WHERE id = 1"))
        .await
        .unwrap();
    out.push(
        outcome(
            &mut b,
            "read another row",
            &format!("SELECT v FROM {t} WHERE id = 2"),
        )
        .await,
    );
    out.push(outcome(&mut b, "set", "SET SESSION innodb_lock_wait_timeout = 1").await);
    out.push(
        outcome(
            &mut b,
            "write the row",
            &format!("UPDATE {t} SET v = 0 WHERE id = 1"),
        )
        .await,
    );
    a.query_drop("ROLLBACK").await.unwrap();
    // autocommit off, as PEP 249 drivers (PyMySQL, mysqlclient, connector-python) start.
    a.query_drop("SET autocommit = 0").await.unwrap();
    a.query_drop(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .unwrap();
    out.push(
        outcome(
            &mut b,
            "read beside autocommit off",
            &format!("SELECT COUNT(*) FROM {t}"),
        )
        .await,
    );
    a.query_drop("COMMIT").await.unwrap();
    a.query_drop("SET autocommit = 1").await.unwrap();
    // A named lock.
    a.query_drop(format!("DO GET_LOCK('{lock}', 0)"))
        .await
        .unwrap();
    let read = format!("SELECT IS_FREE_LOCK('{lock}'), GET_LOCK('{lock}', 0)");
    out.push(outcome(&mut b, "the lock", &read).await);
    a.query_drop(format!("DO RELEASE_LOCK('{lock}')"))
        .await
        .unwrap();
    for c in [a, b] {
        let _ = c.disconnect().await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_transaction_or_lock_does_not_stall_other_sessions() {
    fresh_db("t_audit_hold").await;
    cells_at_once("sessions beside a holder", &holder_script, |pool, depth| {
        let mut cfg = config(pool);
        cfg.pipeline_depth = depth;
        // Long enough for any statement here; what waits longer waits on the holder.
        cfg.queue_timeout = Duration::from_millis(1500);
        cfg
    })
    .await;
}

/// A session's own `wait_timeout`: directly, MariaDB closes the connection once the session
/// has been idle that long, and the next statement finds it gone.
async fn wait_timeout_script(target: Target<'_>, _prefix: &str) -> Seen {
    let mut c = Conn::new(connect_opts(target, "t_audit_wait"))
        .await
        .unwrap();
    let mut out = Vec::new();
    out.push(outcome(&mut c, "set", "SET SESSION wait_timeout = 1").await);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    out.push(outcome(&mut c, "after 2.5 s idle", "SELECT 'still connected'").await);
    let _ = c.disconnect().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends_after_its_wait_timeout() {
    fresh_db("t_audit_wait").await;
    cells_at_once("wait_timeout", &wait_timeout_script, |pool, depth| {
        let mut cfg = config(pool);
        cfg.pipeline_depth = depth;
        cfg
    })
    .await;
}

/// A command over the server's max_allowed_packet (64 MiB on the test server and in sluice),
/// sent in several 16 MiB packets: the client gets the server's 1153, not a protocol error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_command_gets_error_1153() {
    async fn send(target: Target<'_>) -> String {
        let opts = mysql_async::OptsBuilder::from_opts(connect_opts(target, "t_audit_big"))
            .max_allowed_packet(Some(256 << 20));
        let mut c = Conn::new(opts).await.unwrap();
        let sql = format!("SELECT LENGTH('{}')", "a".repeat((64 << 20) + 100));
        let seen = match c.query_drop(sql).await {
            Ok(()) => "ok".to_string(),
            Err(mysql_async::Error::Server(e)) => format!("ERR {}", e.code),
            Err(e) => format!("client error: {e}"),
        };
        drop(c);
        seen
    }
    fresh_db("t_audit_big").await;
    let reference = send(Target::Direct).await;
    assert_eq!(reference, "ERR 1153", "the direct reference");
    let proxy = sluice_at(1, 1).await;
    let seen = send(Target::Sluice(&proxy)).await;
    proxy.shutdown().await;
    assert_eq!(seen, reference, "pool_size 1, pipeline_depth 1");
}

/// Sessions with autocommit off, as PEP 249 drivers (PyMySQL, mysqlclient,
/// connector-python) and JDBC with `autocommit=false` start: each one's first read opens a
/// transaction it keeps until it commits. More such sessions than `pool_size` read at once
/// (and commit only once all have read, as sessions that wait on one another do): directly
/// every read answers.
async fn autocommit_off_script(target: Target<'_>, prefix: &str) -> Seen {
    const READERS: usize = 6;
    let db = "t_audit_ac0";
    let t = format!("{prefix}_rows");
    let mut setup = Conn::new(connect_opts(target, db)).await.unwrap();
    setup
        .query_drop(format!(
            "CREATE OR REPLACE TABLE {t} (id INT PRIMARY KEY, v INT)"
        ))
        .await
        .unwrap();
    setup
        .query_drop(format!("INSERT INTO {t} VALUES (1, 1), (2, 2)"))
        .await
        .unwrap();
    let _ = setup.disconnect().await;
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let mut c = Conn::new(connect_opts(target, db)).await.unwrap();
        c.query_drop("SET autocommit = 0").await.unwrap();
        readers.push(c);
    }
    let all_read = tokio::sync::Barrier::new(READERS);
    let runs = readers.iter_mut().enumerate().map(|(i, c)| {
        let (t, all_read) = (&t, &all_read);
        async move {
            let seen = outcome(
                c,
                &format!("reader {i}"),
                &format!("SELECT COUNT(*) FROM {t}"),
            )
            .await;
            all_read.wait().await;
            let _ = c.query_drop("COMMIT").await;
            seen
        }
    });
    let seen = futures_util::future::join_all(runs).await;
    for c in readers {
        let _ = c.disconnect().await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autocommit_off_sessions_beyond_pool_size_all_run() {
    fresh_db("t_audit_ac0").await;
    cells_at_once("autocommit off", &autocommit_off_script, |pool, depth| {
        let mut cfg = config(pool);
        cfg.pipeline_depth = depth;
        cfg.queue_timeout = Duration::from_millis(1500);
        cfg
    })
    .await;
}
