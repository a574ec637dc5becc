"""rpa campaign finds a one-line slip in a copy of JAX's Pallas ragged paged attention kernel
(issue 36).

The test writes a copy of JAX 0.10.2's ragged_paged_attention/kernel.py with one realistic
slip, a KV block index off by one where the flash-attention step places its keys
(``kv_len_start = (kv_blk_idx + 1) * num_kv_per_blk``: the block's keys are masked as if they
sat one block later), and runs:

    python -m rpa campaign --kernel-file COPY --interpret --dialect jax --calls 12 --seed 1 \\
        --report DIR

It must find the slip within those 12 calls, shrink it to one token of one head, and write a
case file ``rpa check`` replays as a mismatch; the unmodified file in the same budget reports
nothing. The ctest label jax runs it (jax==0.10.2: scripts/python_venv.sh), in about a minute
on a 2-core machine.
"""
import inspect
import json
import os
import subprocess
import sys

from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as jax_kernel

CALLS, SEED = 12, 1
RIGHT = "kv_len_start = kv_blk_idx * num_kv_per_blk"
SLIP = "kv_len_start = (kv_blk_idx + 1) * num_kv_per_blk"


def kernel_copy(tmp_path, slip):
    source = inspect.getsource(jax_kernel)
    assert source.count(RIGHT) == 1
    path = tmp_path / "kernel.py"
    path.write_text(source.replace(RIGHT, SLIP) if slip else source)
    return path


# The campaign as issue 36 measured it (strict calls, plain draws, 4 calls per compile key).
# The defaults (the path-feature cover, both modes) compile once per call: in interpret mode
# this test took 160 s with them against 40 s (issue 46's note).
PLAIN = ("--mode", "strict", "--cover", "0")


def campaign(path, report):
    return subprocess.run([sys.executable, "-m", "rpa", "campaign", "--kernel-file", str(path),
                           "--interpret", "--dialect", "jax", "--calls", str(CALLS), "--seed",
                           str(SEED), "--report", str(report), *PLAIN],
                          capture_output=True, text=True, check=False, timeout=900)


def test_the_slip_is_found_within_the_budget_and_shrunk(tmp_path):
    run = campaign(kernel_copy(tmp_path, slip=True), tmp_path / "report")
    assert run.returncode == 1, run.stdout + run.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["calls"] == CALLS
    [finding] = summary["findings"]
    assert finding["kind"] == "mismatch" and finding["first_call"] <= CALLS, finding
    # Shrunk to one token of one q and one kv head (head_dim 128: JAX's validators' lane
    # multiple), one page of one slot.
    assert " 1 tokens, 1/1 heads, D 128, 1 pages of 1" in finding["size"], finding
    replay = subprocess.run([os.path.join(os.path.dirname(sys.executable), "rpa"), "check",
                             finding["case_file"]], capture_output=True, text=True, check=False)
    assert replay.returncode == 1 and "MISMATCH" in replay.stdout, replay.stdout + replay.stderr


def test_the_unmodified_file_reports_nothing_in_the_same_budget(tmp_path):
    run = campaign(kernel_copy(tmp_path, slip=False), tmp_path / "report")
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["calls"] == CALLS and summary["passed"] == CALLS and not summary["findings"]
