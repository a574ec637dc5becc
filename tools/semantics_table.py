#!/usr/bin/env python3
"""How much each semantics' check can tell: atol / max|o| per dtype pair and kv_len.

For each q / KV dtype pair and kv_len (64, 1024, 8192, 32768 by default) it writes one case (two
sequences of that kv_len: a decode row and a 16-row prefill chunk; 4 q heads, 2 kv heads,
head_dim 128, page 16, sm_scale 1/sqrt(128), q and KV uniform in [-2, 2) rounded to their
dtypes), runs the tiled kernel (`rpa run --impl kernel`), and checks its output, an all-zero
output and the negated output with `rpa check --semantics kernel|reference --json`, whose
power it also reports as the least weight of a dropped key each check is sure to catch (in
the row it watches closest, and in every row: Comparison::min_detectable_key_weight). Prints a
markdown table (docs/oracle.md's) and exits 1 if the kernel semantics accepts a zero or negated
output or rejects the tiled kernel.

Usage: build/venv/bin/python tools/semantics_table.py RPA_BINARY [--kv-lens 64,1024,8192,32768]
           [--seed S]
Needs the rpa package (scripts/python_venv.sh build/venv) for the case files; the checks run
the rpa binary given.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

import rpa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mode_corpus  # noqa: E402

PAIRS = (("float32", "float32"), ("float32", "float8_e4m3fn"), ("float32", "float8_e5m2"),
         ("bfloat16", "bfloat16"), ("bfloat16", "float8_e4m3fn"), ("bfloat16", "float8_e5m2"))
HQ, HKV, D, PAGE = 4, 2, 128, 16
Q_LENS = (1, 16)


def float8_values(name):
    """The value of every float8 code (NaN where the code is NaN or infinite)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if name == "float8_e4m3fn":
        exp, man, bias, mbits = (codes >> 3) & 0xF, codes & 0x7, 7, 3
        special = (codes & 0x7F) == 0x7F
    else:
        exp, man, bias, mbits = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
        special = exp == 0x1F
    normal = (1 + man / 2**mbits) * 2.0**(exp - bias)
    sub = man / 2**mbits * 2.0**(1 - bias)
    v = sign * np.where(exp == 0, sub, normal)
    return np.where(special, np.nan, v)


def draw(rng, dtype, shape):
    """(array to store, its values as float64): uniform in [-2, 2) in dtype."""
    if dtype.startswith("float8"):
        values = float8_values(dtype)
        codes = np.flatnonzero(np.isfinite(values) & (np.abs(values) <= 2)).astype(np.uint8)
        bits = rng.choice(codes, size=shape)
        return bits, values[bits]
    x = rng.uniform(-2, 2, size=shape).astype(np.float32)
    if dtype == "bfloat16":
        bits = make_mode_corpus.bf16_bits(x)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x, x.astype(np.float64)


def write_case(path, q_dtype, kv_dtype, kv_len, seed):
    rng = np.random.default_rng(seed)
    n = len(Q_LENS)
    pages = -(-kv_len // PAGE)
    tokens = sum(Q_LENS)
    q, _ = draw(rng, q_dtype, (tokens, HQ, D))
    kv, _ = draw(rng, kv_dtype, (n * pages, PAGE, 2 * HKV, D))
    page_indices = rng.permutation(n * pages).astype(np.int32).reshape(n, pages)
    rpa.Case(
        q=logical(q, q_dtype), kv_pages=logical(kv, kv_dtype),
        kv_lens=np.full(n, kv_len, np.int32), page_indices=page_indices,
        cu_q_lens=np.concatenate([[0], np.cumsum(Q_LENS)]).astype(np.int32),
        num_seqs=np.array([n], np.int32), sm_scale=1 / math.sqrt(D)).save(path)


def logical(stored, dtype):
    """draw's storage (float32, or bfloat16 / float8 bits) as an array of the dtype."""
    return stored if dtype == "float32" else stored.view(getattr(ml_dtypes, dtype))


def run(rpa, *args):
    return subprocess.run([rpa, *args], capture_output=True, text=True)


def check_json(rpa, path, semantics):
    p = run(rpa, "check", path, "--semantics", semantics, "--json")
    try:
        j = json.loads(p.stdout)
    except ValueError:
        j = {"stdout": p.stdout, "stderr": p.stderr}
    return p.returncode, j


def with_out(src, dst, transform):
    """Writes the case src with its `out` replaced by transform(out bits): float32 values,
    or bfloat16 as its uint16 bits."""
    c = rpa.Case.load(src)
    out = np.asarray(c.out)
    if out.dtype.name == "bfloat16":
        new = transform(out.view(np.uint16)).view(ml_dtypes.bfloat16)
    else:
        new = transform(out)
    c.replace(out=new).save(dst)


def zero(out):
    return np.zeros_like(out)


def negate(out):
    # Flip the sign bit: exact negation in float32 and bfloat16 alike.
    if out.dtype == np.uint16:
        return out ^ np.uint16(0x8000)
    return -out


def measure(rpa, q_dtype, kv_dtype, kv_len, seed, tmp):
    """One row per semantics: the tiled kernel's check and whether zero / negated fail."""
    base = os.path.join(tmp, f"{q_dtype}_{kv_dtype}_{kv_len}.npz")
    write_case(base, q_dtype, kv_dtype, kv_len, seed)
    kernel = base.replace(".npz", "_kernel.npz")
    p = run(rpa, "run", base, "--impl", "kernel", "-o", kernel)
    if p.returncode != 0:
        raise RuntimeError(f"rpa run failed on {base}: {p.stderr}")
    variants = {}
    for name, fn in (("zero", zero), ("negated", negate)):
        variants[name] = base.replace(".npz", f"_{name}.npz")
        with_out(kernel, variants[name], fn)
    rows = []
    for semantics in ("kernel", "reference"):
        rc, j = check_json(rpa, kernel, semantics)
        row = dict(q=q_dtype, kv=kv_dtype, kv_len=kv_len, semantics=semantics,
                   kernel_agrees=rc == 0 and j.get("agree") is True, json=j)
        for name, path in variants.items():
            row[f"{name}_rejected"] = check_json(rpa, path, semantics)[0] == 1
        rows.append(row)
    return rows


def key_weight(j):
    """The least weight of a dropped key the check is sure to catch, best row (every row)."""
    w, every = j.get("min_detectable_key_weight"), j.get("key_weight_every_row")
    if w is None or w >= 1:
        return "none"
    return f"{w:.2g} ({every:.2g})" if every is not None and every < 1 else f"{w:.2g} (none)"


def table(rows):
    lines = ["| q / KV | kv_len | semantics | atol / max\\|o\\| | largest element term / max\\|o\\| "
             "| discrimination | dropped key caught (weight >=) | tiled kernel | zero output "
             "| negated output |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        j = r["json"]
        m = j.get("max_abs_want") or float("nan")
        verdict = {True: "rejected", False: "**accepted**"}
        lines.append(
            f"| {r['q']} / {r['kv']} | {r['kv_len']} | {r['semantics']} | "
            f"{j.get('atol', float('nan')) / m:.2g} | {j.get('max_element_atol', 0.0) / m:.2g} | "
            f"{j.get('discrimination') if j.get('discrimination') is None else format(j['discrimination'], '.2g')} | "
            f"{key_weight(j)} | "
            f"{'agrees' if r['kernel_agrees'] else '**DISAGREES**'} | "
            f"{verdict[r['zero_rejected']]} | {verdict[r['negated_rejected']]} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rpa")
    ap.add_argument("--kv-lens", default="64,1024,8192,32768")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kv_len in (int(x) for x in args.kv_lens.split(",")):
            for q_dtype, kv_dtype in PAIRS:
                rows += measure(args.rpa, q_dtype, kv_dtype, kv_len, args.seed, tmp)
    print(table(rows))
    bad = [r for r in rows if r["semantics"] == "kernel" and not
           (r["kernel_agrees"] and r["zero_rejected"] and r["negated_rejected"])]
    for r in bad:
        print(f"FAIL kernel semantics on {r['q']}/{r['kv']} kv_len {r['kv_len']}: {r['json']}",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
