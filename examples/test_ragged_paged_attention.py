"""Property-testing a ragged paged attention kernel with rpa: copy this file beside your
kernel's tests and make `kernel_under_test` call your kernel.

rpa.strategies.cases() draws ragged batches (decode rows, prefill chunks, padding, shared
pages, garbage past kv_len, soft caps, sliding windows, float8 KV...) that strict validation
accepts (jax_accepts=True: JAX's validators too), so each has a defined output; rpa.check() judges your kernel's output against the
dense reference and raises rpa.CheckFailed with what `rpa check` prints and the path of the
saved case (`rpa check PATH` replays it). Hypothesis shrinks a failing case to a small one.

Here the kernel under test is JAX's own Pallas kernel: on a TPU as shipped, on a CPU (this
machine, CI) in TPU interpret mode through rpa.jax.pallas (jax==0.10.2; the interpreter
traces head_dim multiples of 128 only, hence head_dim=128). The second test runs the same
check against a copy of JAX's reference with one realistic slip and requires it to fail with
a small shrunk case.

Run: pytest examples/test_ragged_paged_attention.py
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

import rpa
from rpa import strategies

ON_TPU = jax.default_backend() == "tpu"


def kernel_under_test(case: rpa.Case) -> np.ndarray:
    """JAX's Pallas ragged_paged_attention on the case: o [T, Hq, D] in q's dtype."""
    if ON_TPU:
        from jax.experimental.pallas.ops.tpu.ragged_paged_attention import (
            ragged_paged_attention)
        args, kwargs = case.call_args()
        return np.asarray(ragged_paged_attention(*args, **kwargs))
    from rpa.jax import pallas
    arrays, params = pallas.case_arrays_params(case)
    return pallas.run_pallas(arrays, params, *pallas.default_blocks(case))


@settings(max_examples=8, deadline=None)
@given(strategies.cases(jax_accepts=True, head_dim=128, max_seqs=3, max_kv_len=40,
                        max_page_size=16))
def test_the_pallas_kernel_agrees_with_the_reference(case):
    rpa.check(case, kernel_under_test(case)).raise_for_verdict()


# --- the same check against a planted bug ------------------------------------------------

def reference_with_a_slip(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                          sm_scale=1.0, sliding_window=None, soft_cap=None, mask_value=None,
                          k_scale=None, v_scale=None, **tuning):
    """JAX 0.10.2's ref_ragged_paged_attention (its validation left out), with one slip: a
    query row's position is taken as its index in the chunk, not kv_len - q_len + index, as
    if every prefill started at token 0. Decode rows and chunked prefill then mask keys they
    should see. Returns o [T, Hq, D] (rows past the sequences 0)."""
    del tuning
    mask_value = -0.7 * float(jnp.finfo(jnp.float32).max) if mask_value is None else mask_value
    num_kv_heads = kv_pages.shape[2] // 2
    head_dim = kv_pages.shape[3]
    per_kv = q.shape[1] // num_kv_heads
    kv_pages, page_indices = jnp.asarray(kv_pages), jnp.asarray(page_indices)
    out = np.zeros(q.shape, q.dtype)
    for i in range(int(num_seqs[0])):
        q_start, q_end, kv_len = int(cu_q_lens[i]), int(cu_q_lens[i + 1]), int(kv_lens[i])
        qi = jnp.asarray(q[q_start:q_end])
        pages = kv_pages[page_indices[i]]  # JAX clamps the entries past kv_len
        k = pages[:, :, 0::2, :].reshape(-1, num_kv_heads, head_dim)[:kv_len]
        v = pages[:, :, 1::2, :].reshape(-1, num_kv_heads, head_dim)[:kv_len]
        if k_scale is not None:
            k = (k.astype(jnp.float32) * k_scale).astype(qi.dtype)
        if v_scale is not None:
            v = (v.astype(jnp.float32) * v_scale).astype(qi.dtype)
        k = jnp.repeat(k, per_kv, axis=1)
        v = jnp.repeat(v, per_kv, axis=1)
        attn = jnp.einsum("qhd,khd->hqk", qi, k, preferred_element_type=jnp.float32)
        attn *= sm_scale
        q_span = jax.lax.broadcasted_iota(jnp.int32, attn.shape, 1)  # the slip
        kv_span = jax.lax.broadcasted_iota(jnp.int32, attn.shape, 2)
        mask = q_span < kv_span
        if sliding_window is not None:
            mask = jnp.logical_or(mask, q_span - sliding_window >= kv_span)
        if soft_cap is not None:
            attn = soft_cap * jnp.tanh(attn / soft_cap)
        attn += jnp.where(mask, mask_value, 0.0)
        attn = jax.nn.softmax(attn, axis=-1).astype(v.dtype)
        out[q_start:q_end] = np.asarray(jnp.einsum("hqk,khd->qhd", attn, v).astype(qi.dtype))
    return out


def test_a_planted_slip_is_caught_and_shrunk():
    # derandomize: the same search, and so the same shrunk case, on every run.
    @settings(max_examples=100, database=None, deadline=None, derandomize=True)
    @given(strategies.cases(max_seqs=4, max_kv_len=64, max_head_dim=32))
    def check_the_slipped_reference(case):
        args, kwargs = case.call_args()
        # JAX's reference rounds where its own code does: the reference semantics.
        out = reference_with_a_slip(*args, **kwargs)
        rpa.check(case, out, semantics="reference").raise_for_verdict()

    with pytest.raises(rpa.CheckFailed) as failed:
        check_the_slipped_reference()
    # Hypothesis raises the error of the shrunk case last.
    shrunk = failed.value.result.case
    n = int(shrunk.num_seqs[0])
    tokens = int(shrunk.cu_q_lens[n])
    kv_lens = [int(x) for x in shrunk.kv_lens[:n]]
    print(f"shrunk: {n} sequences, {tokens} query tokens, kv_lens {kv_lens}, "
          f"{shrunk.q.shape[1]} q heads, head_dim {shrunk.q.shape[2]}\n{failed.value}")
    # The slip shows on one row that should see two keys: a sequence or two (the shrinker
    # may keep an empty one before it), one or two query tokens, one q head, head_dim 1.
    assert n <= 2 and tokens <= 2 and max(kv_lens) <= 4, shrunk
    assert shrunk.q.shape[1] == 1 and shrunk.q.shape[2] == 1, shrunk
    assert failed.value.path.endswith(".npz") and "replay: rpa check " in str(failed.value)
