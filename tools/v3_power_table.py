#!/usr/bin/env python3
"""The power of the v3 kernel-semantics check, per dialect, dtype pair and kv_len.

For each v3 dialect (kernel.py as vLLM calls it, no block sizes: the accumulation bound takes
the worst of TPU generations 5-7's default blocks; hd64 with num_kv_pages_per_block 8, and
without block sizes: then float32 accumulators in any schedule of whole pages), each q / KV
dtype pair strict mode accepts and each kv_len (128, 1024, 8192, 32768 by default) it writes
one case: a single decode row (q_len 1) over kv_len keys, 4 q heads over 1 kv head, head_dim
128 (hd64: 64), pages of 16 tokens, sm_scale 1/sqrt(head_dim), q, K and V standard normal
rounded to their dtypes (the cache filled likewise), no sink. It computes the v3 reference's
out and cache (`rpa run --impl reference`) and checks them with `rpa check --json` (kernel
semantics), which states the check's power (oracle/v3_compare.h; it depends on the case, not
on the output checked): the least weight of a dropped key it is sure to catch in the element
it watches closest (`min_detectable_key_weight`) and in every element
(`key_weight_every_row`), and whether an all-zero output fails (`rejects_zero`); then checks an
all-zero output to confirm that claim. Prints a markdown table (docs/v3.md's) and exits 1 if
the reference's own output is rejected or an all-zero output's verdict contradicts
`rejects_zero`.

Usage: build/venv/bin/python tools/v3_power_table.py RPA_BINARY [--kv-lens 128,1024,8192,32768]
           [--seed S]
Needs the rpa package and JAX (scripts/python_venv.sh build/venv: rpa.jax.v3_cases lays out the
packed cache) for the case files; the checks run the rpa binary given.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

import rpa
from rpa.jax.v3_cases import BF16, E4M3, E5M2, F32, HD64, V3, _data, cache_shape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from semantics_table import check_json, key_weight, run, with_out, zero  # noqa: E402

# The (q, KV) pairs strict mode accepts: q and KV alike, or float8 KV under either q.
PAIRS = ((F32, F32), (F32, E4M3), (F32, E5M2), (BF16, BF16), (BF16, E4M3), (BF16, E5M2))
# (label, dialect, keywords): kernel.py as vLLM calls it; hd64 with and without its blocks.
VARIANTS = (("kernel.py", V3, {}),
            ("hd64, 8 pages per block", HD64, {"num_kv_pages_per_block": 8,
                                               "num_queries_per_block": 1}),
            ("hd64, no block sizes", HD64, {}))
HQ, HKV, PAGE = 4, 1, 16


def write_case(path, dialect, keywords, q_dtype, kv_dtype, kv_len, seed):
    """One decode row over kv_len keys (the last one the new token the call writes)."""
    rng = np.random.default_rng(seed)
    head_dim = 64 if dialect == HD64 else 128
    pages = -(-kv_len // PAGE)
    queries = _data(rng, (1, HQ, head_dim), q_dtype)
    keys = _data(rng, (1, HKV, head_dim), kv_dtype)
    values = _data(rng, (1, HKV, head_dim), kv_dtype)
    kv_cache = _data(rng, cache_shape(dialect, pages, PAGE, HKV, head_dim, kv_dtype), kv_dtype)
    case = rpa.Case.from_v3_call(
        queries, keys, values, kv_cache, np.array([kv_len], np.int32),
        rng.permutation(pages).astype(np.int32), np.array([0, 1], np.int32),
        np.array([1, 1, 1], np.int32), dialect=dialect, sm_scale=1 / math.sqrt(head_dim),
        **keywords)
    verdict = rpa.validate(case)
    if not verdict.valid:
        raise RuntimeError(f"{dialect} {q_dtype}/{kv_dtype} kv_len {kv_len}: {verdict}")
    case.save(path)


def measure(rpa_binary, variant, q_dtype, kv_dtype, kv_len, seed, tmp):
    label, dialect, keywords = variant
    base = os.path.join(tmp, f"{dialect}_{len(keywords)}_{q_dtype}_{kv_dtype}_{kv_len}.npz")
    write_case(base, dialect, keywords, q_dtype, kv_dtype, kv_len, seed)
    checked = base.replace(".npz", "_reference.npz")
    p = run(rpa_binary, "run", base, "--impl", "reference", "-o", checked)
    if p.returncode != 0:
        raise RuntimeError(f"rpa run failed on {base}: {p.stderr}")
    zeros = base.replace(".npz", "_zero.npz")
    with_out(checked, zeros, zero)
    rc, j = check_json(rpa_binary, checked, "kernel")
    zero_rc, _ = check_json(rpa_binary, zeros, "kernel")
    return dict(variant=label, q=q_dtype.name, kv=kv_dtype.name, kv_len=kv_len, json=j,
                agrees=rc == 0 and j.get("agree") is True, zero_rejected=zero_rc == 1)


def table(rows):
    lines = ["| dialect | q / KV | kv_len | dropped key caught (weight >=) | all-zero output | "
             "reference's own output |", "|---|---|---|---|---|---|"]
    for r in rows:
        j = r["json"]
        zeros = "rejected" if j.get("rejects_zero") else "**accepted**"
        lines.append(f"| {r['variant']} | {r['q']} / {r['kv']} | {r['kv_len']} | "
                     f"{key_weight(j)} | {zeros} | "
                     f"{'agrees' if r['agrees'] else '**DISAGREES**'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rpa")
    ap.add_argument("--kv-lens", default="128,1024,8192,32768")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    start, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            for q_dtype, kv_dtype in PAIRS:
                for kv_len in (int(x) for x in args.kv_lens.split(",")):
                    rows.append(measure(args.rpa, variant, q_dtype, kv_dtype, kv_len, args.seed,
                                        tmp))
    print(table(rows))
    print(f"({len(rows)} cases in {time.monotonic() - start:.0f} s)", file=sys.stderr)
    bad = [r for r in rows if not r["agrees"] or r["zero_rejected"] != bool(r["json"].get(
        "rejects_zero"))]
    for r in bad:
        print(f"FAIL {r['variant']} {r['q']}/{r['kv']} kv_len {r['kv_len']}: zero rejected "
              f"{r['zero_rejected']}, {r['json']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
