#!/usr/bin/env python3
"""Checks that no Rust source file is longer than a reader can take in one sitting.

A file's size is its lines outside test code (the style guide counts code, not tests): every
`#[cfg(test)]` item and `#[test]` function is left out wherever it stands in the file, and
tests.rs / *_tests.rs files are not counted. Usage: scripts/file-sizes.py [--max=600]
[--warn=500] DIR [DIR ...]; exits 1 and lists the files over the limit, names those over the
warning size, and prints the largest one.
"""
import os
import sys

from rust_scan import test_line_ranges


def code_lines(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    total = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
    covered = set()
    for first, last in test_line_ranges(src):
        covered.update(range(first, last + 1))
    return total - len(covered)


def main(argv):
    limit, warn = 600, 500
    dirs = []
    for a in argv:
        if a.startswith("--max="):
            limit = int(a.split("=", 1)[1])
        elif a.startswith("--warn="):
            warn = int(a.split("=", 1)[1])
        else:
            dirs.append(a)
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sizes = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in files:
                if name.endswith(".rs") and not name.endswith("_tests.rs") and name != "tests.rs":
                    p = os.path.join(root, name)
                    sizes.append((code_lines(p), p))
    over = sorted((s for s in sizes if s[0] > limit), reverse=True)
    near = sorted((s for s in sizes if warn < s[0] <= limit), reverse=True)
    for n, p in near:
        print(f"warning: {p}: {n} lines outside tests (over {warn}): split it before it grows")
    for n, p in over:
        print(f"{p}: {n} lines outside tests (limit {limit}): split it by what each part does")
    if over:
        return 1
    n, p = max(sizes)
    print(f"file sizes: {len(sizes)} files, all <= {limit} lines outside tests (largest {p}, {n})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
