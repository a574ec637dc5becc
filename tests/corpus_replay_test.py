#!/usr/bin/env python3
"""Replays a corpus directory: `rpa validate` must give each case the verdict that the
directory's expectations.tsv records for each mode; for corpus/modes the README's
mode-difference table must also list every case with the same verdicts.

Usage: corpus_replay_test.py RPA_BINARY REPO_ROOT SUBDIR [--readme-table]
"""
import json
import os
import subprocess
import sys


def verdict(rpa, path, mode):
    proc = subprocess.run([rpa, "validate", path, "--mode", mode, "--json"],
                          capture_output=True, text=True)
    out = json.loads(proc.stdout)
    expected_exit = 0 if out["valid"] else 2
    if proc.returncode != expected_exit:
        raise AssertionError(f"exit {proc.returncode} with {out}")
    return "valid" if out["valid"] else out["rule"]


def main():
    rpa, root, subdir = sys.argv[1], sys.argv[2], sys.argv[3]
    check_readme = "--readme-table" in sys.argv[4:]
    corpus = os.path.join(root, "corpus", subdir)
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    # | `name` | jax verdict [(crash)] | strict verdict | why |
    readme_rows = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            readme_rows[cells[0].strip("`")] = (cells[1].split(" ")[0], cells[2].split(" ")[0])
    passed = failed = 0
    with open(os.path.join(corpus, "expectations.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    for name, want_jax, want_strict, _ in rows:
        path = os.path.join(corpus, name + ".npz")
        problems = []
        for mode, want in (("jax", want_jax), ("strict", want_strict)):
            try:
                got = verdict(rpa, path, mode)
            except (AssertionError, ValueError, KeyError) as e:
                problems.append(f"{mode}: {e}")
                continue
            if got != want:
                problems.append(f"{mode}: got {got}, expected {want}")
        row = readme_rows.get(name)
        if not check_readme:
            pass
        elif row is None:
            problems.append("not listed in README.md's mode-difference table")
        elif (row[0], row[1]) != (want_jax, want_strict):
            problems.append(f"README.md's row says jax {row[0]}, strict {row[1]}")
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            passed += 1
    print(f"corpus/{subdir}: {passed} passed, {failed} failed")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
