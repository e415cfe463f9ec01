//! What a token is to the digest normaliser beyond what the lexer says: where a number
//! literal ends (the lexer splits `1.5e-3`), string introducers, the operators written
//! together, and the keywords that keep a space before `(`.

use super::lexer::WORD_BYTES;

/// The end of the number literal starting at `i` (digits, a fraction, an exponent, `0x..`,
/// `0b..`), or `None` when the word there is an identifier (`1abc`).
pub(super) fn number_end(sql: &[u8], i: usize) -> Option<usize> {
    let at = |j: usize| sql.get(j).copied().unwrap_or(0);
    let digits = |mut j: usize, ok: fn(u8) -> bool| {
        while j < sql.len() && ok(sql[j]) {
            j += 1;
        }
        j
    };
    let prefixed = |p: u8| at(i) == b'0' && at(i + 1) | 0x20 == p;
    let j = if prefixed(b'x') && at(i + 2).is_ascii_hexdigit() {
        digits(i + 2, |b| b.is_ascii_hexdigit())
    } else if prefixed(b'b') && matches!(at(i + 2), b'0' | b'1') {
        digits(i + 2, |b| b == b'0' || b == b'1')
    } else {
        let mut j = digits(i, |b| b.is_ascii_digit());
        let mut mantissa = j - i;
        if at(j) == b'.' {
            let k = digits(j + 1, |b| b.is_ascii_digit());
            mantissa += k - j - 1;
            j = k;
        }
        if mantissa == 0 {
            return None;
        }
        if at(j) | 0x20 == b'e' {
            let k = j + 1 + usize::from(matches!(at(j + 1), b'+' | b'-'));
            if at(k).is_ascii_digit() {
                j = digits(k, |b| b.is_ascii_digit());
            }
        }
        j
    };
    (j >= sql.len() || !WORD_BYTES[sql[j] as usize]).then_some(j)
}

/// `X'0F'`, `B'01'`, `N'text'`: one literal.
pub(super) fn introduces_string(word: &[u8], next: u8) -> bool {
    next == b'\'' && word.len() == 1 && matches!(word[0] | 0x20, b'x' | b'b' | b'n')
}

/// Operators the lexer splits into bytes that are written together: `<=`, `>=`, `<>`, `!=`,
/// `:=`, `||`, `&&`, `<<`, `>>`, `<=>`, `->`, `->>`.
pub(super) fn operator_pair(a: u8, b: u8) -> bool {
    matches!(
        (a, b),
        (b'<' | b'>' | b'!' | b':', b'=')
            | (b'<', b'>' | b'<')
            | (b'>', b'>')
            | (b'|', b'|')
            | (b'&', b'&')
            | (b'=', b'>')
            | (b'-', b'>')
    )
}

/// Words followed by a space before `(` (for reading; it changes no digest id, since it
/// depends only on the tokens): keywords, as opposed to a function's name.
pub(super) fn spaced_keyword(word: &[u8]) -> bool {
    const SPACED: &[&[u8]] = &[
        b"in",
        b"values",
        b"value",
        b"and",
        b"or",
        b"xor",
        b"not",
        b"exists",
        b"as",
        b"on",
        b"using",
        b"from",
        b"join",
        b"where",
        b"select",
        b"into",
        b"union",
        b"when",
        b"then",
        b"else",
        b"by",
        b"set",
        b"any",
        b"all",
        b"some",
        b"with",
        b"having",
        b"like",
        b"between",
        b"is",
        b"distinct",
        b"return",
        b"over",
        b"except",
        b"intersect",
    ];
    word.len() <= 9 && SPACED.iter().any(|k| word.eq_ignore_ascii_case(k))
}
