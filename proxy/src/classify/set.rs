//! Parsing of SET statements into `SetItem`s, so that session variables can be tracked and
//! replayed instead of pinning. Anything not understood adds `UnknownSet` (which pins).

use super::lexer::{ident_text, is_kw, Quoting, Tok, Token};
use super::{classify_in, Classification, Effect, Effects, SetItem, StatementKind};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Session,
    Global,
}

/// Result of parsing one SET statement.
enum Parsed {
    Items(Vec<SetItem>),
    /// Understood, but changes no variable sluice tracks (SET ROLE, SET STATEMENT ... FOR).
    NoItems,
    Unknown,
}

/// Handles a whole SET statement (`tokens[0]` is SET). `for_mark`: see `Stmt::for_mark`.
pub(super) fn finish_set(
    sql: &[u8],
    tokens: &[Token],
    first: bool,
    for_mark: Option<usize>,
    quoting: Quoting,
    c: &mut Classification,
) {
    if first {
        c.kind = StatementKind::Set;
    }
    let rest = tokens.get(1..).unwrap_or_default();
    match parse(sql, rest, first, for_mark, quoting, c) {
        Parsed::Items(items) => c.set.get_or_insert_with(Vec::new).extend(items),
        Parsed::NoItems => {}
        Parsed::Unknown => c.effects.add(Effect::UnknownSet),
    }
}

fn parse(
    sql: &[u8],
    t: &[Token],
    first: bool,
    for_mark: Option<usize>,
    quoting: Quoting,
    c: &mut Classification,
) -> Parsed {
    let kw = |i: usize, k: &[u8]| t.get(i).is_some_and(|x| is_kw(sql, x, k));
    let scope_at = |i: usize| t.get(i).and_then(|x| scope_keyword(sql, x));
    if kw(0, b"password")
        || kw(0, b"role")
        || (kw(0, b"default") && kw(1, b"role"))
        || (kw(0, b"session") && kw(1, b"authorization"))
    {
        c.effects.add(Effect::SetRoleOrAuth);
        return Parsed::NoItems;
    }
    if kw(0, b"statement") {
        return set_statement(sql, t, first, for_mark, quoting, c);
    }
    if kw(0, b"transaction") {
        return transaction(sql, &t[1..], None, &mut c.effects);
    }
    if let (Some(scope), true) = (scope_at(0), kw(1, b"transaction")) {
        return transaction(sql, &t[2..], Some(scope), &mut c.effects);
    }
    let mut items = Vec::new();
    let mut scope = Scope::Session;
    for item in split_commas(t) {
        if item_into(sql, item, &mut scope, &mut items, &mut c.effects).is_none() {
            return Parsed::Unknown;
        }
    }
    if items.is_empty() && !c.effects.contains(&Effect::UnknownSet) {
        return Parsed::Unknown;
    }
    Parsed::Items(items)
}

/// `SET STATEMENT var=value[, ...] FOR <statement>`: the variables last for that statement only
/// (MariaDB), so the classification is the inner statement's. The outer pass saw the inner
/// statement's tokens too; their effects (from `for_mark` on) give way to the inner ones.
fn set_statement(
    sql: &[u8],
    t: &[Token],
    first: bool,
    for_mark: Option<usize>,
    quoting: Quoting,
    c: &mut Classification,
) -> Parsed {
    let mut depth = 0i32;
    let for_pos = t.iter().position(|x| {
        match x.kind {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            _ => {}
        }
        depth == 0 && is_kw(sql, x, b"for")
    });
    let (Some(p), Some(last)) = (for_pos, t.last()) else {
        return Parsed::Unknown;
    };
    let inner = classify_in(&sql[t[p].end..last.end], quoting);
    if first {
        c.kind = inner.kind;
    }
    if let Some(mark) = for_mark {
        c.effects.truncate(mark);
    }
    c.effects.extend(&inner.effects);
    if let Some(items) = inner.set {
        c.set.get_or_insert_with(Vec::new).extend(items);
    }
    c.kill = c.kill.or(inner.kill);
    c.use_schema = inner.use_schema.or(c.use_schema.take());
    Parsed::NoItems
}

fn scope_keyword(sql: &[u8], t: &Token) -> Option<Scope> {
    let is = |k: &[u8]| is_kw(sql, t, k);
    if is(b"session") || is(b"local") {
        Some(Scope::Session)
    } else if is(b"global") || is(b"persist") || is(b"persist_only") {
        Some(Scope::Global)
    } else {
        None
    }
}

/// Splits at commas outside parentheses.
fn split_commas(t: &[Token]) -> Vec<&[Token]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, x) in t.iter().enumerate() {
        match x.kind {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Punct(b',') if depth == 0 => {
                out.push(&t[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&t[start..]);
    out
}

fn lower_ident(sql: &[u8], t: &Token) -> Option<String> {
    ident_text(sql, t).map(|s| s.to_ascii_lowercase())
}

/// Parses one comma-separated item; `None` when it is not understood.
fn item_into(
    sql: &[u8],
    t: &[Token],
    scope: &mut Scope,
    items: &mut Vec<SetItem>,
    e: &mut Effects,
) -> Option<()> {
    let mut i = 0;
    // A scope keyword applies to this and the following items (MySQL semantics).
    if let Some(s) = t.first().and_then(|x| scope_keyword(sql, x)) {
        *scope = s;
        i = 1;
    }
    let kw = |i: usize, k: &[u8]| t.get(i).is_some_and(|x| is_kw(sql, x, k));
    if kw(i, b"names") {
        let charset = lower_ident(sql, t.get(i + 1)?)?;
        let collation = match t.get(i + 2..)? {
            [] => None,
            [c, name] if is_kw(sql, c, b"collate") => Some(lower_ident(sql, name)?),
            _ => return None,
        };
        items.push(SetItem::Names { charset, collation });
        return Some(());
    }
    let charset_at = if kw(i, b"charset") {
        Some(i + 1)
    } else if kw(i, b"character") && kw(i + 1, b"set") {
        Some(i + 2)
    } else {
        None
    };
    if let Some(j) = charset_at {
        match t.get(j..)? {
            [name] => items.push(SetItem::CharacterSet(lower_ident(sql, name)?)),
            _ => return None,
        }
        return Some(());
    }
    let head = t.get(i)?;
    let (item_scope, name, mut j) = match head.kind {
        Tok::UserVar => {
            let raw = &sql[head.start + 1..head.end];
            let name = match raw.first() {
                Some(b'\'' | b'"' | b'`') => ident_text(
                    sql,
                    &Token {
                        kind: Tok::Quoted,
                        start: head.start + 1,
                        end: head.end,
                    },
                )?,
                _ => String::from_utf8_lossy(raw).into_owned(),
            };
            (None, name, i + 1)
        }
        Tok::SysVar => {
            let full = String::from_utf8_lossy(&sql[head.start + 2..head.end]).to_ascii_lowercase();
            let (s, name) = match full.split_once('.') {
                Some(("global" | "persist" | "persist_only", n)) => (Scope::Global, n.to_string()),
                Some(("session" | "local", n)) => (Scope::Session, n.to_string()),
                _ => (Scope::Session, full),
            };
            (Some(s), name, i + 1)
        }
        Tok::Word | Tok::Quoted => {
            let mut name = lower_ident(sql, head)?;
            let mut j = i + 1;
            // A component variable: `validate_password.length`.
            if t.get(j).is_some_and(|x| x.kind == Tok::Punct(b'.')) {
                name = format!("{name}.{}", lower_ident(sql, t.get(j + 1)?)?);
                j += 2;
            }
            (Some(*scope), name, j)
        }
        _ => return None,
    };
    if t.get(j).is_some_and(|x| x.kind == Tok::Punct(b':')) {
        j += 1;
    }
    if !t.get(j).is_some_and(|x| x.kind == Tok::Punct(b'=')) {
        return None;
    }
    let value_toks = t.get(j + 1..).filter(|v| !v.is_empty())?;
    let (first, last) = (value_toks.first()?, value_toks.last()?);
    let value = String::from_utf8_lossy(&sql[first.start..last.end])
        .trim()
        .to_string();
    match item_scope {
        None => items.push(SetItem::UserVar { name, value }),
        Some(Scope::Global) => {
            e.add(Effect::GlobalSet);
            items.push(SetItem::GlobalVar { name, value });
        }
        Some(Scope::Session) => {
            // A value computed from a subquery or a user variable cannot be replayed as text.
            let opaque = value_toks
                .iter()
                .any(|x| x.kind == Tok::UserVar || is_kw(sql, x, b"select"));
            if opaque {
                e.add(Effect::UnknownSet);
                return Some(());
            }
            if name.starts_with("session_track_") {
                e.add(Effect::SessionTrackChange);
            }
            if name == "sql_log_bin" {
                e.add(Effect::SqlLogBin);
            }
            if crate::conn::movable::is_one_shot_variable(name.as_bytes()) {
                e.add(Effect::UnknownState);
            }
            let on = |v: &str| matches!(v.to_ascii_lowercase().as_str(), "1" | "on" | "true");
            if name == "autocommit" && on(&value) {
                e.add(Effect::ImplicitCommit);
            }
            items.push(SetItem::SessionVar { name, value });
        }
    }
    Some(())
}

/// `SET [scope] TRANSACTION characteristic[, ...]`; `t` starts after TRANSACTION.
fn transaction(sql: &[u8], t: &[Token], scope: Option<Scope>, e: &mut Effects) -> Parsed {
    let (mut isolation, mut read_only) = (None, None);
    for part in split_commas(t) {
        let w = |i: usize, k: &[u8]| part.get(i).is_some_and(|x| is_kw(sql, x, k));
        if w(0, b"isolation") && w(1, b"level") {
            let level = match part.len() {
                3 if w(2, b"serializable") => "SERIALIZABLE",
                4 if w(2, b"read") && w(3, b"uncommitted") => "READ-UNCOMMITTED",
                4 if w(2, b"read") && w(3, b"committed") => "READ-COMMITTED",
                4 if w(2, b"repeatable") && w(3, b"read") => "REPEATABLE-READ",
                _ => return Parsed::Unknown,
            };
            isolation = Some(level.to_string());
        } else if part.len() == 2 && w(0, b"read") && (w(1, b"only") || w(1, b"write")) {
            read_only = Some(w(1, b"only"));
        } else {
            return Parsed::Unknown;
        }
    }
    if isolation.is_none() && read_only.is_none() {
        return Parsed::Unknown;
    }
    let Some(scope) = scope else {
        e.add(Effect::SetTransactionNext);
        return Parsed::Items(vec![SetItem::Transaction {
            isolation,
            read_only,
        }]);
    };
    let mut vars = Vec::new();
    if let Some(level) = isolation {
        vars.push(("transaction_isolation".to_string(), format!("'{level}'")));
    }
    if let Some(ro) = read_only {
        let v = if ro { "ON" } else { "OFF" };
        vars.push(("transaction_read_only".to_string(), v.to_string()));
    }
    let items = vars.into_iter().map(|(name, value)| match scope {
        Scope::Session => SetItem::SessionVar { name, value },
        Scope::Global => SetItem::GlobalVar { name, value },
    });
    if scope == Scope::Global {
        e.add(Effect::GlobalSet);
    }
    Parsed::Items(items.collect())
}
