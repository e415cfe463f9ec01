#!/usr/bin/env python3
"""Checks that no Rust source file is longer than a reader can take in one sitting.

A file's size is its lines before its first `#[cfg(test)]` (tests excluded, as the style
guide says). Usage: scripts/file-sizes.py [--max=600] DIR [DIR ...]; exits 1 and lists the
files over the limit, else prints the largest one.
"""
import os
import sys


def code_lines(path):
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#[cfg(test)]"):
                break
            n += 1
    return n


def main(argv):
    limit = 600
    dirs = []
    for a in argv:
        if a.startswith("--max="):
            limit = int(a.split("=", 1)[1])
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
    for n, p in over:
        print(f"{p}: {n} lines before its tests (limit {limit}): split it by what each part does")
    if over:
        return 1
    n, p = max(sizes)
    print(f"file sizes: {len(sizes)} files, all <= {limit} lines before their tests (largest {p}, {n})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
