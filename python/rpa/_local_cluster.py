"""A Ray cluster on this machine's loopback, started and stopped by its owner: the cluster
tests (tests/cluster) and the cluster benchmark (bench/cluster_throughput.py) use it.

``ray start --head --block`` on 127.0.0.1 with N worker slots (--num-cpus N) and its own
temporary folder; stop() sends it SIGTERM, which stops the processes it started and no other
cluster on the machine (``ray stop`` would stop them all). Ray turns 127.0.0.1 into the host's
own address so that other hosts can join; RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps it on the
loopback. Ray 2.60 turns token authentication on for a cluster that ray.init(address="local")
starts (and writes ~/.ray/auth_token, which later ``ray start``s pick up), and a driver of the
other mode cannot connect: these clusters and their drivers run with RAY_AUTH_MODE=disabled.
``loopback_environment()`` sets both in this process, before it connects.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def loopback_environment() -> None:
    """This process's Ray settings for a loopback cluster (see the module docstring)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A local Ray cluster: address, env (the environment its workers run in: pythonpath
    first on PYTHONPATH), stop()."""

    def __init__(self, cpus: int, resources: Optional[dict[str, float]] = None,
                 pythonpath: str = ""):
        loopback_environment()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="rpa-ray-")
        self.log = open(os.path.join(self.temp, "ray-start.log"), "w", encoding="utf-8")
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", JAX_PLATFORMS="cpu",
                   PYTHONPATH=os.pathsep.join(p for p in (pythonpath,
                                                          os.environ.get("PYTHONPATH")) if p))
        env.pop("RAY_ADDRESS", None)
        self.env = env
        cmd = [RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
               "--port", str(self.port), "--num-cpus", str(cpus), "--include-dashboard=false",
               "--object-store-memory", str(100 * 2**20), "--temp-dir", self.temp,
               "--disable-usage-stats"]
        if resources:
            cmd += ["--resources", json.dumps(resources)]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            with open(self.log.name, encoding="utf-8") as f:
                if "Ray runtime started" in f.read():
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(self.log.name, encoding="utf-8") as f:
                    raise RuntimeError(f"ray start did not start: {f.read()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)
