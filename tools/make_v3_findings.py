#!/usr/bin/env python3
"""Writes corpus/findings/'s tpu-inference v3 cases: each input that tpu-inference 0.32.0's
validators accept and on which its kernel.py runs but computes something other than the
definition, with the kernel's own output and cache (TPU interpret mode, rpa.jax.v3_pallas, on
TPU v6's code path) as `expected` / `expected_kv_cache`.

Each is a small hand-made call that shows one finding in as few rows as it takes. Strict mode
rejects each with the rule named in its line of corpus/findings/expectations.tsv (native: valid),
but for finding 28's, which both modes accept (its logits are data);
tests/v3_findings_test.cc checks that the literal v3 schedule reproduces `expected` (within the
schedule tolerance, the cache bit for bit) and that the definition differs where the finding
says; the jax_v3 ctest label (`--verify`) runs the kernel again and wants the same cache bits
and NaNs, and the same output bits or (on a machine whose XLA CPU code sums in another order)
an output the literal schedule agrees with.

Run from the repository root with the virtualenv of scripts/python_v3_venv.sh:
    build/v3venv/bin/python tools/make_v3_findings.py            write the cases, print the
                                                                 expectations.tsv lines
    build/v3venv/bin/python tools/make_v3_findings.py --verify   rerun the kernel on each
    ... [--verify] NAME...                                       only the cases named
"""
import argparse
import os
import sys

import ml_dtypes
import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # interpret mode needs no accelerator
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "findings")
TPU_VERSION = 6


def call(dtype, *, seed, T=8, Hq=4, Hkv=2, ps=4, pages=6, pps=3, kv_lens=(5, 3),
         cu=(0, 1, 4), dist=(1, 1, 2), **keywords):
    """A kernel.py call: head_dim 128, sequences on consecutive page slots (slot i of sequence
    s is page (s * pps + i) % pages), normal data in dtype."""
    import rpa  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(seed)
    packing = 4 // np.dtype(dtype).itemsize
    rows = -(-2 * Hkv // packing)
    n = len(kv_lens)
    return rpa.Case(
        dialect="tpu_inference_v3",
        queries=rng.standard_normal((T, Hq, 128)).astype(dtype),
        keys=rng.standard_normal((T, Hkv, 128)).astype(dtype),
        values=rng.standard_normal((T, Hkv, 128)).astype(dtype),
        kv_cache=rng.standard_normal((pages, ps, rows, packing, 128)).astype(dtype),
        kv_lens=np.array(kv_lens, np.int32),
        page_indices=np.array([i % pages for i in range(n * pps)], np.int32),
        cu_q_lens=np.array(cu, np.int32),
        distribution=np.array(dist, np.int32),
        **keywords)


def cases():
    """(name, case, strict rule (None: strict accepts it), what it shows)."""
    bf16, f32 = ml_dtypes.bfloat16, np.float32
    return [
        ("v3_window_masked_block_nan",
         call(bf16, seed=23, mask_value=-1e30, sliding_window=1, d_block_sizes=(1, 8, 1, 4),
              p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         "masked_block_overflows",
         "finding 23: bfloat16 q, mask_value -1e30 (bfloat16 -1.0003e30) and sliding_window 1: "
         "the decode row at position 4 sees no key in its first KV compute block [0, 4), "
         "exp(mask_value - max) is inf and its output NaN"),
        ("v3_window_skips_cache_write",
         call(bf16, seed=24, ps=2, pages=12, pps=5, kv_lens=(5, 9), cu=(0, 1, 5),
              sliding_window=2, d_block_sizes=(1, 2, 1, 2), p_block_sizes=(1, 2, 1, 2),
              m_block_sizes=(1, 2, 1, 2)),
         "window_skips_cache_write",
         "finding 24: sliding_window 2, query blocks of 1 row, KV blocks of 2 tokens: sequence "
         "1's last query block reads from position 6, so its new token at position 5 (page 7, "
         "slot 1) is never written to the cache"),
        ("v3_window_int16_wraps",
         call(bf16, seed=25, kv_lens=(12, 3), sliding_window=32760, d_block_sizes=(1, 8, 1, 4),
              p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         "window_int16_wraps",
         "finding 25: bfloat16 q and pages_per_seq * page_size 12 <= 32767, so TPU v6's kernel.py "
         "holds mask positions in int16: under sliding_window 32760 the decode row at position 11 "
         "loses keys 8..11 (8 + 32760 wraps past 32767), which the definition keeps"),
        ("v3_window_int32_wraps",
         call(f32, seed=26, kv_lens=(12, 3), sliding_window=2**31 - 1 - 8,
              d_block_sizes=(1, 8, 1, 4), p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         "window_int32_wraps",
         "finding 26: float32 q, so kernel.py holds mask positions in int32 on every TPU "
         "generation: under sliding_window 2147483639 the decode row at position 11 loses keys "
         "9..11 (9 + 2147483639 wraps past 2147483647), which the definition keeps"),
        ("v3_prefill_without_chunk_rows_unwritten",
         call(f32, seed=15, dist=(0, 1, 2), d_block_sizes=(1, 4, 1, 4),
              p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         "prefill_without_chunk_size",
         "finding 15: sequence 0 in the prefill range without chunk_prefill_size: no pass "
         "computes it, its row keeps the query and its new token never reaches the cache"),
        ("v3_decode_two_rows_nan",
         call(f32, seed=16, cu=(0, 2, 4), kv_lens=(5, 3), d_block_sizes=(2, 8, 1, 8),
              p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         "decode_q_len_not_one",
         "finding 15: a decode-range sequence of 2 rows: the decode pass computes row 0 only "
         "and sends its 2-row output block whole, row 1 as 0 / 0 = NaN"),
        ("v3_skip_kv_mask_reads_scratch",
         call(f32, seed=19, use_causal_mask=False, skip_kv_mask=True,
              d_block_sizes=(1, 8, 1, 8), p_block_sizes=(4, 8, 4, 8), m_block_sizes=(4, 8, 4, 8)),
         "skip_kv_mask_kv_len",
         "finding 19: skip_kv_mask with kv_len 5 and 3 in KV compute blocks of 8: the slots past "
         "kv_len hold the KV buffer's NaN scratch, and every row is NaN"),
        ("v3_mask_value_small_pads",
         call(f32, seed=16, mask_value=-1.0, d_block_sizes=(1, 8, 1, 8),
              p_block_sizes=(4, 8, 4, 8), m_block_sizes=(4, 8, 4, 8)),
         "mask_value_too_large",
         "finding 16: mask_value -1: the slots past kv_len of each sequence's KV compute block "
         "of 8 get logit -1 (and V 0) and enter every row's softmax sum"),
        ("v3_bfloat16_max_logit_nan",
         call(bf16, seed=28, k_scale=4096.0, d_block_sizes=(1, 8, 1, 4),
              p_block_sizes=(4, 4, 4, 4), m_block_sizes=(4, 4, 4, 4)),
         None,
         "finding 28: bfloat16 q and k_scale 4096, logits past 2^15: kernel.py holds the row "
         "max in bfloat16, which falls below a float32 logit by more than 88.72, so exp(s - m) "
         "is inf and the row inf / inf = NaN (or p.V overflows to inf); strict accepts it (the "
         "logits are data), the definition is finite"),
    ]


def run_kernel(case, name):
    from rpa.jax import v3_pallas  # pylint: disable=import-outside-toplevel
    return v3_pallas.run_v3_pallas(case, TPU_VERSION, name=name)


def chosen(only):
    """cases(), or those named in only (a list of names; all when empty)."""
    picked = [c for c in cases() if not only or c[0] in only]
    missing = set(only or ()) - {c[0] for c in picked}
    if missing:
        sys.exit(f"no such case: {', '.join(sorted(missing))}")
    return picked


def write(only):
    import rpa  # pylint: disable=import-outside-toplevel
    rows = []
    for name, case, rule, why in chosen(only):
        native, strict = rpa.validate(case, mode="native"), rpa.validate(case, mode="strict")
        if not native.valid or strict.rule != rule:
            sys.exit(f"{name}: native {native.rule or 'valid'}, strict {strict.rule or 'valid'}; "
                     f"wanted valid and {rule}")
        out, cache = run_kernel(case, name)
        case.replace(expected=out, expected_kv_cache=cache).save(os.path.join(OUT, name + ".npz"))
        rows.append(f"{name}\tvalid\t{rule or 'valid'}\t{why}")
        print(f"wrote {name}.npz", file=sys.stderr)
    print("\n".join(rows))


def verify(only):
    """Reruns the kernel on every v3 finding: the cache bit for bit and the output's NaNs where
    `expected` has them; the output's other elements bit for bit too where XLA compiles the
    kernel for this machine as it did for the one that wrote the case, else (XLA's CPU code
    for another vector width sums in another order, and float32 outputs then differ in their
    last bits) within the literal v3 schedule's tolerance: the rerun and the stored output
    must each agree with the literal schedule."""
    import rpa  # pylint: disable=import-outside-toplevel
    failed = 0
    picked = chosen(only)
    for name, _, rule, _ in picked:
        case = rpa.Case.load(os.path.join(OUT, name + ".npz"))
        bare = case.replace(expected=None, expected_kv_cache=None)
        out, cache = run_kernel(bare, name)
        got, want = np.asarray(out), np.asarray(case.expected)
        cache_same = np.asarray(cache).tobytes() == np.asarray(case.expected_kv_cache).tobytes()
        nans_same = np.array_equal(np.isnan(got.astype(np.float32)),
                                   np.isnan(want.astype(np.float32)))
        differing = int(np.sum(got.astype(np.float32).view(np.uint32)
                               != want.astype(np.float32).view(np.uint32)))
        literal = rpa.check(bare.replace(out=out, kv_cache_out=cache), oracle="literal",
                            mode="native", target="v6e")
        stored = rpa.check(bare.replace(out=case.expected, kv_cache_out=case.expected_kv_cache),
                           oracle="literal", mode="native", target="v6e")
        strict = rpa.validate(bare, mode="strict").rule
        ok = (cache_same and nans_same and literal.verdict == "agree"
              and stored.verdict == "agree" and strict == rule)
        failed += not ok
        if not cache_same or not nans_same:
            how = "DIFFERS FROM expected (" + ("cache" if not cache_same else "NaN rows") + ")"
        elif differing:
            how = (f"reproduces expected within the schedule tolerance ({differing} of "
                   f"{got.size} elements differ in their last bits)")
        else:
            how = "reproduces expected bit for bit"
        print(f"{name}: kernel {how}; literal {literal.verdict} "
              f"({literal.share_of_tolerance:.3g} of its tolerance), stored output "
              f"{stored.verdict}; strict {strict or 'valid'}"
              f"{'' if strict == rule else ' (wanted ' + (rule or 'valid') + ')'}")
    print(f"make_v3_findings --verify: {len(picked) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify", action="store_true", help="rerun the kernel on each case")
    parser.add_argument("names", nargs="*", help="only these cases (default: all)")
    args = parser.parse_args()
    if args.verify:
        return verify(args.names)
    write(args.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
