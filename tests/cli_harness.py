"""What the CLI tests share: run the rpa binary, count checks, print the closing line.

The tests are run as `SCRIPT RPA_BINARY REPO_ROOT`; importing this module reads both.
"""
import os
import subprocess
import sys

RPA, ROOT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "tools"))
MODES = os.path.join(ROOT, "corpus", "modes")
results = {"passed": 0, "failed": 0}


def rpa(*args):
    return subprocess.run([RPA, *args], capture_output=True, text=True)


def check(name, cond, detail=""):
    if cond:
        results["passed"] += 1
    else:
        results["failed"] += 1
        print(f"FAIL {name} {detail}")


def finish(label):
    """Prints 'LABEL: N passed, M failed' and returns the exit status."""
    print(f"{label}: {results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0
