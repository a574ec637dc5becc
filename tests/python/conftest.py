"""Shared fixtures of the python label: the rpa CLI installed beside the package, and a
Hypothesis profile that repeats in CI (derandomized, no deadline: the machines are noisy)."""
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("rpa", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rpa")


@pytest.fixture(scope="session")
def rpa_cli():
    """A function running the rpa CLI that pip installed beside this interpreter."""
    exe = os.path.join(os.path.dirname(sys.executable), "rpa")
    if not os.path.exists(exe):
        exe = shutil.which("rpa")
    assert exe, "the rpa CLI is not installed beside the package (pip install . installs it)"

    def run(*args):
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=False)

    return run
