#!/usr/bin/env python3
"""Checks that every #include "dir/file.h" in the C++ sources points down the layers of
DESIGN.md section 1 and docs/layout.md, and names a header that exists:

  core <- schedule <- validation, reference <- kernel <- oracle, casefile
       <- service, properties <- fuzz <- bench <- cli, python

(the literal programs sit below validation, whose program rules read them, and below the
tiled kernels, which run the literal schedule; bench sits above fuzz, whose targets' bodies its
per-input benchmark runs; the two doors sit side by side on the service).
A file may include its own folder and any folder of a lower level; a folder of the same level
(validation and reference, oracle and casefile, service and properties, cli and python) or higher is a violation. tests/ and tools/ sit on
top and are not checked. Every folder holding C++ sources must have a level here.

Usage: check_layers.py REPO_ROOT      exit 1 and one line per violation
       check_layers.py --self-test    plants violations in a scratch tree, expects each found
"""
import os
import re
import sys
import tempfile

LEVELS = {
    "core": 0,
    "schedule": 1,
    "validation": 2,
    "reference": 2,
    "kernel": 3,
    "oracle": 4,
    "casefile": 4,
    "service": 5,
    "properties": 5,
    "fuzz": 6,
    # Above fuzz: bench/fuzz_inputs.cc runs the targets' bodies over their corpus.
    "bench": 7,
    # The two doors, side by side on the service: the rpa commands and the Python package's
    # binding. Neither includes the other.
    "cli": 8,
    "python": 8,
}
UNCHECKED = {"tests", "tools", "build", "corpus", "scripts", ".git", ".ci"}
# "dir/file.h", and <dir/file.h> where dir is one of the project's folders.
INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)')
SOURCE = (".cc", ".h")


def violations(root):
    found = []
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top in UNCHECKED:
            continue
        for dirpath, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith(SOURCE):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if top not in LEVELS:
                    found.append(f"{rel}: folder {top}/ has no layer in DESIGN.md section 1")
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1) or m.group(2)
                        if m.group(2) and target.split("/")[0] not in LEVELS:
                            continue  # a system or library header
                        where = f"{rel}:{lineno}: includes \"{target}\""
                        folder = target.split("/")[0] if "/" in target else top
                        if not os.path.isfile(os.path.join(root, target)) and not os.path.isfile(
                                os.path.join(dirpath, target)):
                            found.append(f"{where}, which does not exist")
                        elif folder == top:
                            continue
                        elif folder not in LEVELS:
                            found.append(f"{where}: {folder}/ is not a library layer")
                        elif LEVELS[folder] >= LEVELS[top]:
                            found.append(f"{where}: {folder}/ (level {LEVELS[folder]}) is not "
                                         f"below {top}/ (level {LEVELS[top]})")
    return found


def self_test():
    planted = {
        "kernel/a.h": '#include "oracle/b.h"\n',        # up
        "oracle/b.h": '#include "casefile/c.h"\n',      # sideways
        "casefile/c.h": '#include "kernel/missing.h"\n',  # no such header
        "cli/d.cc": '#include "oracle/b.h"\n#include "kernel/a.h"\n#include <vector>\n',  # fine
        "reference/f.h": "#include <cli/d.h>\n",          # up, in angle brackets
        "gadgets/e.cc": "",                               # unknown folder
        "cli/i.h": "",
        "python/g.cc": '#include "cli/i.h"\n',           # sideways: one door into the other
        "validation/h.h": '#include "kernel/a.h"\n',     # up: a rule asking the tiled kernel
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        got = violations(root)
    want = ["kernel/a.h:1", "oracle/b.h:1", "casefile/c.h:1", "gadgets/e.cc", "reference/f.h:1",
            "python/g.cc:1", "validation/h.h:1"]
    missing = [w for w in want if not any(g.startswith(w) for g in got)]
    # The two planted arrows of the house: reported as pointing up or sideways, not as missing.
    missing += [w for w in ("python/g.cc:1", "validation/h.h:1")
                if not any(g.startswith(w) and "is not below" in g for g in got)]
    extra = [g for g in got if not any(g.startswith(w) for w in want)]
    if missing or extra or len(got) != len(want):
        print(f"self-test FAILED: missed {missing}, spurious {extra}")
        return 1
    print(f"self-test: {len(want)} planted violations found, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print("usage: check_layers.py REPO_ROOT | --self-test", file=sys.stderr)
        return 64
    found = violations(sys.argv[1])
    for line in found:
        print(line)
    print(f"layers: {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
