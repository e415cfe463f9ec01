//! Direct MariaDB as the reference for what sessions observe: one script run by many
//! sessions at once, first directly, then through sluice at pool sizes 1 and 4, each with
//! pipelining off (`pipeline_depth` 1) and on (16), and each session's observations
//! compared with what the same session saw directly.
//!
//! Scripts get their session's index and a name prefix of their own run (tables differ
//! per run, so auto-increment values start alike in every run) and return what they saw as
//! text lines.

use mysql_async::prelude::*;
use mysql_async::{Conn, Row, Value};
use sluice::ProxyHandle;

use crate::harness::*;

/// Sessions that run a script at once.
pub const SESSIONS: usize = 24;

/// (pool_size, pipeline_depth) of every sluice run.
pub const CELLS: [(u32, u32); 4] = [(1, 1), (1, 16), (4, 1), (4, 16)];

/// What one session saw, line by line.
pub type Seen = Vec<String>;

/// Where a run's sessions connect.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    Direct,
    Sluice(&'a ProxyHandle),
}

impl Target<'_> {
    pub async fn connect(self, db: Option<&str>) -> Conn {
        match self {
            Target::Direct => direct(db).await,
            Target::Sluice(p) => connect(p, db).await,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Target::Direct => "direct",
            Target::Sluice(_) => "sluice",
        }
    }
}

/// Runs `script(i, prefix, conn)` in `sessions` sessions at once and returns what each saw.
pub async fn observe<S>(
    target: Target<'_>,
    db: &str,
    sessions: usize,
    prefix: &str,
    script: &S,
) -> Vec<Seen>
where
    S: AsyncFn(usize, &str, &mut Conn) -> Seen,
{
    let mut conns = Vec::new();
    for _ in 0..sessions {
        conns.push(target.connect(Some(db)).await);
    }
    let runs = conns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| script(i, prefix, c));
    let seen = futures_util::future::join_all(runs).await;
    for c in conns {
        let _ = c.disconnect().await;
    }
    seen
}

/// One sluice in front of the test server at `pool` and `depth`.
pub async fn sluice_at(pool: u32, depth: u32) -> ProxyHandle {
    let mut cfg = config(pool);
    cfg.pipeline_depth = depth;
    start(cfg).await
}

/// Sessions whose observations differ from direct's, described line by line (empty: all
/// the same). `same` says whether a sluice line counts as the direct one.
pub fn differences(
    direct: &[Seen],
    through: &[Seen],
    same: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (d, s)) in direct.iter().zip(through).enumerate() {
        if d.len() != s.len() {
            out.push(format!(
                "session {i}: {} lines directly, {} through sluice\n  direct: {d:?}\n  sluice: {s:?}",
                d.len(),
                s.len()
            ));
            continue;
        }
        for (n, (a, b)) in d.iter().zip(s).enumerate() {
            if !same(a, b) {
                out.push(format!("session {i} line {n}: direct {a:?}, sluice {b:?}"));
            }
        }
    }
    out
}

/// Runs `script` directly and in every cell of [`CELLS`]; panics listing every cell whose
/// sessions saw anything else than directly (`same` compares one line).
pub async fn matches_direct<S>(
    name: &str,
    db: &str,
    script: &S,
    same: impl Fn(&str, &str) -> bool + Copy,
) where
    S: AsyncFn(usize, &str, &mut Conn) -> Seen,
{
    let reference = observe(Target::Direct, db, SESSIONS, "d", script).await;
    let mut failed = Vec::new();
    for (n, (pool, depth)) in CELLS.iter().enumerate() {
        let proxy = sluice_at(*pool, *depth).await;
        let prefix = format!("s{n}");
        let seen = observe(Target::Sluice(&proxy), db, SESSIONS, &prefix, script).await;
        proxy.shutdown().await;
        let diff = differences(&reference, &seen, same);
        if !diff.is_empty() {
            let shown: Vec<&String> = diff.iter().take(12).collect();
            failed.push(format!(
                "pool_size {pool}, pipeline_depth {depth}: {} differences, e.g.\n{}",
                diff.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: through sluice, sessions saw other values than directly:\n{}",
        failed.join("\n\n")
    );
}

/// The exact comparison.
pub fn equal(a: &str, b: &str) -> bool {
    a == b
}

/// A value as text, the same for the text and the binary protocol.
pub fn text(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(d) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// A row as `a|b|c`.
pub fn row_text(row: &Row) -> String {
    (0..row.len())
        .map(|i| row.as_ref(i).map(text).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("|")
}

/// `label: rows` of a query (`label: ERR code` if it fails).
pub async fn seen_query(c: &mut Conn, label: &str, sql: &str) -> String {
    match c.query::<Row, _>(sql).await {
        Ok(rows) => format!(
            "{label}: {}",
            rows.iter().map(row_text).collect::<Vec<_>>().join(" / ")
        ),
        Err(e) => format!("{label}: ERR {:?}", code_of(&e)),
    }
}

/// `label: rows` of a prepared execution (prepared, executed once, closed).
pub async fn seen_exec(c: &mut Conn, label: &str, sql: &str) -> String {
    match c.exec::<Row, _, _>(sql, ()).await {
        Ok(rows) => format!(
            "{label}: {}",
            rows.iter().map(row_text).collect::<Vec<_>>().join(" / ")
        ),
        Err(e) => format!("{label}: ERR {:?}", code_of(&e)),
    }
}

/// Runs `sql`, and says how it ended: its OK's insert id, affected rows and warnings, or
/// its error code.
pub async fn seen_ok(c: &mut Conn, label: &str, sql: &str) -> String {
    match c.query_drop(sql).await {
        Ok(()) => format!(
            "{label}: ok id={:?} rows={} warnings={}",
            c.last_insert_id(),
            c.affected_rows(),
            c.get_warnings()
        ),
        Err(e) => format!("{label}: ERR {:?}", code_of(&e)),
    }
}
