//! A statement's kind from its first words, and the effects that follow from the kind (LOCK
//! TABLES, BEGIN, CREATE TEMPORARY, FLUSH ... WITH READ LOCK, ...): the end of each statement's
//! scan.

use super::lexer::{ident_text, is_kw, Tok, Token};
use super::{
    set, Classification, DiagnosticsRead, Effect, KillTarget, StatementKind, Stmt, PREFIX,
};

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
    let mut buf = [0u8; 12];
    let head = lower(sql, &stmt.prefix[0], &mut buf);
    if head == b"set" {
        let tokens = stmt.tokens.take().unwrap_or_default();
        set::finish_set(sql, &tokens, first, stmt.for_mark, stmt.quoting, c);
        return StatementKind::Set;
    }
    let words = Words { sql, stmt, head };
    let kind = STEPS
        .iter()
        .find_map(|step| step(&words, c))
        .unwrap_or(StatementKind::Other);
    if first {
        c.kind = kind;
    }
    kind
}

/// The statement's first words, as each step of [`finish`] reads them.
struct Words<'a> {
    sql: &'a [u8],
    stmt: &'a Stmt,
    /// The first word in lower case (empty if it is not a short word).
    head: &'a [u8],
}

impl Words<'_> {
    /// Whether word `i` of the statement is `kw`.
    fn is(&self, i: usize, kw: &[u8]) -> bool {
        self.stmt.word(self.sql, i, kw)
    }

    /// Whether `kw` is among the statement's first words, from word `from` on.
    fn has(&self, from: usize, kw: &[u8]) -> bool {
        self.stmt.has_word(self.sql, from, kw)
    }

    fn tokens(&self) -> &[Token] {
        self.stmt.tokens.as_deref().unwrap_or_default()
    }
}

/// One group of statements: their kind and effects, or `None` for a head it does not know.
type Step = fn(&Words<'_>, &mut Classification) -> Option<StatementKind>;

/// Tried in order; the first that knows the head decides. (Order matters where two groups
/// share a first word: DROP PREPARE before DROP, LOAD DATA before LOAD INDEX.)
const STEPS: [Step; 6] = [
    reads_and_writes,
    transactions,
    locks,
    prepared,
    session,
    schema,
];

/// SELECT and DML, and the statements that only read (EXPLAIN, DO).
fn reads_and_writes(w: &Words<'_>, _: &mut Classification) -> Option<StatementKind> {
    use StatementKind as K;
    Some(match w.head {
        b"select" | b"table" | b"values" => K::Select,
        b"" if w.stmt.prefix[0].kind == Tok::Punct(b'(') => K::Select,
        b"with" => w.stmt.with_kind.unwrap_or(K::Other),
        b"insert" => K::Insert,
        b"update" => K::Update,
        b"delete" => K::Delete,
        b"replace" => K::Replace,
        b"explain" | b"describe" | b"desc" => K::Explain,
        b"do" => K::Do,
        _ => return None,
    })
}

/// BEGIN, COMMIT, ROLLBACK, savepoints and XA.
fn transactions(w: &Words<'_>, c: &mut Classification) -> Option<StatementKind> {
    use Effect as E;
    use StatementKind as K;
    let e = &mut c.effects;
    Some(match w.head {
        b"begin" if w.is(1, b"not") => {
            e.add(E::UnknownState);
            K::Other
        }
        b"begin" => {
            e.add(E::Begin);
            K::Begin
        }
        b"start" if w.is(1, b"transaction") => {
            e.add(E::Begin);
            K::Begin
        }
        b"commit" | b"rollback" => {
            if (1..w.stmt.count.min(PREFIX)).any(|i| w.is(i, b"release") && !w.is(i - 1, b"no")) {
                e.add(E::Disconnects);
            }
            if w.is(0, b"commit") {
                K::Commit
            } else if w.has(1, b"to") {
                K::Savepoint
            } else {
                K::Rollback
            }
        }
        b"savepoint" => K::Savepoint,
        b"release" if w.is(1, b"savepoint") => K::Savepoint,
        b"xa" => {
            e.add(E::Xa);
            if w.is(1, b"start") || w.is(1, b"begin") {
                e.add(E::XaStart);
                K::Begin
            } else if w.is(1, b"commit") {
                K::Commit
            } else if w.is(1, b"rollback") {
                K::Rollback
            } else {
                K::Other
            }
        }
        _ => return None,
    })
}

/// LOCK / UNLOCK TABLES and INSTANCE, FLUSH and BACKUP STAGE / LOCK.
fn locks(w: &Words<'_>, c: &mut Classification) -> Option<StatementKind> {
    use Effect as E;
    use StatementKind as K;
    let e = &mut c.effects;
    Some(match w.head {
        b"lock" if w.is(1, b"instance") => {
            e.add(E::LockInstance);
            K::Lock
        }
        b"lock" => {
            e.add(E::LockTables);
            e.add(E::ImplicitCommit);
            K::Lock
        }
        b"unlock" if w.is(1, b"instance") => {
            e.add(E::UnlockInstance);
            K::Unlock
        }
        b"unlock" => {
            e.add(E::UnlockTables);
            K::Unlock
        }
        b"flush" => {
            if let Some(lock) = flush_lock(w.sql, w.tokens()) {
                e.add(lock);
            }
            e.add(E::ImplicitCommit);
            K::Flush
        }
        b"backup" => {
            e.add(if w.is(1, b"stage") && w.is(2, b"end") {
                E::BackupStageEnd
            } else if w.is(1, b"stage") {
                E::BackupStage
            } else if w.is(1, b"unlock") {
                E::BackupUnlock
            } else {
                E::BackupLock
            });
            K::Other
        }
        _ => return None,
    })
}

/// SQL-level prepared statements: PREPARE, EXECUTE, DEALLOCATE / DROP PREPARE.
fn prepared(w: &Words<'_>, c: &mut Classification) -> Option<StatementKind> {
    use Effect as E;
    use StatementKind as K;
    let e = &mut c.effects;
    Some(match w.head {
        b"prepare" => {
            e.add(E::SqlPrepare);
            K::Prepare
        }
        b"execute" => {
            if w.is(1, b"immediate") {
                e.add(E::UnknownState);
            }
            K::Execute
        }
        b"deallocate" => {
            e.add(E::SqlDeallocate);
            K::Deallocate
        }
        b"drop" if w.is(1, b"prepare") => {
            e.add(E::SqlDeallocate);
            K::Deallocate
        }
        _ => return None,
    })
}

/// Statements about the session or the server: USE, KILL, SHOW, GET DIAGNOSTICS, CALL,
/// HANDLER, LOAD DATA, BINLOG.
fn session(w: &Words<'_>, c: &mut Classification) -> Option<StatementKind> {
    use Effect as E;
    use StatementKind as K;
    Some(match w.head {
        b"use" => {
            c.use_schema = match w.tokens() {
                [_, name] => ident_text(w.sql, name),
                _ => None,
            };
            K::Use
        }
        b"kill" => {
            c.kill = kill_target(w.sql, w.tokens());
            K::Kill
        }
        b"show" => {
            if w.is(1, b"warnings") || w.is(1, b"errors") {
                c.effects.add(E::Diagnostics(DiagnosticsRead::Show));
            } else if w.is(1, b"count") {
                c.effects.add(E::Diagnostics(DiagnosticsRead::Value));
            }
            K::Show
        }
        b"get" => {
            if w.has(1, b"diagnostics") {
                c.effects.add(E::Diagnostics(DiagnosticsRead::Get));
            }
            K::Other
        }
        b"call" => {
            c.effects.add(E::Call);
            K::Call
        }
        b"handler" => {
            if w.has(2, b"open") {
                c.effects.add(E::HandlerOpen);
            }
            K::Handler
        }
        b"load" if w.is(1, b"data") || w.is(1, b"xml") => {
            if w.has(2, b"local") {
                c.effects.add(E::LoadLocalInfile);
            }
            K::LoadData
        }
        b"binlog" => {
            c.effects.add(E::UnknownState);
            K::Other
        }
        _ => return None,
    })
}

/// CREATE, DROP, ALTER and the other statements that commit implicitly.
fn schema(w: &Words<'_>, c: &mut Classification) -> Option<StatementKind> {
    use Effect as E;
    use StatementKind as K;
    let e = &mut c.effects;
    Some(match w.head {
        b"create" | b"drop" => {
            e.add(if w.has(1, b"temporary") {
                E::TemporaryTable
            } else {
                E::ImplicitCommit
            });
            if w.is(0, b"create") {
                K::Create
            } else {
                K::Drop
            }
        }
        b"alter" => {
            e.add(E::ImplicitCommit);
            K::Alter
        }
        b"rename" | b"truncate" | b"grant" | b"revoke" | b"analyze" | b"optimize" | b"repair"
        | b"install" | b"uninstall" | b"reset" | b"cache" | b"load" => {
            e.add(E::ImplicitCommit);
            K::Other
        }
        _ => return None,
    })
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
