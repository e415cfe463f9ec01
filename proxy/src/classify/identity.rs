//! Where `CONNECTION_ID()` is called (or `@@pseudo_thread_id`, the same id, is read), so
//! that a session whose backend account may not set `pseudo_thread_id` can put the client's
//! own id in its place; and where `ROW_COUNT()` and `FOUND_ROWS()` are, so that a session
//! on another backend than its previous statement's can put that statement's outcome there.
//! A backquoted name followed by `(` calls the builtin as the plain name does.
//!
//! Only statements that run now are covered: the bodies of CREATE/ALTER (views, routines,
//! triggers, events, column defaults) are stored and run later by any session, so a call
//! there keeps its text. Called only for statements that contain such a call (rare), so this
//! lexes them a second time and allocates freely.

use std::ops::Range;

use super::lexer::{is_call_of, is_kw, Lexer, Quoting, Tok, Token};

/// One `CONNECTION_ID()` call outside strings and comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdCall {
    /// The call, from its name to its closing parenthesis.
    pub span: Range<usize>,
    /// The select item this call is part of, when that item has no alias: the server names
    /// the column after the item's text, so the rewrite adds that text as the alias. Set
    /// on one call per item (the last); others in the same item have `None`.
    pub unnamed_item: Option<Range<usize>>,
}

/// Words that end a select list (at its own parenthesis depth).
const LIST_END: &[&[u8]] = &[
    b"from",
    b"into",
    b"where",
    b"group",
    b"having",
    b"order",
    b"limit",
    b"window",
    b"union",
    b"except",
    b"intersect",
    b"for",
    b"lock",
    b"procedure",
];

/// Select modifiers that may come before the first item.
const MODIFIERS: &[&[u8]] = &[
    b"all",
    b"distinct",
    b"distinctrow",
    b"high_priority",
    b"straight_join",
    b"sql_small_result",
    b"sql_big_result",
    b"sql_buffer_result",
    b"sql_cache",
    b"sql_no_cache",
    b"sql_calc_found_rows",
];

/// Per parenthesis depth: whether a select list is open there, and where its current item
/// starts (a token index).
#[derive(Default, Clone, Copy)]
struct Frame {
    item_start: Option<usize>,
}

/// The `CONNECTION_ID()` calls of `sql` that the session may replace, and the reads of
/// `@@pseudo_thread_id` (`@@SESSION.`, `@@LOCAL.`), which is the same id: such a "call" is
/// the variable's one token.
pub(super) fn id_calls(sql: &[u8], quoting: Quoting) -> Vec<IdCall> {
    calls(sql, Find::call(b"connection_id").or_variable(), quoting)
}

/// The calls of the argument-less function `name` in `sql` that the session may replace.
pub(super) fn calls_of(sql: &[u8], name: &[u8], quoting: Quoting) -> Vec<IdCall> {
    calls(sql, Find::call(name), quoting)
}

/// Whether the name of a system variable token (after its `@@`) is the session's
/// `pseudo_thread_id` (bare, `SESSION.` or `LOCAL.`; there is no global one).
pub(super) fn is_pseudo_thread_id(name: &[u8]) -> bool {
    let (scope, bare) = match name.iter().rposition(|&b| b == b'.') {
        Some(dot) => (&name[..dot], &name[dot + 1..]),
        None => (&b""[..], name),
    };
    bare.eq_ignore_ascii_case(b"pseudo_thread_id")
        && (scope.is_empty()
            || scope.eq_ignore_ascii_case(b"session")
            || scope.eq_ignore_ascii_case(b"local"))
}

/// The `LAST_INSERT_ID()` calls a session may replace with its own value: none when the
/// statement also reads `@@last_insert_id` or `@@identity`, which no text can replace, or
/// has a table value constructor, whose columns are named after their text and cannot
/// take an alias (the value is then set on the backend first).
pub(super) fn last_insert_id_calls(sql: &[u8], quoting: Quoting) -> Vec<IdCall> {
    let tokens: Vec<Token> = Lexer::new(sql, quoting).collect();
    let variable = tokens.iter().any(|t| {
        let name = &sql[t.start..t.end];
        let bare = name
            .rsplit(|&b| b == b'.' || b == b'@')
            .next()
            .unwrap_or(name);
        t.kind == Tok::SysVar
            && (bare.eq_ignore_ascii_case(b"identity")
                || bare.eq_ignore_ascii_case(b"last_insert_id"))
    });
    if variable || has_value_constructor(sql, &tokens) {
        return Vec::new();
    }
    calls(sql, Find::call(b"last_insert_id"), quoting)
}

/// Whether a VALUES keyword starts a table value constructor: at the start of a statement,
/// after `(` (a derived table, a CTE, a subquery) or after a set operation. After a table
/// name or a column list it is an INSERT's, after `=` the VALUES() function.
fn has_value_constructor(sql: &[u8], tokens: &[Token]) -> bool {
    const BEFORE: &[&[u8]] = &[b"union", b"except", b"intersect", b"all", b"distinct"];
    tokens.iter().enumerate().any(|(i, t)| {
        let before = i.checked_sub(1).map(|j| &tokens[j]);
        is_kw(sql, t, b"values")
            && before.is_none_or(|b| {
                matches!(b.kind, Tok::Punct(b'(' | b';')) || BEFORE.iter().any(|w| is_kw(sql, b, w))
            })
    })
}

/// The calls of function `name` with arguments, each from its name to its closing
/// parenthesis.
pub(super) fn calls_with_arguments(sql: &[u8], name: &[u8], quoting: Quoting) -> Vec<IdCall> {
    calls(
        sql,
        Find {
            arguments: true,
            ..Find::call(name)
        },
        quoting,
    )
}

/// What the scan looks for: calls of a function, perhaps with arguments, and perhaps the
/// system variable that reads the same value.
#[derive(Clone, Copy)]
struct Find<'n> {
    name: &'n [u8],
    arguments: bool,
    /// `@@pseudo_thread_id` counts as a call (of CONNECTION_ID()).
    variable: bool,
}

impl<'n> Find<'n> {
    fn call(name: &'n [u8]) -> Self {
        Find {
            name,
            arguments: false,
            variable: false,
        }
    }

    fn or_variable(self) -> Self {
        Find {
            variable: true,
            ..self
        }
    }
}

fn calls(sql: &[u8], find: Find<'_>, quoting: Quoting) -> Vec<IdCall> {
    let tokens: Vec<Token> = Lexer::new(sql, quoting).collect();
    let mut out = Vec::new();
    for stmt in tokens.split(|t| t.kind == Tok::Punct(b';')) {
        let stored = stmt
            .first()
            .is_some_and(|t| is_kw(sql, t, b"create") || is_kw(sql, t, b"alter"));
        if !stored {
            statement_calls(sql, stmt, find, &mut out);
        }
    }
    out
}

/// Whether token `i` reads `@@pseudo_thread_id`, other than as what a SET assigns.
fn reads_variable(sql: &[u8], t: &[Token], i: usize) -> bool {
    let tok = &t[i];
    let assigned = t.first().is_some_and(|f| is_kw(sql, f, b"set"))
        && t.get(i + 1)
            .is_some_and(|x| matches!(x.kind, Tok::Punct(b'=' | b':')));
    tok.kind == Tok::SysVar && is_pseudo_thread_id(&sql[tok.start + 2..tok.end]) && !assigned
}

/// The index of the last token of a call at token `i`: for a function, the `)` right after
/// its `(` without `arguments`, at the matching depth with them; for the variable, itself.
fn call_end(sql: &[u8], t: &[Token], i: usize, find: Find<'_>) -> Option<usize> {
    if find.variable && reads_variable(sql, t, i) {
        return Some(i);
    }
    let (name, arguments) = (find.name, find.arguments);
    let named = is_call_of(sql, &t[i], name)
        && t.get(i + 1).is_some_and(|x| x.kind == Tok::Punct(b'('))
        && !(i > 0 && t[i - 1].kind == Tok::Punct(b'.'));
    if !named {
        return None;
    }
    if !arguments {
        return t
            .get(i + 2)
            .is_some_and(|x| x.kind == Tok::Punct(b')'))
            .then_some(i + 2);
    }
    let mut depth = 0usize;
    for (j, x) in t.iter().enumerate().skip(i + 1) {
        match x.kind {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') if depth == 1 => return (j > i + 2).then_some(j),
            Tok::Punct(b')') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn statement_calls(sql: &[u8], t: &[Token], find: Find<'_>, out: &mut Vec<IdCall>) {
    let first = out.len();
    let mut frames = vec![Frame::default()];
    let mut items: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let tok = &t[i];
        if let Some(end) = call_end(sql, t, i, find) {
            out.push(IdCall {
                span: tok.start..t[end].end,
                unnamed_item: None,
            });
            i = end + 1;
            continue;
        }
        let depth = frames.len() - 1;
        match tok.kind {
            Tok::Punct(b'(') => frames.push(Frame::default()),
            Tok::Punct(b')') => {
                close_item(&mut frames[depth], i, &mut items);
                if frames.len() > 1 {
                    frames.pop();
                }
            }
            Tok::Punct(b',') if frames[depth].item_start.is_some() => {
                close_item(&mut frames[depth], i, &mut items);
                frames[depth].item_start = Some(i + 1);
            }
            Tok::Word if is_kw(sql, tok, b"select") => {
                let mut start = i + 1;
                while t
                    .get(start)
                    .is_some_and(|x| MODIFIERS.iter().any(|m| is_kw(sql, x, m)))
                {
                    start += 1;
                }
                frames[depth].item_start = Some(start);
                i = start;
                continue;
            }
            Tok::Word
                if frames[depth].item_start.is_some()
                    && LIST_END.iter().any(|w| is_kw(sql, tok, w)) =>
            {
                close_item(&mut frames[depth], i, &mut items);
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(f) = frames.first_mut() {
        close_item(f, t.len(), &mut items);
    }
    // Each unnamed item that holds a call names its last call.
    for item in items {
        let (a, b) = (t[item.start].start, t[item.end - 1].end);
        if unnamed(sql, &t[item.clone()]) {
            if let Some(call) = out[first..]
                .iter_mut()
                .rev()
                .find(|c| c.span.start >= a && c.span.end <= b)
            {
                call.unnamed_item = Some(a..b);
            }
        }
    }
}

/// Ends the open item of `frame` before token `end` (exclusive).
fn close_item(frame: &mut Frame, end: usize, items: &mut Vec<Range<usize>>) {
    if let Some(start) = frame.item_start.take() {
        if start < end {
            items.push(start..end);
        }
    }
}

/// Reserved words that end an expression (`IS NOT NULL`, `IS TRUE`): never an alias.
const ENDING_WORDS: &[&[u8]] = &[b"null", b"true", b"false"];

/// Reserved words after which an expression goes on: the word that follows is an operand,
/// never an alias (`IS NOT UNKNOWN`, `AND x`, `LIKE 'a'`, `DIV 2`).
const OPERATOR_WORDS: &[&[u8]] = &[
    b"and", b"or", b"xor", b"not", b"is", b"like", b"regexp", b"rlike", b"div", b"mod", b"between",
    b"in", b"binary", b"case", b"when", b"then", b"else",
];

/// An item without an alias: it ends in `)`, in a system variable, in a reserved word that
/// ends an expression, in
/// the END of its CASE, or its last word follows an operator (`CONNECTION_ID() + 1`, `t.id`,
/// `... IS NOT UNKNOWN`). `x AS name` and `expr name` have one. When unsure (`INTERVAL
/// CONNECTION_ID() DAY`, where DAY could be an alias too), it counts as named: the rewrite then
/// only changes the column's name, while a second alias would break the statement.
fn unnamed(sql: &[u8], item: &[Token]) -> bool {
    let Some(last) = item.last() else {
        return false;
    };
    let is_any = |t: &Token, words: &[&[u8]]| words.iter().any(|w| is_kw(sql, t, w));
    let count = |w: &[u8]| item.iter().filter(|t| is_kw(sql, t, w)).count();
    // An alias is a word or a quoted name: never a system variable.
    if matches!(last.kind, Tok::Punct(b')') | Tok::SysVar) || is_any(last, ENDING_WORDS) {
        return true;
    }
    if is_kw(sql, last, b"end") && count(b"case") == count(b"end") {
        return true;
    }
    let before = item.len().checked_sub(2).map(|i| &item[i]);
    match before {
        Some(b) if is_kw(sql, b, b"as") => false,
        Some(b) if is_any(b, OPERATOR_WORDS) => true,
        Some(b) => matches!(b.kind, Tok::Punct(p) if p != b')'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (call text, alias text) pairs found in `sql`.
    fn found(sql: &str) -> Vec<(String, Option<String>)> {
        id_calls(sql.as_bytes(), Quoting::Backslash)
            .into_iter()
            .map(|c| {
                (
                    sql[c.span].to_string(),
                    c.unnamed_item.map(|r| sql[r].to_string()),
                )
            })
            .collect()
    }

    fn one(call: &str, alias: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![(call.to_string(), alias.map(str::to_string))]
    }

    #[test]
    fn bare_items_are_named_after_their_text() {
        let c = "CONNECTION_ID()";
        assert_eq!(found("SELECT CONNECTION_ID()"), one(c, Some(c)));
        assert_eq!(
            found("select connection_id() from dual"),
            one("connection_id()", Some("connection_id()"))
        );
        assert_eq!(
            found("SELECT DISTINCT (CONNECTION_ID()) , 1"),
            one(c, Some("(CONNECTION_ID())"))
        );
        assert_eq!(
            found("SELECT CONNECTION_ID() + 1 FROM t"),
            one(c, Some("CONNECTION_ID() + 1"))
        );
        assert_eq!(
            found("SELECT * FROM (SELECT 1, CONNECTION_ID()) d"),
            one(c, Some(c))
        );
        assert_eq!(
            found("SELECT CONNECTION_ID(/* x */ )"),
            one("CONNECTION_ID(/* x */ )", Some("CONNECTION_ID(/* x */ )"))
        );
    }

    #[test]
    fn aliased_items_and_other_places_get_no_alias() {
        let c = "CONNECTION_ID()";
        assert_eq!(found("SELECT CONNECTION_ID() AS id"), one(c, None));
        assert_eq!(found("SELECT CONNECTION_ID() id"), one(c, None));
        assert_eq!(
            found("SELECT 1 FROM t WHERE id = CONNECTION_ID()"),
            one(c, None)
        );
        assert_eq!(
            found("INSERT INTO t VALUES (CONNECTION_ID())"),
            one(c, None)
        );
        assert_eq!(found("DO CONNECTION_ID()"), one(c, None));
        let wrapped = "IFNULL(NULL, CONNECTION_ID())";
        assert_eq!(found(&format!("SELECT {wrapped}")), one(c, Some(wrapped)));
        // The word before an alias: `CASE ... END end` names the column "end".
        assert_eq!(
            found("SELECT CASE WHEN CONNECTION_ID() > 0 THEN 1 END end"),
            one(c, None)
        );
        assert_eq!(found("SELECT CONNECTION_ID() DAY"), one(c, None));
        assert_eq!(found("SELECT CONNECTION_ID() 'x'"), one(c, None));
    }

    #[test]
    fn items_ending_in_keywords_are_unnamed() {
        let c = "CONNECTION_ID()";
        for item in [
            "CONNECTION_ID() IS NOT NULL",
            "CONNECTION_ID() IS TRUE",
            "CONNECTION_ID() > 0 IS NOT UNKNOWN",
            "CONNECTION_ID() > 0 AND x",
            "CONNECTION_ID() DIV 2",
            "CONNECTION_ID() LIKE '1%'",
            "CASE WHEN CONNECTION_ID() > 0 THEN 1 ELSE 0 END",
            "CASE WHEN CONNECTION_ID() > 0 THEN CASE 1 WHEN 1 THEN 2 END END",
        ] {
            assert_eq!(
                found(&format!("SELECT {item}, 1 FROM dual")),
                one(c, Some(item)),
                "{item}"
            );
        }
    }

    #[test]
    fn calls_with_arguments_span_to_their_closing_parenthesis() {
        let sql = "SELECT IS_USED_LOCK(CONCAT('a', ')')), is_used_lock('b') AS h, IS_USED_LOCK()";
        let found: Vec<(String, Option<String>)> =
            calls_with_arguments(sql.as_bytes(), b"is_used_lock", Quoting::Backslash)
                .into_iter()
                .map(|c| {
                    (
                        sql[c.span].to_string(),
                        c.unnamed_item.map(|r| sql[r].to_string()),
                    )
                })
                .collect();
        let first = "IS_USED_LOCK(CONCAT('a', ')'))";
        assert_eq!(
            found,
            vec![
                (first.to_string(), Some(first.to_string())),
                ("is_used_lock('b')".to_string(), None)
            ]
        );
    }

    #[test]
    fn strings_comments_stored_bodies_and_other_functions_are_left_alone() {
        assert!(found("SELECT 'CONNECTION_ID()', `CONNECTION_ID()` -- CONNECTION_ID()").is_empty());
        assert!(found("SELECT db.connection_id(), connection_id(1)").is_empty());
        assert!(found("CREATE VIEW v AS SELECT CONNECTION_ID()").is_empty());
        assert!(found("CREATE TABLE t (a INT DEFAULT (CONNECTION_ID()))").is_empty());
        assert_eq!(
            found("CREATE VIEW v AS SELECT 1; SELECT CONNECTION_ID() x").len(),
            1
        );
    }
}
