//! The SQL classifier: the only code in sluice that reads SQL text.
//!
//! `classify` is called for every COM_QUERY, so it makes one pass over the bytes and allocates
//! nothing for ordinary statements (only SET, USE and multi-part results own strings). It is
//! deliberately conservative: when it cannot tell, it reports an effect that pins the session
//! (for example `UnknownSet`), never one that lets unmovable state move to another client. It
//! names effects ([`Effect`]); what they mean for a session is `session::state::Rules::of`.
//!
//! It skips comments, string literals and backquoted identifiers, but reads MySQL/MariaDB
//! executable comments (`/*!40101 ... */`, `/*M! ... */`) because the server runs them. The
//! server's session-state tracker is the primary signal for state changes; this backs it up for
//! state the tracker does not report (GET_LOCK, LOCK TABLES, FOUND_ROWS, ...).
//!
//! String literals are lexed by the session's rule ([`Quoting`]): with backslash escapes, or
//! without under sql_mode NO_BACKSLASH_ESCAPES.
//!
//! Known limits: statements inside stored procedures (CALL) are invisible; a multi-statement
//! that changes NO_BACKSLASH_ESCAPES is lexed by the rule it started with.

mod builtins;
mod calls;
mod digest;
mod digest_lex;
mod effect;
mod fast;
mod identity;
mod kind;
mod lexer;
mod read;
mod safety;
mod set;
mod timeout;

#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod tests;

pub use digest::{digest, Digest, DigestId};
pub use effect::{DiagnosticsRead, Effect, Effects, LockName};
pub use identity::IdCall;
use kind::{dml_kind, finish};
pub use lexer::Quoting;
use lexer::{is_kw, Lexer, Tok, Token};
pub use safety::{ReadSafety, WriterOnly};
pub use timeout::{with_time_limit, TimeLimitSyntax};

/// What one COM_QUERY does, as far as pooling is concerned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Classification {
    /// The kind of the first statement (of a multi-statement, the first one).
    pub kind: StatementKind,
    /// Effects of all statements in the query.
    pub effects: Effects,
    /// Parsed items of SET statements; `None` when there is no SET, or it could not be parsed
    /// (then the effects hold `UnknownSet`).
    pub set: Option<Vec<SetItem>>,
    /// `KILL [QUERY|CONNECTION] <id>`.
    pub kill: Option<KillTarget>,
    /// `USE db` (the last one, for a multi-statement).
    pub use_schema: Option<String>,
    /// More SQL follows a `;` (outside strings and comments).
    pub multi_statement: bool,
    /// The `CONNECTION_ID()` calls a session may replace with the client's id (empty, and
    /// not allocated, for statements without one).
    pub id_calls: Vec<IdCall>,
    /// The `ROW_COUNT()` and `FOUND_ROWS()` calls, which read the previous statement's
    /// outcome (empty, and not allocated, for statements without one).
    pub row_count_calls: Vec<IdCall>,
    pub found_rows_calls: Vec<IdCall>,
    /// The `LAST_INSERT_ID()` calls without an argument (empty, and not allocated, for
    /// statements without one).
    pub last_insert_id_calls: Vec<IdCall>,
    /// The `IS_USED_LOCK(...)` calls, argument included (empty, and not allocated, for
    /// statements without one).
    pub lock_holder_calls: Vec<IdCall>,
    /// Whether a replica may run the query (all of its statements): `topology::route`'s input.
    pub read: ReadSafety,
    /// The value of a `/* sluice:min_gtid=<GTID position> */` comment (trimmed, unparsed:
    /// `topology::GtidPosition::parse_any` reads it), the position a read must see. Only
    /// allocated when present.
    pub min_gtid: Option<Box<str>>,
}

/// The first keyword(s) of a statement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StatementKind {
    /// SELECT, `(SELECT ...)`, TABLE, VALUES, and WITH ... SELECT.
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    /// SET (session, global, user variables, NAMES, TRANSACTION, PASSWORD, ROLE).
    Set,
    Use,
    /// BEGIN [WORK], START TRANSACTION, XA START/BEGIN.
    Begin,
    /// COMMIT, XA COMMIT.
    Commit,
    /// ROLLBACK (not ROLLBACK TO SAVEPOINT), XA ROLLBACK.
    Rollback,
    /// SAVEPOINT, ROLLBACK TO [SAVEPOINT], RELEASE SAVEPOINT: the transaction stays open.
    Savepoint,
    /// LOCK TABLES, LOCK INSTANCE FOR BACKUP.
    Lock,
    /// UNLOCK TABLES, UNLOCK INSTANCE.
    Unlock,
    Prepare,
    Execute,
    /// DEALLOCATE PREPARE, DROP PREPARE.
    Deallocate,
    Kill,
    Show,
    Call,
    Do,
    Create,
    Drop,
    Alter,
    Flush,
    Handler,
    /// LOAD DATA, LOAD XML.
    LoadData,
    /// EXPLAIN, DESCRIBE, DESC.
    Explain,
    #[default]
    Other,
}

/// One assignment of a SET statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetItem {
    /// A session system variable. `name` is lower case without `@@session.`; `value` is the
    /// SQL expression as written, trimmed (for SET SESSION TRANSACTION: `transaction_isolation`
    /// = `'READ-COMMITTED'` and `transaction_read_only` = `ON`/`OFF`).
    SessionVar { name: String, value: String },
    /// SET NAMES charset [COLLATE collation] (lower case, quotes removed; "default" allowed).
    Names {
        charset: String,
        collation: Option<String>,
    },
    /// SET CHARACTER SET x / SET CHARSET x.
    CharacterSet(String),
    /// SET GLOBAL / PERSIST / PERSIST_ONLY.
    GlobalVar { name: String, value: String },
    /// SET @name = value (`name` without `@` and quotes, case kept).
    UserVar { name: String, value: String },
    /// SET TRANSACTION ... without a scope: the next transaction only.
    Transaction {
        /// "READ-UNCOMMITTED", "READ-COMMITTED", "REPEATABLE-READ" or "SERIALIZABLE".
        isolation: Option<String>,
        read_only: Option<bool>,
    },
}

/// What a KILL statement targets (a connection id as the client knows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillTarget {
    Query(u64),
    Connection(u64),
}

/// How many leading tokens of each statement are kept to decide its kind.
const PREFIX: usize = 6;

/// Per-statement scan state.
struct Stmt {
    prefix: [Token; PREFIX],
    count: usize,
    /// All tokens, kept only for statements parsed in full (SET, USE, KILL, FLUSH).
    tokens: Option<Vec<Token>>,
    depth: u32,
    is_with: bool,
    /// An INTO keyword was seen: the user variables that follow are assigned.
    into: bool,
    /// `LAST_INSERT_ID(` was just read: the next token says whether it sets the value.
    last_insert_id_open: bool,
    /// For WITH: the first top-level SELECT/INSERT/UPDATE/DELETE/REPLACE.
    with_kind: Option<StatementKind>,
    /// Why this statement cannot run on a replica, as far as the scan found (a locking
    /// read, a sequence, a call that is not a safe builtin).
    unsafe_read: Option<WriterOnly>,
    /// A GET_LOCK/RELEASE_LOCK call whose first argument is being read.
    lock_arg: Option<LockArg>,
    /// Of `SET STATEMENT ... FOR <statement>`: how many effects the query had when FOR was
    /// reached (the inner statement's own classification replaces what follows).
    for_mark: Option<usize>,
    /// The query's quoting rule (for text lexed again, `SET STATEMENT ... FOR`'s statement).
    quoting: Quoting,
}

/// Reading the first argument of a lock call: the index of its effect, and the literal seen
/// so far (named only if a `,` or `)` follows it directly).
#[derive(Clone, Copy)]
struct LockArg {
    effect: usize,
    literal: Option<(usize, usize)>,
}

const NO_TOKEN: Token = Token {
    kind: Tok::Punct(0),
    start: 0,
    end: 0,
};

impl Stmt {
    fn new(quoting: Quoting) -> Self {
        Stmt {
            prefix: [NO_TOKEN; PREFIX],
            count: 0,
            tokens: None,
            depth: 0,
            is_with: false,
            into: false,
            last_insert_id_open: false,
            with_kind: None,
            unsafe_read: None,
            lock_arg: None,
            for_mark: None,
            quoting,
        }
    }

    fn word(&self, sql: &[u8], i: usize, kw: &[u8]) -> bool {
        i < self.count.min(PREFIX) && is_kw(sql, &self.prefix[i], kw)
    }

    fn has_word(&self, sql: &[u8], from: usize, kw: &[u8]) -> bool {
        (from..self.count.min(PREFIX)).any(|i| is_kw(sql, &self.prefix[i], kw))
    }
}

/// Classifies one COM_QUERY text, lexed with backslash escapes (the default sql_mode).
pub fn classify(sql: &[u8]) -> Classification {
    classify_in(sql, Quoting::Backslash)
}

/// Classifies one COM_QUERY text of a session whose string literals follow `quoting`.
pub fn classify_in(sql: &[u8], quoting: Quoting) -> Classification {
    match fast::classify_plain(sql) {
        Some(c) => c,
        None => classify_all(sql, quoting, None),
    }
}

/// [`classify_in`] and [`digest`] of the same text. A statement the classifier reads in
/// full feeds the normaliser the same tokens, so the text is lexed once; a plain one (the
/// fast path reads only its first words) is lexed for the digest alone.
pub fn classify_digested(sql: &[u8], quoting: Quoting) -> (Classification, Digest) {
    if let Some(c) = fast::classify_plain(sql) {
        return (c, digest(sql, quoting));
    }
    let mut class = Classification::default();
    let d = digest::digest_with(sql, |n| class = classify_all(sql, quoting, Some(n)));
    (class, d)
}

/// The full scan alone, so the fuzz target can check the fast path against it.
#[cfg(fuzzing)]
pub fn classify_full_scan(sql: &[u8]) -> Classification {
    classify_all(sql, Quoting::Backslash, None)
}

/// The full scan: every token of every statement (each also to `digest`, when given).
fn classify_all(
    sql: &[u8],
    quoting: Quoting,
    mut digest: Option<&mut digest::Normaliser<'_, '_>>,
) -> Classification {
    let mut c = Classification::default();
    let mut stmt = Stmt::new(quoting);
    let mut statements = 0usize;
    let mut prev: Option<Token> = None;
    let mut read = ReadSafety::default();
    let mut lexer = Lexer::new(sql, quoting);
    for tok in lexer.by_ref() {
        if let Some(n) = digest.as_deref_mut() {
            n.token(tok);
        }
        if tok.kind == Tok::Punct(b';') {
            if stmt.count > 0 {
                let kind = finish(sql, &mut stmt, statements == 0, &mut c);
                read = read::combine(read, read::statement(sql, &stmt, kind), statements == 0);
                statements += 1;
            }
            stmt = Stmt::new(quoting);
            prev = None;
            continue;
        }
        if stmt.count == 0 && statements > 0 {
            c.multi_statement = true;
        }
        if stmt.count < PREFIX {
            stmt.prefix[stmt.count] = tok;
            if stmt.count == 0 {
                if needs_all_tokens(sql, &tok) {
                    stmt.tokens = Some(Vec::new());
                }
                stmt.is_with = is_kw(sql, &tok, b"with");
            }
        }
        stmt.count += 1;
        if let Some(all) = &mut stmt.tokens {
            all.push(tok);
        }
        scan_token(sql, &tok, prev.as_ref(), &mut stmt, &mut c.effects);
        prev = Some(tok);
    }
    if stmt.count > 0 {
        let kind = finish(sql, &mut stmt, statements == 0, &mut c);
        read = read::combine(read, read::statement(sql, &stmt, kind), statements == 0);
    }
    c.read = read::with_effects(read, &c.effects);
    c.min_gtid = lexer
        .min_gtid()
        .map(|v| String::from_utf8_lossy(v).into_owned().into_boxed_str());
    if c.effects.contains(&Effect::ConnectionIdRead) {
        c.id_calls = identity::id_calls(sql, quoting);
    }
    if c.effects.contains(&Effect::FoundRows) {
        c.row_count_calls = identity::calls_of(sql, b"row_count", quoting);
        c.found_rows_calls = identity::calls_of(sql, b"found_rows", quoting);
    }
    if c.effects.contains(&Effect::LastInsertIdRead) {
        c.last_insert_id_calls = identity::last_insert_id_calls(sql, quoting);
    }
    if c.effects.contains(&Effect::LockHolderRead) {
        c.lock_holder_calls = identity::calls_with_arguments(sql, b"is_used_lock", quoting);
    }
    c
}

/// Whether the query certainly names a table (or a derived one): its first word is INSERT,
/// UPDATE, DELETE, REPLACE or TABLE, or a FROM names something other than DUAL. The server
/// clears a session's diagnostics before such a statement; one this misses clears them or not
/// (stored functions, views of routines), and counts as keeping them.
pub fn references_table(sql: &[u8], quoting: Quoting) -> bool {
    let mut first = true;
    let mut after_from = false;
    for tok in Lexer::new(sql, quoting) {
        if first
            && [&b"insert"[..], b"update", b"delete", b"replace", b"table"]
                .iter()
                .any(|kw| is_kw(sql, &tok, kw))
        {
            return true;
        }
        first = tok.kind == Tok::Punct(b';');
        if after_from && !is_kw(sql, &tok, b"dual") && tok.kind != Tok::Punct(b';') {
            return true;
        }
        after_from = is_kw(sql, &tok, b"from");
    }
    false
}

fn needs_all_tokens(sql: &[u8], first: &Token) -> bool {
    [&b"set"[..], b"use", b"kill", b"flush", b"start"]
        .iter()
        .any(|kw| is_kw(sql, first, kw))
}

/// Effects that can appear anywhere in a statement.
fn scan_token(sql: &[u8], tok: &Token, prev: Option<&Token>, stmt: &mut Stmt, e: &mut Effects) {
    if let Some(arg) = stmt.lock_arg.take() {
        calls::lock_argument(sql, tok, arg, stmt, e);
    }
    if std::mem::take(&mut stmt.last_insert_id_open) {
        e.add(if tok.kind == Tok::Punct(b')') {
            Effect::LastInsertIdRead
        } else {
            Effect::LastInsertIdSet
        });
    }
    match tok.kind {
        Tok::UserVar => {
            let first_is = |kw: &[u8]| stmt.count > 1 && is_kw(sql, &stmt.prefix[0], kw);
            let after_into = prev.is_some_and(|p| {
                is_kw(sql, p, b"into") || (stmt.into && p.kind == Tok::Punct(b','))
            });
            // SET assigns its variables (conservatively, all it names); GET DIAGNOSTICS
            // assigns its targets.
            if first_is(b"set") || first_is(b"get") || after_into {
                e.add(Effect::UserVariableWrite);
            } else {
                e.add(Effect::UserVariableRead);
            }
        }
        Tok::Punct(b':') if prev.is_some_and(|p| p.kind == Tok::UserVar) => {
            e.add(Effect::UserVariableWrite)
        }
        Tok::Word if is_kw(sql, tok, b"into") => stmt.into = true,
        Tok::SysVar => {
            let name = &sql[tok.start + 2..tok.end];
            if name.eq_ignore_ascii_case(b"identity")
                || name.eq_ignore_ascii_case(b"last_insert_id")
            {
                e.add(Effect::LastInsertIdRead);
            }
            // @@warning_count / @@session.error_count read what the previous statement left.
            let bare = name.rsplit(|&b| b == b'.').next().unwrap_or(name);
            if bare.eq_ignore_ascii_case(b"warning_count")
                || bare.eq_ignore_ascii_case(b"error_count")
            {
                e.add(Effect::Diagnostics(DiagnosticsRead::Value));
            }
            // @@pseudo_thread_id is the connection's id, as CONNECTION_ID() is.
            if identity::is_pseudo_thread_id(name) {
                e.add(Effect::ConnectionIdRead);
            }
        }
        Tok::Punct(b'(') => {
            let name = prev.filter(|p| matches!(p.kind, Tok::Word | Tok::Quoted));
            if let Some(p) = name {
                read::call(sql, p, stmt);
            }
            stmt.depth += 1;
            if let Some(p) = name {
                calls::function_call(sql, p, stmt, e);
            }
        }
        Tok::Punct(b')') => stmt.depth = stmt.depth.saturating_sub(1),
        Tok::Word => {
            read::word(sql, tok, prev, stmt);
            // NEXT VALUE FOR s: the session's last value of s changes (NEXTVAL(s) is a call).
            if tok.end - tok.start == 5
                && is_kw(sql, tok, b"value")
                && prev.is_some_and(|p| is_kw(sql, p, b"next"))
            {
                e.add(Effect::SequenceNext);
            }
            if tok.end - tok.start == 19 && is_kw(sql, tok, b"sql_calc_found_rows") {
                e.add(Effect::FoundRows);
            }
            if stmt.is_with && stmt.depth == 0 && stmt.with_kind.is_none() && stmt.count > 1 {
                stmt.with_kind = dml_kind(sql, tok);
            }
            if stmt.depth == 0
                && stmt.for_mark.is_none()
                && stmt.word(sql, 1, b"statement")
                && stmt.word(sql, 0, b"set")
                && is_kw(sql, tok, b"for")
            {
                stmt.for_mark = Some(e.len());
            }
        }
        _ => {}
    }
}
