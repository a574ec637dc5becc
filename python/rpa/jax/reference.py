"""JAX's own reference, ref_ragged_paged_attention, on an rpa.Case (on the CPU)."""
from __future__ import annotations

import numpy as np

from rpa._case import ARRAYS
from rpa.jax.validators import kernel_module

# The parameters ref_ragged_paged_attention takes (not the block sizes or the VMEM limit).
PARAM_NAMES = ("sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale", "v_scale")


def jax_reference(case, jit=False, kernel=None):
    """JAX's ref_ragged_paged_attention on the case, on CPU, padded with zero rows to q's
    shape (JAX returns only the cu_q_lens[num_seqs] defined rows).

    By default the call is eager, as JAX's tests make it: every argument a jnp array, each
    jnp operation compiled on its own for its shapes (most of the time goes there). With
    jit, the call is one jax.jit over q and kv_pages with the index arrays as constants
    (its Python loop over sequences needs them concrete): one compilation per case, about
    5x faster, but XLA then fuses operations and an element may round differently from
    the eager call (one float32 ulp, or one step of a bfloat16 / float8 rounding).

    Args:
      case: an rpa.Case (its sm_scale, sliding_window, soft_cap, mask_value, k_scale and
        v_scale are passed; None: unset).
      jit: one jax.jit per case instead of the eager call.
      kernel: JAX's kernel module (default: imported here).
    Raises:
      Whatever JAX raises; ValueError when JAX's output has another shape or dtype.
    """
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    kernel = kernel or kernel_module()
    kwargs = {name: getattr(case, name) for name in PARAM_NAMES}
    if kwargs["sm_scale"] is None:
        kwargs["sm_scale"] = 1.0
    if jit:
        index = [np.asarray(getattr(case, name)) for name in ARRAYS[2:]]
        call = jax.jit(lambda q, kv: kernel.ref_ragged_paged_attention(q, kv, *index,
                                                                       **kwargs))
        got = call(jnp.asarray(case.q), jnp.asarray(case.kv_pages))
    else:
        args = [jnp.asarray(getattr(case, name)) for name in ARRAYS]
        got = kernel.ref_ragged_paged_attention(*args, **kwargs)
    got = np.asarray(got)
    q = case.q
    rows = int(case.cu_q_lens[int(case.num_seqs[0])])
    if got.shape != (rows,) + q.shape[1:] or got.dtype != q.dtype:
        raise ValueError(f"JAX returned {got.dtype}{list(got.shape)}, expected "
                         f"{q.dtype}{[rows] + list(q.shape[1:])}")
    out = np.zeros(q.shape, q.dtype)
    out[:rows] = got
    return out
