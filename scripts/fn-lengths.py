#!/usr/bin/env python3
"""Checks that no function outside test code is longer than a reader can follow on a screen
or two.

A function's length is its lines from `fn` to its closing brace. Test code (`#[cfg(test)]`
items, `#[test]` functions, tests.rs / *_tests.rs files) is not checked. Usage:
scripts/fn-lengths.py [--max=120] DIR [DIR ...]; exits 1 and lists the functions over the
limit, else prints the longest one.
"""
import os
import sys

from rust_scan import functions


def main(argv):
    limit = 120
    dirs = []
    for a in argv:
        if a.startswith("--max="):
            limit = int(a.split("=", 1)[1])
        else:
            dirs.append(a)
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    found = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in sorted(files):
                if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                    continue
                p = os.path.join(root, name)
                with open(p, encoding="utf-8") as f:
                    src = f.read()
                for fname, first, last, is_test in functions(src):
                    if not is_test:
                        found.append((last - first + 1, f"{p}:{first}", fname))
    over = sorted((f for f in found if f[0] > limit), reverse=True)
    for n, at, name in over:
        print(f"{at}: fn {name} is {n} lines (limit {limit}): split it into named steps")
    if over:
        return 1
    if found:
        n, at, name = max(found)
        print(f"function lengths: {len(found)} functions, all <= {limit} lines (longest {name} at {at}, {n})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
