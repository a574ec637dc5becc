"""Every ```python block of README.md and docs/*.md runs (each in a fresh interpreter, in a
temporary directory), so the documentation's examples cannot rot."""
import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.environ.get("RPA_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks():
    found = []
    for page in PAGES:
        with open(page) as f:
            text = f.read()
        for k, m in enumerate(BLOCK.finditer(text)):
            line = text.count("\n", 0, m.start()) + 1
            found.append(pytest.param(m.group(1), id=f"{os.path.relpath(page, ROOT)}:{line}"))
    return found


def test_the_documentation_has_python_examples():
    ids = [p.id for p in blocks()]
    assert any(i.startswith("README.md:") for i in ids)
    assert sum(i.startswith("docs/python.md:") for i in ids) >= 3


@pytest.mark.parametrize("code", blocks())
def test_python_block_runs(code, tmp_path):
    # A block that starts a Ray cluster (docs/cluster.md) keeps it on the loopback and leaves
    # no token in ~/.ray (rpa._local_cluster says why).
    env = {**os.environ, "RPA_ROOT": ROOT, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
