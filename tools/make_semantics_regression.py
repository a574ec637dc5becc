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

Run from the repository root with the virtualenv of scripts/python_venv.sh (JAX and rpa):
    build/venv/bin/python tools/make_semantics_regression.py
"""
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # interpret mode needs no accelerator
import rpa  # noqa: E402
from rpa.jax import pallas  # noqa: E402
from rpa.jax.reference import jax_reference  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mode_corpus  # noqa: E402
import semantics_table  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "regressions")
BLOCKS = dict(num_kv_pages_per_block=8, num_queries_per_block=16)


def main():
    pallas.check_version()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.npz")
        semantics_table.write_case(path, "bfloat16", "float8_e4m3fn", 128, seed=11)
        case = rpa.Case.load(path).replace(**BLOCKS)
    arrays, params = pallas.case_arrays_params(case)
    jax_ref = jax_reference(case)
    pallas_out = pallas.run_pallas(arrays, params, BLOCKS["num_kv_pages_per_block"],
                                   BLOCKS["num_queries_per_block"])
    set_params = {k: v for k, v in dict(params, **BLOCKS).items() if v is not None}
    for name, out in (("float8_jax_reference", jax_ref), ("float8_pallas_kernel", pallas_out)):
        make_mode_corpus.save_case(os.path.join(OUT, name + ".npz"), arrays, set_params,
                                   out=np.asarray(out))
    rows = int(arrays["cu_q_lens"][2])
    diff = np.abs(np.asarray(jax_ref, np.float32)[:rows] -
                  np.asarray(pallas_out, np.float32)[:rows])
    print(f"wrote {OUT}: max |JAX reference - Pallas| {diff.max():.4g} on outputs up to "
          f"{np.abs(np.asarray(pallas_out, np.float32)[:rows]).max():.4g}")


if __name__ == "__main__":
    main()
