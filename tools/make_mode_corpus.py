#!/usr/bin/env python3
"""Writes corpus/modes/: one small case per difference between jax and strict validation.

Each case is the same valid base batch with one change. corpus/modes/expectations.tsv
records the verdict each mode must give (a rule id, or "valid"); `rpa replay corpus/modes`
(ctest corpus.replay) replays them and the mode-difference table of docs/validation.md lists
them (ctest corpus.readme_table).

Run from the repository root with the rpa package (scripts/python_venv.sh build/venv):
    build/venv/bin/python tools/make_mode_corpus.py
"""
import io
import os

import ml_dtypes
import numpy as np

import rpa

import make_v3_mode_cases  # tools/, beside this script

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "modes")

# (q_len, kv_len) per sequence; 4 sequence slots of 4 pages of 4 tokens.
SEQS = [(1, 5), (3, 7), (2, 2)]
N, PAGES_PER_SEQ, PAGE_SIZE, NUM_PAGES = 4, 4, 4, 16
# head_dim 128: the Pallas kernel traces only multiples of 128, so that jax mode shows what
# JAX and its kernel do with each change rather than head_dim_not_lane_multiple.
T, HQ, HKV, D = 16, 4, 2, 128


def base(seed=0, seqs=SEQS, hq=HQ, hkv=HKV, d=D):
    """The valid base case, with NaN in every slot and index the definition never reads."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, hq, d)).astype(np.float32)
    kv_pages = np.full((NUM_PAGES, PAGE_SIZE, 2 * hkv, d), np.nan, np.float32)
    kv_lens = np.zeros(N, np.int32)
    page_indices = np.full((N, PAGES_PER_SEQ), -1, np.int32)
    cu_q_lens = np.zeros(N + 1, np.int32)
    # Pages are handed out in a shuffled order, as a real allocator's free list would.
    free = list(rng.permutation(NUM_PAGES))
    for i, (q_len, kv_len) in enumerate(seqs):
        kv_lens[i] = kv_len
        cu_q_lens[i + 1] = cu_q_lens[i] + q_len
        for j in range(-(-kv_len // PAGE_SIZE)):
            page = free.pop()
            page_indices[i, j] = page
            used = min(PAGE_SIZE, kv_len - j * PAGE_SIZE)
            kv_pages[page, :used] = rng.standard_normal((used, 2 * hkv, d))
    cu_q_lens[len(seqs) + 1:] = cu_q_lens[len(seqs)]
    q[cu_q_lens[len(seqs)]:] = np.nan
    return dict(q=q, kv_pages=kv_pages, kv_lens=kv_lens, page_indices=page_indices,
                cu_q_lens=cu_q_lens, num_seqs=np.array([len(seqs)], np.int32))


def with_(case, **changes):
    case = dict(case)
    case.update(changes)
    return case


def cases():
    b = base()
    kv_lens_pad = b["kv_lens"].copy()
    kv_lens_pad[3] = 17  # padding slot: never read, but JAX takes the max over it
    pages_bad = b["page_indices"].copy()
    pages_bad[1, 1] = NUM_PAGES  # one past the last page, in a page sequence 1 reads
    kv_lens_huge = b["kv_lens"].copy()
    kv_lens_huge[1] = 2**31 - 1  # JAX's int32 cdiv(kv_len + 3, 4) wraps negative
    kv_lens_neg = b["kv_lens"].copy()
    kv_lens_neg[2] = -1
    pages_neg = b["page_indices"].copy()
    pages_neg[1, 1] = -1  # numpy-style: interpret mode reads the last page
    zero = dict(b)
    # Sequence 1 empty (kv_len 0) before sequence 2's rows; its first page is a real page
    # sequence 2 does not use, so strict's page rule passes and only the stale block shows.
    empty = base(seqs=[(1, 5), (0, 0), (2, 2)])
    empty["page_indices"][1, 0] = 15 if 15 not in empty["page_indices"][2] else 14
    # Two heads blocks (8 q heads over 8 kv heads), query blocks of 4 ending at row 4 =
    # cu_q_lens[num_seqs], and an empty sequence after the last one with rows.
    trailing = base(seqs=[(2, 5), (2, 7), (0, 3)], hq=8, hkv=8)
    # name, case, params, jax verdict, strict verdict, what it shows
    return [
        ("padding_kv_len_garbage", with_(b, kv_lens=kv_lens_pad), {},
         "pages_per_seq_too_small", "valid",
         "JAX rejects garbage in kv_lens padding past num_seqs"),
        ("kv_block_over_pages_per_seq", b,
         dict(num_kv_pages_per_block=PAGES_PER_SEQ + 1, num_queries_per_block=8),
         "kv_pages_per_block_range", "valid",
         "the kernel clamps page slots, so a KV block past pages_per_seq is harmless"),
        ("page_index_out_of_range", with_(b, page_indices=pages_bad), {},
         "page_index_out_of_range", "page_index_out_of_range",
         "JAX never range-checks page indices; its kernel's DMA raises (interpret mode), a "
         "TPU reads outside kv_pages"),
        ("page_index_negative", with_(b, page_indices=pages_neg), {},
         "valid", "page_index_out_of_range",
         "-1 passes JAX and its kernel: interpret mode reads the last page, a TPU reads "
         "outside kv_pages"),
        ("kv_len_int32_max", with_(b, kv_lens=kv_lens_huge), {},
         "kv_block_loop_wraps_int32", "pages_per_seq_too_small",
         "JAX's int32 cdiv overflows and passes a kv_len far past pages_per_seq; its "
         "kernel's KV loop then wraps int32 and never ends"),
        ("empty_sequence_then_rows", empty, {},
         "valid", "stale_kv_block",
         "the Pallas kernel computes sequence 2 from the block it prefetched for the "
         "empty sequence 1 (finding 8)"),
        ("trailing_empty_sequence_at_block_end", trailing,
         dict(num_kv_pages_per_block=1, num_queries_per_block=4),
         "valid", "rows_not_computed",
         "the Pallas kernel's second heads block starts at the empty sequence 2 and never "
         "computes rows 0..3 (finding 9)"),
        ("head_dim_64", base(d=64), {},
         "head_dim_not_lane_multiple", "valid",
         "JAX's validators accept head_dim 64; its kernel asserts a multiple of 128"),
        ("q_block_past_int32", b, dict(num_kv_pages_per_block=1, num_queries_per_block=2**31),
         "queries_per_block_too_large", "vmem_budget_exceeded",
         "the kernel multiplies the query block index by 2^31 in int32 (OverflowError)"),
        ("sliding_window_past_int32", b, dict(sliding_window=2**31),
         "sliding_window_too_large", "sliding_window_too_large",
         "both: JAX's validators accept it, its kernel raises OverflowError tracing it"),
        ("cu_q_lens_first_nonzero", with_(b, cu_q_lens=np.array([1, 1, 4, 6, 6], np.int32)), {},
         "valid", "cu_q_lens_first_nonzero",
         "rows before cu_q_lens[0] belong to no sequence"),
        ("negative_q_len", with_(b, cu_q_lens=np.array([0, 3, 1, 3, 3], np.int32)), {},
         "valid", "cu_q_lens_decreasing",
         "JAX accepts non-monotonic cu_q_lens (a negative q_len)"),
        ("negative_kv_len", with_(b, kv_lens=kv_lens_neg,
                                  cu_q_lens=np.array([0, 1, 4, 3, 3], np.int32)), {},
         "valid", "cu_q_lens_decreasing",
         "JAX accepts kv_len -1 when q_len <= kv_len (here q_len -1)"),
        ("mask_value_small", b, dict(mask_value=-1.0),
         "valid", "mask_value_too_large",
         "the TPU kernel gives the zero-padded slots past kv_len weight exp(-1 - m)"),
        ("mask_value_neg_inf", b, dict(mask_value=float("-inf")),
         "valid", "mask_value_nonfinite",
         "-inf gives NaN in the TPU kernel on fully masked KV blocks"),
        ("soft_cap_nan", b, dict(soft_cap=float("nan")),
         "valid", "soft_cap_nonfinite", "a NaN soft cap makes every output NaN"),
        ("sm_scale_inf", b, dict(sm_scale=float("inf")),
         "valid", "sm_scale_nonfinite", "an infinite sm_scale makes the softmax NaN"),
        ("k_scale_nan", b, dict(k_scale=float("nan")),
         "valid", "k_scale_nonfinite", "a NaN k_scale makes every logit NaN"),
        ("vmem_limit_1", b, dict(vmem_limit_bytes=1),
         "valid", "vmem_budget_exceeded", "JAX only asks vmem_limit_bytes > 0"),
        ("vmem_limit_over_capacity", b, dict(vmem_limit_bytes=(128 << 20) + 1),
         "valid", "vmem_limit_over_capacity", "more scoped VMEM than a v6e core has"),
        ("block_sizes_partial", b, dict(num_queries_per_block=8),
         "valid", "block_sizes_partial", "JAX silently discards a lone block size"),
        ("q_bf16_kv_f32", with_(b, q=b["q"].astype(np.float32)), {},
         "valid", "dtype_mismatch", "JAX does not check that q and KV dtypes agree"),
        ("q_f32_kv_bf16", b, {},
         "valid", "dtype_mismatch",
         "JAX does not check q/KV dtype agreement; its kernel promotes bfloat16 K/V to float32"),
        ("head_dim_zero", with_(b, q=np.zeros((T, HQ, 0), np.float32),
                                kv_pages=np.zeros((NUM_PAGES, PAGE_SIZE, 2 * HKV, 0), np.float32)),
         {}, "head_dim_not_lane_multiple", "head_dim_zero",
         "JAX's validators accept head_dim 0; its kernel does not"),
        ("kv_raw_uint8", with_(b, kv_pages=np.zeros((NUM_PAGES, PAGE_SIZE, 2 * HKV, D), np.uint8)),
         {}, "valid", "kv_dtype_unsupported",
         "uint8 KV without kv_dtype: raw fp8 bits with no format named"),
        ("num_seqs_int64", with_(b, num_seqs=np.array([3], np.int64)), {},
         "valid", "num_seqs_dtype", "the kernel prefetches num_seqs as int32"),
        ("max_num_seqs_zero", with_(zero, kv_lens=np.zeros(0, np.int32),
                                    page_indices=np.zeros((0, PAGES_PER_SEQ), np.int32),
                                    cu_q_lens=np.zeros(1, np.int32),
                                    num_seqs=np.array([0], np.int32)), {},
         "max_num_seqs_zero", "max_num_seqs_zero",
         "JAX crashes: jnp.max of an empty kv_lens; the kernel prefetches kv_lens[0]"),
        ("kv_len_zero_first_page_garbage",
         with_(b, kv_lens=np.array([5, 7, 0, 0], np.int32),
               cu_q_lens=np.array([0, 1, 4, 4, 4], np.int32),
               page_indices=np.where(np.arange(N)[:, None] == 2, -1, b["page_indices"]).astype(np.int32)),
         {}, "valid", "page_index_out_of_range",
         "the kernel prefetches page_indices[i, 0] even for kv_len 0"),
        ("num_seqs_negative", with_(b, num_seqs=np.array([-1], np.int32)), {},
         "num_seqs_negative", "num_seqs_negative",
         "JAX accepts (cu_q_lens[-1] reads from the end); its reference concatenates nothing"),
        ("kv_heads_zero", with_(b, kv_pages=np.zeros((NUM_PAGES, PAGE_SIZE, 0, D), np.float32)),
         {}, "kv_heads_zero", "kv_heads_zero", "JAX crash: num_q_heads % 0"),
        ("combined_heads_odd", with_(b, kv_pages=np.zeros((NUM_PAGES, PAGE_SIZE, 3, D), np.float32)),
         {}, "combined_heads_odd", "combined_heads_odd", "JAX: a bare AssertionError"),
        ("page_size_zero", with_(b, kv_pages=np.zeros((NUM_PAGES, 0, 2 * HKV, D), np.float32)),
         {}, "page_size_zero", "page_size_zero",
         "JAX accepts (XLA's x / 0 does not raise); the kernel divides by page_size"),
        ("soft_cap_negative_zero", b, dict(soft_cap=-0.0),
         "soft_cap_zero", "soft_cap_zero", "the seed bug: -0.0 == 0.0 is rejected too"),
        ("vmem_limit_zero", b, dict(vmem_limit_bytes=0),
         "vmem_limit_nonpositive", "vmem_limit_nonpositive", "the seed bug: vmem_limit_bytes=0"),
    ]


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = ["# name\tjax\tstrict\twhat it shows (a v3 case, v3_*: the jax column is its "
            "dialect's native mode)"]
    for name, case, params, jax_verdict, strict_verdict, note in cases():
        if name == "q_bf16_kv_f32":
            case = with_(case, q=bf16_bits(case["q"]).view(ml_dtypes.bfloat16))
        if name == "q_f32_kv_bf16":
            case = with_(case, kv_pages=bf16_bits(case["kv_pages"]).view(ml_dtypes.bfloat16))
        # kv_raw_uint8: uint8 KV with no kv_dtype, written as it is (JAX takes it so).
        save_case(os.path.join(OUT, name + ".npz"), case, params)
        rows.append("\t".join([name, jax_verdict, strict_verdict, note]))
    # The tpu-inference v3 cases (DESIGN.md section 16), same folder, same file.
    rows += make_v3_mode_cases.write(OUT)
    write_expectations(OUT, rows)


def save_case(path, arrays, params=None, **extra):
    """Writes a corpus case: rpa.Case(**arrays, **params, **extra) with the members
    rpa.Case.save writes (the C++ writer's; each .npy member byte for byte what numpy
    writes), deflated in np.savez_compressed's layout, as the committed files are. sm_scale
    is left out unless params sets it (a case file without it means JAX's default, 1.0;
    rpa.Case always holds one), so the committed files stay as they are."""
    params = dict(params or {})
    case = rpa.Case(**arrays, **params, **extra)
    with np.load(io.BytesIO(case.to_bytes()), allow_pickle=False) as z:
        members = {n: z[n] for n in z.files if n != "sm_scale" or "sm_scale" in params}
    with open(path, "wb") as f:
        np.savez_compressed(f, **members)


def bf16_bits(x):
    """bfloat16 bits of a float32 array (round to nearest even; NaN stays NaN)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded).astype(np.uint16)


def write_expectations(out, rows):
    """Writes out/expectations.tsv (a header, then rows of name, jax, strict, note)."""
    with open(os.path.join(out, "expectations.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"wrote {len(rows) - 1} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
