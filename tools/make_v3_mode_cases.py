#!/usr/bin/env python3
"""Writes corpus/modes/'s tpu-inference v3 cases (tools/make_mode_corpus.py calls it, so one
run of that writes the whole folder and its expectations.tsv): one minimal case (kernel.py's
dialect tpu_inference_v3, and kernel_hd64.py's for the sink) per place where tpu-inference
0.32.0's own validators (native mode) and rpa's strict mode disagree, each a one-change mutation of one small valid case. Their lines in
corpus/modes/expectations.tsv (the `jax` column is the dialect's native mode) are printed.

Usage:
  make_v3_mode_cases.py [--out DIR]     write DIR/<name>.npz (default corpus/modes)
  make_v3_mode_cases.py --verify        (under a Python with tpu-inference, e.g. /tmp/v3venv)
      calls kernel.py's (kernel_hd64.py's) dynamic_validate_inputs on every case, its
      arrays as jnp.asarray makes them (vLLM's call), and checks that it accepts exactly the
      cases whose native verdict is `valid`; prints what it says on the others.

The base case (f32, Hq 2, Hkv 1, D 128, page_size 16, 2 pages): sequence 0 decodes 1 row
over kv_len 5 on page 0, sequence 1 is mixed, 3 rows over kv_len 3 on page 1; every
keyword's block tuple given (bkv 16 = one page). Valid in both modes.
"""
import argparse
import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INT32_MAX = 2**31 - 1


def base():
    rng = np.random.default_rng(7)
    return dict(
        dialect=np.array("tpu_inference_v3"),
        queries=rng.standard_normal((4, 2, 128)).astype(np.float32),
        keys=rng.standard_normal((4, 1, 128)).astype(np.float32),
        values=rng.standard_normal((4, 1, 128)).astype(np.float32),
        kv_cache=rng.standard_normal((2, 16, 2, 1, 128)).astype(np.float32),
        kv_lens=np.array([5, 3], np.int32),
        page_indices=np.array([0, 1], np.int32),
        cu_q_lens=np.array([0, 1, 4], np.int32),
        distribution=np.array([1, 1, 2], np.int32),
        d_block_sizes=np.array([1, 16, 1, 16], np.int64),
        p_block_sizes=np.array([4, 16, 4, 16], np.int64),
        m_block_sizes=np.array([4, 16, 4, 16], np.int64),
    )


def base_hd64():
    """The same batch for kernel_hd64.py: head_dim 64, [K | V] in one 128-lane cache row."""
    rng = np.random.default_rng(8)
    return dict(
        dialect=np.array("tpu_inference_v3_hd64"),
        queries=rng.standard_normal((4, 2, 64)).astype(np.float32),
        keys=rng.standard_normal((4, 1, 64)).astype(np.float32),
        values=rng.standard_normal((4, 1, 64)).astype(np.float32),
        kv_cache=rng.standard_normal((2, 16, 1, 1, 128)).astype(np.float32),
        kv_lens=np.array([5, 3], np.int32),
        page_indices=np.array([0, 1], np.int32),
        cu_q_lens=np.array([0, 1, 4], np.int32),
        distribution=np.array([1, 1, 2], np.int32),
    )


def with_(case, **changes):
    c = dict(case)
    c.update(changes)
    return c


def cases():
    """(name, arrays, native verdict, strict verdict, what it shows)."""
    b = base()
    h = base_hd64()
    return [
        ("v3_hd64_sink_rank_two",
         with_(h, attention_sink=np.zeros((2, 1), np.float32)),
         "valid", "sink_rank",
         "v3 hd64: kernel_hd64.py checks only attention_sink.shape[0] == num_q_heads, so a [Hq, 1] sink passes"),
        ("v3_distribution_negative",
         with_(b, distribution=np.array([-1, 1, 2], np.int32)),
         "valid", "distribution_negative",
         "v3: kernel.py only asks i <= j <= k of the distribution; a negative decode end is no range"),
        ("v3_decode_q_len_two",
         with_(b, cu_q_lens=np.array([0, 2, 4], np.int32)),
         "valid", "decode_q_len_not_one",
         "v3: kernel.py accepts a decode sequence of 2 rows; its decode pass computes only one"),
        ("v3_prefill_without_chunk_size",
         with_(b, distribution=np.array([0, 1, 2], np.int32)),
         "valid", "prefill_without_chunk_size",
         "v3: kernel.py runs the prefill pass only with chunk_prefill_size; sequence 0's row stays unwritten"),
        ("v3_cu_q_lens_first_nonzero",
         with_(b, cu_q_lens=np.array([1, 2, 4], np.int32)),
         "valid", "cu_q_lens_first_nonzero",
         "v3: kernel.py never reads cu_q_lens[0] against 0; row 0 belongs to no sequence"),
        ("v3_sm_scale_nan",
         with_(b, sm_scale=np.float64("nan")),
         "valid", "sm_scale_nonfinite",
         "v3: kernel.py puts no constraint on sm_scale; NaN makes every logit NaN"),
        ("v3_k_scale_inf",
         with_(b, k_scale=np.float64("inf")),
         "valid", "k_scale_nonfinite",
         "v3: kernel.py puts no constraint on k_scale; inf makes the logits inf or NaN"),
        ("v3_mask_value_small",
         with_(b, mask_value=np.float64(-1.0)),
         "valid", "mask_value_too_large",
         "v3: kernel.py accepts mask_value -1; the last compute block's slots past kv_len then weigh exp(-1 - m)"),
        ("v3_bq_sz_zero",
         with_(b, m_block_sizes=np.array([0, 16, 4, 16], np.int64)),
         "valid", "block_size_nonpositive",
         "v3: kernel.py asks only bq_sz % bq_csz == 0 of the q blocks, which bq_sz 0 passes"),
        ("v3_sliding_window_past_int32",
         with_(b, sliding_window=np.int64(2**31)),
         "valid", "sliding_window_too_large",
         "v3: kernel.py asks only sliding_window > 0; the kernel adds it to int32 key positions"),
        ("v3_kv_len_int32_max",
         with_(b, kv_lens=np.array([5, INT32_MAX], np.int32)),
         "valid", "page_count_too_large",
         "v3: kernel.py's int32 cdiv(kv_len, page_size) wraps negative, so kv_len 2^31 - 1 passes one page slot"),
        ("v3_q_f32_kv_bf16",
         with_(b, keys=b["keys"].astype(ml_dtypes.bfloat16),
               values=b["values"].astype(ml_dtypes.bfloat16),
               kv_cache=b["kv_cache"].reshape(2, 16, 1, 2, 128).astype(ml_dtypes.bfloat16)),
         "valid", "dtype_pair",
         "v3: kernel.py never compares q's dtype with the cache's (it traces float32 q over a bfloat16 cache); strict takes one dtype, or float8 KV under a wider q"),
        ("v3_skip_kv_mask_kv_len",
         with_(b, use_causal_mask=np.int64(0), skip_kv_mask=np.int64(1)),
         "valid", "skip_kv_mask_kv_len",
         "v3: kernel.py lets skip_kv_mask through with kv_len 5 inside a 16-token compute block: it reads slots past kv_len"),
        ("v3_update_page_shared",
         with_(b, page_indices=np.array([0, 0], np.int32)),
         "valid", "update_page_shared",
         "v3: both sequences map page 0 and sequence 1's new tokens overwrite positions 0..2 of sequence 0; tpu-inference updates and attends sequence by sequence, the definition updates first"),
        ("v3_hd64_sink_group_odd",
         with_(h, queries=np.repeat(h["queries"][:, :1], 3, axis=1).astype(ml_dtypes.bfloat16),
               keys=h["keys"].astype(ml_dtypes.bfloat16),
               values=h["values"].astype(ml_dtypes.bfloat16),
               kv_cache=np.concatenate([h["kv_cache"]] * 2, axis=3).astype(ml_dtypes.bfloat16),
               attention_sink=np.array([0.5, 1.0, 2.0], np.float32)),
         "sink_group_unpacked", "sink_group_unpacked",
         "v3 hd64: both validators accept bfloat16 q with 3 q heads per kv head and a sink; kernel_hd64 reshapes the 3 sinks to (-1, 4, 1) (the group padded to q's packing) and fails at trace (TypeError); with 1 q head per kv head and 2 or 4 kv heads it reads sinks past the array (finding 22)"),
        ("v3_head_dim_zero",
         with_(b, queries=b["queries"][..., :0], keys=b["keys"][..., :0],
               values=b["values"][..., :0], kv_cache=b["kv_cache"][..., :0]),
         "head_dim_zero", "head_dim_zero",
         "v3: kernel.py's validators accept head_dim 0 (a cache of align(0, 128) = 0 lanes); its kernel cannot trace it: strided_load asserts sz % step with step 0, a ZeroDivisionError in TPU interpret mode (finding 27)"),
        ("v3_chunk_prefill_zero",
         with_(b, chunk_prefill_size=np.int64(0)),
         "chunk_prefill_nonpositive", "chunk_prefill_nonpositive",
         "v3: both reject chunk_prefill_size 0"),
    ]


def write(out_dir):
    """Writes the cases into out_dir; returns their expectations.tsv lines."""
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name, arrays, native, strict, why in cases():
        # numpy has no bfloat16: its bits as uint16 and a kv_dtype member naming it (the case
        # file format, casefile/case_file.cc).
        stored = dict(arrays)
        if arrays["kv_cache"].dtype == ml_dtypes.bfloat16:
            for key in ("keys", "values", "kv_cache"):
                stored[key] = arrays[key].view(np.uint16)
            stored["kv_dtype"] = np.array("bfloat16")
        if arrays["queries"].dtype == ml_dtypes.bfloat16:
            stored["queries"] = arrays["queries"].view(np.uint16)
            stored["q_dtype"] = np.array("bfloat16")
        np.savez(os.path.join(out_dir, name + ".npz"), **stored)
        rows.append(f"{name}\t{native}\t{strict}\t{why}")
    return rows


def load_kernel_modules():
    """kernel.py and kernel_hd64.py without importing tpu_inference (it pulls vllm; hd64's
    imports of tpu_inference.logger and .utils are stubbed)."""
    import importlib
    import logging
    import types
    import site
    for d in site.getsitepackages():
        if os.path.isdir(os.path.join(d, "tpu_inference")):
            root = d
            break
    else:
        raise SystemExit("tpu_inference is not installed in this Python")
    pkg = types.ModuleType("tpu_inference")
    pkg.__path__ = [os.path.join(root, "tpu_inference")]
    sys.modules["tpu_inference"] = pkg
    lg = types.ModuleType("tpu_inference.logger")

    def init_logger(name):
        log = logging.getLogger(name)
        log.warning_once, log.info_once = log.warning, log.info
        return log

    lg.init_logger = init_logger
    sys.modules["tpu_inference.logger"] = lg
    ut = types.ModuleType("tpu_inference.utils")

    def get_device_name(*_, **__):
        raise RuntimeError("Expected TPU devices")

    ut.get_device_name = get_device_name
    sys.modules["tpu_inference.utils"] = ut
    v3 = "tpu_inference.kernels.ragged_paged_attention.v3."
    return {"tpu_inference_v3": importlib.import_module(v3 + "kernel"),
            "tpu_inference_v3_hd64": importlib.import_module(v3 + "kernel_hd64")}


ARRAYS = ("queries", "keys", "values", "kv_cache", "kv_lens", "page_indices", "cu_q_lens",
          "distribution")


def verify():
    import jax.numpy as jnp
    modules = load_kernel_modules()
    failed = 0
    for name, arrays, native, _, _ in cases():
        K = modules[str(arrays["dialect"])]
        args = [jnp.asarray(arrays[a]) for a in ARRAYS]
        if "attention_sink" in arrays:
            args.append(jnp.asarray(arrays["attention_sink"]))
        kw = {}
        for key, value in arrays.items():
            if key in ARRAYS or key in ("dialect", "attention_sink"):
                continue
            if key.endswith("_block_sizes"):
                kw[key] = tuple(int(x) for x in value)
            elif key in ("use_causal_mask", "skip_kv_mask"):
                kw[key] = bool(value)
            elif value.dtype.kind in "iu":
                kw[key] = int(value)
            else:
                kw[key] = float(value)
        try:
            K.dynamic_validate_inputs(*args, **kw)
            said = "valid"
        except Exception as e:  # ValueError, or what the validators crash with
            said = f"{type(e).__name__}: {e}"
        # A native crash rule of the kernel (sink_group_unpacked, head_dim_zero) is a call the validators
        # accept and the kernel then fails on (rpa.jax.v3_pallas measures that part).
        accepted = native in ("valid", "sink_group_unpacked", "head_dim_zero")
        ok = (said == "valid") == accepted
        failed += not ok
        source = "kernel_hd64.py" if "hd64" in str(arrays["dialect"]) else "kernel.py"
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {source} says {said}; expected {native}")
    print(f"{len(cases()) - failed} agree, {failed} differ")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "corpus", "modes"))
    ap.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    if args.verify:
        return verify()
    for row in write(args.out):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
