"""The v3 cross-check's cases (rpa.jax.v3_cross_check): random valid calls of tpu-inference's
v3 kernels (both dialects), mutations that each trip one of their validators' rules (or
crash them), and the package's own test scenarios rebuilt as its harnesses build them
(v3-contract.md section 5).

Random cases are built valid by construction, never filtered: shapes first (heads, head_dim,
dtypes, page size a multiple of the KV packing), then sequences (q_len <= kv_len, distinct
pages, a distribution i <= j <= k), then data (N(0,1) cast to each dtype, the cache in the
packed layout of core/v3_cache_layout.h: padding lanes and unused pages hold data too,
never read), then keywords, each set or left at its default at random. A mutation takes a
valid case to an invalid one; ``MUTATIONS[dialect]`` lists them with the validator rule each
trips (v3-contract.md section 2; "crash": the validators raise something else).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import ml_dtypes
import numpy as np

import rpa

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
# The int dtype of each KV dtype's width (a mutation reads the cache's bits as integers).
_INT_OF = {4: np.int32, 2: np.int16, 1: np.int8}

V3 = "tpu_inference_v3"
HD64 = "tpu_inference_v3_hd64"
DIALECTS = (V3, HD64)

# (q dtype, KV dtype) pairs the generators draw: what vLLM runs (q float32 or bfloat16; KV
# the same, or float8 for bfloat16 queries) and float32 queries over narrower KV.
DTYPE_PAIRS = ((F32, F32), (BF16, BF16), (BF16, E4M3), (BF16, E5M2), (F32, BF16), (F32, E4M3))


def packing(kv: np.dtype) -> int:
    """Values per 32-bit word: 32 / bits."""
    return 4 // np.dtype(kv).itemsize


def align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def cache_shape(dialect: str, pages: int, page_size: int, kv_heads: int, head_dim: int,
                kv: np.dtype) -> tuple[int, ...]:
    """get_kv_cache_shape (kernel.py), or hd64's [pages, ps, align(Hkv, P) / P, P, 128]."""
    p = packing(kv)
    if dialect == HD64:
        return (pages, page_size, align(kv_heads, p) // p, p, 128)
    return (pages, page_size, align(2 * kv_heads, p) // p, p, align(head_dim, 128))


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
          scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(dtype)


def _pick(rng: np.random.Generator, options: list[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def random_case(rng: np.random.Generator, dialect: str, *, reference: bool = False,
                dtypes: Optional[tuple[np.dtype, np.dtype]] = None) -> rpa.Case:
    """A valid call of the dialect's kernel (its validators accept it). reference: only what
    the reference computes as the kernel would (update_kv_cache left True, which the
    reference always does)."""
    q_dtype, kv_dtype = dtypes or _pick(rng, list(DTYPE_PAIRS))
    p = packing(kv_dtype)
    head_dim = 64 if dialect == HD64 else int(_pick(rng, [8, 32, 64, 80, 128, 136, 256]))
    kv_heads = int(rng.integers(1, 4))
    q_heads = kv_heads * int(_pick(rng, [1, 2, 3, 4]))
    page_size = p * int(_pick(rng, [1, 2, 4])) if rng.random() < 0.8 else 16
    n = int(rng.integers(1, 5))
    max_seqs = n + int(rng.integers(0, 3))
    decode = int(rng.integers(0, n + 1))
    q_lens = [1] * decode + [int(rng.integers(1, 13)) for _ in range(n - decode)]
    kv_lens = [q + int(rng.integers(0, 30)) for q in q_lens]
    pages_per_seq = max(math.ceil(k / page_size) for k in kv_lens) + int(rng.integers(0, 2))
    total_pages = max_seqs * pages_per_seq + int(rng.integers(0, 3))
    page_indices = rng.permutation(total_pages)[:max_seqs * pages_per_seq].astype(np.int32)
    tokens = sum(q_lens) + int(rng.integers(0, 4))
    cu = np.zeros(max_seqs + 1, np.int32)
    cu[1:n + 1] = np.cumsum(q_lens)
    cu[n + 1:] = cu[n] if rng.random() < 0.7 else 0  # the package's harness pads with 0
    lens = np.zeros(max_seqs, np.int32)
    lens[:n] = kv_lens
    if dialect == V3 and rng.random() < 0.3:
        i = int(rng.integers(0, n + 1))
        distribution = [i, int(rng.integers(i, n + 1)), n]
    else:
        distribution = [decode, decode, n]
    scale = float(_pick(rng, [1.0, 1.0, 0.25, 3.0]))
    queries = _data(rng, (tokens, q_heads, head_dim), q_dtype, scale)
    keys = _data(rng, (tokens, kv_heads, head_dim), kv_dtype, scale)
    values = _data(rng, (tokens, kv_heads, head_dim), kv_dtype)
    kv_cache = _data(rng, cache_shape(dialect, total_pages, page_size, kv_heads, head_dim,
                                      kv_dtype), kv_dtype, scale)
    kw: dict[str, Any] = {}
    if rng.random() < 0.4:
        kw["sm_scale"] = float(_pick(rng, [head_dim ** -0.5, 0.5, 2.0, float(rng.random())]))
    if rng.random() < 0.25:
        kw["sliding_window"] = int(rng.integers(1, max(kv_lens) + 2))
    if rng.random() < 0.25:
        kw["soft_cap"] = float(_pick(rng, [5.0, 30.0, 50.0]))
    if rng.random() < 0.15:
        kw["mask_value"] = float(_pick(rng, [-1e4, -1e30, -2.0 ** 100]))
    for name in ("q_scale", "k_scale", "v_scale"):
        if rng.random() < 0.15:
            kw[name] = float(_pick(rng, [0.5, 2.0, 0.75]))
    if rng.random() < 0.15:
        kw["chunk_prefill_size"] = int(rng.integers(1, 16))
    if rng.random() < 0.2:
        kw["vmem_limit_bytes"] = int(_pick(rng, [1, 16 << 20, 100 << 20]))
    sink = None
    if dialect == V3:
        if rng.random() < 0.2:
            kw["use_causal_mask"] = False
            if rng.random() < 0.5:
                kw["skip_kv_mask"] = True
        if not reference and rng.random() < 0.1:
            kw["update_kv_cache"] = False
        for name in ("d_block_sizes", "p_block_sizes", "m_block_sizes"):
            if rng.random() < 0.25:
                bq_csz = int(rng.integers(1, 9))
                bkv_csz = page_size * int(rng.integers(1, 4))
                kw[name] = (bq_csz * int(rng.integers(1, 4)), bkv_csz * int(rng.integers(1, 3)),
                            bq_csz, bkv_csz)
    else:
        if rng.random() < 0.5:
            sink = (rng.random(q_heads, dtype=np.float32) * np.float32(10)).astype(np.float32)
        if rng.random() < 0.3:
            kw["num_kv_pages_per_block"] = int(rng.integers(1, 9))
        if rng.random() < 0.3:
            kw["num_queries_per_block"] = int(rng.integers(1, 65))
    return rpa.Case.from_v3_call(queries, keys, values, kv_cache, lens, page_indices, cu,
                                 np.asarray(distribution, np.int32), sink, dialect=dialect, **kw)


def reference_case(rng: np.random.Generator, dialect: str) -> rpa.Case:
    """A valid call for the reference comparison, with shapes from a small fixed set (T 32,
    4 sequence slots of 3 pages of 16 tokens, 24 pages; heads 4/2; head_dim 80 or 128 (hd64:
    64); q_len 1, 3 or 8 and kv_len q_len + 0, 5 or 17), so that the eager reference's per-
    operation compilations, keyed by shape, are mostly reused from case to case; dtypes,
    data, distribution, page order and keywords are drawn as in random_case."""
    # float32 queries over a bfloat16 cache: no kernel computes that (strict's dtype_pair).
    q_dtype, kv_dtype = _pick(rng, [pair for pair in DTYPE_PAIRS if pair != (F32, BF16)])
    head_dim = 64 if dialect == HD64 else int(_pick(rng, [80, 128]))
    kv_heads, q_heads, page_size, max_seqs, pages_per_seq, total_pages, tokens = 2, 4, 16, 4, 3, 24, 32
    n = int(rng.integers(1, 4))
    q_lens = sorted(int(_pick(rng, [1, 3, 8])) for _ in range(n))
    kv_lens = [q + int(_pick(rng, [0, 5, 17])) for q in q_lens]
    decode = sum(1 for q in q_lens if q == 1)
    page_indices = rng.permutation(total_pages)[:max_seqs * pages_per_seq].astype(np.int32)
    cu = np.zeros(max_seqs + 1, np.int32)
    cu[1:n + 1] = np.cumsum(q_lens)
    cu[n + 1:] = cu[n]
    lens = np.zeros(max_seqs, np.int32)
    lens[:n] = kv_lens
    queries = _data(rng, (tokens, q_heads, head_dim), q_dtype)
    keys = _data(rng, (tokens, kv_heads, head_dim), kv_dtype)
    values = _data(rng, (tokens, kv_heads, head_dim), kv_dtype)
    kv_cache = _data(rng, cache_shape(dialect, total_pages, page_size, kv_heads, head_dim,
                                      kv_dtype), kv_dtype)
    kw: dict[str, Any] = {}
    if rng.random() < 0.5:
        kw["sm_scale"] = float(_pick(rng, [head_dim ** -0.5, 0.5, 2.0]))
    if rng.random() < 0.3:
        kw["sliding_window"] = int(rng.integers(1, 20))
    if rng.random() < 0.3:
        kw["soft_cap"] = float(_pick(rng, [5.0, 30.0]))
    for name in ("q_scale", "k_scale", "v_scale"):
        if rng.random() < 0.2:
            kw[name] = float(_pick(rng, [0.5, 2.0]))
    sink = None
    if dialect == V3:
        if rng.random() < 0.2:
            kw["use_causal_mask"] = False
        kw["m_block_sizes"] = (8, 32, 8, 16)
    elif rng.random() < 0.5:
        sink = (rng.random(q_heads, dtype=np.float32) * np.float32(10)).astype(np.float32)
    return rpa.Case.from_v3_call(queries, keys, values, kv_cache, lens, page_indices, cu,
                                 np.asarray([decode, decode, n], np.int32), sink,
                                 dialect=dialect, **kw)


# -- mutations: each takes a valid case to one a validator rejects ---------------------------
def _seqs(case: rpa.Case) -> int:
    return int(case.distribution[2])


def _pps(case: rpa.Case) -> int:
    return case.page_indices.shape[0] // case.kv_lens.shape[0]


def _page_size(case: rpa.Case) -> int:
    return case.kv_cache.shape[1]


def _other_float(dtype: np.dtype) -> np.dtype:
    return F32 if dtype != F32 else BF16


Mutation = Callable[[rpa.Case, np.random.Generator], Optional[rpa.Case]]


def _causal_skip(c, _r):
    return c.replace(use_causal_mask=True, skip_kv_mask=True)


def _rank(c, r):
    name = _pick(r, ["queries", "keys", "values"])
    a = getattr(c, name)
    return c.replace(**{name: a.reshape(a.shape[0], -1) if r.random() < 0.5 else a[..., None]})


def _kv_shapes(c, _r):
    return c.replace(values=np.concatenate([c.values, c.values[:, :1]], axis=1))


def _token_dims(c, _r):
    return c.replace(keys=np.concatenate([c.keys, c.keys[:1]]),
                     values=np.concatenate([c.values, c.values[:1]]))


def _head_dims(c, r):
    d = c.queries.shape[2]
    if r.random() < 0.5 or d == 1:
        return c.replace(queries=np.concatenate([c.queries, c.queries[..., :1]], axis=2))
    return c.replace(queries=np.ascontiguousarray(c.queries[..., :-1]))


def _heads_divisible(c, r):
    hq = c.queries.shape[1]
    t, _, d = c.keys.shape
    return c.replace(keys=_data(r, (t, hq + 1, d), c.keys.dtype),
                     values=_data(r, (t, hq + 1, d), c.values.dtype))


def _cache_shape(c, r):
    s = list(c.kv_cache.shape)
    s[_pick(r, [2, 3, 4])] += 1 if r.random() < 0.5 else 128
    return c.replace(kv_cache=_data(r, tuple(s), c.kv_cache.dtype))


def _kv_dtype(c, r):
    other = _other_float(c.kv_cache.dtype)
    if r.random() < 0.5:
        return c.replace(keys=c.keys.astype(other), values=c.values.astype(other))
    return c.replace(values=c.values.astype(other))


def _not_floating(c, _r):
    t = _INT_OF[c.kv_cache.dtype.itemsize]
    return c.replace(kv_cache=c.kv_cache.view(t), keys=c.keys.view(t), values=c.values.view(t))


def _int32(c, r):
    name = _pick(r, ["kv_lens", "page_indices", "cu_q_lens", "distribution"])
    to = _pick(r, [np.int16, np.uint32, np.float32, np.uint8])
    return c.replace(**{name: getattr(c, name).astype(to)})


def _one_d(c, r):
    name = _pick(r, ["kv_lens", "page_indices", "cu_q_lens"])
    a = getattr(c, name)
    return c.replace(**{name: a.reshape(-1, 1) if r.random() < 0.7 else a.reshape(1, -1)})


def _page_indices_divisible(c, _r):
    if c.kv_lens.shape[0] < 2:
        return None
    return c.replace(page_indices=np.append(c.page_indices, np.int32(0)).astype(np.int32))


def _cu_q_lens_shape(c, r):
    if r.random() < 0.5:
        return c.replace(cu_q_lens=np.append(c.cu_q_lens, c.cu_q_lens[-1]).astype(np.int32))
    return c.replace(cu_q_lens=c.cu_q_lens[:-1].copy())


def _distribution_shape(c, r):
    d = c.distribution
    return c.replace(distribution=np.append(d, d[-1]).astype(np.int32) if r.random() < 0.5
                     else d[:2].copy())


def _page_size_packing(c, r):
    p = packing(c.kv_cache.dtype)
    if p == 1:
        return None
    s = list(c.kv_cache.shape)
    s[1] += int(r.integers(1, p))
    return c.replace(kv_cache=_data(r, tuple(s), c.kv_cache.dtype))


def _sliding_window(c, r):
    return c.replace(sliding_window=int(_pick(r, [0, -1, -(2 ** 31)])))


def _soft_cap(c, r):
    return c.replace(soft_cap=float(_pick(r, [0.0, -0.0])))


def _chunk_prefill(c, r):
    return c.replace(chunk_prefill_size=int(_pick(r, [0, -1, -64])))


def _vmem(c, r):
    return c.replace(vmem_limit_bytes=int(_pick(r, [0, -1])))


def _block_sizes(which: int) -> Mutation:
    """A block-size tuple of one pass breaking condition `which` of _validate_block_sizes
    (0: bq_csz, 1: bkv_csz, 2: bkv_sz % page_size, 3: bkv_csz % page_size)."""
    def mutate(c, r):
        ps = _page_size(c)
        name = _pick(r, ["d_block_sizes", "p_block_sizes", "m_block_sizes"])
        if which == 0:
            t = _pick(r, [(8, 2 * ps, 3, ps), (8, 2 * ps, 0, ps), (8, ps, -2, ps)])
        elif which == 1:
            t = _pick(r, [(8, 3 * ps, 4, 2 * ps), (8, ps, 4, 0), (8, ps, 4, -ps)])
        elif which == 2:
            if ps == 1:
                return None
            t = (8, ps + 1, 4, ps + 1)
        else:
            if ps % 2:
                return None
            t = (8, ps, 4, ps // 2)
        return c.replace(**{name: t})
    return mutate


def _distribution_order(c, r):
    n = _seqs(c)
    if n == 0:
        return None
    if r.random() < 0.5:
        return c.replace(distribution=np.array([n, 0, n], np.int32))
    return c.replace(distribution=np.array([0, n, n - 1], np.int32))


def _too_many_seqs(c, _r):
    return c.replace(distribution=np.array([0, 0, c.kv_lens.shape[0] + 1], np.int32))


def _total_tokens(c, _r):
    cu = c.cu_q_lens.copy()
    n = _seqs(c)
    cu[n:] = c.queries.shape[0] + 1
    return c.replace(cu_q_lens=cu)


def _q_len_zero(c, r):
    n = _seqs(c)
    s = int(r.integers(n))
    cu = c.cu_q_lens.copy()
    q_len = int(cu[s + 1] - cu[s])
    cu[s + 1:] -= q_len + (1 if r.random() < 0.3 else 0)  # 0, or negative
    return c.replace(cu_q_lens=cu.astype(np.int32))


def _q_len_over_kv(c, r):
    s = int(r.integers(_seqs(c)))
    lens = c.kv_lens.copy()
    lens[s] = c.cu_q_lens[s + 1] - c.cu_q_lens[s] - 1
    return c.replace(kv_lens=lens)


def _page_count(c, r):
    s = int(r.integers(_seqs(c)))
    lens = c.kv_lens.copy()
    lens[s] = _pps(c) * _page_size(c) + int(r.integers(1, _page_size(c) + 1))
    return c.replace(kv_lens=lens)


def _page_index(c, r):
    s = int(r.integers(_seqs(c)))
    used = math.ceil(int(c.kv_lens[s]) / _page_size(c))
    pi = c.page_indices.copy()
    pi[s * _pps(c) + int(r.integers(used))] = _pick(r, [-1, c.kv_cache.shape[0],
                                                        c.kv_cache.shape[0] + 7, -(2 ** 31)])
    return c.replace(page_indices=pi)


def _no_seqs(c, _r):
    # max_num_seqs 0: the static checks' `num_page_indices % max_num_seqs` divides by zero.
    empty = np.zeros(0, np.int32)
    return c.replace(kv_lens=empty, page_indices=empty, cu_q_lens=np.zeros(1, np.int32),
                     distribution=np.zeros(3, np.int32))


def _sink_shape(c, r):
    hq = c.queries.shape[1]
    return c.replace(attention_sink=r.random(hq + _pick(r, [1, -1 if hq > 1 else 2]),
                                             dtype=np.float32))


def _sink_dtype(c, r):
    to = _pick(r, [BF16, np.dtype(np.float16), np.dtype(np.int32)])
    return c.replace(attention_sink=r.random(c.queries.shape[1], dtype=np.float32).astype(to))


def _head_dim_64(c, r):
    d = int(_pick(r, [32, 128, 63]))
    t, hq, _ = c.queries.shape
    hkv = c.keys.shape[1]
    return c.replace(queries=_data(r, (t, hq, d), c.queries.dtype),
                     keys=_data(r, (t, hkv, d), c.keys.dtype),
                     values=_data(r, (t, hkv, d), c.values.dtype))


def _hd64_last_dim(c, r):
    s = list(c.kv_cache.shape)
    s[4] = int(_pick(r, [64, 256, 129]))
    return c.replace(kv_cache=_data(r, tuple(s), c.kv_cache.dtype))


def _hd64_kv_heads(c, r):
    s = list(c.kv_cache.shape)
    s[2] += 1
    return c.replace(kv_cache=_data(r, tuple(s), c.kv_cache.dtype))


def _hd64_packing(c, r):
    s = list(c.kv_cache.shape)
    s[3] = s[3] * 2
    return c.replace(kv_cache=_data(r, tuple(s), c.kv_cache.dtype))


def _kv_heads_zero(c, _r):
    t, _, d = c.keys.shape
    return c.replace(keys=np.zeros((t, 0, d), c.keys.dtype), values=np.zeros((t, 0, d),
                                                                              c.values.dtype))


def _cache_rank(c, r):
    # kernel.py compares the whole shape (a ValueError, or an IndexError below rank 2);
    # kernel_hd64.py unpacks it into five names (a ValueError from the unpacking).
    a = c.kv_cache
    rank = int(_pick(r, [1, 2, 4, 6]))
    if rank == 1:
        return c.replace(kv_cache=a.reshape(-1))
    if rank == 2:
        return c.replace(kv_cache=a.reshape(a.shape[0], -1))
    if rank == 4:
        return c.replace(kv_cache=a.reshape(a.shape[0], a.shape[1], -1, a.shape[4]))
    return c.replace(kv_cache=a[..., None])


def _page_size_zero(c, _r):
    s = list(c.kv_cache.shape)
    s[1] = 0
    return c.replace(kv_cache=np.zeros(tuple(s), c.kv_cache.dtype))


def _q_fp8(c, r):
    # The validators do not look at the queries' dtype; the kernel fails at trace.
    return c.replace(queries=c.queries.astype(_pick(r, [E4M3, E5M2])))


def _out_dtype(c, _r):
    return c.replace(out_dtype="float32" if c.queries.dtype != F32 else "bfloat16")


def _sink_rank(c, r):
    return c.replace(attention_sink=np.float32(r.random()).reshape(()) if r.random() < 0.5
                     else r.random((c.queries.shape[1], 1), dtype=np.float32))


def _hd64_positive(name: str) -> Mutation:
    def mutate(c, r):
        return c.replace(**{name: int(_pick(r, [0, -1]))})
    return mutate


_COMMON: list[tuple[str, Mutation]] = [
    ("rank", _rank), ("kv_shapes", _kv_shapes), ("token_dims", _token_dims),
    ("head_dims", _head_dims), ("heads_divisible", _heads_divisible),
    ("kv_dtype", _kv_dtype), ("not_floating", _not_floating), ("int32", _int32),
    ("one_d", _one_d), ("page_indices_divisible", _page_indices_divisible),
    ("cu_q_lens_shape", _cu_q_lens_shape), ("distribution_shape", _distribution_shape),
    ("page_size_packing", _page_size_packing), ("sliding_window", _sliding_window),
    ("soft_cap", _soft_cap), ("chunk_prefill_size", _chunk_prefill), ("vmem", _vmem),
    ("distribution_order", _distribution_order), ("too_many_seqs", _too_many_seqs),
    ("total_tokens", _total_tokens), ("q_len_zero", _q_len_zero),
    ("q_len_over_kv", _q_len_over_kv), ("page_count", _page_count),
    ("page_index", _page_index), ("no_seqs", _no_seqs), ("kv_heads_zero", _kv_heads_zero),
    ("cache_rank", _cache_rank), ("page_size_zero", _page_size_zero), ("q_fp8", _q_fp8),
]
MUTATIONS: dict[str, list[tuple[str, Mutation]]] = {
    V3: _COMMON + [
        ("causal_skip", _causal_skip), ("cache_shape", _cache_shape),
        ("out_dtype", _out_dtype),
        ("block_bq", _block_sizes(0)), ("block_bkv", _block_sizes(1)),
        ("block_bkv_page", _block_sizes(2)), ("block_bkv_csz_page", _block_sizes(3)),
    ],
    HD64: _COMMON + [
        ("sink_shape", _sink_shape), ("sink_dtype", _sink_dtype),
        ("head_dim_64", _head_dim_64), ("last_dim_128", _hd64_last_dim),
        ("kv_heads", _hd64_kv_heads), ("packing_dim", _hd64_packing),
        ("sink_rank", _sink_rank),
        ("num_kv_pages_per_block", _hd64_positive("num_kv_pages_per_block")),
        ("num_queries_per_block", _hd64_positive("num_queries_per_block")),
    ],
}


def mutated_case(rng: np.random.Generator, dialect: str, index: int) -> tuple[str, rpa.Case]:
    """A valid case broken by the dialect's mutation number `index` (mod their count): the
    next one that applies to the drawn case if that one does not."""
    table = MUTATIONS[dialect]
    while True:
        case = random_case(rng, dialect)
        for k in range(len(table)):
            name, mutate = table[(index + k) % len(table)]
            got = mutate(case, rng)
            if got is not None:
                return name, got


# -- the package's own tests (v3-contract.md section 5) ---------------------------------------
_SEQS_16_KV = (18, 129, 597, 122, 64, 322, 463, 181, 1107, 123, 31, 18, 1229, 229, 87, 1328)
BASIC = ((192, 328), (128, 180), (64, 255))
DECODE_ONLY = tuple((1, kv) for kv in _SEQS_16_KV)
PREFILL_ONLY = tuple(zip((5, 15, 120, 100, 21, 32, 251, 40, 64, 99, 10, 5, 3, 120, 9, 2),
                         _SEQS_16_KV))
MIXED = tuple(zip((5, 1, 120, 1, 1, 32, 251, 1, 1, 99, 1, 5, 3, 117, 1, 1), _SEQS_16_KV))


def _complex_seqs(num_seqs: int) -> tuple[tuple[int, int], ...]:
    """The q_lens / kv_lens of the package's complex, sliding-window and soft-cap tests."""
    rng = np.random.default_rng(1234)
    q_lens = rng.integers(1, 100, num_seqs)
    kv_lens = q_lens + rng.integers(0, 50, num_seqs)
    return tuple(zip(q_lens.tolist(), kv_lens.tolist()))


def harness_case(dialect: str, seq_lens, num_heads: tuple[int, int], head_dim: int,
                 q_dtype, kv_dtype, *, page_size: int = 16, num_pages: int = 1000,
                 **keywords: Any) -> rpa.Case:
    """The call the package's harness (`_test_ragged_paged_attention`, or its hd64 twin
    `_test_ragged_paged_attention_hd64`) makes, built step for step as it builds it, with
    jnp: one np.random.default_rng(1234) drawing U[0,1) float32 for q, k, v (hd64: then the
    sink, x100), then each sequence's K/V tokens in the packed layout, padded to whole pages
    (kernel.py: NaN; hd64: 0); consecutive pages per sequence; page_indices padded with NaN
    cast to int32; the cache padded to num_pages (NaN; hd64: 0); T = max(align(total q, 128),
    512), max_num_seq = max(align(n, 8), 8), cu_q_lens and kv_lens padded with 0;
    distribution [0, 0, n] (hd64: seqs sorted by q_len, [decode, decode, n]). keywords: the
    test's (kernel.py: m_block_sizes (64, 256, 32, 128) and vmem_limit_bytes 100 MiB unless
    given; hd64: num_kv_pages_per_block 8, num_queries_per_block 64, vmem 100 MiB;
    use_attention_sink=True draws a sink)."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    hd64 = dialect == HD64
    use_sink = keywords.pop("use_attention_sink", False)
    rng = np.random.default_rng(1234)

    def gen_random(shape, dtype):
        return jnp.array(rng.random(size=shape, dtype=np.float32)).astype(dtype)

    if hd64:
        seq_lens = sorted(seq_lens, key=lambda x: x[0])
        num_decoding_seqs = sum(q for q, _ in seq_lens if q == 1)
    cu_q_lens = [0]
    kv_lens = []
    for q_len, kv_len in seq_lens:
        cu_q_lens.append(cu_q_lens[-1] + q_len)
        kv_lens.append(kv_len)
    max_num_batched_tokens = max(align(cu_q_lens[-1], 128), 512)
    max_num_seq = max(align(len(seq_lens), 8), 8)
    pages_per_seq = math.ceil(max(kv_lens) / page_size)
    num_q_heads, num_kv_heads = num_heads
    q = gen_random((max_num_batched_tokens, num_q_heads, head_dim), q_dtype)
    k = gen_random((max_num_batched_tokens, num_kv_heads, head_dim), kv_dtype)
    v = gen_random((max_num_batched_tokens, num_kv_heads, head_dim), kv_dtype)
    sink = gen_random((num_q_heads), jnp.float32) * 10**2 if use_sink else None
    kv_packing = packing(np.dtype(kv_dtype))
    padded_head_dim = align(head_dim, 128)
    rows = (align(num_kv_heads, kv_packing) if hd64
            else align(num_kv_heads * 2, kv_packing)) // kv_packing
    pad = 0 if hd64 else jnp.nan
    page_cnt = 0
    page_indices_list, kv_pages_list = [], []
    for kv_len in kv_lens:
        kv = gen_random((kv_len, rows, kv_packing, padded_head_dim), kv_dtype)
        kv = jnp.pad(kv, ((0, math.ceil(kv_len / page_size) * page_size - kv_len), (0, 0),
                          (0, 0), (0, 0)), constant_values=pad).reshape(
                              -1, page_size, rows, kv_packing, padded_head_dim)
        indices = page_cnt + jnp.arange(kv.shape[0], dtype=jnp.int32)
        indices = jnp.pad(indices, ((0, pages_per_seq - indices.shape[0]),),
                          constant_values=jnp.nan)
        page_indices_list.append(indices)
        page_cnt += kv.shape[0]
        kv_pages_list.append(kv)
    kv_cache = jnp.concatenate(kv_pages_list, axis=0)
    kv_cache = jnp.pad(kv_cache, ((0, num_pages - kv_cache.shape[0]), (0, 0), (0, 0), (0, 0),
                                  (0, 0)), constant_values=pad)
    page_indices = jnp.stack(page_indices_list, axis=0)
    page_indices = jnp.pad(page_indices, ((0, max_num_seq - page_indices.shape[0]), (0, 0)),
                           constant_values=jnp.nan).reshape(-1)
    cu = jnp.pad(jnp.array(cu_q_lens, dtype=jnp.int32), (0, max_num_seq + 1 - len(cu_q_lens)))
    lens = jnp.pad(jnp.array(kv_lens, dtype=jnp.int32), (0, max_num_seq - len(kv_lens)))
    if hd64:
        distribution = [num_decoding_seqs, num_decoding_seqs, len(seq_lens)]
        keywords.setdefault("num_kv_pages_per_block", 8)
        keywords.setdefault("num_queries_per_block", 64)
    else:
        distribution = [0, 0, len(seq_lens)]
        keywords.setdefault("m_block_sizes", (64, 256, 32, 128))
    keywords.setdefault("vmem_limit_bytes", 100 * 1024 * 1024)
    keywords = {name: value for name, value in keywords.items() if value is not None}
    return rpa.Case.from_v3_call(
        np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(kv_cache),
        np.asarray(lens.astype(jnp.int32)), np.asarray(page_indices.astype(jnp.int32)),
        np.asarray(cu.astype(jnp.int32)), np.asarray(distribution, np.int32),
        None if sink is None else np.asarray(sink), dialect=dialect, **keywords)


def scenarios(dialect: str, quick: bool = False, cover: bool = False):
    """(name, thunk building the case) for every parametrization of the package's test file
    of the dialect that computes an output (the two ValueError tests are validator cases and
    run with the mutations; kv_share passes update_kv_cache=False, which the reference does
    not take). quick: the smaller ones only (the complex tests with one sequence, sliding
    window, soft cap; hd64's sliding window with sinks), not basic, quantized, decode_only,
    prefill_only, mixed (3 or 16 sequences of 32 q heads each) nor complex with 17.
    cover (implies quick): of quick's two cross products, a covering set instead of every
    combination: complex's heads x head_dim x dtype (16 for kernel.py, 8 for hd64) as each
    heads setting once with every head_dim and dtype pairing among them, and hd64's sinks'
    window x heads (6) as each window and each heads setting once; 21 calls instead of 40
    (the ctest budget "ci", tests/CMakeLists.txt; tests/python_v3 checks that the cover
    reaches every feature quick does)."""
    quick = quick or cover
    f32, bf16 = F32, BF16
    d = 64 if dialect == HD64 else 128
    out: list[tuple[str, Callable[[], rpa.Case]]] = []

    def add(name, *args, **kw):
        out.append((name, lambda: harness_case(dialect, *args, **kw)))

    for dt in (() if quick else (f32, bf16)):
        if dialect == V3:
            for blocks in ((64, 256, 32, 128), (60, 48, 30, 48)):
                for causal in (True, False):
                    add(f"basic[{dt.name},{blocks},causal={causal}]", BASIC, (32, 8), d, dt, dt,
                        m_block_sizes=blocks, use_causal_mask=causal)
        else:
            add(f"basic[{dt.name}]", BASIC, (32, 8), d, dt, dt)
    for kv in (() if quick else (E5M2, E4M3)):
        for ks, vs in ((0.5, 0.5), (None, None)):
            add(f"quantized_kv_cache[{kv.name},{ks},{vs}]", BASIC, (32, 8), d, bf16, kv,
                k_scale=ks, v_scale=vs)
            add(f"quantized_attention[{kv.name},0.5,{ks},{vs}]", BASIC, (32, 8), d, bf16, kv,
                q_scale=0.5, k_scale=ks, v_scale=vs)
    if not quick:
        for dt in (f32, bf16):
            add(f"decode_only[{dt.name}]", DECODE_ONLY, (32, 8), d, dt, dt)
            add(f"prefill_only[{dt.name}]", PREFILL_ONLY, (32, 8), d, dt, dt)
            add(f"mixed[{dt.name}]", MIXED, (32, 8), d, dt, dt)
    complex_heads = ((32, 8), (12, 2), (5, 1), (3, 3))
    head_dims = (64,) if dialect == HD64 else (80, 240)
    pairings = [(hd, dt) for hd in head_dims for dt in (f32, bf16)]
    # cover: the heads settings in order take these pairings (kernel.py: each of its four
    # once; hd64: each of its two twice).
    cover_pairing = (0, 1, 1, 0) if dialect == HD64 else (0, 3, 1, 2)
    for n in ((1,) if quick else (1, 17)):
        for i, heads in enumerate(complex_heads):
            for hd, dt in ([pairings[cover_pairing[i]]] if cover else pairings):
                add(f"complex[{n},{heads},{hd},{dt.name}]", _complex_seqs(n), heads, hd,
                    dt, dt)
    for window in (None, 5, 128):
        add(f"sliding_window[{window}]", _complex_seqs(5), (4, 4), d, f32, f32,
            sliding_window=window)
    if dialect == HD64:
        sink_heads = ((4, 4), (8, 4), (64, 8))
        windows = (5, 128)
        sink_calls = ([(windows[i % 2], heads) for i, heads in enumerate(sink_heads)] if cover
                      else [(w, heads) for w in windows for heads in sink_heads])
        for window, heads in sink_calls:
            add(f"sliding_window_with_attention_sink[{window},{heads}]", _complex_seqs(5),
                heads, d, f32, f32, sliding_window=window, use_attention_sink=True)
    for cap in (None, 50.0):
        add(f"logit_soft_capping[{cap}]", _complex_seqs(2), (16, 2), d, f32, f32, soft_cap=cap)
    return out


def scenario_errors(dialect: str) -> list[tuple[str, rpa.Case]]:
    """The package's two ValueError tests: sliding_window 0 and -1 ("must be positive"),
    soft_cap 0.0 ("must not be 0.0"), on basic's call."""
    d = 64 if dialect == HD64 else 128
    return [(f"{name}={value}", harness_case(dialect, BASIC, (32, 8), d, F32, F32,
                                             **{name: value}))
            for name, value in (("sliding_window", 0), ("sliding_window", -1),
                                ("soft_cap", 0.0))]
