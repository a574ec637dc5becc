#!/usr/bin/env python3
"""The power of `rpa check --oracle literal` on tpu-inference v3 calls, per dialect, dtype pair
and kv_len: the smallest departures it catches.

For each v3 dialect (kernel.py on TPU v6e's default blocks; hd64 with num_kv_pages_per_block 8),
each q / KV dtype pair strict mode accepts and each kv_len (1024, 8192, 32768 by default) it
writes tools/v3_power_table.py's case (one decode row over kv_len keys, 4 q heads on 1 kv
head, standard-normal data), computes three wrong answers with the literal v3 schedule itself
(`rpa.kernel(schedule="literal")` on a changed call) and checks each against the call as given
with `rpa.check(oracle="literal")`:
- a dropped key: the oldest key cut off (sliding_window kv_len - 1);
- a shifted window edge: the call with sliding_window kv_len / 2 against one of kv_len / 2 - 1;
- a wrong scale: sm_scale times 1 + x, x the smallest caught of 2^-k for k = 1 .. 30
  (the power of two just above the least relative slip the check rejects).
It also checks the literal's own output (it must agree). Prints a markdown table and exits 1 if
the literal's own output is rejected. Run it with the rpa package of two builds to compare them
(docs/v3.md's before / after table).

Usage: build/venv/bin/python tools/v3_literal_power_table.py [--kv-lens 1024,8192,32768]
           [--seed S]
"""
import argparse
import math
import os
import sys
import tempfile
import time

import rpa
from rpa.jax.v3_cases import HD64, V3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from v3_power_table import PAIRS, write_case  # noqa: E402

VARIANTS = (("kernel.py, v6e", V3, {}),
            ("hd64, 8 pages per block", HD64, {"num_kv_pages_per_block": 8,
                                               "num_queries_per_block": 1}))


def caught(case, wrong):
    """Whether the literal check of `case` rejects the literal schedule's output of `wrong`."""
    out = rpa.kernel(wrong, schedule="literal", mode="native")
    return not rpa.check(case, out=out, oracle="literal", mode="native").verdict == "agree"


def measure(variant, q_dtype, kv_dtype, kv_len, seed, tmp):
    label, dialect, keywords = variant
    path = os.path.join(tmp, f"{dialect}_{q_dtype}_{kv_dtype}_{kv_len}.npz")
    write_case(path, dialect, keywords, q_dtype, kv_dtype, kv_len, seed)
    case = rpa.Case.load(path)
    own = rpa.check(case, out=rpa.kernel(case, schedule="literal", mode="native"),
                    oracle="literal", mode="native").verdict == "agree"
    dropped = caught(case, case.replace(sliding_window=kv_len - 1))
    half = case.replace(sliding_window=kv_len // 2)
    edge = caught(half, half.replace(sliding_window=kv_len // 2 - 1))
    slip = None
    for k in range(30, 0, -1):
        if caught(case, case.replace(sm_scale=case.sm_scale * (1 + 2.0 ** -k))):
            slip = 2.0 ** -k
            break
    return dict(variant=label, q=q_dtype.name, kv=kv_dtype.name, kv_len=kv_len, own=own,
                dropped=dropped, edge=edge, slip=slip)


def table(rows):
    yes = {True: "caught", False: "**missed**"}
    lines = ["| dialect | q / KV | kv_len | oldest key dropped | window edge shifted by one | "
             "least sm_scale slip caught | literal's own output |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        slip = f"2^{round(math.log2(r['slip']))}" if r["slip"] else "none up to 1/2"
        lines.append(f"| {r['variant']} | {r['q']} / {r['kv']} | {r['kv_len']} | "
                     f"{yes[r['dropped']]} | {yes[r['edge']]} | {slip} | "
                     f"{'agrees' if r['own'] else '**REJECTED**'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kv-lens", default="1024,8192,32768")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    start, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            for q_dtype, kv_dtype in PAIRS:
                for kv_len in (int(x) for x in args.kv_lens.split(",")):
                    rows.append(measure(variant, q_dtype, kv_dtype, kv_len, args.seed, tmp))
                    print(f"{rows[-1]}", file=sys.stderr, flush=True)
    print(table(rows))
    print(f"({len(rows)} cases in {time.monotonic() - start:.0f} s)", file=sys.stderr)
    return 0 if all(r["own"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
