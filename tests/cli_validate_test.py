#!/usr/bin/env python3
"""`rpa validate` end to end: exit codes, the one-line messages, --json, --all, --target.

Usage: cli_validate_test.py RPA_BINARY REPO_ROOT (with the rpa package's python, for the
case files: scripts/python_venv.sh build/venv)
"""
import json
import os
import sys
import tempfile

import numpy as np

import rpa as rpa_package

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import MODES, check, finish, rpa  # noqa: E402  (reads argv)
import make_mode_corpus  # noqa: E402


def test_usage_errors():
    for args in ([], ["frobnicate"], ["validate"], ["validate", "x.npz", "--mode", "lax"],
                 ["validate", "x.npz", "--bogus"], ["validate", "a.npz", "b.npz"],
                 ["validate", "x.npz", "--target", "v9"], ["validate", "x.npz", "--max-bytes"]):
        p = rpa(*args)
        check(f"usage {args}", p.returncode == 64 and p.stderr.startswith("rpa: "),
              f"rc={p.returncode} stderr={p.stderr!r}")


def test_unreadable(tmp):
    missing = os.path.join(tmp, "missing.npz")
    p = rpa("validate", missing)
    check("missing file exit 3", p.returncode == 3, p.stderr)
    check("missing file one line naming it",
          p.stderr.count("\n") == 1 and missing in p.stderr, repr(p.stderr))
    garbage = os.path.join(tmp, "garbage.npz")
    with open(garbage, "wb") as f:
        f.write(b"this is not a zip archive at all")
    p = rpa("validate", garbage, "--json")
    check("garbage exit 3", p.returncode == 3, p.stderr)
    out = json.loads(p.stdout)
    check("garbage json error", "error" in out and "garbage.npz" in out["error"], p.stdout)
    p = rpa("validate", os.path.join(MODES, "soft_cap_negative_zero.npz"), "--max-bytes", "64")
    check("byte cap exit 3", p.returncode == 3 and "cap" in p.stderr, p.stderr)


def test_seed_bugs_jax_messages():
    p = rpa("validate", os.path.join(MODES, "soft_cap_negative_zero.npz"), "--mode", "jax",
            "--json")
    check("soft_cap -0.0 exit 2", p.returncode == 2)
    check("soft_cap -0.0 json", json.loads(p.stdout) == {
        "valid": False, "mode": "jax", "rule": "soft_cap_zero",
        "message": "soft_cap=-0.0 must not be 0.0."}, p.stdout)
    p = rpa("validate", os.path.join(MODES, "vmem_limit_zero.npz"), "--mode", "jax")
    check("vmem 0 one stderr line", p.returncode == 2 and p.stderr.count("\n") == 1
          and p.stderr.rstrip().endswith(
              "vmem_limit_nonpositive: vmem_limit_bytes=0 must be positive."), repr(p.stderr))
    check("vmem 0 nothing on stdout", p.stdout == "", repr(p.stdout))


def test_valid_and_default_mode():
    path = os.path.join(MODES, "padding_kv_len_garbage.npz")
    p = rpa("validate", path)
    check("default mode is strict", p.returncode == 0 and "valid in strict mode" in p.stdout,
          p.stdout + p.stderr)
    p = rpa("validate", path, "--json")
    check("valid json", json.loads(p.stdout) == {"valid": True, "mode": "strict"}, p.stdout)


def test_jax_crash_flag():
    p = rpa("validate", os.path.join(MODES, "kv_heads_zero.npz"), "--mode", "jax", "--json")
    out = json.loads(p.stdout)
    check("jax_crash flagged", out.get("jax_crash") is True and out["rule"] == "kv_heads_zero",
          p.stdout)
    p = rpa("validate", os.path.join(MODES, "kv_heads_zero.npz"), "--mode", "strict", "--json")
    check("no jax_crash in strict", "jax_crash" not in json.loads(p.stdout), p.stdout)


def test_all(tmp):
    case = make_mode_corpus.base()
    path = os.path.join(tmp, "many.npz")
    rpa_package.Case(**case, sliding_window=0, soft_cap=0.0, vmem_limit_bytes=-1).save(path)
    p = rpa("validate", path, "--mode", "jax", "--all", "--json")
    out = json.loads(p.stdout)
    rules = [f["rule"] for f in out["failures"]]
    check("--all lists every failure in order", rules == [
        "sliding_window_nonpositive", "soft_cap_zero", "vmem_limit_nonpositive"], p.stdout)
    check("--all first is the rule", out["rule"] == "sliding_window_nonpositive", p.stdout)
    p = rpa("validate", path, "--mode", "jax", "--all")
    check("--all one stderr line per failure", p.stderr.count("\n") == 3, repr(p.stderr))


def test_target(tmp):
    case = make_mode_corpus.base()
    n = case["kv_lens"].shape[0]
    # 4 + 4 * 1022 + 5 + 3 int32 words = 16400 bytes: over v2's 16 KiB of SMEM.
    pages = case["page_indices"]
    wide = np.full((n, 1022), -1, np.int32)
    wide[:, : pages.shape[1]] = pages
    path = os.path.join(tmp, "wide.npz")
    rpa_package.Case(**dict(case, page_indices=wide)).save(path)
    check("v6e fits", rpa("validate", path).returncode == 0)
    p = rpa("validate", path, "--target", "v2", "--json")
    check("v2 smem", json.loads(p.stdout).get("rule") == "smem_budget_exceeded", p.stdout)


def v3_case_file(path, dialect="tpu_inference_v3", kv_lens=(5, 3), **options):
    """A small kernel.py case (f32, Hq 2, Hkv 1, D 128, page_size 16, two sequences: a
    decode one and a mixed one of 3 rows), written with numpy as DESIGN.md section 16 says."""
    arrays = dict(
        dialect=np.array(dialect),
        queries=np.zeros((4, 2, 128), np.float32),
        keys=np.zeros((4, 1, 128), np.float32),
        values=np.zeros((4, 1, 128), np.float32),
        kv_cache=np.zeros((2, 16, 2, 1, 128), np.float32),
        kv_lens=np.array(kv_lens, np.int32),
        page_indices=np.array([0, 1], np.int32),
        cu_q_lens=np.array([0, 1, 4], np.int32),
        distribution=np.array([1, 1, 2], np.int32),
        d_block_sizes=np.array([1, 16, 1, 16], np.int64),
        m_block_sizes=np.array([4, 16, 4, 16], np.int64),
    )
    arrays.update(options)
    np.savez(path, **arrays)
    return path


def test_v3_dialect(tmp):
    good = v3_case_file(os.path.join(tmp, "v3.npz"))
    for mode in ("native", "jax", "strict"):
        p = rpa("validate", good, "--mode", mode)
        check(f"v3 valid in {mode}", p.returncode == 0 and "(tpu_inference_v3)" in p.stdout,
              p.stdout + p.stderr)
    p = rpa("validate", good, "--json", "--mode", "native")
    check("v3 json names the dialect and the native mode",
          json.loads(p.stdout) == {"valid": True, "mode": "native", "dialect": "tpu_inference_v3"},
          p.stdout)
    # Expected messages: tpu-inference 0.32.0's dynamic_validate_inputs on these arrays as
    # jnp arrays (/tmp/v3venv, jax 0.11.2), printed there.
    bad = v3_case_file(os.path.join(tmp, "v3_q_len.npz"), kv_lens=(5, 2))
    p = rpa("validate", bad, "--mode", "native")
    check("v3 native rejection", p.returncode == 2 and p.stderr == (
        f"{bad}: rejected in native mode (tpu_inference_v3) by q_len_range: Require 0 < "
        "q_len=Array(3, dtype=int32) <= kv_len=Array(2, dtype=int32) at sequence 1.\n"),
        p.stderr)
    p = rpa("validate", bad, "--mode", "native", "--json")
    j = json.loads(p.stdout)
    check("v3 json rule", j.get("rule") == "q_len_range" and j.get("valid") is False
          and j.get("message", "").endswith("at sequence 1."), p.stdout)
    both = v3_case_file(os.path.join(tmp, "v3_two.npz"), kv_lens=(5, 2),
                        sliding_window=np.int64(0))
    p = rpa("validate", both, "--mode", "native", "--all", "--json")
    j = json.loads(p.stdout)
    rules = [f["rule"] for f in j.get("failures", [])]
    check("v3 --all lists both, static first", rules[:1] == ["sliding_window_nonpositive"]
          and "q_len_range" in rules and j.get("message") == "sliding_window=0 must be positive.",
          p.stdout)
    # A member of the other dialect: unreadable (3), naming it.
    hd64 = v3_case_file(os.path.join(tmp, "hd64.npz"), dialect="tpu_inference_v3_hd64",
                        use_causal_mask=np.int64(1))
    p = rpa("validate", hd64)
    check("other dialect's member", p.returncode == 3 and "member 'd_block_sizes.npy'" in p.stderr,
          p.stderr)
    p = rpa("validate", v3_case_file(os.path.join(tmp, "odd.npz"), dialect="tpu_v9"))
    check("unknown dialect", p.returncode == 3 and p.stderr.count("\n") == 1
          and "unknown dialect 'tpu_v9'" in p.stderr, p.stderr)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_usage_errors()
        test_unreadable(tmp)
        test_seed_bugs_jax_messages()
        test_valid_and_default_mode()
        test_jax_crash_flag()
        test_all(tmp)
        test_target(tmp)
        test_v3_dialect(tmp)
    return finish("rpa validate CLI")


if __name__ == "__main__":
    sys.exit(main())
