#!/usr/bin/env python3
"""The README's mode-difference table lists every case of corpus/modes/expectations.tsv with
the same jax and strict verdicts (rpa replay checks the cases against the file itself).

Usage: readme_table_test.py REPO_ROOT
"""
import os
import sys


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    # | `name` | jax verdict [(crash)] | strict verdict | why |
    table = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            table[cells[0].strip("`")] = (cells[1].split(" ")[0], cells[2].split(" ")[0])
    with open(os.path.join(root, "corpus", "modes", "expectations.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
    failed = 0
    for name, want_jax, want_strict, _ in rows:
        row = table.get(name)
        if row is None:
            problem = "not listed in README.md's mode-difference table"
        elif row != (want_jax, want_strict):
            problem = f"README.md's row says jax {row[0]}, strict {row[1]}; expectations.tsv says {want_jax}, {want_strict}"
        else:
            continue
        failed += 1
        print(f"FAIL {name}: {problem}")
    print(f"README mode-difference table: {len(rows) - failed} rows agree, {failed} differ")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
