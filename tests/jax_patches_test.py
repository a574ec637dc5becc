#!/usr/bin/env python3
"""ctest jax.patches: rpa.jax.pallas still fits the installed JAX.

Run with the virtualenv's python (scripts/python_venv.sh build/venv). Checks that the installed JAX
is the pinned one, that both run-time patches apply exactly once (PatchError otherwise),
that a patch whose source is missing raises PatchError, that a failing run raises
PallasError and leaves the runs after it unharmed, and that JAX's Pallas kernel in
TPU interpret mode, patched, computes a small batch (a decode and a prefill sequence,
GQA, several KV blocks and query blocks, a query block spanning both sequences, pages
shuffled, NaN in unused slots) as JAX's own reference does, in float32 within 2^-17 of
max |V| (DESIGN.md section 14 measures ~1e-6 relative) and in bfloat16 within 2^-5 of
it, the rows past cu_q_lens[num_seqs] aside. Exit 0 on success, 1 with the reason.
"""

import logging
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

from rpa.jax import pallas  # noqa: E402


def tiny_case(dtype):
    """Two sequences (q_len, kv_len) = (1, 5) and (6, 11), page size 4, 3 pages per
    sequence, 4 query heads on 2 kv heads, head_dim 128, q and kv_pages in dtype."""
    rng = np.random.default_rng(0)
    s, pps, hq, hkv, d = 4, 3, 4, 2, 128
    seqs = [(1, 5), (6, 11)]
    t = sum(q for q, _ in seqs) + 1  # one padding row
    num_pages = 7
    kv_pages = np.full((num_pages, s, 2 * hkv, d), np.nan, np.float32)
    page_indices = np.zeros((2, pps), np.int32)
    free = [6, 2, 4, 0, 5, 1, 3]
    for i, (_, kv_len) in enumerate(seqs):
        for j in range(pps):
            page = free.pop()
            page_indices[i, j] = page
            used = max(0, min(s, kv_len - j * s))
            kv_pages[page, :used] = rng.standard_normal((used, 2 * hkv, d))
    q = rng.standard_normal((t, hq, d)).astype(np.float32)
    q[-1] = np.nan
    arrays = dict(q=q.astype(dtype), kv_pages=kv_pages.astype(dtype),
                  kv_lens=np.array([5, 11], np.int32),
                  page_indices=page_indices, cu_q_lens=np.array([0, 1, 7], np.int32),
                  num_seqs=np.array([2], np.int32))
    params = dict(sm_scale=float(d) ** -0.5, sliding_window=None, soft_cap=None,
                  mask_value=None, k_scale=None, v_scale=None)
    return arrays, params, seqs


def main():
    pallas.check_version()
    kernel = pallas.patched_kernel()
    if pallas.patched_kernel() is not kernel:
        print("FAIL: patched_kernel() is not cached")
        return 1
    replace_once = pallas._replace_once  # pylint: disable=protected-access
    try:
        replace_once("x = 1\n", "y = 2", "z = 3", "a missing source")
    except pallas.PatchError as e:
        print(f"ok: a missing patch source raises PatchError ({e})")
    else:
        print("FAIL: a missing patch source did not raise PatchError")
        return 1

    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    import ml_dtypes  # pylint: disable=import-outside-toplevel
    # A page index out of range: the DMA's out-of-bounds read raises PallasError('run'),
    # and leaves nothing behind that fails the runs after it (checked below).
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)  # its traceback
    arrays, params, _ = tiny_case(np.float32)
    arrays["page_indices"] = arrays["page_indices"].copy()
    arrays["page_indices"][1, 1] = arrays["kv_pages"].shape[0]
    try:
        pallas.run_pallas(arrays, params, 2, 4)
    except pallas.PallasError as e:
        if e.stage != "run" or "Out-of-bounds" not in str(e):
            print(f"FAIL: an out-of-range page index raised {e}")
            return 1
        print("ok: an out-of-range page index raises PallasError at run")
    else:
        print("FAIL: an out-of-range page index did not raise")
        return 1
    # float32 exercises the reshape and masked-store patches; bfloat16 KV (two values per
    # 32-bit word) the bitcast one too. JAX's reference rounds the softmax weights to
    # bfloat16 where the kernel keeps them in float32: a few bfloat16 ulps of max |V|.
    for dtype, eps in ((np.float32, 2.0**-17), (ml_dtypes.bfloat16, 2.0**-5)):
        arrays, params, seqs = tiny_case(dtype)
        # 2 pages per KV block (two KV steps for the second sequence), 4 rows per query
        # block (the first block holds both sequences' rows).
        out = pallas.run_pallas(arrays, params, 2, 4)
        ref = np.asarray(kernel.ref_ragged_paged_attention(
            *[jnp.asarray(arrays[n]) for n in ("q", "kv_pages", "kv_lens", "page_indices",
                                               "cu_q_lens", "num_seqs")],
            sm_scale=params["sm_scale"]))
        rows = sum(q for q, _ in seqs)
        name = np.dtype(dtype).name
        if out.shape != arrays["q"].shape or out.dtype != dtype or ref.shape[0] != rows:
            print(f"FAIL: {name}: shapes: Pallas {out.dtype}{list(out.shape)}, reference "
                  f"{ref.dtype}{list(ref.shape)}")
            return 1
        v = arrays["kv_pages"][:, :, 1::2].astype(np.float32)
        bound = eps * float(np.nanmax(np.abs(v)))
        got = out[:rows].astype(np.float32)
        err = float(np.max(np.abs(got - ref.astype(np.float32))))
        if not np.all(np.isfinite(got)) or not err <= bound:
            print(f"FAIL: {name}: Pallas vs JAX's reference: max |diff| {err:.3g} > "
                  f"{bound:.3g}")
            return 1
        print(f"ok: {name}: Pallas (interpret, patched) vs JAX's reference on {rows} rows: "
              f"max |diff| {err:.3g} (bound {bound:.3g})")
    print(f"ok: JAX {pallas.PINNED_JAX}, both patches apply and compute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
