#!/usr/bin/env python3
"""Writes corpus/regressions/v3_window_without_causal.npz (finding 13): a tpu_inference_v3
call with use_causal_mask=False and sliding_window 2, with tpu-inference 0.32.0's own
`ref_ragged_paged_attention` output and updated cache as `out` and `kv_cache_out`. Its
reference drops the window without the causal mask, its kernel (and rpa's kernel semantics)
keeps it: `rpa check --semantics reference` agrees, `rpa check` (kernel semantics)
mismatches. Prints the two expectations.tsv lines.

Run under the Python of scripts/python_v3_venv.sh (rpa and tpu-inference 0.32.0):
  build/v3venv/bin/python tools/make_v3_window_regression.py [--out DIR]
"""
import argparse
import os
import sys

import numpy as np

import rpa
from rpa.jax import tpu_inference

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "v3_window_without_causal"


def make_case() -> rpa.Case:
    """One sequence of 4 new tokens over kv_len 8 (page_size 4, two pages), 2 q heads over 1
    kv head, head_dim 128, float32, N(0, 1) data: with the window the first rows see a few
    keys, without it all eight."""
    rng = np.random.default_rng(13)
    T, hq, hkv, d, ps = 4, 2, 1, 128, 4
    cache = rng.standard_normal((3, ps, 2 * hkv, 1, d)).astype(np.float32)
    return rpa.Case.from_v3_call(
        rng.standard_normal((T, hq, d)).astype(np.float32),
        rng.standard_normal((T, hkv, d)).astype(np.float32),
        rng.standard_normal((T, hkv, d)).astype(np.float32),
        cache,
        np.array([8], np.int32),
        np.array([1, 2], np.int32),
        np.array([0, 4], np.int32),
        np.array([0, 0, 1], np.int32),
        dialect="tpu_inference_v3",
        use_causal_mask=False,
        sliding_window=2,
        sm_scale=0.125,
        m_block_sizes=(4, 4, 4, 4),
        vmem_limit_bytes=1 << 26)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "corpus", "regressions"))
    args = ap.parse_args()
    case = make_case()
    assert rpa.validate(case, mode="strict").valid and rpa.validate(case, mode="native").valid
    out, cache = tpu_inference.reference(case)
    case = case.replace(out=out, kv_cache_out=cache)
    case.save(os.path.join(args.out, NAME + ".npz"))
    print(f"{NAME}\t--semantics reference\tagree\tfinding 13: tpu-inference's reference output "
          f"with use_causal_mask=False and sliding_window 2, which its reference drops: the "
          f"reference semantics drops it too")
    print(f"{NAME}\t\tmismatch\tfinding 13: ... and the kernel semantics keeps it, as kernel.py "
          f"does")
    return 0


if __name__ == "__main__":
    sys.exit(main())
