"""The cross-check's case generators (rpa.jax.cross_check): small random cases around a
valid base, with mutations, for JAX's validators (random_case); strict-valid cases built
constructively for JAX's reference (reference_case). The Pallas mode draws its cases
from rpa.gen instead (the generator `rpa gen` uses)."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

_INT32_MAX = 2**31 - 1
_INT32_MIN = -2**31

# --- random cases -------------------------------------------------------------------

_DATA_DTYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64,
    "int32": np.int32, "int8": np.int8, "bool": np.bool_,
    "uint8": np.uint8, "uint16": np.uint16,  # raw bits with no dtype name
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
# Common dtypes are listed more than once to be picked more often.
_DATA_DTYPE_PICKS = ("float32", "float32", "bfloat16", "bfloat16", "float8_e4m3fn",
                     "float8_e5m2", "float16", "float64", "int32", "int8", "bool", "uint8",
                     "uint16")
_INDEX_DTYPES = ("int64", "float32", "int16", "uint32", "int8", "float64")
_NUM_SEQS_DTYPES = ("int64", "int16", "int8", "uint8", "uint32", "uint64", "float32",
                    "float64", "bool")
_PARAM_VALUES = {
    "sm_scale": (1.0, 0.125, 0.0, -0.0, -1.0, float("nan"), float("inf"), -float("inf"),
                 1e300, 1e-5),
    "soft_cap": (0.0, -0.0, 1.0, 30.0, -2.0, float("nan"), float("inf"), -float("inf"),
                 1e-300, 1e300),
    "mask_value": (-1e30, -2.381976426469702e38, 0.0, -0.0, 1.0, -float("inf"),
                   float("inf"), float("nan"), -1e300),
    "k_scale": (1.0, 0.5, 0.0, -0.0, -1.0, float("nan"), float("inf"), 1e300),
    "v_scale": (1.0, 0.5, 0.0, -0.0, -1.0, float("nan"), -float("inf"), 1e-300),
    "sliding_window": (1, 2, 3, 128, 0, -1, -2**63, 2**62),
    "num_kv_pages_per_block": ("pps", "pps+1", 1, 2, 0, -1, 2**40),
    "num_queries_per_block": (1, 2, 8, 0, -1, 2**40),
    "vmem_limit_bytes": (1, 2**20, 32 * 2**20, 2**40, 0, -1, -2**63),
}
# Mutations applied to a valid base, by phase: dims, then values, then representation.
_DIM_MUTATIONS = ("q_heads_zero", "kv_heads_zero", "combined_odd", "heads_not_divisible",
                  "heads_not_tileable", "heads_many", "head_dim_zero", "head_dim_mismatch",
                  "page_size_zero", "pages_zero", "max_num_seqs_zero", "pages_per_seq_zero",
                  "tokens_zero")
_VALUE_MUTATIONS = ("num_seqs_value", "kv_lens_padding", "kv_len_negative", "kv_len_huge",
                    "kv_len_over_pages", "cu_q_lens_shuffle", "cu_q_lens_first",
                    "cu_q_lens_extreme", "total_over_tokens", "q_len_over_kv_len",
                    "page_index_out_of_range")
_REPR_MUTATIONS = ("q_rank", "kv_pages_rank", "page_indices_rank", "num_seqs_shape",
                   "kv_lens_shape", "cu_q_lens_shape", "index_dtype", "num_seqs_dtype",
                   "q_dtype", "kv_dtype", "q_dtype", "kv_dtype")


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _data(rng, shape, dtype_name):
    """A random q / kv_pages array of the shape in the dtype (values do not matter)."""
    if dtype_name in ("uint8", "uint16", "int8", "int32"):
        return rng.integers(0, 100, shape).astype(_DATA_DTYPES[dtype_name])
    return rng.standard_normal(shape).astype(_DATA_DTYPES[dtype_name])


def _reshape_rank(rng, x):
    """x with one axis dropped or one of size 1 (or 2) inserted."""
    if x.ndim > 0 and rng.random() < 0.5:
        axis = int(rng.integers(x.ndim))
        return np.take(x, 0, axis=axis) if x.shape[axis] else np.sum(x, axis=axis)
    axis = int(rng.integers(x.ndim + 1))
    return np.repeat(np.expand_dims(x, axis), int(rng.integers(1, 3)), axis=axis)


def random_case(rng):
    """Builds one small random case around a valid base.

    Returns:
      (arrays, params, description): the six input arrays, the set parameters, and a
      one-line description with the mutations applied and the case's values.
    """
    names = [_pick(rng, _DIM_MUTATIONS + _VALUE_MUTATIONS + _REPR_MUTATIONS)
             for _ in range(_pick(rng, (0, 1, 1, 1, 2, 2, 3)))]
    applied = []

    # Dims of a valid base, then dim mutations.
    hkv = _pick(rng, (1, 2, 4))
    ratio = _pick(rng, (1, 2))
    d = dict(T=int(rng.integers(1, 7)), Hq=hkv * ratio, D=_pick(rng, (1, 2, 4)),
             P=int(rng.integers(1, 6)), S=_pick(rng, (1, 2, 3, 4)), Hc=2 * hkv,
             N=int(rng.integers(1, 5)), pps=int(rng.integers(1, 4)))
    d["Dk"] = d["D"]
    for m in names:
        if m not in _DIM_MUTATIONS:
            continue
        applied.append(m)
        if m == "q_heads_zero":
            d["Hq"] = 0
        elif m == "kv_heads_zero":
            d["Hc"] = 0
        elif m == "combined_odd":
            d["Hc"] = _pick(rng, (1, 3, 5))
        elif m == "heads_not_divisible":
            d["Hc"], d["Hq"] = _pick(rng, ((4, 3), (4, 1), (8, 6), (6, 4), (4, 5)))
        elif m == "heads_not_tileable":
            d["Hc"] = _pick(rng, (6, 10, 12, 14, 18, 20))
            d["Hq"] = d["Hc"] // 2 * _pick(rng, (1, 2, 3))
        elif m == "heads_many":
            d["Hc"] = _pick(rng, (16, 32, 48))
            d["Hq"] = d["Hc"] // 2 * _pick(rng, (1, 3))
        elif m == "head_dim_zero":
            d["D"] = d["Dk"] = 0
        elif m == "head_dim_mismatch":
            d["Dk"] = d["D"] + (1 if d["D"] == 0 else _pick(rng, (-1, 1)))
        elif m == "page_size_zero":
            d["S"] = 0
        elif m == "pages_zero":
            d["P"] = 0
        elif m == "max_num_seqs_zero":
            d["N"] = 0
        elif m == "pages_per_seq_zero":
            d["pps"] = 0
        elif m == "tokens_zero":
            d["T"] = 0

    # A consistent batch for those dims.
    n, pps, s = d["N"], d["pps"], d["S"]
    ns = int(rng.integers(0, n + 1))
    # int64 while mutating; the int32 cast at the end wraps, as a user's astype would.
    kv_lens = np.zeros(n, np.int64)
    cu = np.zeros(n + 1, np.int64)
    budget = d["T"]
    for i in range(ns):
        kv_lens[i] = rng.integers(0, pps * s + 1)
        q_len = int(rng.integers(0, min(int(kv_lens[i]), budget) + 1))
        budget -= q_len
        cu[i + 1] = cu[i] + q_len
    cu[ns + 1:] = cu[ns]
    page_indices = (rng.integers(0, d["P"], (n, pps)) if d["P"] else
                    np.zeros((n, pps), np.int64)).astype(np.int32)
    num_seqs = np.array([ns], np.int32)

    for m in names:
        if m not in _VALUE_MUTATIONS:
            continue
        applied.append(m)
        if m == "num_seqs_value":
            num_seqs[0] = _pick(rng, (-1, -2, -n - 1, -n - 2, 0, n, n + 1, n + 2,
                                      _INT32_MAX, _INT32_MIN))
        elif m == "kv_lens_padding" and ns < n:
            kv_lens[ns:] = rng.integers(-5, pps * s + 6, n - ns)
        elif m == "kv_len_negative" and n:
            kv_lens[int(rng.integers(n))] = _pick(rng, (-1, -2, -s - 1, _INT32_MIN))
        elif m == "kv_len_huge" and n:
            kv_lens[int(rng.integers(n))] = _INT32_MAX - int(rng.integers(0, max(s, 1) + 1))
        elif m == "kv_len_over_pages" and n:
            kv_lens[int(rng.integers(n))] = pps * s + int(rng.integers(1, max(s, 1) + 2))
        elif m == "cu_q_lens_shuffle":
            cu[1:] = rng.permutation(cu[1:])
            if rng.random() < 0.5 and n:
                cu[int(rng.integers(1, n + 1))] -= int(rng.integers(1, 4))
        elif m == "cu_q_lens_first":
            cu[0] = _pick(rng, (1, -1, 2))
        elif m == "cu_q_lens_extreme":
            cu[int(rng.integers(n + 1))] = _pick(rng, (_INT32_MAX, _INT32_MIN, _INT32_MIN + 1))
        elif m == "total_over_tokens":
            cu[ns:] += d["T"] + 1 - cu[ns]
        elif m == "q_len_over_kv_len" and ns:
            i = int(rng.integers(ns))
            cu[i + 1:] += int(kv_lens[i]) + 1 - (int(cu[i + 1]) - int(cu[i]))
        elif m == "page_index_out_of_range" and page_indices.size:
            page_indices.flat[int(rng.integers(page_indices.size))] = _pick(
                rng, (d["P"], d["P"] + 5, -1, _INT32_MAX))

    q_dtype = kv_dtype = "float32"
    if rng.random() < 0.5:
        q_dtype = kv_dtype = _pick(rng, ("bfloat16", "float32"))
    arrays = dict(kv_lens=kv_lens.astype(np.int32), page_indices=page_indices,
                  cu_q_lens=cu.astype(np.int32), num_seqs=num_seqs)
    q_shape = [d["T"], d["Hq"], d["D"]]
    kv_shape = [d["P"], d["S"], d["Hc"], d["Dk"]]
    reshape = set()
    for m in names:
        if m not in _REPR_MUTATIONS:
            continue
        if m == "q_rank":
            reshape.add("q")
        elif m == "kv_pages_rank":
            reshape.add("kv_pages")
        elif m == "page_indices_rank":
            arrays["page_indices"] = _reshape_rank(rng, arrays["page_indices"])
        elif m == "num_seqs_shape":
            v = arrays["num_seqs"].reshape(-1)[:1]
            v = v if v.size else np.zeros(1, v.dtype)
            arrays["num_seqs"] = _pick(rng, (v.reshape(()), v.reshape(1, 1), np.repeat(v, 2),
                                             v[:0]))
        elif m == "kv_lens_shape":
            v = arrays["kv_lens"].reshape(-1)
            arrays["kv_lens"] = _pick(rng, (np.append(v, 0), v[:max(v.size - 1, 0)],
                                            v.reshape(-1, 1)))
        elif m == "cu_q_lens_shape":
            v = arrays["cu_q_lens"].reshape(-1)
            arrays["cu_q_lens"] = _pick(rng, (v[:max(v.size - 1, 0)], np.append(v, 0),
                                              v.reshape(1, -1)))
        elif m == "index_dtype":
            name = _pick(rng, ("kv_lens", "page_indices", "cu_q_lens"))
            arrays[name] = arrays[name].astype(_pick(rng, _INDEX_DTYPES))
        elif m == "num_seqs_dtype":
            dtype = _pick(rng, _NUM_SEQS_DTYPES)
            value = arrays["num_seqs"]
            if dtype == "uint64" and rng.random() < 0.5:
                value = np.full(value.shape, _pick(rng, (2**63 + 1, 2**64 - 1)), np.uint64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # negative values wrap in unsigned types
                arrays["num_seqs"] = value.astype(dtype)
        elif m == "q_dtype":
            q_dtype = _pick(rng, _DATA_DTYPE_PICKS)
        elif m == "kv_dtype":
            kv_dtype = _pick(rng, _DATA_DTYPE_PICKS)
        applied.append(m)
    arrays["q"] = _data(rng, q_shape, q_dtype)
    arrays["kv_pages"] = _data(rng, kv_shape, kv_dtype)
    for name in reshape:
        arrays[name] = _reshape_rank(rng, arrays[name])

    params = {}
    for name, values in _PARAM_VALUES.items():
        if rng.random() < 0.3:
            value = _pick(rng, values)
            params[name] = {"pps": pps, "pps+1": pps + 1}[value] if isinstance(
                value, str) else value
    text = ("mutations=[" + ", ".join(applied) + "] " +
            " ".join(f"{k}={v}" for k, v in d.items()) +
            f" q={arrays['q'].dtype}{list(arrays['q'].shape)}"
            f" kv_pages={arrays['kv_pages'].dtype}{list(arrays['kv_pages'].shape)}" +
            "".join(f" {k}={arrays[k].dtype}{np.array2string(arrays[k], separator=',')}"
                    .replace("\n", "") for k in ("num_seqs", "kv_lens", "cu_q_lens",
                                                 "page_indices")) +
            "".join(f" {k}={v!r}" for k, v in params.items()))
    return arrays, params, text


# --- reference mode: strict-valid cases for JAX's ref_ragged_paged_attention -----------

# (q dtype, kv dtype) combinations, and (num_q_heads, num_kv_heads) shapes, drawn from.
REF_DTYPE_COMBOS = (("float32", "float32"), ("bfloat16", "bfloat16"),
                     ("bfloat16", "float8_e4m3fn"), ("bfloat16", "float8_e5m2"),
                     ("float32", "float8_e4m3fn"))
_REF_HEADS = ((1, 1), (2, 1), (4, 2), (8, 2), (4, 4), (8, 8), (16, 2))
_REF_PAGE_SIZES = (1, 2, 4, 8, 16)
_REF_HEAD_DIMS = (1, 8, 32, 128)
# get_dtype_packing: how many elements of the dtype share one 32-bit word.
_PACKING = {"float32": 1, "bfloat16": 2, "float8_e4m3fn": 4, "float8_e5m2": 4}


def _xla_fully_tileable(n, packing):
    """JAX's can_be_xla_fully_tiled (get_min_heads_per_blk): the one head-count condition
    on a strict-valid case that depends on the dtypes."""
    if n % packing:
        return False
    n //= packing
    return n in (1, 2, 4, 8) or n % 8 == 0


def _garbage_index(rng, num_pages):
    """An index the definition never reads: out of range either way, or a real page."""
    return int(_pick(rng, (-1, -7, _INT32_MIN, _INT32_MAX, num_pages, num_pages + 7,
                           int(rng.integers(0, 1 << 30)),
                           int(rng.integers(0, max(num_pages, 1))))))


def _normal(rng, shape, scale, dtype_name):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(
        _DATA_DTYPES[dtype_name])


def reference_case(rng):
    """Builds one strict-valid case constructively (no rejection loop).

    Returns:
      (arrays, params, info): the six input arrays (q / kv_pages as float32 or ml_dtypes
      arrays), the parameters to pass (sm_scale always; the others only when set), and a
      dict describing the case (dtypes, dims, sequences, data scales) for messages.
    """
    q_dtype, kv_dtype = _pick(rng, REF_DTYPE_COMBOS)
    # Only head counts the kernel's XLA tiling takes for this KV dtype (strict rejects the
    # rest with heads_not_tileable): fp8 KV needs num_combined_kv_heads % 4 == 0.
    heads = [h for h in _REF_HEADS if _xla_fully_tileable(2 * h[1], _PACKING[kv_dtype])]
    hq, hkv = _pick(rng, heads)
    d = _pick(rng, _REF_HEAD_DIMS)
    s = _pick(rng, _REF_PAGE_SIZES)

    ns = int(rng.integers(1, 7))
    seqs = []
    for _ in range(ns):
        kv_len = int(rng.integers(1, 81))
        if rng.random() < 0.5:
            q_len = 1  # decode
        elif rng.random() < 0.3:
            q_len = kv_len  # a whole prompt
        else:
            q_len = int(rng.integers(1, kv_len + 1))  # prefill after a cached prefix
        seqs.append((q_len, kv_len))
    n = ns + int(rng.integers(0, 3))  # max_num_seqs, with padding slots
    used_pages = [-(-kv_len // s) for _, kv_len in seqs]
    pps = max(used_pages) + int(rng.integers(0, 3))
    num_pages = sum(used_pages) + int(rng.integers(0, 4))
    total = sum(q for q, _ in seqs)
    t = total + int(rng.integers(0, 4))  # max_num_batched_tokens, with padding rows

    q_scale = _pick(rng, (1.0,) * 8 + (10.0, 0.01))
    kv_scale = _pick(rng, (1.0,) * 8 + (10.0, 0.01))
    q = _normal(rng, (t, hq, d), q_scale, q_dtype)
    q[total:] = np.nan  # rows past cu_q_lens[num_seqs] belong to no sequence
    kv_pages = np.full((num_pages, s, 2 * hkv, d), np.nan, np.float32).astype(
        _DATA_DTYPES[kv_dtype])
    kv_lens = np.zeros(n, np.int32)
    cu = np.zeros(n + 1, np.int32)
    page_indices = np.zeros((n, pps), np.int32)
    free = list(rng.permutation(num_pages))  # a shuffled free list, as an allocator's
    for i, (q_len, kv_len) in enumerate(seqs):
        kv_lens[i] = kv_len
        cu[i + 1] = cu[i] + q_len
        for j in range(pps):
            if j >= used_pages[i]:
                page_indices[i, j] = _garbage_index(rng, num_pages)
                continue
            page = int(free.pop())
            page_indices[i, j] = page
            used = min(s, kv_len - j * s)
            kv_pages[page, :used] = _normal(rng, (used, 2 * hkv, d), kv_scale, kv_dtype)
    # Padding sequence slots: garbage everywhere (strict ignores them, as the definition).
    for i in range(ns, n):
        kv_lens[i] = _pick(rng, (0, -3, _INT32_MAX, int(rng.integers(0, 10**6))))
        cu[i + 1] = _pick(rng, (int(cu[ns]), -1, _INT32_MAX, int(rng.integers(0, 10**6))))
        for j in range(pps):
            page_indices[i, j] = _garbage_index(rng, num_pages)

    max_kv_len = max(kv_len for _, kv_len in seqs)
    params = dict(sm_scale=float(_pick(rng, (1.0 / np.sqrt(d), 1.0, 0.3))))
    if rng.random() < 0.3:
        params["sliding_window"] = int(rng.integers(1, max_kv_len + 6))
    if rng.random() < 0.3:
        params["soft_cap"] = float(_pick(rng, (5.0, 50.0)))
    if rng.random() < 0.5:
        # Strict mode (mask_value_too_large) takes only mask values so negative that a
        # masked weight is exactly 0: at most -1e30.
        params["mask_value"] = float(_pick(rng, (-1e30, -1e35, -1e38, -2.381976426469702e38)))
    for name in ("k_scale", "v_scale"):
        if rng.random() < 0.3:
            params[name] = float(_pick(rng, (0.5, 2.0)))
    arrays = dict(q=q, kv_pages=kv_pages, kv_lens=kv_lens, page_indices=page_indices,
                  cu_q_lens=cu, num_seqs=np.array([ns], np.int32))
    info = dict(dtypes=f"{q_dtype}/{kv_dtype}", Hq=hq, Hkv=hkv, D=d, S=s, T=t, N=n,
                pps=pps, P=num_pages, seqs=seqs, q_scale=q_scale, kv_scale=kv_scale)
    return arrays, params, info


def describe_reference_case(info, params):
    seqs = ",".join(f"({q},{kv})" for q, kv in info["seqs"])
    return (f"{info['dtypes']} Hq={info['Hq']} Hkv={info['Hkv']} D={info['D']} "
            f"S={info['S']} T={info['T']} N={info['N']} pps={info['pps']} P={info['P']} "
            f"(q_len,kv_len)=[{seqs}] data_scale q={info['q_scale']:g} "
            f"kv={info['kv_scale']:g} " +
            " ".join(f"{k}={v!r}" for k, v in params.items()))
