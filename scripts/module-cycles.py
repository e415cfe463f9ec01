#!/usr/bin/env python3
"""Finds import cycles between the modules of a Rust crate.

Usage: scripts/module-cycles.py CRATE_DIR [CRATE_DIR ...] [--edges] [--allow-parent] [--depth=N]
       scripts/module-cycles.py --self-test

For every module of the crate (its files, and inline `mod name { ... }` blocks) this reads the
paths the code names: `use` trees (braces expanded), and paths written inline in the code such as
`crate::measure::level::run_level(..)`, `super::Run` or `child::Item`. Each path is resolved to the
deepest module it names, so `crate::report::plots::soak` is an edge to `report::plots`, not to
`report`. A module naming one of its own ancestors or descendants counts like any other edge: a
`mod.rs` that calls into its children while a child imports back from the `mod.rs` is a cycle.
`mod x;` declarations are not edges, and neither are `#[cfg(test)]` modules (nothing imports a
test module, so it cannot close a cycle). `--allow-parent` drops the edges between a module and
its own ancestors (the looser rule: a child may use what its `mod.rs` defines while the `mod.rs`
uses the child), so only cycles through unrelated modules remain. `--depth=N` merges every
module into its ancestor N levels below the crate root first (`--depth=1`: top-level modules
only, so `conn::client -> config` and `config::values -> conn::endpoint` make a `conn <-> config`
cycle).

Prints every cycle (one per strongly connected component, shortest path first) and exits 1, or
prints `no import cycles` and exits 0. `--edges` also prints the module graph. Only the standard
library is needed; comments, strings and char literals are skipped, macros are read as code.
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """Source with comments, string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
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
                    out.append("\n" if src[i] == "\n" else "")
                    i += 1
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not re.match(r"\w", src[i - 1])):
            end = src.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), else a lifetime or label.
            m = re.compile(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'").match(src, i)
            if m:
                out.append("' '")
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def use_paths(tree, prefix=()):
    """Expands a `use` tree (`a::{b, c::{d as e}, self}`) into segment tuples."""
    tree = tree.strip()
    paths = []
    if not tree:
        return paths
    m = re.match(r"^((?:::)?(?:%s::)*)\{(.*)\}$" % IDENT, tree, re.S)
    if m:
        head = tuple(s for s in m.group(1).split("::") if s)
        body, parts, depth, cur = m.group(2), [], 0, ""
        for ch in body:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for p in parts:
            paths += use_paths(p, prefix + head)
        return paths
    tree = re.sub(r"\s+as\s+%s$" % IDENT, "", tree)
    segs = tuple(s for s in tree.split("::") if s and s != "*")
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    paths.append(prefix + segs)
    return paths


class Crate:
    def __init__(self, crate_dir):
        src = Path(crate_dir) / "src"
        roots = [p for p in (src / "lib.rs", src / "main.rs") if p.exists()]
        if not roots:
            sys.exit(f"{crate_dir}: no src/lib.rs or src/main.rs")
        self.modules = {}  # name -> (stripped text, set of child names)
        self.refs = {}  # name -> list of (segments, line)
        self.files = {}
        for root in roots:
            self.load(root, "crate", src)

    def load(self, path, name, dir_for_children):
        text = strip(path.read_text())
        self.files[name] = path
        self.scan(text, name, path, dir_for_children, 0)

    def scan(self, text, name, path, child_dir, line0):
        children = set()
        self.modules[name] = children
        refs = self.refs.setdefault(name, [])
        # Inline and file modules declared here.
        pos, body = 0, []
        pat = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(%s)\s*([;{])" % IDENT)
        for m in pat.finditer(text):
            if m.start() < pos:
                continue
            attrs, child, kind = m.group(1), m.group(2), m.group(3)
            is_test = "cfg(test)" in attrs
            body.append(text[pos : m.start()])
            body.append("\n" * text.count("\n", m.start(), m.end()))
            full = f"{name}::{child}"
            if kind == ";":
                pos = m.end()
                if is_test:
                    continue
                children.add(child)
                for cand in (child_dir / f"{child}.rs", child_dir / child / "mod.rs"):
                    if cand.exists():
                        sub = child_dir / child
                        self.load(cand, full, sub)
                        break
                else:
                    print(f"warning: {path}: module {child} has no file", file=sys.stderr)
            else:
                close = matching_brace(text, m.end() - 1)
                pos = close + 1
                body.append("\n" * text.count("\n", m.end(), pos))
                if is_test:
                    continue
                children.add(child)
                self.files[full] = path
                inner_line0 = line0 + text.count("\n", 0, m.end())
                self.scan(text[m.end() : close], full, path, child_dir / child, inner_line0)
        body.append(text[pos:])
        own = "".join(body)
        line_of = lambda off: line0 + own.count("\n", 0, off) + 1
        # `use` trees first, then blank them so their paths are not read twice.
        for m in re.finditer(r"\buse\s+([^;]*);", own):
            for segs in use_paths(m.group(1)):
                refs.append((segs, line_of(m.start())))
        code = re.sub(r"\buse\s+[^;]*;", lambda m: " " * len(m.group(0)), own)
        for m in re.finditer(r"(?<![\w:])((?:%s)(?:\s*::\s*%s)+)" % (IDENT, IDENT), code):
            segs = tuple(s.strip() for s in m.group(1).split("::"))
            refs.append((segs, line_of(m.start())))

    def resolve(self, here, segs):
        """The deepest module `segs`, read in module `here`, names (None if outside the crate)."""
        if not segs:
            return None
        parts = here.split("::")
        first, rest = segs[0], list(segs[1:])
        if first == "crate":
            base = ["crate"]
        elif first == "self":
            base = parts
        elif first == "super":
            base = parts[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif first in self.modules.get(here, ()):
            base, rest = parts, [first] + rest
        else:
            return None
        mod = "::".join(base)
        for seg in rest:
            nxt = f"{mod}::{seg}"
            if nxt not in self.modules:
                break
            mod = nxt
        return mod if mod in self.modules else None

    def edges(self, allow_parent, depth):
        """`{module: {module it names: (file, line of the first mention)}}`."""
        cut = lambda m: "::".join(m.split("::")[: depth + 1]) if depth else m
        out = {cut(m): {} for m in self.modules}
        related = lambda a, b: a.startswith(b + "::") or b.startswith(a + "::")
        for here, refs in self.refs.items():
            for segs, line in refs:
                target = self.resolve(here, segs)
                if not target:
                    continue
                a, b = cut(here), cut(target)
                if a == b or (allow_parent and related(a, b)):
                    continue
                out[a].setdefault(b, (self.files[here], line))
        return out


def sccs(graph):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in comps if len(c) > 1]


def shortest_cycle(graph, comp):
    comp = set(comp)
    best = None
    for start in sorted(comp):
        prev, queue = {start: None}, [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path = list(reversed(path)) + [start]
                    if best is None or len(path) < len(best):
                        best = path
                    queue = []
                    break
                if w in comp and w not in prev:
                    prev[w] = v
                    queue.append(w)
    return best


def self_test():
    """Checks the rule on a small crate written to a temp dir; exits 1 on a wrong answer."""
    import tempfile

    files = {
        "src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\npub use a::Thing;\n",
        # a <-> b through a use tree and a `super::` path; the comment and string do not count.
        "src/a.rs": "use crate::{b::{Other, More as M}};\npub struct Thing;\n"
        "// use crate::c;\nconst S: &str = \"crate::c::X\";\nconst C: char = '\\'';\n",
        "src/b.rs": "pub struct Other;\npub struct More;\nfn f() { super::a::Thing; }\n",
        # c names a only inside its tests (no edge) and d by an inline path; d names nothing.
        "src/c.rs": "fn g() { crate::d::h(); }\n#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\n",
        "src/d/mod.rs": "mod inner;\npub fn h() { inner::k(); }\n",
        # d <-> d::inner: a parent and its child, a cycle unless --allow-parent.
        "src/d/inner.rs": "pub fn k() {}\nfn back() { super::h(); }\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        strict = Crate(tmp).edges(False, 0)
        loose = Crate(tmp).edges(True, 0)
        found = sorted(sorted(c) for c in sccs(strict))
        want = [["crate::a", "crate::b"], ["crate::d", "crate::d::inner"]]
        checks = [
            (found == want, f"strict cycles {found}, expected {want}"),
            (sorted(sorted(c) for c in sccs(loose)) == want[:1], "--allow-parent keeps only a <-> b"),
            ("crate::c" not in strict["crate::a"], "a comment or a string made an edge"),
            ("crate::a" not in strict["crate::c"], "a test module made an edge"),
            ("crate::d" in strict["crate::c"], "an inline crate:: path made no edge"),
        ]
    bad = [msg for ok, msg in checks if not ok]
    for msg in bad:
        print(f"self-test failed: {msg}")
    print("self-test passed" if not bad else "")
    return 1 if bad else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    show_edges = "--edges" in argv
    allow_parent = "--allow-parent" in argv
    depth = 0
    for a in argv:
        if a.startswith("--depth="):
            depth = int(a.split("=", 1)[1])
    dirs = [a for a in argv if not a.startswith("--")]
    if not dirs:
        sys.exit(__doc__.split("\n\n")[1])
    failed = False
    for d in dirs:
        crate = Crate(d)
        graph = crate.edges(allow_parent, depth)
        short = lambda m: m.replace("crate::", "", 1) if m != "crate" else "crate (root)"
        if show_edges:
            for a in sorted(graph):
                for b in sorted(graph[a]):
                    print(f"{d}: {short(a)} -> {short(b)}")
        cycles = sccs(graph)
        for comp in cycles:
            path = shortest_cycle(graph, comp)
            hops = []
            for a, b in zip(path, path[1:]):
                file, line = graph[a][b]
                hops.append(f"  {short(a)} -> {short(b)}  ({file}:{line})")
            members = ", ".join(short(m) for m in sorted(comp))
            print(f"{d}: import cycle among {len(comp)} modules ({members}); the shortest:")
            print("\n".join(hops))
        if cycles:
            failed = True
        else:
            print(f"{d}: no import cycles among {len(graph)} modules")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
