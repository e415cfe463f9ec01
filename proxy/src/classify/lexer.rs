//! A minimal MySQL tokenizer: just enough to find keywords, variables, calls and statement
//! boundaries. Comments are skipped, except MySQL/MariaDB executable comments (`/*! ... */`,
//! `/*M! ... */`), whose content is lexed as SQL because the server runs it. Never allocates.

/// What a token is. Literals and identifiers keep only their byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Keyword, unquoted identifier or number (`[A-Za-z0-9_$]` and non-ASCII bytes).
    Word,
    /// A `` `backquoted` `` identifier.
    Quoted,
    /// A '...' or "..." literal.
    Str,
    /// `@name`, `@'name'`: a user variable.
    UserVar,
    /// `@@name`, `@@session.name`: a system variable.
    SysVar,
    /// The `@host` of `user@host` / `'user'@'host'` (an account name, not a variable).
    HostPart,
    /// Any other single byte: `( ) , ; = : . *` and so on.
    Punct(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub start: usize,
    pub end: usize,
}

pub(crate) struct Lexer<'a> {
    sql: &'a [u8],
    pos: usize,
    /// Inside `/*! ... */`: the next `*/` closes it rather than being two punctuation bytes.
    in_exec_comment: bool,
    /// End and kind of the previous token, to tell `user@host` from `@var`.
    prev: Option<Token>,
    /// The byte range of the first `/* sluice:min_gtid=... */` token's value.
    min_gtid: Option<(usize, usize)>,
    /// Whether a backslash escapes the next byte of a string literal.
    backslash_escapes: bool,
}

/// How string literals are lexed: the server's rule for the session, which its status flags
/// tell (SERVER_STATUS_NO_BACKSLASH_ESCAPES). `'a\\'` is a whole string under
/// NO_BACKSLASH_ESCAPES and an unterminated one otherwise, so what follows it is SQL in one
/// mode and string in the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Quoting {
    /// The default: a backslash escapes the next byte.
    #[default]
    Backslash,
    /// sql_mode NO_BACKSLASH_ESCAPES: only a doubled quote escapes.
    QuotesOnly,
}

/// What opens a read-your-writes token comment (after optional spaces): `/* sluice:min_gtid=`.
const MIN_GTID: &[u8] = b"sluice:min_gtid=";

/// Bytes that make up words, as a table because this is the innermost loop of the hot path.
pub(crate) const WORD_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
        i += 1;
    }
    t
};

fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[b as usize]
}

impl<'a> Lexer<'a> {
    pub fn new(sql: &'a [u8], quoting: Quoting) -> Self {
        Lexer {
            sql,
            pos: 0,
            in_exec_comment: false,
            prev: None,
            min_gtid: None,
            backslash_escapes: quoting == Quoting::Backslash,
        }
    }

    /// The value of the first `/* sluice:min_gtid=<value> */` comment lexed so far, trimmed
    /// (the text between `=` and `*/`; empty if there was none).
    pub fn min_gtid(&self) -> Option<&'a [u8]> {
        self.min_gtid.map(|(s, e)| &self.sql[s..e])
    }

    /// Notes a `sluice:min_gtid=` comment whose body is `sql[start..end]`.
    fn note_min_gtid(&mut self, start: usize, end: usize) {
        let body = &self.sql[start..end];
        let lead = body.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if self.min_gtid.is_some() || !body[lead..].starts_with(MIN_GTID) {
            return;
        }
        let value = &body[lead + MIN_GTID.len()..];
        let trail = value
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        let from = start + lead + MIN_GTID.len();
        self.min_gtid = Some((from, from + value.len() - trail));
    }

    fn at(&self, i: usize) -> u8 {
        self.sql.get(i).copied().unwrap_or(0)
    }

    fn skip_while(&mut self, f: impl Fn(u8) -> bool) {
        let rest = self.sql.get(self.pos..).unwrap_or_default();
        self.pos += rest.iter().position(|&b| !f(b)).unwrap_or(rest.len());
    }

    /// Skips a quoted run starting at `pos` (on the opening quote). Backslash escapes apply to
    /// strings (unless the session's sql_mode has NO_BACKSLASH_ESCAPES), a doubled quote
    /// escapes in all three kinds. An unterminated one runs to the end.
    fn skip_quoted(&mut self, quote: u8) {
        self.pos += 1;
        while self.pos < self.sql.len() {
            let b = self.sql[self.pos];
            if b == b'\\' && quote != b'`' && self.backslash_escapes {
                self.pos += 2;
            } else if b == quote {
                if self.at(self.pos + 1) == quote {
                    self.pos += 2;
                } else {
                    self.pos += 1;
                    return;
                }
            } else {
                self.pos += 1;
            }
        }
        self.pos = self.sql.len();
    }

    /// Skips a comment if one starts at `pos`; returns whether it did.
    fn skip_comment(&mut self) -> bool {
        let (c, n) = (self.at(self.pos), self.at(self.pos + 1));
        let dash_comment = c == b'-' && n == b'-' && {
            let after = self.at(self.pos + 2);
            after == 0 || after.is_ascii_whitespace() || after.is_ascii_control()
        };
        if c == b'#' || dash_comment {
            self.skip_while(|b| b != b'\n');
            return true;
        }
        if c == b'/' && n == b'*' {
            let exec = if self.at(self.pos + 2) == b'!' {
                Some(3)
            } else if self.at(self.pos + 2) == b'M' && self.at(self.pos + 3) == b'!' {
                Some(4)
            } else {
                None
            };
            if let Some(skip) = exec {
                self.pos += skip;
                self.skip_while(|b| b.is_ascii_digit());
                self.in_exec_comment = true;
                return true;
            }
            let body = &self.sql[self.pos + 2..];
            let (end, next) = match body.windows(2).position(|w| w == b"*/") {
                Some(i) => (self.pos + 2 + i, self.pos + 2 + i + 2),
                None => (self.sql.len(), self.sql.len()),
            };
            // Only a closed comment is a token: a cut-off one may have lost part of its value.
            if next != end {
                self.note_min_gtid(self.pos + 2, end);
            }
            self.pos = next;
            return true;
        }
        if self.in_exec_comment && c == b'*' && n == b'/' {
            self.pos += 2;
            self.in_exec_comment = false;
            return true;
        }
        false
    }

    fn variable(&mut self, start: usize) -> Tok {
        if self.at(self.pos + 1) == b'@' {
            self.pos += 2;
            self.skip_while(|b| is_word_byte(b) || b == b'.');
            return Tok::SysVar;
        }
        let adjacent = self.prev.is_some_and(|p| {
            p.end == start && matches!(p.kind, Tok::Word | Tok::Str | Tok::Quoted)
        });
        self.pos += 1;
        match self.at(self.pos) {
            q @ (b'\'' | b'"' | b'`') => self.skip_quoted(q),
            _ => self.skip_while(|b| is_word_byte(b) || b == b'.'),
        }
        if adjacent {
            Tok::HostPart
        } else {
            Tok::UserVar
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        loop {
            self.skip_while(|b| b.is_ascii_whitespace());
            if self.pos >= self.sql.len() {
                return None;
            }
            let start = self.pos;
            let b = self.sql[start];
            if matches!(b, b'#' | b'-' | b'/' | b'*') && self.skip_comment() {
                continue;
            }
            let kind = match b {
                b'\'' | b'"' => {
                    self.skip_quoted(b);
                    Tok::Str
                }
                b'`' => {
                    self.skip_quoted(b);
                    Tok::Quoted
                }
                b'@' => self.variable(start),
                b if is_word_byte(b) => {
                    self.skip_while(is_word_byte);
                    Tok::Word
                }
                other => {
                    self.pos += 1;
                    Tok::Punct(other)
                }
            };
            let tok = Token {
                kind,
                start,
                end: self.pos.min(self.sql.len()),
            };
            self.prev = Some(tok);
            return Some(tok);
        }
    }
}

/// True when `tok` is the word `kw` (given in lower case), compared case-insensitively.
pub(crate) fn is_kw(sql: &[u8], tok: &Token, kw: &[u8]) -> bool {
    tok.kind == Tok::Word
        && tok.end - tok.start == kw.len()
        && sql[tok.start..tok.end].eq_ignore_ascii_case(kw)
}

/// The name a token gives a function it calls (the token is followed by `(`): a word as it
/// is, a backquoted identifier without its quotes (MariaDB calls its builtin for
/// `` `LAST_INSERT_ID`() `` as for `LAST_INSERT_ID()`); `None` for any other token.
pub(crate) fn call_name<'a>(sql: &'a [u8], tok: &Token) -> Option<&'a [u8]> {
    let raw = &sql[tok.start..tok.end];
    match tok.kind {
        Tok::Word => Some(raw),
        Tok::Quoted if raw.len() >= 2 && raw[raw.len() - 1] == b'`' => Some(&raw[1..raw.len() - 1]),
        _ => None,
    }
}

/// True when `tok`, followed by `(`, calls the function `name` (given in lower case),
/// compared case-insensitively: a word or a backquoted identifier ([`call_name`]).
pub(crate) fn is_call_of(sql: &[u8], tok: &Token, name: &[u8]) -> bool {
    call_name(sql, tok).is_some_and(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
}

/// The text of an identifier-like token without its quotes (`` `a``b` `` -> "a`b").
pub(crate) fn ident_text(sql: &[u8], tok: &Token) -> Option<String> {
    let raw = &sql[tok.start..tok.end];
    let text = match tok.kind {
        Tok::Word => String::from_utf8_lossy(raw).into_owned(),
        Tok::Quoted | Tok::Str if raw.len() >= 2 => {
            let q = raw[0] as char;
            let inner = String::from_utf8_lossy(&raw[1..raw.len() - 1]).into_owned();
            inner.replace(&format!("{q}{q}"), &q.to_string())
        }
        _ => return None,
    };
    Some(text)
}
