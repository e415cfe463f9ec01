//! What a function call in a statement does to the session: the lock functions (and the
//! name a lock call's first argument gives), the calls that read what the previous
//! statement left or the connection's identity, and the sequence functions.

use super::lexer::{self, Tok, Token};
use super::{Effect, Effects, LockArg, LockName, Stmt};

/// The tokens after `GET_LOCK(` / `RELEASE_LOCK(`: a plain single-quoted literal directly
/// followed by `,` or `)` names the lock; anything else leaves it unknown.
pub(super) fn lock_argument(
    sql: &[u8],
    tok: &Token,
    arg: LockArg,
    stmt: &mut Stmt,
    e: &mut Effects,
) {
    match arg.literal {
        None => {
            let text = &sql[tok.start..tok.end];
            let plain = tok.kind == Tok::Str
                && text.len() >= 2
                && text[0] == b'\''
                && text[text.len() - 1] == b'\''
                && !text[1..text.len() - 1]
                    .iter()
                    .any(|&b| b == b'\\' || b == b'\'');
            if plain {
                stmt.lock_arg = Some(LockArg {
                    literal: Some((tok.start + 1, tok.end - 1)),
                    ..arg
                });
            }
        }
        Some((start, end)) => {
            if matches!(tok.kind, Tok::Punct(b',' | b')')) {
                e.name_lock(arg.effect, sql[start..end].into());
            }
        }
    }
}

/// A word or a backquoted name directly followed by `(`: a function call (or,
/// conservatively, something named like one). A backquoted name calls the builtin of that
/// name too, except the sequence functions, which are keywords to the server's parser.
pub(super) fn function_call(sql: &[u8], name: &Token, stmt: &mut Stmt, e: &mut Effects) {
    let Some(text) = lexer::call_name(sql, name) else {
        return;
    };
    if !(7..=27).contains(&text.len()) {
        return;
    }
    let is = |kw: &[u8]| text.len() == kw.len() && text.eq_ignore_ascii_case(kw);
    if name.kind == Tok::Word && is(b"nextval") {
        // The session's LASTVAL() of the sequence changes (SETVAL() leaves it).
        e.add(Effect::SequenceNext);
        return;
    }
    let named = if is(b"get_lock") {
        Some(Effect::GetLock(LockName::Unknown))
    } else if is(b"release_lock") {
        Some(Effect::ReleaseLock(LockName::Unknown))
    } else {
        None
    };
    if let Some(call) = named {
        stmt.lock_arg = Some(LockArg {
            effect: e.len(),
            literal: None,
        });
        e.add(call);
    } else if is(b"service_get_write_locks")
        || is(b"service_get_read_locks")
        || is(b"version_tokens_lock_shared")
        || is(b"version_tokens_lock_exclusive")
    {
        // MySQL's locking services: taken like GET_LOCK, by names sluice does not read.
        e.add(Effect::GetLock(LockName::Unknown));
    } else if is(b"release_all_locks") {
        e.add(Effect::ReleaseAllLocks);
    } else if is(b"found_rows") || is(b"row_count") {
        e.add(Effect::FoundRows);
    } else if is(b"last_insert_id") {
        // With an argument it sets the value, without one it reads it (the next token says).
        stmt.last_insert_id_open = true;
    } else if is(b"connection_id") {
        e.add(Effect::ConnectionIdRead);
    } else if is(b"is_used_lock") {
        e.add(Effect::LockHolderRead);
    }
}
