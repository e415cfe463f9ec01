"""A small Rust source scanner for the style checks (file sizes, function lengths).

It does not parse Rust; it finds what the checks need: where each `fn` body starts and ends,
and which lines belong to test code (`#[cfg(test)]` items, `#[test]` functions), while
skipping comments, string, byte-string, raw-string and char literals, so that a brace or a
`fn` inside them is never counted.
"""

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tokens(src):
    """Yields (kind, text, line) for identifiers, attributes' `#`, and the punctuation
    `{ } ( ) [ ] ;`, with comments and literals skipped. Lines are 1-based."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif _raw_string_at(src, i):
            j = _raw_string_end(src, i)
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i)):
            i += 2 if c == "b" else 1
            while i < n and src[i] != '"':
                if src[i] == "\\":
                    i += 1
                line += src[i] == "\n" if i < n else 0
                i += 1
            i += 1
        elif c == "'" or (c == "b" and src.startswith("b'", i)):
            j = _char_end(src, i + (2 if c == "b" else 1))
            if j is None:  # a lifetime or a label: `'a`
                i += 1
            else:
                i = j
        elif c.isalpha() or c == "_":
            m = _IDENT.match(src, i)
            yield ("ident", m.group(0), line)
            i = m.end()
        elif c in "{}()[];#":
            yield ("punct", c, line)
            i += 1
        else:
            i += 1


def _raw_string_at(src, i):
    m = re.match(r"b?r#*\"", src[i : i + 260])
    if not m:
        return False
    # `r` must not be the end of an identifier (`bar"` cannot occur, but `for r#"..."` can).
    return i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")


def _raw_string_end(src, i):
    m = re.match(r"b?r(#*)\"", src[i : i + 260])
    close = '"' + m.group(1)
    j = src.find(close, i + m.end())
    return len(src) if j < 0 else j + len(close)


def _char_end(src, i):
    """End of a char literal whose body starts at `i`, or None for a lifetime."""
    if i >= len(src):
        return None
    if src[i] == "\\":
        j = src.find("'", i + 2 if src[i + 1 : i + 2] == "'" else i + 1)
        return None if j < 0 or j - i > 12 else j + 1
    if i + 1 < len(src) and src[i + 1] == "'":
        return i + 2
    return None


def functions(src):
    """Yields (name, first_line, last_line, is_test) for each `fn` with a body. `is_test`:
    the function is, or lies inside, an item marked `#[test]` or `#[cfg(test)]`."""
    toks = list(tokens(src))
    test_spans = _test_spans(toks)
    for k, (kind, text, line) in enumerate(toks):
        if kind != "ident" or text != "fn" or k + 1 >= len(toks) or toks[k + 1][0] != "ident":
            continue
        body = _body_start(toks, k + 2)
        if body is None:
            continue
        end = _matching(toks, body)
        last = toks[end][2] if end is not None else toks[-1][2]
        is_test = any(a <= k <= b for a, b in test_spans)
        yield (toks[k + 1][1], line, last, is_test)


def test_line_ranges(src):
    """The (first_line, last_line) of every `#[cfg(test)]` or `#[test]` item."""
    toks = list(tokens(src))
    return [(toks[a][2], toks[b][2]) for a, b in _test_spans(toks)]


def _test_spans(toks):
    """Token index spans (attribute start, item end) of items marked as test code."""
    spans = []
    for k in range(len(toks) - 3):
        if toks[k][1] != "#" or toks[k + 1][1] != "[":
            continue
        close = _matching(toks, k + 1)
        if close is None:
            continue
        words = [t[1] for t in toks[k + 2 : close] if t[0] == "ident"]
        if words not in (["test"], ["cfg", "test"]) and words[:3] != ["tokio", "test"]:
            continue
        # The item: up to its body's closing brace, or its `;` (`mod tests;`).
        j = close + 1
        while j < len(toks) and toks[j][1] not in ("{", ";"):
            j += 1
        if j < len(toks) and toks[j][1] == "{":
            end = _matching(toks, j)
            spans.append((k, end if end is not None else len(toks) - 1))
        elif j < len(toks):
            spans.append((k, j))
    return spans


def _body_start(toks, k):
    """Index of the `{` that opens the body of the fn whose signature starts at `k`; None
    for a declaration without a body (`fn f();`)."""
    depth = 0
    while k < len(toks):
        t = toks[k][1]
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif depth == 0 and t == ";":
            return None
        elif depth == 0 and t == "{":
            return k
        k += 1
    return None


_PAIR = {"{": "}", "(": ")", "[": "]"}


def _matching(toks, k):
    """Index of the bracket that closes the one at `k`."""
    open_, close = toks[k][1], _PAIR[toks[k][1]]
    depth = 0
    for j in range(k, len(toks)):
        t = toks[j][1]
        if t == open_:
            depth += 1
        elif t == close:
            depth -= 1
            if depth == 0:
                return j
    return None
