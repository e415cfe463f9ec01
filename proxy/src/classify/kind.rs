//! A statement's kind from its first words, and the effects that follow from the kind (LOCK
//! TABLES, BEGIN, CREATE TEMPORARY, FLUSH ... WITH READ LOCK, ...): the end of each statement's
//! scan.

use super::lexer::{ident_text, is_kw, Tok, Token};
use super::{set, Classification, Effect, KillTarget, StatementKind, Stmt, PREFIX};

pub(super) fn dml_kind(sql: &[u8], tok: &Token) -> Option<StatementKind> {
    let is = |kw: &[u8]| is_kw(sql, tok, kw);
    if is(b"select") {
        Some(StatementKind::Select)
    } else if is(b"insert") {
        Some(StatementKind::Insert)
    } else if is(b"update") {
        Some(StatementKind::Update)
    } else if is(b"delete") {
        Some(StatementKind::Delete)
    } else if is(b"replace") {
        Some(StatementKind::Replace)
    } else {
        None
    }
}

/// Decides the statement's kind from its first words and adds the effects that depend on it;
/// returns the kind (of this statement, which for a multi-statement need not be `c.kind`).
pub(super) fn finish(
    sql: &[u8],
    stmt: &mut Stmt,
    first: bool,
    c: &mut Classification,
) -> StatementKind {
    use Effect as E;
    use StatementKind as K;
    let w = |i: usize, kw: &[u8]| stmt.word(sql, i, kw);
    let e = &mut c.effects;
    let mut buf = [0u8; 12];
    let head = lower(sql, &stmt.prefix[0], &mut buf);
    let kind = match head {
        b"select" | b"table" | b"values" => K::Select,
        b"" if stmt.prefix[0].kind == Tok::Punct(b'(') => K::Select,
        b"with" => stmt.with_kind.unwrap_or(K::Other),
        b"insert" => K::Insert,
        b"update" => K::Update,
        b"delete" => K::Delete,
        b"replace" => K::Replace,
        b"set" => {
            let tokens = stmt.tokens.take().unwrap_or_default();
            set::finish_set(sql, &tokens, first, stmt.for_mark, stmt.quoting, c);
            return K::Set;
        }
        b"use" => {
            let t = stmt.tokens.as_deref().unwrap_or_default();
            c.use_schema = match t {
                [_, name] => ident_text(sql, name),
                _ => None,
            };
            K::Use
        }
        b"begin" if w(1, b"not") => {
            e.add(E::UnknownState);
            K::Other
        }
        b"begin" => {
            e.add(E::Begin);
            K::Begin
        }
        b"start" if w(1, b"transaction") => {
            e.add(E::Begin);
            K::Begin
        }
        b"commit" | b"rollback" => {
            if (1..stmt.count.min(PREFIX)).any(|i| w(i, b"release") && !w(i - 1, b"no")) {
                e.add(E::Disconnects);
            }
            if w(0, b"commit") {
                K::Commit
            } else if stmt.has_word(sql, 1, b"to") {
                K::Savepoint
            } else {
                K::Rollback
            }
        }
        b"savepoint" => K::Savepoint,
        b"release" if w(1, b"savepoint") => K::Savepoint,
        b"lock" if w(1, b"instance") => {
            e.add(E::LockInstance);
            K::Lock
        }
        b"lock" => {
            e.add(E::LockTables);
            e.add(E::ImplicitCommit);
            K::Lock
        }
        b"unlock" if w(1, b"instance") => {
            e.add(E::UnlockInstance);
            K::Unlock
        }
        b"unlock" => {
            e.add(E::UnlockTables);
            K::Unlock
        }
        b"prepare" => {
            e.add(E::SqlPrepare);
            K::Prepare
        }
        b"execute" => {
            if w(1, b"immediate") {
                e.add(E::UnknownState);
            }
            K::Execute
        }
        b"deallocate" => {
            e.add(E::SqlDeallocate);
            K::Deallocate
        }
        b"drop" if w(1, b"prepare") => {
            e.add(E::SqlDeallocate);
            K::Deallocate
        }
        b"create" | b"drop" => {
            e.add(if stmt.has_word(sql, 1, b"temporary") {
                E::TemporaryTable
            } else {
                E::ImplicitCommit
            });
            if w(0, b"create") {
                K::Create
            } else {
                K::Drop
            }
        }
        b"alter" => {
            e.add(E::ImplicitCommit);
            K::Alter
        }
        b"kill" => {
            c.kill = kill_target(sql, stmt.tokens.as_deref().unwrap_or_default());
            K::Kill
        }
        b"show" => {
            if w(1, b"warnings") || w(1, b"errors") || w(1, b"count") {
                e.add(E::Diagnostics);
            }
            K::Show
        }
        b"call" => {
            e.add(E::Call);
            K::Call
        }
        b"do" => K::Do,
        b"flush" => {
            if let Some(lock) = flush_lock(sql, stmt.tokens.as_deref().unwrap_or_default()) {
                e.add(lock);
            }
            e.add(E::ImplicitCommit);
            K::Flush
        }
        b"handler" => {
            if stmt.has_word(sql, 2, b"open") {
                e.add(E::HandlerOpen);
            }
            K::Handler
        }
        b"load" if w(1, b"data") || w(1, b"xml") => {
            if stmt.has_word(sql, 2, b"local") {
                e.add(E::LoadLocalInfile);
            }
            K::LoadData
        }
        b"xa" => {
            e.add(E::Xa);
            if w(1, b"start") || w(1, b"begin") {
                e.add(E::XaStart);
                K::Begin
            } else if w(1, b"commit") {
                K::Commit
            } else if w(1, b"rollback") {
                K::Rollback
            } else {
                K::Other
            }
        }
        b"explain" | b"describe" | b"desc" => K::Explain,
        b"get" => {
            if stmt.has_word(sql, 1, b"diagnostics") {
                e.add(E::Diagnostics);
            }
            K::Other
        }
        b"backup" => {
            e.add(if w(1, b"stage") && w(2, b"end") {
                E::BackupStageEnd
            } else if w(1, b"stage") {
                E::BackupStage
            } else if w(1, b"unlock") {
                E::BackupUnlock
            } else {
                E::BackupLock
            });
            K::Other
        }
        b"binlog" => {
            e.add(E::UnknownState);
            K::Other
        }
        b"rename" | b"truncate" | b"grant" | b"revoke" | b"analyze" | b"optimize" | b"repair"
        | b"install" | b"uninstall" | b"reset" | b"cache" | b"load" => {
            e.add(E::ImplicitCommit);
            K::Other
        }
        _ => K::Other,
    };
    if first {
        c.kind = kind;
    }
    kind
}

/// The lock a FLUSH statement takes: `FLUSH [LOCAL | NO_WRITE_TO_BINLOG] TABLES WITH READ LOCK`
/// is the global read lock; with a table list, or FOR EXPORT, it locks those tables.
fn flush_lock(sql: &[u8], t: &[Token]) -> Option<Effect> {
    let pair = |a: &[u8], b: &[u8]| {
        t.windows(2)
            .any(|p| is_kw(sql, &p[0], a) && is_kw(sql, &p[1], b))
    };
    let read_lock = pair(b"read", b"lock");
    if !read_lock && !pair(b"for", b"export") {
        return None;
    }
    let global = read_lock && (pair(b"tables", b"with") || pair(b"table", b"with"));
    Some(if global {
        Effect::GlobalReadLock
    } else {
        Effect::LockTables
    })
}

/// The token in lower case, if it is a word that fits `buf`; otherwise empty.
pub(super) fn lower<'b>(sql: &[u8], tok: &Token, buf: &'b mut [u8; 12]) -> &'b [u8] {
    let len = tok.end - tok.start;
    if tok.kind != Tok::Word || len > buf.len() {
        return &[];
    }
    for (d, s) in buf.iter_mut().zip(&sql[tok.start..tok.end]) {
        *d = s.to_ascii_lowercase();
    }
    &buf[..len]
}

/// `KILL [HARD|SOFT] [CONNECTION|QUERY] <id>`; `KILL QUERY ID <query id>` and `KILL USER` give None.
fn kill_target(sql: &[u8], t: &[Token]) -> Option<KillTarget> {
    let mut i = 1;
    if t.get(i)
        .is_some_and(|x| is_kw(sql, x, b"hard") || is_kw(sql, x, b"soft"))
    {
        i += 1;
    }
    let query = t.get(i).is_some_and(|x| is_kw(sql, x, b"query"));
    if query || t.get(i).is_some_and(|x| is_kw(sql, x, b"connection")) {
        i += 1;
    }
    let id_tok = t.get(i).filter(|x| x.kind == Tok::Word)?;
    if t.len() != i + 1 {
        return None;
    }
    let id: u64 = std::str::from_utf8(&sql[id_tok.start..id_tok.end])
        .ok()?
        .parse()
        .ok()?;
    Some(if query {
        KillTarget::Query(id)
    } else {
        KillTarget::Connection(id)
    })
}
