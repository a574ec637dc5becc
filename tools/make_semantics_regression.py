#!/usr/bin/env python3
"""Writes the two corpus/regressions/ cases of finding 11: JAX's reference rounds the
softmax weights p, and p.V, to V's dtype, while its Pallas kernel does not.

One case (tools/semantics_table.py's layout: bfloat16 q over float8_e4m3fn KV, two
sequences of kv_len 128, 4 q heads, 2 kv heads, head_dim 128, both block sizes set), saved
twice: with JAX's ref_ragged_paged_attention output as `out`
(float8_jax_reference.npz) and with the Pallas kernel's output in TPU interpret mode as
`out` (float8_pallas_kernel.npz). ctest's corpus label checks without JAX that
`rpa check` (the kernel semantics) accepts the Pallas kernel's and rejects JAX's
reference's, and that `rpa check --semantics reference` accepts JAX's reference's.

Run from the repository root with the JAX virtualenv (scripts/jax_venv.sh):
    build/jaxvenv/bin/python tools/make_semantics_regression.py
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cross_check_jax  # noqa: E402
import pallas_interpret  # noqa: E402
import rpa_case  # noqa: E402
import semantics_table  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "regressions")
BLOCKS = dict(num_kv_pages_per_block=8, num_queries_per_block=16)


def main():
    pallas_interpret.check_version()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.npz")
        semantics_table.write_case(path, "bfloat16", "float8_e4m3fn", 128, seed=11)
        case = rpa_case.load_case(path)
    arrays, params = pallas_interpret.case_arrays_params(case)
    params = dict(params, **BLOCKS)
    ref_params = {k: params.get(k) for k in cross_check_jax._REF_PARAM_NAMES}
    jax_ref = cross_check_jax.jax_reference(cross_check_jax._kernel_module(), arrays,
                                            ref_params)
    pallas = pallas_interpret.run_pallas(arrays, params, BLOCKS["num_kv_pages_per_block"],
                                         BLOCKS["num_queries_per_block"])
    set_params = {k: v for k, v in params.items() if v is not None}
    for name, out in (("float8_jax_reference", jax_ref), ("float8_pallas_kernel", pallas)):
        rpa_case.save_case(os.path.join(OUT, name + ".npz"), compressed=True, **arrays,
                           out=np.asarray(out), **set_params)
    rows = int(arrays["cu_q_lens"][2])
    diff = np.abs(np.asarray(jax_ref, np.float32)[:rows] - np.asarray(pallas, np.float32)[:rows])
    print(f"wrote {OUT}: max |JAX reference - Pallas| {diff.max():.4g} on outputs up to "
          f"{np.abs(np.asarray(pallas, np.float32)[:rows]).max():.4g}")


if __name__ == "__main__":
    main()
