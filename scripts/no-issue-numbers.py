#!/usr/bin/env python3
"""Checks that no Rust source (code, comments, help texts, user-facing output) names an issue
number: code says why in its own words, and the history of a change belongs to git.

Usage: scripts/no-issue-numbers.py DIR [DIR ...]; exits 1 and lists each mention.
"""
import os
import re
import sys



def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    hits = []
    for d in argv:
        for root, _, files in os.walk(d):
            for name in sorted(files):
                if not name.endswith(".rs"):
                    continue
                p = os.path.join(root, name)
                with open(p, encoding="utf-8") as f:
                    for i, line in enumerate(f, 1):
                        m = re.search(r"\bissues?\s*#?\s*\d+", line, re.IGNORECASE)
                        if m:
                            hits.append(f"{p}:{i}: {m.group(0)!r}: say why in words, not by issue number")
    for h in hits:
        print(h)
    if hits:
        return 1
    print("issue numbers: none in the Rust sources")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
