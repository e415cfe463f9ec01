//! Whether a statement can be *proven* safe to run on a replica ([`ReadSafety`]): the fact
//! the router (`topology::route`) needs from the SQL text.
//!
//! Safe means: it reads data only, its result does not depend on which server or which
//! backend connection runs it (beyond what session replay moves), and it changes nothing a
//! later statement could see. The rules:
//! - SELECT (also `(SELECT ...)`, TABLE, VALUES, WITH ... SELECT), DESCRIBE/EXPLAIN, and the
//!   SHOW forms that describe the schema (SHOW TABLES, COLUMNS, INDEX, CREATE ..., DATABASES,
//!   TABLE STATUS, TRIGGERS, ...) are reads. Other SHOW forms describe the *server* (STATUS,
//!   PROCESSLIST, MASTER/SLAVE STATUS, VARIABLES, WARNINGS) and stay on the writer, because a
//!   replica would answer about itself.
//! - Not safe, whatever the kind: `FOR UPDATE`, `FOR SHARE`, `LOCK IN SHARE MODE` (locking
//!   reads); `SELECT ... INTO` (variables or files); `NEXT/PREVIOUS VALUE FOR`, NEXTVAL,
//!   LASTVAL, SETVAL (sequences); user-variable assignments (`@x :=`); the lock functions
//!   (GET_LOCK, RELEASE_LOCK, IS_FREE_LOCK, IS_USED_LOCK, ...: locks are per server);
//!   LAST_INSERT_ID, FOUND_ROWS, ROW_COUNT, SQL_CALC_FOUND_ROWS, SHOW WARNINGS (they read the
//!   previous statement's outcome, which ran on the writer); SLEEP and the replication waits
//!   (MASTER_GTID_WAIT, MASTER_POS_WAIT, WAIT_FOR_EXECUTED_GTID_SET, ...), which are used to
//!   wait *for* a server; EXPLAIN ANALYZE and ANALYZE (they run the statement).
//! - Any call to a function that is not a known builtin (a stored function: `f(...)`,
//!   `db.f(...)`, `` `f`(...) ``) is not safe: sluice cannot see whether it writes. A
//!   builtin missing from `builtins::BUILTINS` only costs a replica read, never correctness.
//! - A multi-statement is safe only if every statement is.
//! - Decided as safe on purpose: CONNECTION_ID() (sessions replace it with the client's id),
//!   reading `@x` and `@@vars` (session state is replayed; `@@server_id` answers for the
//!   server that ran it, which is how tests see where a read went), UUID(), UUID_SHORT()
//!   (unique across servers with distinct `server_id`s), RAND(), NOW().
//!
//! `START TRANSACTION READ ONLY` is its own verdict ([`ReadSafety::ReadOnlyBegin`]): the
//! transaction's statements may go to one replica.

use super::builtins::{BUILTINS, UNSAFE_BUILTINS};
use super::lexer::{is_kw, Tok, Token, WORD_BYTES};
use super::safety::{ReadSafety, WriterOnly};
use super::{Effect, Effects, StatementKind, Stmt, PREFIX};

/// The verdict for one finished statement of kind `kind`, from its first words and what the
/// scan noted in `stmt.unsafe_read` (effects are applied once for the query, in [`combine`]).
pub(super) fn statement(sql: &[u8], stmt: &Stmt, kind: StatementKind) -> ReadSafety {
    use ReadSafety::{ReadOnlyBegin, ReplicaSafe, WriterOnly as W};
    let w = |i: usize, kw: &[u8]| stmt.word(sql, i, kw);
    let verdict = match kind {
        StatementKind::Select => ReplicaSafe,
        StatementKind::Explain if w(1, b"analyze") => W(WriterOnly::NotARead),
        // EXPLAIN FOR CONNECTION <id>: connection ids are per server.
        StatementKind::Explain if stmt.has_word(sql, 1, b"connection") => {
            W(WriterOnly::ServerSpecific)
        }
        StatementKind::Explain => ReplicaSafe,
        StatementKind::Show => show(sql, stmt),
        StatementKind::Begin if w(0, b"start") && read_only_begin(sql, stmt) => ReadOnlyBegin,
        _ => W(WriterOnly::NotARead),
    };
    match (verdict, stmt.unsafe_read) {
        (ReplicaSafe, Some(why)) => W(why),
        (v, _) => v,
    }
}

/// SHOW forms that describe the schema (the same on every server of a replication set).
fn show(sql: &[u8], stmt: &Stmt) -> ReadSafety {
    const SCHEMA: [&[u8]; 17] = [
        b"character",
        b"charset",
        b"collation",
        b"columns",
        b"create",
        b"databases",
        b"events",
        b"fields",
        b"function",
        b"index",
        b"indexes",
        b"keys",
        b"procedure",
        b"schemas",
        b"table",
        b"tables",
        b"triggers",
    ];
    // SHOW FULL TABLES / FULL COLUMNS, but not SHOW FULL PROCESSLIST.
    let at = if stmt.word(sql, 1, b"full") { 2 } else { 1 };
    let schema =
        at < stmt.count.min(PREFIX) && SCHEMA.iter().any(|kw| is_kw(sql, &stmt.prefix[at], kw));
    if schema {
        ReadSafety::ReplicaSafe
    } else {
        ReadSafety::WriterOnly(WriterOnly::ServerSpecific)
    }
}

/// `START TRANSACTION [WITH CONSISTENT SNAPSHOT,] READ ONLY`, without READ WRITE (START is
/// one of the statements whose tokens are all kept).
fn read_only_begin(sql: &[u8], stmt: &Stmt) -> bool {
    let tokens = stmt.tokens.as_deref().unwrap_or_default();
    let pair = |a: &[u8], b: &[u8]| {
        tokens
            .windows(2)
            .any(|p| is_kw(sql, &p[0], a) && is_kw(sql, &p[1], b))
    };
    pair(b"read", b"only") && !pair(b"read", b"write")
}

/// Combines the verdicts of a query's statements with its effects: the first unsafe reason
/// wins; a READ ONLY start inside a multi-statement is not trusted to cover the rest.
pub(super) fn combine(verdicts: ReadSafety, next: ReadSafety, first: bool) -> ReadSafety {
    use ReadSafety::{ReadOnlyBegin, ReplicaSafe, WriterOnly as W};
    match (first, verdicts, next) {
        (true, _, v) => v,
        (false, W(why), _) => W(why),
        (false, ReplicaSafe, ReplicaSafe) => ReplicaSafe,
        (false, ReplicaSafe | ReadOnlyBegin, W(why)) => W(why),
        (false, _, _) => W(WriterOnly::NotARead),
    }
}

/// Applies the effects of the whole query to a safe verdict.
pub(super) fn with_effects(verdict: ReadSafety, effects: &Effects) -> ReadSafety {
    if verdict != ReadSafety::ReplicaSafe {
        return verdict;
    }
    for e in effects {
        let why = match e {
            Effect::UserVariableRead | Effect::ConnectionIdRead => continue,
            Effect::UserVariableWrite => WriterOnly::UserVariableAssignment,
            Effect::GetLock(_) | Effect::ReleaseLock(_) | Effect::ReleaseAllLocks => {
                WriterOnly::Lock
            }
            Effect::FoundRows
            | Effect::LastInsertIdRead
            | Effect::LastInsertIdSet
            | Effect::Diagnostics(_) => WriterOnly::SessionDependent,
            Effect::LockHolderRead => WriterOnly::Lock,
            Effect::SequenceNext => WriterOnly::Sequence,
            Effect::Call => WriterOnly::UnknownFunction,
            _ => WriterOnly::NotARead,
        };
        return ReadSafety::WriterOnly(why);
    }
    verdict
}

/// A word token during the scan: notes locking reads, sequence syntax and INTO OUTFILE /
/// DUMPFILE (`prev` is the token before it; INTO @x is a user-variable write, and a plain
/// `INTO name` is refused by every server outside stored programs). Only words of 5 to 8
/// bytes can matter, so the rest return at once.
pub(super) fn word(sql: &[u8], tok: &Token, prev: Option<&Token>, stmt: &mut Stmt) {
    let len = tok.end - tok.start;
    if !(5..=8).contains(&len) || stmt.unsafe_read.is_some() {
        return;
    }
    let Some(prev) = prev else { return };
    let after = |kw: &[u8]| is_kw(sql, prev, kw);
    let why = if is_kw(sql, tok, b"update") && after(b"for")
        || is_kw(sql, tok, b"share") && (after(b"for") || after(b"in"))
    {
        WriterOnly::LockingRead
    } else if is_kw(sql, tok, b"value") && (after(b"next") || after(b"previous")) {
        WriterOnly::Sequence
    } else if (is_kw(sql, tok, b"outfile") || is_kw(sql, tok, b"dumpfile")) && after(b"into") {
        WriterOnly::SelectInto
    } else {
        return;
    };
    stmt.unsafe_read = Some(why);
}

/// A call: `name` (a word or a quoted identifier) directly followed by `(`. `stmt.depth` is
/// the depth outside the parenthesis.
pub(super) fn call(sql: &[u8], name: &Token, stmt: &mut Stmt) {
    if stmt.unsafe_read.is_some() {
        return;
    }
    // `WITH cte(a, b) AS (...)`: a column list, not a call (the main statement's first
    // word, which sets `with_kind`, comes after every CTE).
    if stmt.is_with && stmt.depth == 0 && stmt.with_kind.is_none() {
        return;
    }
    let qualified = name.start > 0 && sql[name.start - 1] == b'.';
    let why = match name.kind {
        Tok::Word if !qualified => builtin(&sql[name.start..name.end]),
        _ => Some(WriterOnly::UnknownFunction),
    };
    stmt.unsafe_read = why;
}

/// `None` for a builtin that is safe on a replica (or a keyword that may precede `(`), the
/// reason otherwise.
fn builtin(name: &[u8]) -> Option<WriterOnly> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return Some(WriterOnly::UnknownFunction);
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let lower: &[u8] = lower;
    if let Ok(i) = UNSAFE_BUILTINS.binary_search_by(|(n, _)| (*n).cmp(lower)) {
        return Some(UNSAFE_BUILTINS[i].1);
    }
    if BUILTINS.binary_search(&lower).is_ok() {
        None
    } else {
        Some(WriterOnly::UnknownFunction)
    }
}

/// Whether a plain statement (no strings, comments, variables, calls) has a word that may
/// make a SELECT unsafe: UPDATE or SHARE (locking reads), NEXT or PREVIOUS (sequences). The
/// fast path then leaves the statement to the full scan. (A plain INTO is harmless: at the
/// top level `SELECT a INTO b` is an error on every server; INTO @x and INTO OUTFILE '..'
/// have special bytes.) Each of the four words has an `h`, `p` or `x`, rare letters in SQL
/// apart from WHERE's `h`, so those are found eight bytes at a time (SWAR, as for
/// SQL_CALC_FOUND_ROWS) and only their words are compared: this runs on every SELECT.
pub(super) fn has_unsafe_read_word(sql: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const CASE: u64 = 0x2020_2020_2020_2020;
    // Non-zero when some byte of x equals b (false positives are harmless: checked exactly).
    let has = |x: u64, b: u8| {
        let y = x ^ (ONES * u64::from(b));
        y.wrapping_sub(ONES) & !y & HIGHS != 0
    };
    let at = |i: usize| matches!(sql[i] | 0x20, b'h' | b'p' | b'x') && unsafe_word_at(sql, i);
    let mut chunks = sql.chunks_exact(8);
    for (n, chunk) in chunks.by_ref().enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) | CASE;
        if (has(x, b'h') || has(x, b'p') || has(x, b'x')) && (n * 8..n * 8 + 8).any(at) {
            return true;
        }
    }
    let tail = sql.len() - chunks.remainder().len();
    (tail..sql.len()).any(at)
}

/// Whether the word around byte `i` is UPDATE, SHARE, NEXT or PREVIOUS.
fn unsafe_word_at(sql: &[u8], i: usize) -> bool {
    let is_word = |b: &u8| WORD_BYTES[*b as usize];
    let start = i - sql[..i].iter().rev().take_while(|b| is_word(b)).count();
    let end = i + sql[i..].iter().take_while(|b| is_word(b)).count();
    let w = &sql[start..end];
    match w.len() {
        4 => w.eq_ignore_ascii_case(b"next"),
        5 => w.eq_ignore_ascii_case(b"share"),
        6 => w.eq_ignore_ascii_case(b"update"),
        8 => w.eq_ignore_ascii_case(b"previous"),
        _ => false,
    }
}
