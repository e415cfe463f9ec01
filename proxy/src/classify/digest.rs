//! Statement digests: a statement's shape (its text with the literals taken out) and a stable
//! 64-bit id of that shape. Per-digest statistics (`crate::digests`) and query rules
//! (`crate::rules`) key on it.
//!
//! The normalised text, built from the lexer's tokens (so comments, strings and quoting are
//! read exactly as the classifier reads them):
//! - literals become `?`: numbers (`12`, `1.5e-3`, `.5`, `0x1F`, `0b01`), strings, `X'..'`,
//!   `B'..'`, `N'..'`, `_charset'..'`, NULL (but not in `IS [NOT] NULL`), and the `?` of a
//!   prepared statement's text, so a prepared statement and the same query with literals
//!   share one digest;
//! - a parenthesised list of literals after IN, VALUES or VALUE, or directly inside such a
//!   list, becomes `(?+)` whatever its length (signs included: `IN (-1, 2)`);
//! - rows of the same shape in a list (`VALUES (1,'a'),(2,'b')`, `IN ((1,2),(3,4))`) are
//!   written once and followed by `/* , ... */`, as performance_schema writes them;
//! - comments and whitespace are dropped (an executable comment's content is SQL and stays);
//!   tokens are separated by one space, except after `(` and `.`, before `)`, `,` and `.`,
//!   within an operator (`<=`, `:=`, `->>`) and between a name and its `(` (a call);
//! - keywords and identifiers keep the case and quoting they were written with, and a
//!   multi-statement keeps its `;` (a trailing one is dropped).
//!
//! The id is XXH3-64 of the normalised bytes, so it is the same in every build and release
//! for as long as these rules are. The kept text stops at [`TEXT_CAP`] bytes; the id covers it
//! all. Work is one pass over the tokens into a buffer that lives on the stack for statements
//! up to [`INLINE`] normalised bytes; a long pure list is counted, never written.

use std::fmt;
use std::hash::Hasher;

use smallvec::SmallVec;

use super::digest_lex::{introduces_string, number_end, operator_pair, spaced_keyword};
use super::lexer::{Lexer, Quoting, Tok, Token};

/// Normalised bytes kept on the stack before the buffer moves to the heap.
pub const INLINE: usize = 128;
/// The normalised text kept for display and rules; the id covers what follows too.
pub const TEXT_CAP: usize = 16 * 1024;
/// Parentheses tracked for list folding; deeper ones are written as they are.
const MAX_DEPTH: usize = 32;
/// What a repeated row leaves behind.
const MORE_ROWS: &[u8] = b" /* , ... */";

/// A digest id: XXH3-64 of the normalised text, shown as `0x` and 16 hex digits (which
/// `config::parse_digest_id` reads back).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DigestId(pub u64);

impl fmt::Display for DigestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:016x}", self.0)
    }
}

type Text = SmallVec<[u8; INLINE]>;

/// One statement's digest: its id and its normalised text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    pub id: DigestId,
    text: Text,
    truncated: bool,
}

impl Digest {
    /// The normalised text (its first `TEXT_CAP` bytes, 16 KiB; UTF-8 when the statement was).
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Whether the text stops at `TEXT_CAP` (the id still covers the whole statement).
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

/// The digest of one statement text (COM_QUERY, or a prepared statement's text), with
/// strings lexed by the session's `quoting`.
pub fn digest(sql: &[u8], quoting: Quoting) -> Digest {
    digest_with(sql, |n| {
        for tok in Lexer::new(sql, quoting) {
            n.token(tok);
        }
    })
}

/// The digest of the tokens `feed` gives the normaliser (the classifier's full scan gives
/// them as it reads them).
pub(super) fn digest_with(sql: &[u8], feed: impl FnOnce(&mut Normaliser<'_, '_>)) -> Digest {
    // Built in place: the text is written where the caller's value lives.
    let mut d = Digest {
        id: DigestId(0),
        text: Text::new(),
        truncated: false,
    };
    let mut n = Normaliser::new(sql, &mut d.text);
    feed(&mut n);
    if let Some((id, head)) = n.finish() {
        d.text = head;
        d.truncated = true;
        d.id = id;
    } else {
        d.id = DigestId(twox_hash::XxHash3_64::oneshot(&d.text));
    }
    d
}

/// How the last written token spaces the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Start,
    Word,
    Value,
    Open,
    Close,
    Comma,
    Dot,
    Op,
    Semi,
    Host,
}

/// The last token written: its class, its input range (a word's text, an operator's
/// adjacency) and, for an operator, its byte.
#[derive(Clone, Copy)]
struct Prev {
    class: Class,
    start: usize,
    end: usize,
}

/// Sibling rows at one depth: the last row kept, and where the `,` before the next began.
#[derive(Clone, Copy, Default)]
struct Rows {
    last: Option<(u32, u32)>,
    sep: Option<u32>,
    after_row: bool,
    expect_row: bool,
    marked: bool,
}

/// One open parenthesis.
#[derive(Clone, Copy)]
struct Frame {
    /// Where its `(` is in the output.
    open_at: u32,
    /// A list that folds (after IN / VALUES / VALUE, or a row inside such a list).
    list: bool,
    /// A list whose children so far are literals: they are counted, not written.
    pure: bool,
    values: u32,
    trailing_comma: bool,
    /// A `-` or `+` held before the literal it signs.
    sign: Option<u8>,
    /// Its children's rows.
    rows: Rows,
}

/// The token-by-token normaliser (fed by [`digest`]).
pub(super) struct Normaliser<'a, 'b> {
    sql: &'a [u8],
    out: &'b mut Text,
    prev: Prev,
    /// Input bytes already written as part of a literal (the lexer splits `1.5e-3`).
    skip_until: usize,
    /// The string after an introducer (`X'..'`, `_utf8mb4'..'`) is part of its `?`.
    swallow_str: bool,
    semicolon: bool,
    frames: SmallVec<[Frame; 4]>,
    /// Parentheses open beyond `MAX_DEPTH`.
    deep: usize,
    top: Rows,
    /// Set once the text passed `TEXT_CAP`: what was written is hashed and gone.
    spill: Option<Spill>,
}

struct Spill {
    hasher: twox_hash::XxHash3_64,
    head: Text,
}

impl<'a, 'b> Normaliser<'a, 'b> {
    pub(super) fn new(sql: &'a [u8], out: &'b mut Text) -> Normaliser<'a, 'b> {
        out.clear();
        Normaliser {
            sql,
            out,
            prev: Prev {
                class: Class::Start,
                start: 0,
                end: 0,
            },
            skip_until: 0,
            swallow_str: false,
            semicolon: false,
            frames: SmallVec::new(),
            deep: 0,
            top: Rows::default(),
            spill: None,
        }
    }

    /// Takes the next token of the statement.
    pub(super) fn token(&mut self, tok: Token) {
        if tok.start < self.skip_until {
            return;
        }
        if std::mem::take(&mut self.swallow_str) && tok.kind == Tok::Str {
            return;
        }
        let class = self.class_of(&tok);
        if class == Class::Semi {
            // A new statement: nothing folds across it, and a trailing `;` is dropped.
            self.semicolon = self.prev.class != Class::Start;
            self.frames.clear();
            self.deep = 0;
            self.top = Rows::default();
            return;
        }
        if std::mem::take(&mut self.semicolon) {
            self.emit(Class::Semi, tok.start, tok.start, b";");
        }
        if self.pure_child(class, &tok) {
            return;
        }
        match class {
            Class::Open => self.open(&tok),
            Class::Close => self.close(&tok),
            Class::Comma => {
                let len = pos(self.out.len());
                let rows = self.rows();
                if rows.after_row {
                    rows.sep = Some(len);
                    rows.expect_row = true;
                    rows.after_row = false;
                } else {
                    *rows = Rows::default();
                }
                self.emit(Class::Comma, tok.start, tok.end, b",");
            }
            Class::Value => {
                *self.rows() = Rows::default();
                self.emit(Class::Value, tok.start, tok.end, b"?");
            }
            _ => {
                *self.rows() = Rows::default();
                let text = &self.sql[tok.start..tok.end];
                self.emit(class, tok.start, tok.end, text);
            }
        }
        if self.out.len() > TEXT_CAP {
            self.spill();
        }
    }

    /// Ends the statement. The text is in the caller's buffer, unless it outgrew
    /// `TEXT_CAP`: then this returns the id and the text's head.
    pub(super) fn finish(mut self) -> Option<(DigestId, Text)> {
        // Only the innermost open list can still be pure (a child paren ends its parent's).
        if self.frames.last().is_some_and(|f| f.pure) {
            self.materialise();
        }
        let mut s = self.spill.take()?;
        s.hasher.write(self.out);
        Some((DigestId(s.hasher.finish()), s.head))
    }

    /// What the token is, literals recognised (and the input they cover marked as taken).
    fn class_of(&mut self, tok: &Token) -> Class {
        let sql = self.sql;
        let at = |i: usize| sql.get(i).copied().unwrap_or(0);
        match tok.kind {
            Tok::Str | Tok::Punct(b'?') => Class::Value,
            Tok::Quoted | Tok::UserVar | Tok::SysVar => Class::Word,
            Tok::HostPart => Class::Host,
            Tok::Word => {
                let word = &sql[tok.start..tok.end];
                if word[0].is_ascii_digit() {
                    if let Some(end) = number_end(sql, tok.start) {
                        self.skip_until = end;
                        return Class::Value;
                    }
                } else if introduces_string(word, at(tok.end)) || self.charset_introducer(tok) {
                    self.swallow_str = true;
                    return Class::Value;
                } else if word.eq_ignore_ascii_case(b"null") && !self.after_is_or_not() {
                    return Class::Value;
                }
                Class::Word
            }
            Tok::Punct(b'(') => Class::Open,
            Tok::Punct(b')') => Class::Close,
            Tok::Punct(b',') => Class::Comma,
            Tok::Punct(b';') => Class::Semi,
            Tok::Punct(b'.') => {
                let qualifies =
                    matches!(self.prev.class, Class::Word | Class::Close | Class::Value);
                match number_end(sql, tok.start) {
                    Some(end) if !qualifies && at(tok.start + 1).is_ascii_digit() => {
                        self.skip_until = end;
                        Class::Value
                    }
                    _ => Class::Dot,
                }
            }
            Tok::Punct(_) => Class::Op,
        }
    }

    /// `_utf8mb4 'x'`, `_binary'x'`: a charset introducer before a string.
    fn charset_introducer(&self, tok: &Token) -> bool {
        let sql = self.sql;
        if sql[tok.start] != b'_' || tok.end - tok.start < 2 {
            return false;
        }
        let next = sql[tok.end..].iter().find(|b| !b.is_ascii_whitespace());
        matches!(next, Some(b'\'' | b'"'))
    }

    /// The word written last, if the last token was one.
    fn prev_word(&self) -> Option<&[u8]> {
        (self.prev.class == Class::Word).then(|| &self.sql[self.prev.start..self.prev.end])
    }

    fn after_is_or_not(&self) -> bool {
        self.prev_word()
            .is_some_and(|w| w.eq_ignore_ascii_case(b"is") || w.eq_ignore_ascii_case(b"not"))
    }

    /// The rows of the innermost open parenthesis (or of the statement's top level).
    fn rows(&mut self) -> &mut Rows {
        match self.frames.last_mut() {
            Some(f) if self.deep == 0 => &mut f.rows,
            _ => &mut self.top,
        }
    }

    /// A child of a pure list: literals, commas and signs are counted; anything else makes
    /// the list an ordinary one. Returns whether the token was taken.
    fn pure_child(&mut self, class: Class, tok: &Token) -> bool {
        let Some(f) = self.frames.last_mut().filter(|f| f.pure && self.deep == 0) else {
            return false;
        };
        match class {
            Class::Value => {
                f.values += 1;
                f.trailing_comma = false;
                f.sign = None;
                true
            }
            Class::Comma if f.sign.is_none() => {
                f.trailing_comma = true;
                true
            }
            Class::Op if f.sign.is_none() && matches!(self.sql[tok.start], b'-' | b'+') => {
                f.sign = Some(self.sql[tok.start]);
                true
            }
            Class::Close => false,
            _ => {
                self.materialise();
                false
            }
        }
    }

    /// Writes what the innermost pure list counted, and makes it an ordinary list.
    fn materialise(&mut self) {
        let Some(f) = self.frames.last_mut() else {
            return;
        };
        f.pure = false;
        let (values, trailing, sign) = (f.values, f.trailing_comma, f.sign);
        let at = self.prev.end;
        for i in 0..values {
            if i > 0 {
                self.emit(Class::Comma, at, at, b",");
            }
            self.emit(Class::Value, at, at, b"?");
        }
        if trailing {
            self.emit(Class::Comma, at, at, b",");
        }
        if let Some(sign) = sign {
            self.emit(Class::Op, at, at, &[sign]);
        }
    }

    fn open(&mut self, tok: &Token) {
        let after_list_word = self.prev_word().is_some_and(|w| {
            w.eq_ignore_ascii_case(b"in")
                || w.eq_ignore_ascii_case(b"values")
                || w.eq_ignore_ascii_case(b"value")
        });
        let first_row = self.prev.class == Class::Open
            && self.deep == 0
            && self.frames.last().is_some_and(|f| f.list);
        let rows = self.rows();
        let next_row = std::mem::take(&mut rows.expect_row);
        if !next_row {
            *rows = Rows::default();
        }
        rows.after_row = false;
        let list = after_list_word || first_row || next_row;
        self.emit(Class::Open, tok.start, tok.end, b"(");
        if self.frames.len() >= MAX_DEPTH || self.deep > 0 {
            self.deep += 1;
            return;
        }
        self.frames.push(Frame {
            open_at: pos(self.out.len() - 1),
            list,
            pure: list,
            values: 0,
            trailing_comma: false,
            sign: None,
            rows: Rows::default(),
        });
    }

    fn close(&mut self, tok: &Token) {
        if self.deep > 0 {
            self.deep -= 1;
            self.emit(Class::Close, tok.start, tok.end, b")");
            return;
        }
        let Some(f) = self.frames.pop() else {
            *self.rows() = Rows::default();
            self.emit(Class::Close, tok.start, tok.end, b")");
            return;
        };
        if f.pure && (f.values > 0 || f.trailing_comma) {
            self.emit(Class::Value, tok.start, tok.start, b"?+");
        }
        self.emit(Class::Close, tok.start, tok.end, b")");
        let end = pos(self.out.len());
        let spilled = self.spill.is_some();
        let out = &mut *self.out;
        let rows = match self.frames.last_mut() {
            Some(parent) => &mut parent.rows,
            None => &mut self.top,
        };
        if !f.list {
            *rows = Rows::default();
            return;
        }
        let row = (f.open_at, end);
        let repeat = match (rows.sep, rows.last) {
            (Some(_), Some((a, b))) if !spilled => {
                out[a as usize..b as usize] == out[row.0 as usize..row.1 as usize]
            }
            _ => false,
        };
        if repeat {
            out.truncate(rows.sep.unwrap_or(end) as usize);
            if !std::mem::replace(&mut rows.marked, true) {
                out.extend_from_slice(MORE_ROWS);
            }
            // The kept row now ends with the marker: the next row compares with the row.
        } else {
            rows.last = Some(row);
            rows.marked = false;
        }
        rows.sep = None;
        rows.after_row = true;
    }

    /// Writes one token, with the space the previous one asks for.
    fn emit(&mut self, class: Class, start: usize, end: usize, text: &[u8]) {
        if self.space_before(class, start) {
            self.out.push(b' ');
        }
        // Tokens are a few bytes: a loop beats a call to memcpy.
        self.out.extend(text.iter().copied());
        self.prev = Prev { class, start, end };
    }

    fn space_before(&self, class: Class, start: usize) -> bool {
        use Class as C;
        match (self.prev.class, class) {
            (C::Start | C::Open | C::Dot, _) => false,
            (_, C::Close | C::Comma | C::Dot | C::Host | C::Semi) => false,
            (C::Word, C::Open) => self.prev_word().is_some_and(spaced_keyword),
            (C::Op, C::Op) => {
                let joined = self.prev.end == start
                    && start > 0
                    && operator_pair(self.sql[start - 1], self.sql[start]);
                !joined
            }
            _ => true,
        }
    }

    /// Past `TEXT_CAP`: the text so far is hashed and kept (once) as the head; folding that
    /// would reach back into it stops.
    fn spill(&mut self) {
        let out = std::mem::take(self.out);
        match &mut self.spill {
            Some(s) => s.hasher.write(&out),
            None => {
                let mut hasher = twox_hash::XxHash3_64::with_seed(0);
                hasher.write(&out);
                self.spill = Some(Spill { hasher, head: out });
            }
        }
    }
}

/// An output position (the text is spilled long before 4 GiB).
fn pos(at: usize) -> u32 {
    u32::try_from(at).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "digest_tests.rs"]
mod tests;
