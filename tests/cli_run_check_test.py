#!/usr/bin/env python3
"""`rpa run` and `rpa check` end to end: the written output file, agreement, planted
mismatches located exactly, undefined rows ignored, the strict gate in jax mode, and the
exit codes for missing or malformed `out`, usage errors and unreadable files.

Usage: cli_run_check_test.py RPA_BINARY REPO_ROOT (with the rpa package's python, for the
case files: scripts/python_venv.sh build/venv)
"""
import json
import os
import sys
import tempfile

import ml_dtypes
import numpy as np

import rpa as rpa_package

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import MODES, check, finish, rpa  # noqa: E402  (reads argv)
import make_mode_corpus  # noqa: E402

INPUTS = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")


def as_json(p):
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"unparsable stdout": p.stdout, "stderr": p.stderr}


def bits(a):
    """The raw storage of an array (ml_dtypes bfloat16 loads as its uint16 bits)."""
    a = np.asarray(a)
    if a.dtype.kind == "V" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)
    return a


def same_array(a, b):
    a, b = bits(a), bits(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_case():
    case = make_mode_corpus.base(seed=1)
    case["q"] = to_bf16_bits(case["q"]).view(ml_dtypes.bfloat16)
    case["kv_pages"] = to_bf16_bits(case["kv_pages"]).view(ml_dtypes.bfloat16)
    return case, dict(q_dtype="bfloat16", kv_dtype="bfloat16")


def save(path, case, **extra):
    """Writes a case file with rpa.Case (an `out` given as bfloat16 bits is saved as
    bfloat16 when q is)."""
    out = extra.get("out")
    if out is not None and out.dtype == np.uint16 and case["q"].dtype.name == "bfloat16":
        extra["out"] = out.view(ml_dtypes.bfloat16)
    rpa_package.Case(**case, **extra).save(path)


def locate(case, row):
    """(seq, row_in_seq) of a defined q row, from cu_q_lens."""
    cu = case["cu_q_lens"]
    n = int(case["num_seqs"][0])
    seq = int(np.searchsorted(cu[1:n + 1], row, side="right"))
    assert cu[seq] <= row < cu[seq + 1]
    return seq, row - int(cu[seq])


def save_with_out(path, case, out):
    save(path, case, out=out)


def defined_elements(case):
    q = case["q"]
    return int(case["cu_q_lens"][int(case["num_seqs"][0])]) * q.shape[1] * q.shape[2]


def test_run_and_check(tmp, label, case, dtypes):
    """Runs the reference on a valid case, then checks the output, a planted error and
    changes on undefined rows. Returns nothing; every step is a check."""
    src = os.path.join(tmp, f"{label}.npz")
    out_path = os.path.join(tmp, f"{label}_out.npz")
    save(src, case)

    p = rpa("run", src, "--impl", "reference", "-o", out_path)
    check(f"{label}: run exit 0", p.returncode == 0, f"rc={p.returncode} {p.stderr!r}")
    check(f"{label}: run says it wrote", p.stdout.startswith(src) and out_path in p.stdout,
          repr(p.stdout))
    if p.returncode != 0:
        return
    written = rpa_package.Case.load(out_path)
    for name in INPUTS:
        check(f"{label}: {name} unchanged", same_array(getattr(written, name), case[name]),
              f"{bits(getattr(written, name)).dtype} {getattr(written, name).shape}")
    # The q_dtype / kv_dtype members name the dtypes (the reader gives q and kv_pages them).
    check(f"{label}: q_dtype member", written.q.dtype.name == dtypes.get("q_dtype", "float32"),
          repr(written.q.dtype))
    check(f"{label}: kv_dtype member",
          written.kv_pages.dtype.name == dtypes.get("kv_dtype", "float32"),
          repr(written.kv_pages.dtype))
    out = written.out
    check(f"{label}: out present", out is not None)
    if out is None:
        return
    out = bits(out)
    check(f"{label}: out shape is q's", out.shape == case["q"].shape, str(out.shape))
    check(f"{label}: out dtype is q's storage", out.dtype == bits(case["q"]).dtype,
          str(out.dtype))
    check(f"{label}: no expected member", written.expected is None)
    rows = int(case["cu_q_lens"][int(case["num_seqs"][0])])
    # out as float32 values (bfloat16 bits widen exactly).
    values = ((out.astype(np.uint32) << 16).view(np.float32) if out.dtype == np.uint16
              else out)
    check(f"{label}: defined rows finite", bool(np.isfinite(values[:rows]).all()))

    p = rpa("check", out_path)
    check(f"{label}: check exit 0", p.returncode == 0, f"rc={p.returncode} {p.stderr!r}")
    check(f"{label}: check line", p.stdout.startswith(out_path + ": out agrees")
          and p.stdout.count("\n") == 1, repr(p.stdout))
    p = rpa("check", out_path, "--json")
    j = as_json(p)
    check(f"{label}: check --json exit 0", p.returncode == 0, p.stderr)
    check(f"{label}: check --json agrees", j.get("valid") is True and j.get("agree") is True
          and j.get("mismatches") == 0 and j.get("max_abs_err") == 0.0
          and j.get("max_rel_err") == 0.0 and "first" not in j, p.stdout)
    check(f"{label}: compared every defined element",
          j.get("compared") == defined_elements(case), p.stdout)
    atol = j.get("atol", 0.0)
    check(f"{label}: atol positive", atol > 0, p.stdout)
    # The power: a dropped key of the reported weight moves an output by weight * max|V|.
    w, every = j.get("min_detectable_key_weight"), j.get("key_weight_every_row")
    check(f"{label}: key weights reported", w is not None and every is not None
          and 0 < w <= every < 1 and j.get("dot_passes") == 6, p.stdout)
    p = rpa("check", out_path)
    check(f"{label}: the line names the dropped key caught",
          f"catches a dropped key of weight >= {w:.2g}" in p.stdout if w else False, p.stdout)
    p = rpa("check", out_path, "--json", "--dot-passes", "1")
    j1 = as_json(p)
    check(f"{label}: --dot-passes 1 agrees, no tighter", p.returncode == 0
          and j1.get("dot_passes") == 1 and j1.get("min_detectable_key_weight", 0) >= w, p.stdout)
    p = rpa("check", out_path, "--dot-passes", "2")
    check(f"{label}: --dot-passes 2 is a usage error", p.returncode == 64
          and "--dot-passes takes 6, 3 or 1" in p.stderr, p.stderr)
    check(f"{label}: check --mode jax agrees too",
          rpa("check", out_path, "--mode", "jax").returncode == 0)

    # Running again on the output file (which already holds `out`) writes the same out.
    again = os.path.join(tmp, f"{label}_again.npz")
    p = rpa("run", out_path, "--impl", "reference", "-o", again)
    check(f"{label}: rerun exit 0", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        check(f"{label}: rerun same out",
              same_array(rpa_package.Case.load(again).out, written.out))

    # One planted error: sequence 1, row 2 of it (q row cu_q_lens[1] + 2), head 2, col 5.
    row, head, col = int(case["cu_q_lens"][1]) + 2, 2, 5
    seq, row_in_seq = locate(case, row)
    check(f"{label}: planted row is in sequence 1", (seq, row_in_seq) == (1, 2))
    bad = out.copy()
    if bad.dtype == np.uint16:
        bad[row, head, col] = 0x42C8  # bfloat16 100.0, far above max |V|
        planted = 100.0
    else:
        # Past any allowance: the uniform atol plus the largest per-element term.
        bad[row, head, col] += np.float32(10 * (atol + j.get("max_element_atol", 0.0)))
        planted = float(bad[row, head, col])
    want = float(values[row, head, col])
    bad_path = os.path.join(tmp, f"{label}_bad.npz")
    save_with_out(bad_path, case, bad)
    p = rpa("check", bad_path, "--json")
    j = as_json(p)
    check(f"{label}: mismatch exit 1", p.returncode == 1, f"rc={p.returncode} {p.stderr!r}")
    check(f"{label}: mismatch json", j.get("valid") is True and j.get("agree") is False
          and j.get("mismatches") == 1, p.stdout)
    first = j.get("first", {})
    check(f"{label}: first located", {k: first.get(k) for k in
                                      ("seq", "row_in_seq", "row", "head", "col")} ==
          dict(seq=seq, row_in_seq=row_in_seq, row=row, head=head, col=col), p.stdout)
    check(f"{label}: first values", first.get("got") == planted and first.get("want") == want,
          f"{p.stdout} planted {planted} want {want}")
    uniform = j.get("atol", 0.0) + j.get("rtol", 0.0) * abs(want)
    check(f"{label}: first allowed", uniform <= first.get("allowed", -1.0)
          <= uniform + j.get("max_element_atol", 0.0), p.stdout)
    check(f"{label}: max_abs_err is the planted error",
          j.get("max_abs_err") == abs(planted - want), p.stdout)
    p = rpa("check", bad_path)
    check(f"{label}: mismatch plain exit 1", p.returncode == 1)
    check(f"{label}: mismatch one line with path and MISMATCH",
          p.stdout.count("\n") == 1 and p.stdout.startswith(bad_path) and "MISMATCH" in p.stdout,
          repr(p.stdout))
    check(f"{label}: mismatch line names the place",
          f"sequence {seq}, row {row_in_seq} (q row {row}), head {head}, column {col}"
          in p.stdout, repr(p.stdout))

    # Undefined rows (at and past cu_q_lens[num_seqs]) may hold anything.
    junk = out.copy()
    if junk.dtype == np.uint16:
        junk[rows:] = 0x7FC1  # a bfloat16 NaN
        junk[-1] = 0x7F80     # +inf
    else:
        junk[rows:] = np.nan
        junk[-1] = 1e30
    junk_path = os.path.join(tmp, f"{label}_junk.npz")
    save_with_out(junk_path, case, junk)
    p = rpa("check", junk_path, "--json")
    j = as_json(p)
    check(f"{label}: undefined rows ignored", p.returncode == 0 and j.get("agree") is True
          and j.get("compared") == defined_elements(case), p.stdout + p.stderr)


def test_check_without_or_with_bad_out(tmp):
    case = make_mode_corpus.base()
    path = os.path.join(tmp, "no_out.npz")
    save(path, case)
    # Without `out`, check runs the tiled kernel and compares it with the reference.
    p = rpa("check", path)
    check("no out checks the kernel", p.returncode == 0
          and "the tiled kernel agrees with the reference" in p.stdout, p.stdout + p.stderr)
    p = rpa("check", path, "--json", "--threads", "1")
    j = as_json(p)
    check("no out json names the kernel", p.returncode == 0 and j.get("checked") == "kernel"
          and j.get("schedule") == "default" and j.get("agree") is True, p.stdout)
    # --literal: the kernel's literal TPU schedule (fuzz_differential's replay lines use it).
    p = rpa("check", path, "--json", "--literal")
    j = as_json(p)
    check("check --literal runs the literal schedule", p.returncode == 0
          and j.get("schedule") == "literal" and j.get("agree") is True, p.stdout + p.stderr)
    p = rpa("run", path, "--impl", "reference", "--literal")
    check("run --literal needs the kernel", p.returncode == 64
          and "--schedule literal needs --impl kernel" in p.stderr, p.stderr)
    # run --impl kernel writes the kernel's output; check then compares that `out`.
    kernel_out = os.path.join(tmp, "kernel_out.npz")
    p = rpa("run", path, "--impl", "kernel", "--threads", "2", "-o", kernel_out)
    check("run --impl kernel", p.returncode == 0, p.stderr)
    p = rpa("check", kernel_out, "--json")
    j = as_json(p)
    check("kernel out agrees", p.returncode == 0 and j.get("checked") == "out"
          and j.get("agree") is True, p.stdout)

    q = case["q"]
    for label, out in (("rows", np.zeros((q.shape[0] - 1,) + q.shape[1:], np.float32)),
                       ("dim", np.zeros(q.shape[:2] + (q.shape[2] + 1,), np.float32)),
                       ("rank", np.zeros(q.shape[:2], np.float32))):
        path = os.path.join(tmp, f"bad_out_{label}.npz")
        save(path, case, out=out)
        p = rpa("check", path)
        check(f"wrong-shape out ({label}) exit 3", p.returncode == 3,
              f"rc={p.returncode} {p.stderr!r}")
        check(f"wrong-shape out ({label}) one stderr line", p.stderr.count("\n") == 1,
              repr(p.stderr))
    # Right shape, wrong dtype, written with plain numpy (as a careless dump would be).
    for dtype in (np.float64, np.uint16):
        path = os.path.join(tmp, f"bad_out_{np.dtype(dtype).name}.npz")
        np.savez(path, **case, out=np.zeros(q.shape, dtype))
        p = rpa("check", path)
        check(f"wrong-dtype out ({np.dtype(dtype).name}) exit 3",
              p.returncode == 3 and p.stderr.count("\n") == 1, f"rc={p.returncode} {p.stderr!r}")


def test_strict_gate_in_jax_mode():
    # page index -1: JAX and its kernel accept it (interpret mode reads the last page).
    path = os.path.join(MODES, "page_index_negative.npz")
    for cmd in (["run", path, "--impl", "reference"], ["check", path]):
        p = rpa(*cmd, "--mode", "jax")
        check(f"{cmd[0]} jax-only case exit 2", p.returncode == 2, f"rc={p.returncode}")
        check(f"{cmd[0]} jax-only case says why",
              p.stderr.count("\n") == 1 and "accepted in jax mode" in p.stderr
              and "rejected in strict mode" in p.stderr
              and "page_index_out_of_range" in p.stderr, repr(p.stderr))
        check(f"{cmd[0]} jax-only case nothing on stdout", p.stdout == "", repr(p.stdout))
        p = rpa(*cmd, "--mode", "jax", "--json")
        j = as_json(p)
        check(f"{cmd[0]} jax-only case --json", p.returncode == 2 and j.get("valid") is False
              and j.get("rule") == "page_index_out_of_range", p.stdout)
        p = rpa(*cmd)
        check(f"{cmd[0]} strict rejects", p.returncode == 2
              and "rejected in strict mode by page_index_out_of_range" in p.stderr,
              repr(p.stderr))
    # A case jax mode itself rejects.
    path = os.path.join(MODES, "vmem_limit_zero.npz")
    p = rpa("check", path, "--mode", "jax", "--json")
    check("jax-rejected case", p.returncode == 2
          and as_json(p).get("rule") == "vmem_limit_nonpositive", p.stdout)


def test_usage(tmp):
    path = os.path.join(tmp, "usage.npz")
    save(path, make_mode_corpus.base())
    for args in (["run", path], ["run", path, "--impl", "kernel", "--threads", "0"],
                 ["run", path, "--impl", "bogus"], ["run", path, "--impl", "reference", "--frob"],
                 ["run", path, "--impl"], ["run", "--impl", "reference"],
                 ["run", path, path, "--impl", "reference"],
                 ["check", path, "--frob"], ["check", path, "--impl", "reference"],
                 ["check", path, "-o", os.path.join(tmp, "x.npz")], ["check"],
                 ["check", path, "--mode", "lax"]):
        p = rpa(*args)
        check(f"usage {args[0]} {args[2:]}", p.returncode == 64 and p.stderr.startswith("rpa: "),
              f"rc={p.returncode} stderr={p.stderr[:200]!r}")
        check(f"usage {args[0]} {args[2:]} nothing on stdout", p.stdout == "", repr(p.stdout))


def test_bench_usage():
    # Timing runs belong to `rpa bench` itself (seconds each); only its usage is tested here.
    for args in (["bench", "--preset", "nope"], ["bench", "--frob"], ["bench", "--threads"],
                 ["bench", "--threads", "0"], ["bench", "--threads", "-1"],
                 ["bench", "--threads", "1,,2"], ["bench", "--threads", "two"],
                 ["bench", "--threads", "1,all,x"], ["bench", "--threads", ""]):
        p = rpa(*args)
        check(f"usage {args}", p.returncode == 64 and p.stderr.startswith("rpa: "),
              f"rc={p.returncode} stderr={p.stderr[:200]!r}")


def test_unreadable(tmp):
    missing = os.path.join(tmp, "missing.npz")
    garbage = os.path.join(tmp, "garbage.npz")
    with open(garbage, "wb") as f:
        f.write(b"PK\x03\x04 but not really a zip archive")
    for path in (missing, garbage):
        for cmd in (["run", path, "--impl", "reference"], ["check", path]):
            p = rpa(*cmd)
            check(f"{cmd[0]} {os.path.basename(path)} exit 3", p.returncode == 3,
                  f"rc={p.returncode}")
            check(f"{cmd[0]} {os.path.basename(path)} one line naming it",
                  p.stderr.count("\n") == 1 and path in p.stderr, repr(p.stderr))
        p = rpa("check", path, "--json")
        check(f"check {os.path.basename(path)} --json error", p.returncode == 3
              and "error" in as_json(p), p.stdout)
    # An output path that cannot be written.
    src = os.path.join(tmp, "src.npz")
    save(src, make_mode_corpus.base())
    p = rpa("run", src, "--impl", "reference", "-o", os.path.join(tmp, "no", "such", "o.npz"))
    check("unwritable -o exit 3", p.returncode == 3 and p.stderr.count("\n") == 1,
          f"rc={p.returncode} {p.stderr!r}")


def test_literal_in_jax_mode(tmp):
    """The literal schedule runs on inputs only jax mode accepts; check --oracle literal."""
    for name, rule in (("trailing_empty_sequence_at_block_end", "rows_not_computed"),
                       ("negative_q_len", "cu_q_lens_decreasing"),
                       ("page_index_negative", "page_index_out_of_range")):
        path = os.path.join(MODES, name + ".npz")
        out = os.path.join(tmp, name + "_literal.npz")
        p = rpa("run", path, "--impl", "kernel", "--schedule", "literal", "--mode", "jax",
                "-o", out, "--json")
        j = as_json(p)
        check(f"{name}: literal runs in jax mode", p.returncode == 0 and j.get("schedule") ==
              "literal" and isinstance(j.get("blocks"), list) and len(j["blocks"]) == 2,
              p.stdout + p.stderr)
        p = rpa("run", path, "--impl", "kernel", "--mode", "jax")
        check(f"{name}: the default schedule still needs strict", p.returncode == 2 and
              rule in p.stderr, p.stderr)
        p = rpa("check", out, "--oracle", "literal", "--mode", "jax", "--json")
        j = as_json(p)
        check(f"{name}: its own output agrees with the literal oracle", p.returncode == 0 and
              j.get("oracle") == "literal" and j.get("agree") is True and j["mismatches"] == 0,
              p.stdout + p.stderr)
        # One defined element moved by twice, then half, what the schedule tolerance allows.
        atol, rtol = j["atol"], j["rtol"]
        check(f"{name}: schedule tolerance tighter than 1e-3 of max |V|", 0 < atol and
              rtol < 2.0 ** -18, str(j))
        case = rpa_package.Case.load(out)
        row = int(case.cu_q_lens[0]) if name != "negative_q_len" else 0
        for factor, agree in ((2.0, False), (0.5, True)):
            bad = np.array(case.out, np.float32)
            value = float(bad[row, 0, 0])
            bad[row, 0, 0] = np.float32(value + factor * (atol + rtol * abs(value)))
            moved = os.path.join(tmp, name + "_moved.npz")
            case.replace(out=bad).save(moved)
            p = rpa("check", moved, "--oracle", "literal", "--mode", "jax", "--json")
            jm = as_json(p)
            check(f"{name}: {factor}x the allowed difference {'passes' if agree else 'fails'}",
                  p.returncode == (0 if agree else 1) and jm.get("agree") is agree and
                  (agree or jm["first"]["row"] == row), p.stdout + p.stderr)
    path = os.path.join(MODES, "trailing_empty_sequence_at_block_end.npz")
    p = rpa("check", path, "--oracle", "literal", "--mode", "jax")
    check("--oracle literal needs out", p.returncode == 64 and "needs a case with `out`" in
          p.stderr, p.stderr)
    p = rpa("check", path, "--oracle", "bogus")
    check("--oracle takes reference or literal", p.returncode == 64, p.stderr)
    p = rpa("run", path, "--impl", "kernel", "--schedule", "bogus")
    check("--schedule takes default or literal", p.returncode == 64, p.stderr)
    # Raw uint8 KV: JAX's kernel computes with the integers, and so does the literal.
    p = rpa("run", os.path.join(MODES, "kv_raw_uint8.npz"), "--impl", "kernel", "--schedule",
            "literal", "--mode", "jax", "--json")
    check("literal runs raw uint8 KV in jax mode", p.returncode == 0, p.stdout + p.stderr)


def test_run_json_without_output(tmp):
    case = make_mode_corpus.base()
    path = os.path.join(tmp, "plain.npz")
    save(path, case)
    before = set(os.listdir(tmp))
    p = rpa("run", path, "--impl", "reference", "--json")
    j = as_json(p)
    rows = int(case["cu_q_lens"][int(case["num_seqs"][0])])
    check("run --json", p.returncode == 0 and j.get("valid") is True
          and j.get("impl") == "reference" and j.get("rows") == rows and "output" not in j,
          p.stdout)
    check("run without -o writes nothing", set(os.listdir(tmp)) == before)
    out_path = os.path.join(tmp, "plain_out.npz")
    p = rpa("run", path, "--impl", "reference", "-o", out_path, "--json")
    check("run --json -o names the output", as_json(p).get("output") == out_path, p.stdout)


def test_v3_run(tmp):
    """rpa run on a kernel.py case (f32, Hq 2, Hkv 1, D 128, page_size 16): sequence 0
    decodes 1 row over kv_len 5 (cached tokens 0..3 on page 1), sequence 1 has 3 new rows
    over kv_len 3 on page 0. Hand derivation: every key is 0, so each row's softmax is
    uniform over its visible keys and the output is the mean of their values."""
    kv_cache = np.full((2, 16, 2, 1, 128), np.nan, np.float32)
    kv_cache[1, 0:4, 0, 0, :] = 0.0  # K of cached tokens 0..3 (combined head 0 = K0)
    kv_cache[1, 0:4, 1, 0, :] = 2.0  # V0 = 2
    keys = np.zeros((4, 1, 128), np.float32)
    values = np.zeros((4, 1, 128), np.float32)
    values[0] = 7.0                            # sequence 0's new token: V = 7
    values[1:4, 0, :] = np.array([1.0, 2.0, 3.0])[:, None]  # sequence 1's three tokens
    path = os.path.join(tmp, "v3_run.npz")
    np.savez(path, dialect=np.array("tpu_inference_v3"),
             queries=np.ones((4, 2, 128), np.float32), keys=keys, values=values,
             kv_cache=kv_cache, kv_lens=np.array([5, 3], np.int32),
             page_indices=np.array([1, 0], np.int32), cu_q_lens=np.array([0, 1, 4], np.int32),
             distribution=np.array([1, 1, 2], np.int32),
             d_block_sizes=np.array([1, 16, 1, 16], np.int64),
             m_block_sizes=np.array([4, 16, 4, 16], np.int64))
    out_path = os.path.join(tmp, "v3_run_out.npz")
    for semantics in ("kernel", "reference"):
        p = rpa("run", path, "--impl", "reference", "--semantics", semantics, "-o", out_path,
                "--json")
        j = as_json(p)
        check(f"v3 run {semantics}", p.returncode == 0 and j.get("rows") == 4
              and j.get("dialect") == "tpu_inference_v3" and j.get("semantics") == semantics,
              p.stdout + p.stderr)
        with np.load(out_path) as f:
            out, cache = f["out"], f["kv_cache_out"]
            names = set(f.files)
        check(f"v3 run {semantics} writes out and kv_cache_out",
              {"out", "kv_cache_out", "dialect", "queries"} <= names, sorted(names))
        # Sequence 0 (row 0): mean of V over 4 cached 2s and the new 7 = 3. Sequence 1
        # (causal): row r sees tokens 0..r, values 1, 2, 3 -> 1, 1.5, 2.
        want = np.array([3.0, 1.0, 1.5, 2.0], np.float32)
        check(f"v3 run {semantics} output", np.array_equal(out[:, :, :], np.broadcast_to(
            want[:, None, None], (4, 2, 128))), out[:, 0, 0])
        # The fused update: sequence 0's new token is position 4 (page 1, slot 4),
        # sequence 1's are positions 0..2 of page 0; K at combined head 0, V at 1.
        check(f"v3 run {semantics} cache update",
              np.all(cache[1, 4, 1, 0] == 7.0) and np.all(cache[1, 4, 0, 0] == 0.0)
              and np.array_equal(cache[0, 0:3, 1, 0, 0], [1.0, 2.0, 3.0])
              and np.all(cache[1, 0:4, 1, 0] == 2.0) and np.isnan(cache[1, 5]).all()
              and np.isnan(cache[0, 3:]).all(), cache[0, 0:4, 1, 0, 0])
    p = rpa("run", path, "--impl", "reference")
    check("v3 run text", p.returncode == 0 and p.stdout.startswith(f"{path}: computed 4 rows"),
          p.stdout)
    # The tiled kernel: the same hand-derived output and cache update, any thread count.
    kernel_out = os.path.join(tmp, "v3_kernel_out.npz")
    for threads in ("1", "3"):
        p = rpa("run", path, "--impl", "kernel", "--threads", threads, "-o", kernel_out, "--json")
        j = as_json(p)
        # m_block_sizes' bkv_csz 16 over page_size 16: one page per online-softmax step.
        check(f"v3 run kernel --threads {threads}", p.returncode == 0 and j == {
            "valid": True, "impl": "kernel", "dialect": "tpu_inference_v3", "rows": 4,
            "schedule": "default", "kv_pages_per_block": 1, "output": kernel_out},
            p.stdout + p.stderr)
        with np.load(kernel_out) as f:
            out, cache = f["out"], f["kv_cache_out"]
        want = np.array([3.0, 1.0, 1.5, 2.0], np.float32)
        check(f"v3 kernel output --threads {threads}", np.array_equal(
            out, np.broadcast_to(want[:, None, None], (4, 2, 128))), out[:, 0, 0])
        check(f"v3 kernel cache update --threads {threads}",
              np.all(cache[1, 4, 1, 0] == 7.0) and np.array_equal(cache[0, 0:3, 1, 0, 0],
                                                                  [1.0, 2.0, 3.0])
              and np.isnan(cache[0, 3:]).all(), cache[0, 0:4, 1, 0, 0])
    p = rpa("run", path, "--impl", "kernel")
    check("v3 run kernel text", p.returncode == 0 and p.stdout ==
          f"{path}: computed 4 rows of tpu_inference_v3 with the tiled kernel\n", p.stdout)
    # The literal v3 schedule (kernel.py's program, TPU v6's code path): the same hand-derived
    # rows and cache (every softmax here is a mean of exact values).
    literal_out = os.path.join(tmp, "v3_literal_out.npz")
    p = rpa("run", path, "--impl", "kernel", "--schedule", "literal", "-o", literal_out, "--json")
    j = as_json(p)
    check("v3 run --schedule literal", p.returncode == 0 and j.get("schedule") == "literal"
          and j.get("tpu_version") == 6 and j.get("rows") == 4, p.stdout + p.stderr)
    with np.load(literal_out) as f:
        out, cache = f["out"], f["kv_cache_out"]
    check("v3 run --schedule literal output", np.array_equal(out, np.broadcast_to(
        np.array([3.0, 1.0, 1.5, 2.0], np.float32)[:, None, None], (4, 2, 128))), out[:, 0, 0])
    check("v3 run --schedule literal cache", np.all(cache[1, 4, 1, 0] == 7.0)
          and np.array_equal(cache[0, 0:3, 1, 0, 0], [1.0, 2.0, 3.0])
          and np.isnan(cache[0, 3:]).all(), cache[0, 0:4, 1, 0, 0])
    p = rpa("run", path, "--impl", "kernel", "--schedule", "literal", "--mode", "native")
    check("v3 run --schedule literal text", p.returncode == 0 and p.stdout ==
          f"{path}: computed 4 rows of tpu_inference_v3 with the literal v3 schedule\n", p.stdout)
    test_v3_check(tmp, path, kernel_out)
    bad = os.path.join(tmp, "v3_bad.npz")
    with np.load(path) as f:
        arrays = dict(f)
    arrays["kv_lens"] = np.array([5, 2], np.int32)
    np.savez(bad, **arrays)
    p = rpa("run", bad, "--impl", "reference", "--json")
    check("v3 run rejects in strict mode", p.returncode == 2
          and as_json(p).get("rule") == "q_len_range" and as_json(p).get("mode") == "strict",
          p.stdout)


def test_v3_check(tmp, path, kernel_out):
    """rpa check on v3 cases: the kernel's own output, a file's out and kv_cache_out, one of
    them alone, a corrupted one of each, options that do not apply, a rejected case."""
    p = rpa("check", path, "--json")
    j = as_json(p)
    check("v3 check kernel", p.returncode == 0 and j.get("verdict") == "agree"
          and j.get("checked") == ["kernel"] and j.get("dialect") == "tpu_inference_v3"
          and j.get("mode") == "strict" and j.get("cache_equal") is True
          and j.get("cache_differences") == 0 and j.get("compared") == 4 * 2 * 128
          and "not_checked" not in j, p.stdout + p.stderr)
    for semantics in ("kernel", "reference"):
        p = rpa("check", kernel_out, "--semantics", semantics, "--json")
        j = as_json(p)
        check(f"v3 check out and kv_cache_out ({semantics})", p.returncode == 0
              and j.get("checked") == ["out", "kv_cache_out"] and j.get("semantics") == semantics
              and j.get("max_abs_err") == 0.0, p.stdout + p.stderr)
    p = rpa("check", kernel_out)
    check("v3 check text", p.returncode == 0 and p.stdout.startswith(
        f"{kernel_out}: out and kv_cache_out agree with the v3 reference (kernel semantics) "
        "(cache equal; out: all 1024 elements agree"), p.stdout)
    # The check's power, as the jax dialect states it: the least weight of a dropped key it is
    # sure to catch (in the row watched closest, and in every row) and whether an all-zero
    # output fails. Exact float32 means of a few values: a tiny tolerance, so both below 1.
    p = rpa("check", kernel_out, "--json")
    j = as_json(p)
    w, every = j.get("min_detectable_key_weight"), j.get("key_weight_every_row")
    check("v3 check --json states its power", p.returncode == 0
          and {"rejects_zero", "min_detectable_key_weight", "key_weight_every_row"} <= set(j)
          and j["rejects_zero"] is True and w is not None and every is not None
          and 0 < w <= every < 1, p.stdout)
    p = rpa("check", kernel_out)
    check("v3 check text states its power", p.returncode == 0 and
          "; power: catches a dropped key of weight >= " in p.stdout
          and p.stdout.rstrip("\n").endswith(", rejects an all-zero output"), p.stdout)
    with np.load(kernel_out) as f:
        arrays = dict(f)
    # out wrong by 0.5 at row 2 (want 1.5), head 1, column 7: far past any tolerance of an
    # exact float32 mean of three values.
    bad_out = dict(arrays)
    bad_out["out"] = arrays["out"].copy()
    bad_out["out"][2, 1, 7] = 2.0
    bad_out_path = os.path.join(tmp, "v3_bad_out.npz")
    np.savez(bad_out_path, **bad_out)
    p = rpa("check", bad_out_path, "--json")
    j = as_json(p)
    first = j.get("first", {})
    check("v3 check out mismatch", p.returncode == 1 and j.get("verdict") == "mismatch"
          and j.get("mismatches") == 1 and j.get("cache_equal") is True
          and (first.get("row"), first.get("head"), first.get("col"), first.get("got"),
               first.get("want")) == (2, 1, 7, 2.0, 1.5), p.stdout)
    p = rpa("check", bad_out_path)
    check("v3 check out mismatch text", p.returncode == 1 and p.stdout.startswith(
        f"{bad_out_path}: MISMATCH between out and kv_cache_out and the v3 reference (kernel "
        "semantics): cache equal; out: row 2, head 1, column 7: got 2.0, want 1.5, allowed "
        "difference"), p.stdout)
    # The cache: sequence 1's token 1 (page 0, slot 1) V lane 3 should be 2.0.
    bad_cache = dict(arrays)
    bad_cache["kv_cache_out"] = arrays["kv_cache_out"].copy()
    bad_cache["kv_cache_out"][0, 1, 1, 0, 3] = 5.0
    bad_cache_path = os.path.join(tmp, "v3_bad_cache.npz")
    np.savez(bad_cache_path, **bad_cache)
    p = rpa("check", bad_cache_path, "--json")
    j = as_json(p)
    check("v3 check cache mismatch", p.returncode == 1 and j.get("cache_equal") is False
          and j.get("cache_differences") == 1 and j.get("mismatches") == 0
          and j.get("cache_first") == {"element": 1 * 2 * 128 + 128 + 3, "page": 0, "slot": 1,
                                       "kv_head": 0, "part": "V", "lane": 3, "got": 5.0,
                                       "want": 2.0}, p.stdout)
    # One member alone: that one is checked, the other is said not to be.
    only_out = {k: v for k, v in bad_out.items() if k != "kv_cache_out"}
    only_out_path = os.path.join(tmp, "v3_only_out.npz")
    np.savez(only_out_path, **only_out)
    p = rpa("check", only_out_path, "--json")
    j = as_json(p)
    check("v3 check out alone", p.returncode == 1 and j.get("checked") == ["out"]
          and j.get("not_checked") == ["kv_cache_out"] and j.get("mismatches") == 1, p.stdout)
    p = rpa("check", only_out_path)
    check("v3 check out alone says so", p.stdout.rstrip().endswith(
        "; kv_cache_out not checked: the case has none"), p.stdout)
    only_cache = {k: v for k, v in bad_cache.items() if k != "out"}
    only_cache_path = os.path.join(tmp, "v3_only_cache.npz")
    np.savez(only_cache_path, **only_cache)
    p = rpa("check", only_cache_path, "--json")
    j = as_json(p)
    check("v3 check kv_cache_out alone", p.returncode == 1 and j.get("checked") == ["kv_cache_out"]
          and j.get("not_checked") == ["out"] and j.get("cache_differences") == 1, p.stdout)
    # A member of the wrong shape is unreadable (3), not a mismatch.
    wrong = dict(arrays)
    wrong["kv_cache_out"] = arrays["kv_cache_out"][:1]
    wrong_path = os.path.join(tmp, "v3_wrong_shape.npz")
    np.savez(wrong_path, **wrong)
    p = rpa("check", wrong_path)
    check("v3 check wrong kv_cache_out shape", p.returncode == 3 and
          "member 'kv_cache_out.npy' is float32 (1, 16, 2, 1, 128), expected kv_cache's float32 "
          "(2, 16, 2, 1, 128)" in p.stderr, p.stderr)
    literal_out = os.path.join(tmp, "v3_literal_out.npz")  # test_v3_run's literal run
    p = rpa("check", path, "--schedule", "literal")
    check("v3 check --schedule literal: the literal schedule against the reference",
          p.returncode == 0 and "the literal v3 schedule's out and kv_cache agree with the v3 "
          "reference (kernel semantics)" in p.stdout, p.stdout + p.stderr)
    # An hd64 call without its block sizes: the literal schedule has no tuned tables.
    hd64 = os.path.join(tmp, "v3_hd64_no_blocks.npz")
    p = rpa("gen", "--dialect", "tpu_inference_v3_hd64", "--seed", "3", "-o", hd64)
    with np.load(hd64) as f:
        members = {k: f[k] for k in f.files if k not in ("num_kv_pages_per_block",
                                                         "num_queries_per_block")}
    np.savez(hd64, **members)
    for command in (["run", hd64, "--impl", "kernel", "--schedule", "literal"],
                    ["check", hd64, "--schedule", "literal"]):
        p = rpa(*command)
        check(f"v3 {command[0]} --schedule literal on hd64 without block sizes", p.returncode == 64
              and p.stderr.endswith("the literal hd64 schedule needs num_kv_pages_per_block and "
                                    "num_queries_per_block (kernel_hd64's tuned tables are not in "
                                    "rpa)\n") and p.stderr.count("\n") == 1, p.stderr)
    p = rpa("check", path, "--oracle", "literal")
    check("v3 check --oracle literal without an out is one usage line", p.returncode == 64 and
          p.stderr == "rpa: --oracle literal needs a v3 case with `out` and `kv_cache_out` (the "
          "kernel's results to check)\n", p.stderr)
    p = rpa("check", literal_out, "--oracle", "literal", "--mode", "native", "--json")
    j = as_json(p)
    check("v3 check --oracle literal", p.returncode == 0 and j.get("oracle") == "literal"
          and j.get("tpu_version") == 6 and j.get("verdict") == "agree"
          and j.get("max_abs_err") == 0.0, p.stdout + p.stderr)
    moved = dict(arrays)
    with np.load(literal_out) as f:
        moved["out"], moved["kv_cache_out"] = f["out"].copy(), f["kv_cache_out"]
    moved["out"][2] += 0.25
    moved_path = os.path.join(tmp, "v3_literal_moved.npz")
    np.savez(moved_path, **moved)
    p = rpa("check", moved_path, "--oracle", "literal")
    check("v3 check --oracle literal catches a moved row", p.returncode == 1 and
          "MISMATCH between out and kv_cache_out and the literal v3 schedule (TPU v6): cache "
          "equal; out: row 2, head 0, column 0: got 1.75, want 1.5" in p.stdout
          and "; power: catches a dropped key of weight >= " in p.stdout, p.stdout)
    rejected = dict(arrays)
    rejected["kv_lens"] = np.array([5, 2], np.int32)
    rejected_path = os.path.join(tmp, "v3_check_rejected.npz")
    np.savez(rejected_path, **rejected)
    p = rpa("check", rejected_path, "--json")
    check("v3 check rejected", p.returncode == 2 and as_json(p).get("rule") == "q_len_range"
          and p.stderr.startswith(f"{rejected_path}: rejected in strict mode (tpu_inference_v3) "
                                  "by q_len_range: "), p.stdout + p.stderr)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_run_and_check(tmp, "f32", make_mode_corpus.base(), {})
        case, dtypes = bf16_case()
        test_run_and_check(tmp, "bf16", case, dtypes)
        test_check_without_or_with_bad_out(tmp)
        test_strict_gate_in_jax_mode()
        test_usage(tmp)
        test_bench_usage()
        test_unreadable(tmp)
        test_run_json_without_output(tmp)
        test_literal_in_jax_mode(tmp)
        test_v3_run(tmp)
    return finish("rpa run/check CLI")


if __name__ == "__main__":
    sys.exit(main())
