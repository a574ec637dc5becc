#!/usr/bin/env python3
"""The mode-difference table of docs/validation.md ("Where the modes differ") lists every case
of corpus/modes/expectations.tsv with the same jax and strict verdicts (rpa replay checks the
cases against the file itself).

Usage: readme_table_test.py REPO_ROOT
"""
import os
import sys

PAGE = os.path.join("docs", "validation.md")


def main():
    root = sys.argv[1]
    with open(os.path.join(root, PAGE)) as f:
        page = f.read()
    # | `name` | jax verdict [(crash)] | strict verdict | why |
    table = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            table[cells[0].strip("`")] = (cells[1].split(" ")[0], cells[2].split(" ")[0])
    with open(os.path.join(root, "corpus", "modes", "expectations.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
    failed = 0
    for name, want_jax, want_strict, _ in rows:
        row = table.get(name)
        if row is None:
            problem = f"not listed in {PAGE}'s mode-difference table"
        elif row != (want_jax, want_strict):
            problem = f"{PAGE}'s row says jax {row[0]}, strict {row[1]}; expectations.tsv says {want_jax}, {want_strict}"
        else:
            continue
        failed += 1
        print(f"FAIL {name}: {problem}")
    print(f"{PAGE} mode-difference table: {len(rows) - failed} rows agree, {failed} differ")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
