"""The cluster label's Ray clusters: `ray start --head` on 127.0.0.1 with N worker slots
(--num-cpus N), started by the test and stopped by it (SIGTERM to `ray start --block`, which
stops the processes it started and no other cluster on the machine).

Ray turns 127.0.0.1 into the host's own address (so that other hosts can join); these tests
keep every process and connection on the loopback: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes
Ray take 127.0.0.1 as the node's address, for the cluster and for this process's driver."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before ray is imported: see above
# Ray 2.60 turns token authentication on for a cluster that ray.init(address="local") starts
# (and writes ~/.ray/auth_token, which later `ray start`s then pick up); a driver of another
# mode cannot connect. These loopback-only clusters and their drivers all run without it.
os.environ["RAY_AUTH_MODE"] = "disabled"
HERE = os.path.dirname(os.path.abspath(__file__))
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A local Ray cluster: address, the environment its workers run in, stop()."""

    def __init__(self, cpus, resources=None):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="rpa-ray-")
        self.log = open(os.path.join(self.temp, "ray-start.log"), "w", encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   RAY_USAGE_STATS_ENABLED="0", JAX_PLATFORMS="cpu")
        env.pop("RAY_ADDRESS", None)
        self.env = env
        cmd = [RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
               "--port", str(self.port), "--num-cpus", str(cpus), "--include-dashboard=false",
               "--object-store-memory", str(100 * 2**20), "--temp-dir", self.temp,
               "--disable-usage-stats"]
        if resources:
            import json  # pylint: disable=import-outside-toplevel
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

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def cluster():
    """Two worker slots, and 2 of the custom resource rpa_slot."""
    c = Cluster(2, {"rpa_slot": 2})
    yield c
    c.stop()


@pytest.fixture(scope="module")
def one_worker():
    c = Cluster(1)
    yield c
    c.stop()


@pytest.fixture
def connected(cluster):
    """This process connected to the two-slot cluster, as rpa.campaign(cluster=...) connects
    (and disconnected after)."""
    import ray  # pylint: disable=import-outside-toplevel
    os.environ["PYTHONPATH"] = cluster.env["PYTHONPATH"]
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
