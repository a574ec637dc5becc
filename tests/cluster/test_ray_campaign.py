"""rpa.campaign on a local Ray cluster (issue 37; docs/cluster.md): the campaign on it equals
the campaign on one machine and on one worker, a killed worker loses no call and counts none
twice, a hang is a finding and the cluster goes on, Ctrl-C keeps the report of what finished,
and the tasks ask for the resources given."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import rpa
import cluster_kernels

SAME = ("seconds", "cluster", "workers", "resubmitted", "duplicates")
# The campaign as issue 37 ran it (strict calls, plain draws): the kernels below are right on
# strict calls only. The defaults (mode="both", cover=512) on the cluster: the v3 test below.
PLAIN = {"mode": "strict", "cover": 0}
SEED_HANG = 21  # test_a_hang_is_a_finding_and_the_cluster_goes_on


def comparable(result):
    """The result without what depends on where and how fast it ran."""
    j = result.to_json()
    for key in SAME:
        j.pop(key)
    for f in j["findings"]:
        f.pop("case_file")
        f.pop("replay")
    return j


def test_a_campaign_on_the_cluster_is_the_campaign_on_one_machine(cluster, one_worker):
    here = rpa.campaign(cluster_kernels.slip, **PLAIN, calls=48, seed=1)
    two = rpa.campaign(cluster_kernels.slip, **PLAIN, calls=48, seed=1, cluster=cluster.address)
    one = rpa.campaign(cluster_kernels.slip, **PLAIN, calls=48, seed=1, cluster=one_worker.address)
    assert not here.ok and here.findings[0].kind == "mismatch"
    assert here.findings[0].shrink_steps > 0  # shrunk, on a worker in the cluster runs
    assert comparable(two) == comparable(here)
    assert comparable(one) == comparable(here)
    assert two.call_log == here.call_log == one.call_log
    assert [i for i, _, _ in two.call_log] == list(range(48))
    assert len(two.worker_ids) == 2 and len(one.worker_ids) == 1
    assert two.cluster.startswith(f"ray {cluster.address} (2 CPUs on 1 node)")
    assert " on 2 workers of ray " in two.summary()


def test_a_worker_killed_mid_campaign_loses_no_call_and_counts_none_twice(cluster, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    os.environ["RPA_PID_DIR"] = str(pids)
    # The workers read RPA_PID_DIR from the job's environment (rpa._cluster passes only
    # JAX_PLATFORMS): connect with it set.
    import ray
    ray.init(address=cluster.address, runtime_env={"env_vars": {"RPA_PID_DIR": str(pids)}},
             logging_level="WARNING")
    killed = []

    def kill_one():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for name in os.listdir(pids):
                os.kill(int(name), signal.SIGKILL)  # in the middle of its 200 ms call
                killed.append(int(name))
                break
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        result = rpa.campaign(cluster_kernels.marks_pid, **PLAIN, calls=32, seed=2,
                              cluster=cluster.address)
    finally:
        killer.join()
        ray.shutdown()
        del os.environ["RPA_PID_DIR"]
    assert killed, "no worker wrote its pid"
    assert result.ok and result.calls == 32 and result.passed == 32
    assert [i for i, _, _ in result.call_log] == list(range(32))  # each call once
    assert result.lost == 0 and result.stopped is None
    # The killed worker's task ran again on another (a new worker: 3 pids in all at least).
    assert len(os.listdir(pids)) >= 3
    here = rpa.campaign(cluster_kernels.slow, **PLAIN, calls=32, seed=2)
    assert [v for _, _, v in here.call_log] == [v for _, _, v in result.call_log]
    assert [h for _, h, _ in here.call_log] == [h for _, h, _ in result.call_log]


def test_a_hang_is_a_finding_and_the_cluster_goes_on(cluster):
    # A 3 s watchdog: no honest call comes near it, even with the machine busy.
    # Seed 21 hangs call 21, the second of its compile group of 4 (calls 20-23): the calls after
    # it in the group go out again. (Seed 3 did until the campaign stopped drawing flat data:
    # its one hang became the last of its group, with nothing after it to resubmit.)
    result = rpa.campaign(cluster_kernels.hangs_sometimes, **PLAIN, calls=40, seed=SEED_HANG,
                          timeout_s=3.0, cluster=cluster.address)
    hung = [i for i, _, v in result.call_log if v == "hang"]
    assert hung, "no call hung: pick another seed"
    assert result.calls == 40 and result.stopped is None  # every call ran
    assert [i for i, _, _ in result.call_log] == list(range(40))
    assert [f.kind for f in result.findings] == ["hang"]
    assert result.findings[0].first_call == hung[0] + 1
    assert result.findings[0].failing_calls == len(hung)
    # The calls after each hang in its group went out again (a seed whose hangs all end their
    # groups resubmits none: pick another).
    assert result.resubmitted >= len(hung), (hung, result.resubmitted)
    # On one machine the campaign stops at the first hang, with the same verdicts up to it.
    here = rpa.campaign(cluster_kernels.hangs_sometimes, **PLAIN, calls=40, seed=SEED_HANG,
                        timeout_s=3.0)
    assert here.stopped and here.calls == hung[0] + 1
    assert here.call_log == result.call_log[:hung[0] + 1]


def test_native_mode_v3_calls_on_the_cluster_are_those_here(cluster):
    """A native-mode campaign (valid calls and calls broken by a mutation the validators let
    through, judged by the literal schedule) of the v3 dialect, and one with the defaults (the
    path-feature cover, strict and native calls): the same on the cluster."""
    for options in ({"mode": "native", "cover": 0}, {}):
        here = rpa.campaign(cluster_kernels.v3_literal, dialect="tpu_inference_v3", calls=24,
                            seed=6, **options)
        there = rpa.campaign(cluster_kernels.v3_literal, dialect="tpu_inference_v3", calls=24,
                             seed=6, cluster=cluster.address, **options)
        assert here.ok and there.ok, there.summary()
        assert comparable(there) == comparable(here) and there.call_log == here.call_log
        assert there.reach == here.reach and here.reach


def test_seconds_bound_a_campaign_on_the_cluster(cluster):
    start = time.monotonic()
    result = rpa.campaign(cluster_kernels.slow, **PLAIN, seconds=4, seed=7, cluster=cluster.address)
    took = time.monotonic() - start
    assert result.ok and result.calls > 0 and result.stopped is None, result.summary()
    assert [i for i, _, _ in result.call_log] == list(range(result.calls))
    # Connecting takes a few seconds; past the deadline only the tasks in flight finish (two
    # per slot, 4 calls of 50 ms each).
    assert took < 4 + 20, took


def test_a_call_that_kills_every_worker_is_found_and_the_others_run(cluster):
    """A call that ends its worker process each time: Ray runs its task 3 more times and the
    driver sends it twice more; then the group is split, each part tried twice, down to the
    call: it alone is lost, counted and a finding of kind "crashed"; every other call runs."""
    result = rpa.campaign(cluster_kernels.kills_its_worker, **PLAIN, calls=40, seed=3,
                          cluster=cluster.address)
    here = rpa.campaign(cluster_kernels.hangs_sometimes, **PLAIN, calls=40, seed=3, timeout_s=3.0)
    first = next(i for i, _, v in here.call_log if v == "hang")  # the same hash picks them
    done = {i for i, _, _ in result.call_log}
    assert first not in done and result.lost == 40 - result.calls > 0, result.summary()
    assert [v for i, _, v in here.call_log if i < first] == [
        v for i, _, v in result.call_log if i < first]
    assert [f.kind for f in result.findings] == ["crashed"] and not result.ok
    assert result.findings[0].first_call == first + 1, result.findings[0].detail
    assert result.findings[0].detail.startswith("the worker died each time it ran this call")
    assert result.stopped and "calls lost: their worker died each time they ran" in result.stopped


def test_a_kernel_the_workers_cannot_import_stops_with_one_line(cluster, tmp_path):
    (tmp_path / "only_on_the_driver.py").write_text(
        "import rpa\n\ndef kernel(*args, **kwargs):\n"
        "    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import only_on_the_driver  # pylint: disable=import-outside-toplevel
        with pytest.raises(RuntimeError) as e:
            rpa.campaign(only_on_the_driver.kernel, **PLAIN, calls=4, seed=1,
                         cluster=cluster.address)
    finally:
        sys.path.remove(str(tmp_path))
    assert re.fullmatch(r"a task failed on the cluster: the kernel does not load on worker "
                        r"\S+:\d+: RaySystemError: System error: No module named "
                        r"'only_on_the_driver'", str(e.value)), str(e.value)


def cli(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "rpa", "campaign", "--mode", "strict",
                             "--cover", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("where", ["here", "cluster"])
def test_ctrl_c_writes_the_report_of_what_finished(cluster, tmp_path, where):
    report = tmp_path / "report"
    marks = tmp_path / "pids"
    marks.mkdir()
    ray = ["--ray", cluster.address] if where == "cluster" else []
    # RPA_PID_DIR reaches the workers as every RPA_ variable does (rpa._cluster.connect).
    p = cli("--kernel", "cluster_kernels:marks_pid", "--calls", "2000", "--seed", "4",
            "--report", str(report), *ray, env=dict(cluster.env, RPA_PID_DIR=str(marks)))
    deadline = time.monotonic() + 120
    while not any(marks.iterdir()) and time.monotonic() < deadline:  # calls are running
        time.sleep(0.1)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    summary = json.loads((report / "summary.json").read_text())
    assert summary["stopped"].startswith("interrupted (Ctrl-C) after "), summary["stopped"]
    assert 0 < summary["calls"] < 2000
    rows = [line.split("\t") for line in (report / "calls.tsv").read_text().splitlines()[1:]]
    indices = [int(r[0]) for r in rows]
    assert len(indices) == len(set(indices)) == summary["calls"]
    # The calls that finished are the calls a run of the same seed here makes: calls are drawn
    # 64 at a time (batch) and the last batch is cut to what calls= leaves, so a run of whole
    # batches draws what the 2000-call run drew.
    here = rpa.campaign(cluster_kernels.slow, **PLAIN, calls=64 * (max(indices) // 64 + 1), seed=4)
    by_index = {i: (h, v) for i, h, v in here.call_log}
    assert all(by_index[int(i)] == (h, v) for i, h, v in rows)
    assert (report / "report.html").exists() and (report / "junit.xml").exists()
    assert "interrupted (Ctrl-C)" in out


def test_tasks_ask_for_the_resources_given(cluster, tmp_path):
    p = cli("--kernel", "cluster_kernels:records_resources", "--calls", "8", "--seed", "5",
            "--ray", cluster.address, "--ray-resources", "rpa_slot=1,CPU=0.5",
            env=dict(cluster.env, RPA_PID_DIR=str(tmp_path)))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    assert "8 calls in " in out
    held = [json.loads(f.read_text()) for f in tmp_path.iterdir()]
    assert held and all(h == {"rpa_slot": 1.0, "CPU": 0.5} for h in held), held
    p = cli("--kernel", "cluster_kernels:slow", "--calls", "8", "--ray", cluster.address,
            "--ray-resources", "TPU=1", env=cluster.env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2
    assert err.strip().splitlines()[-1] == ("rpa campaign: worker_resources: each task asks TPU "
                                            "1; the cluster has 0"), err
    for bad in ("TPU", "TPU=-1", "=2", "TPU=x"):
        p = cli("--kernel", "cluster_kernels:slow", "--ray", cluster.address,
                "--ray-resources", bad, env=cluster.env)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2 and "--ray-resources takes NAME=N" in err, (bad, err)
    p = cli("--kernel", "cluster_kernels:slow", "--ray-resources", "TPU=1", env=cluster.env)
    assert p.communicate(timeout=60)[1].strip().endswith("--ray-resources goes with --ray")
    p = cli("--kernel", "cluster_kernels:slow", "--ray", "127.0.0.1:9", env=cluster.env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "cannot connect to the Ray cluster 127.0.0.1:9" in err, err


def test_a_kernel_file_runs_in_interpret_mode_on_the_workers(cluster, tmp_path):
    """JAX's kernel.py, sent as its source (rpa.jax.kernel_file.KernelFile.__reduce__): the
    workers compile it themselves, from a path that is not on their host."""
    pytest.importorskip("jax")
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as shipped
    from rpa.jax.kernel_file import KernelFile
    source = open(shipped.__file__, encoding="utf-8").read()
    kernel = KernelFile(str(tmp_path / "not-on-the-workers" / "kernel.py"), "jax",
                        source=source)
    result = rpa.campaign(kernel, **PLAIN, calls=8, seed=1, cluster=cluster.address)
    assert result.ok and result.calls == 8 and len(result.worker_ids) == 2, result.summary()
    assert result.summary().startswith(f"rpa campaign: {tmp_path}/not-on-the-workers/kernel.py:"
                                       f"ragged_paged_attention (jax, strict): 8 calls in ")


def without_times(text):
    """The cross-check's lines without the ones that hold timings or name the cluster."""
    return [line for line in text.splitlines()
            if not re.search(r"[0-9] s\b|[0-9] s\)|Ray tasks of|WARNING", line)]


def test_jax_cross_check_on_the_cluster_prints_what_it_prints_here(cluster):
    pytest.importorskip("jax")
    args = [sys.executable, "-m", "rpa.jax.cross_check", "--pallas", "8", "--seed", "3"]
    here = subprocess.run(args, capture_output=True, text=True, env=cluster.env, timeout=300)
    there = subprocess.run(args + ["--ray", cluster.address], capture_output=True, text=True,
                           env=cluster.env, timeout=300)
    assert here.returncode == there.returncode == 0, there.stdout[-2000:] + there.stderr[-2000:]
    assert f"(the 8 generated cases ran as Ray tasks of 4 on ray {cluster.address}" in there.stdout
    assert without_times(there.stdout) == without_times(here.stdout)
    assert there.stdout.rstrip().endswith("cross_check_jax pallas: 8 passed, 0 failed")


def test_rpa_campaign_pallas_runs_both_cross_checks_on_ray(tmp_path):
    """rpa campaign --pallas 1 --ray local: each cross-check on a Ray cluster of its own
    Python (JAX's in build/venv, tpu-inference's in build/v3venv)."""
    rpa_cli = os.path.join(os.path.dirname(sys.executable), "rpa")
    v3 = os.environ.get("RPA_V3_PYTHON")
    assert v3 and os.path.exists(v3), "ctest passes RPA_V3_PYTHON (scripts/python_v3_venv.sh)"
    env = dict(os.environ, RPA_JAX_PYTHON=sys.executable, RPA_V3_PYTHON=v3)
    env.pop("RAY_ADDRESS", None)
    report = tmp_path / "report"
    p = subprocess.run([rpa_cli, "campaign", "--cases", "8", "--pallas", "1", "--ray", "local",
                        "--report", str(report)], capture_output=True, text=True, env=env,
                       timeout=540)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summary = json.loads((report / "summary.json").read_text())
    assert ("JAX's kernel: 1 passed, 0 failed (python -m rpa.jax.cross_check --pallas 1 --seed 1 "
            "--ray local;") in summary["pallas"], summary["pallas"]
    assert ("tpu-inference's v3 kernels: 4 passed, 0 failed (python -m rpa.jax.v3_cross_check "
            "--cases 0 --reference 0 --scenarios none --pallas 2 --seed 1 --ray local;"
            ) in summary["pallas"], summary["pallas"]
    assert "(the 1 generated cases ran as Ray tasks of 4 on ray " in (
        report / "pallas.log").read_text()
    assert "(the 2 generated calls ran as Ray tasks of 2 on ray " in (
        report / "pallas-v3.log").read_text()
