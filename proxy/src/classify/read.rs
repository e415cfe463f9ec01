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
//!   builtin missing from [`BUILTINS`] only costs a replica read, never correctness.
//! - A multi-statement is safe only if every statement is.
//! - Decided as safe on purpose: CONNECTION_ID() (sessions replace it with the client's id),
//!   reading `@x` and `@@vars` (session state is replayed; `@@server_id` answers for the
//!   server that ran it, which is how tests see where a read went), UUID(), UUID_SHORT()
//!   (unique across servers with distinct `server_id`s), RAND(), NOW().
//!
//! `START TRANSACTION READ ONLY` is its own verdict ([`ReadSafety::ReadOnlyBegin`]): the
//! transaction's statements may go to one replica.

use super::lexer::{is_kw, Tok, Token, WORD_BYTES};
use super::{Effect, Effects, StatementKind, Stmt, PREFIX};

/// Can the statement be proven safe on a replica?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSafety {
    /// A read a replica may serve (in autocommit mode or inside a READ ONLY transaction).
    ReplicaSafe,
    /// `START TRANSACTION READ ONLY`: starts a transaction whose statements may run on a
    /// replica (they are still classified one by one).
    ReadOnlyBegin,
    /// Only the writer may run it.
    WriterOnly(WriterOnly),
}

impl Default for ReadSafety {
    fn default() -> Self {
        ReadSafety::WriterOnly(WriterOnly::NotARead)
    }
}

impl ReadSafety {
    /// Whether a replica may run it.
    pub fn is_replica_safe(&self) -> bool {
        matches!(self, ReadSafety::ReplicaSafe)
    }
}

/// Why a statement must run on the writer (a label for metrics and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterOnly {
    /// Not a read: a write, DDL, SET, a transaction statement, CALL, ...
    NotARead,
    /// FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE.
    LockingRead,
    /// SELECT ... INTO variables, OUTFILE or DUMPFILE.
    SelectInto,
    /// A sequence is advanced or its session value read.
    Sequence,
    /// `@x := ...` (or `INTO @x`) inside a read.
    UserVariableAssignment,
    /// A user-level lock function (locks live on one server).
    Lock,
    /// Reads the outcome of the previous statement (LAST_INSERT_ID, FOUND_ROWS, ROW_COUNT,
    /// SQL_CALC_FOUND_ROWS, SHOW WARNINGS, GET DIAGNOSTICS).
    SessionDependent,
    /// Answers about the server that runs it (SHOW STATUS, SHOW PROCESSLIST, ...).
    ServerSpecific,
    /// SLEEP, or a wait for a replication position.
    SideEffect,
    /// A function that is not a known builtin (a stored function, which may write).
    UnknownFunction,
}

impl WriterOnly {
    /// The label for /metrics (`reason="..."`).
    pub fn label(&self) -> &'static str {
        match self {
            WriterOnly::NotARead => "not_a_read",
            WriterOnly::LockingRead => "locking_read",
            WriterOnly::SelectInto => "select_into",
            WriterOnly::Sequence => "sequence",
            WriterOnly::UserVariableAssignment => "user_variable_assignment",
            WriterOnly::Lock => "lock",
            WriterOnly::SessionDependent => "session_dependent",
            WriterOnly::ServerSpecific => "server_specific",
            WriterOnly::SideEffect => "side_effect",
            WriterOnly::UnknownFunction => "unknown_function",
        }
    }
}

/// The verdict for one finished statement of kind `kind`, from its first words and what the
/// scan noted in `stmt.unsafe_read` (effects are applied once for the query, in [`combine`]).
pub(super) fn statement(sql: &[u8], stmt: &Stmt, kind: StatementKind) -> ReadSafety {
    use ReadSafety::{ReadOnlyBegin, ReplicaSafe, WriterOnly as W};
    let w = |i: usize, kw: &[u8]| stmt.word(sql, i, kw);
    let verdict = match kind {
        StatementKind::Select if stmt.into => W(WriterOnly::SelectInto),
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
            Effect::FoundRows | Effect::LastInsertIdRead | Effect::Diagnostics => {
                WriterOnly::SessionDependent
            }
            Effect::Call => WriterOnly::UnknownFunction,
            _ => WriterOnly::NotARead,
        };
        return ReadSafety::WriterOnly(why);
    }
    verdict
}

/// A word token during the scan: notes locking reads and sequence syntax (`prev` is the
/// token before it). Only words of length 5 and 6 can matter, so the rest return at once.
pub(super) fn word(sql: &[u8], tok: &Token, prev: Option<&Token>, stmt: &mut Stmt) {
    let len = tok.end - tok.start;
    if !(5..=6).contains(&len) || stmt.unsafe_read.is_some() {
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
/// make a SELECT unsafe: UPDATE or SHARE (locking reads), INTO, NEXT or PREVIOUS (sequences).
/// The fast path then leaves the statement to the full scan. One pass, words only.
pub(super) fn has_unsafe_read_word(sql: &[u8]) -> bool {
    let mut i = 0;
    while i < sql.len() {
        if !WORD_BYTES[sql[i] as usize] {
            i += 1;
            continue;
        }
        let start = i;
        while i < sql.len() && WORD_BYTES[sql[i] as usize] {
            i += 1;
        }
        let w = &sql[start..i];
        let hit = match w.len() {
            4 => w.eq_ignore_ascii_case(b"into") || w.eq_ignore_ascii_case(b"next"),
            5 => w.eq_ignore_ascii_case(b"share"),
            6 => w.eq_ignore_ascii_case(b"update"),
            8 => w.eq_ignore_ascii_case(b"previous"),
            _ => false,
        };
        if hit {
            return true;
        }
    }
    false
}

/// Builtins that must run on the writer, sorted by name.
const UNSAFE_BUILTINS: [(&[u8], WriterOnly); 20] = [
    (b"found_rows", WriterOnly::SessionDependent),
    (b"get_lock", WriterOnly::Lock),
    (b"is_free_lock", WriterOnly::Lock),
    (b"is_used_lock", WriterOnly::Lock),
    (b"last_insert_id", WriterOnly::SessionDependent),
    (b"lastval", WriterOnly::Sequence),
    (b"master_gtid_wait", WriterOnly::SideEffect),
    (b"master_pos_wait", WriterOnly::SideEffect),
    (b"nextval", WriterOnly::Sequence),
    (b"release_all_locks", WriterOnly::Lock),
    (b"release_lock", WriterOnly::Lock),
    (b"row_count", WriterOnly::SessionDependent),
    (b"service_get_read_locks", WriterOnly::Lock),
    (b"service_get_write_locks", WriterOnly::Lock),
    (b"setval", WriterOnly::Sequence),
    (b"sleep", WriterOnly::SideEffect),
    (b"source_pos_wait", WriterOnly::SideEffect),
    (b"version_tokens_lock_exclusive", WriterOnly::Lock),
    (b"version_tokens_lock_shared", WriterOnly::Lock),
    (b"wait_for_executed_gtid_set", WriterOnly::SideEffect),
];

/// Keywords that may be followed by `(`, and builtin functions that only compute from their
/// arguments, the data and the (replayed) session: safe on a replica. Sorted (a unit test
/// checks), searched by binary search.
const BUILTINS: &[&[u8]] = &[
    b"abs",
    b"acos",
    b"adddate",
    b"addtime",
    b"aes_decrypt",
    b"aes_encrypt",
    b"against",
    b"all",
    b"and",
    b"any",
    b"as",
    b"ascii",
    b"asin",
    b"atan",
    b"atan2",
    b"avg",
    b"between",
    b"bin",
    b"binary",
    b"bit_and",
    b"bit_count",
    b"bit_length",
    b"bit_or",
    b"bit_xor",
    b"by",
    b"case",
    b"cast",
    b"ceil",
    b"ceiling",
    b"char",
    b"char_length",
    b"character_length",
    b"charset",
    b"chr",
    b"coalesce",
    b"coercibility",
    b"collation",
    b"columns",
    b"compress",
    b"concat",
    b"concat_ws",
    b"connection_id",
    b"conv",
    b"convert",
    b"convert_tz",
    b"cos",
    b"cot",
    b"count",
    b"crc32",
    b"crc32c",
    b"cume_dist",
    b"curdate",
    b"current_date",
    b"current_role",
    b"current_time",
    b"current_timestamp",
    b"current_user",
    b"curtime",
    b"database",
    b"date",
    b"date_add",
    b"date_format",
    b"date_sub",
    b"datediff",
    b"datetime",
    b"day",
    b"dayname",
    b"dayofmonth",
    b"dayofweek",
    b"dayofyear",
    b"dec",
    b"decimal",
    b"decode",
    b"default",
    b"degrees",
    b"dense_rank",
    b"distinct",
    b"div",
    b"double",
    b"else",
    b"elt",
    b"encode",
    b"except",
    b"exists",
    b"exp",
    b"export_set",
    b"extract",
    b"extractvalue",
    b"field",
    b"find_in_set",
    b"first_value",
    b"float",
    b"floor",
    b"force",
    b"format",
    b"from",
    b"from_base64",
    b"from_days",
    b"from_unixtime",
    b"greatest",
    b"group_concat",
    b"having",
    b"hex",
    b"hour",
    b"if",
    b"ifnull",
    b"ignore",
    b"in",
    b"index",
    b"inet6_aton",
    b"inet6_ntoa",
    b"inet_aton",
    b"inet_ntoa",
    b"insert",
    b"instr",
    b"int",
    b"integer",
    b"intersect",
    b"interval",
    b"is",
    b"is_ipv4",
    b"is_ipv6",
    b"isnull",
    b"join",
    b"json",
    b"json_array",
    b"json_arrayagg",
    b"json_compact",
    b"json_contains",
    b"json_contains_path",
    b"json_depth",
    b"json_detailed",
    b"json_exists",
    b"json_extract",
    b"json_insert",
    b"json_keys",
    b"json_length",
    b"json_loose",
    b"json_merge",
    b"json_merge_patch",
    b"json_merge_preserve",
    b"json_object",
    b"json_objectagg",
    b"json_overlaps",
    b"json_query",
    b"json_quote",
    b"json_remove",
    b"json_replace",
    b"json_search",
    b"json_set",
    b"json_table",
    b"json_type",
    b"json_unquote",
    b"json_valid",
    b"json_value",
    b"key",
    b"lag",
    b"last_day",
    b"last_value",
    b"lateral",
    b"lcase",
    b"lead",
    b"least",
    b"left",
    b"length",
    b"like",
    b"limit",
    b"ln",
    b"localtime",
    b"localtimestamp",
    b"locate",
    b"log",
    b"log10",
    b"log2",
    b"lower",
    b"lpad",
    b"ltrim",
    b"make_set",
    b"makedate",
    b"maketime",
    b"match",
    b"max",
    b"md5",
    b"microsecond",
    b"mid",
    b"min",
    b"minute",
    b"mod",
    b"month",
    b"monthname",
    b"nchar",
    b"not",
    b"now",
    b"nth_value",
    b"ntile",
    b"nullif",
    b"numeric",
    b"oct",
    b"octet_length",
    b"of",
    b"on",
    b"or",
    b"ord",
    b"over",
    b"partition",
    b"percent_rank",
    b"percentile_cont",
    b"percentile_disc",
    b"period_add",
    b"period_diff",
    b"pi",
    b"position",
    b"pow",
    b"power",
    b"quarter",
    b"quote",
    b"radians",
    b"rand",
    b"rank",
    b"real",
    b"recursive",
    b"regexp",
    b"regexp_instr",
    b"regexp_like",
    b"regexp_replace",
    b"regexp_substr",
    b"repeat",
    b"replace",
    b"reverse",
    b"right",
    b"rlike",
    b"round",
    b"row",
    b"row_number",
    b"rpad",
    b"rtrim",
    b"schema",
    b"sec_to_time",
    b"second",
    b"select",
    b"session_user",
    b"sha",
    b"sha1",
    b"sha2",
    b"sign",
    b"signed",
    b"sin",
    b"some",
    b"soundex",
    b"space",
    b"sqrt",
    b"std",
    b"stddev",
    b"stddev_pop",
    b"stddev_samp",
    b"str_to_date",
    b"straight_join",
    b"strcmp",
    b"subdate",
    b"substr",
    b"substring",
    b"substring_index",
    b"subtime",
    b"sum",
    b"sysdate",
    b"system_user",
    b"table",
    b"tan",
    b"then",
    b"time",
    b"time_format",
    b"time_to_sec",
    b"timediff",
    b"timestamp",
    b"timestampadd",
    b"timestampdiff",
    b"to_base64",
    b"to_days",
    b"to_seconds",
    b"trim",
    b"truncate",
    b"ucase",
    b"uncompress",
    b"uncompressed_length",
    b"unhex",
    b"union",
    b"unix_timestamp",
    b"unsigned",
    b"upper",
    b"use",
    b"user",
    b"using",
    b"utc_date",
    b"utc_time",
    b"utc_timestamp",
    b"uuid",
    b"uuid_short",
    b"values",
    b"var_pop",
    b"var_samp",
    b"varchar",
    b"variance",
    b"version",
    b"week",
    b"weekday",
    b"weekofyear",
    b"weight_string",
    b"when",
    b"where",
    b"window",
    b"with",
    b"xor",
    b"year",
    b"yearweek",
];

#[cfg(test)]
pub(super) fn lists_are_sorted() -> bool {
    BUILTINS.windows(2).all(|w| w[0] < w[1]) && UNSAFE_BUILTINS.windows(2).all(|w| w[0].0 < w[1].0)
}
