//! The fast path for plain statements: no comments, strings, variables, calls or `;`.
//!
//! Most COM_QUERY traffic looks like the benchmark's `SELECT ... WHERE id BETWEEN 1 AND 20000`.
//! One table-driven pass over the bytes proves that nothing but the first few words can matter;
//! then only those words are lexed. Anything else falls back to the full scan, so this path
//! can only ever agree with it (a unit test checks that on every test statement).

use super::kind::{finish, lower};
use super::lexer::{is_kw, Lexer, Quoting};
use super::read;
use super::{needs_all_tokens, Classification, ReadSafety, StatementKind, Stmt, PREFIX};

/// Bytes that may start a comment, string, quoted identifier, variable, argument list or a
/// second statement (1), and all others (0). `*` is harmless without a `/`.
const SPECIAL: [u8; 256] = {
    let mut t = [0u8; 256];
    let special = b"@(;'\"`#-/";
    let mut j = 0;
    while j < special.len() {
        t[special[j] as usize] = 1;
        j += 1;
    }
    t
};

/// Classifies a plain statement, or returns `None` when the full scan is needed.
pub(super) fn classify_plain(sql: &[u8]) -> Option<Classification> {
    // Branch-free: OR the classes of all bytes together.
    if sql.iter().fold(0u8, |acc, &b| acc | SPECIAL[b as usize]) != 0 {
        return None;
    }
    // SQL_CALC_FOUND_ROWS is the one effect a plain word can have.
    if has_calc_found_rows(sql) {
        return None;
    }
    // No quote reaches here, so the quoting rule does not matter.
    let mut lexer = Lexer::new(sql, Quoting::Backslash);
    let Some(first) = lexer.next() else {
        return Some(Classification::default());
    };
    // The common case: plain DML is decided by its first word alone.
    let mut buf = [0u8; 12];
    let kind = match lower(sql, &first, &mut buf) {
        b"select" | b"table" | b"values" => Some(StatementKind::Select),
        b"insert" => Some(StatementKind::Insert),
        b"update" => Some(StatementKind::Update),
        b"delete" => Some(StatementKind::Delete),
        b"replace" => Some(StatementKind::Replace),
        _ => None,
    };
    if let Some(kind) = kind {
        let read = if kind != StatementKind::Select {
            ReadSafety::default()
        } else if read::has_unsafe_read_word(sql) {
            // FOR UPDATE, INTO, NEXT VALUE FOR, ...: the full scan tells which.
            return None;
        } else {
            ReadSafety::ReplicaSafe
        };
        return Some(Classification {
            kind,
            read,
            ..Classification::default()
        });
    }
    if needs_all_tokens(sql, &first) || is_kw(sql, &first, b"with") {
        return None;
    }
    // Built only here: plain DML above never needs it.
    let mut stmt = Stmt::new(Quoting::Backslash);
    stmt.prefix[0] = first;
    stmt.count = 1;
    for tok in lexer.take(PREFIX - 1) {
        stmt.prefix[stmt.count] = tok;
        stmt.count += 1;
    }
    let mut c = Classification::default();
    let kind = finish(sql, &mut stmt, true, &mut c);
    c.read = read::with_effects(read::statement(sql, &stmt, kind), &c.effects);
    Some(c)
}

/// Whether `sql_calc_found_rows` (any case) occurs. Finds each '_' eight bytes at a time (SWAR),
/// because most queries have few underscores and this runs on every one of them.
fn has_calc_found_rows(sql: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let at = |i: usize| {
        sql[i] == b'_'
            && i.checked_sub(3)
                .and_then(|s| sql.get(s..i + 16))
                .is_some_and(|w| w.eq_ignore_ascii_case(b"sql_calc_found_rows"))
    };
    let mut chunks = sql.chunks_exact(8);
    for (n, chunk) in chunks.by_ref().enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ (ONES * u64::from(b'_'));
        // Non-zero when some byte of x is zero, i.e. some byte was '_' (false positives are
        // possible and harmless: the positions are checked exactly).
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 && (n * 8..n * 8 + 8).any(at) {
            return true;
        }
    }
    let tail = sql.len() - chunks.remainder().len();
    (tail..sql.len()).any(at)
}
