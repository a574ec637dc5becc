"""rpa.jax: rpa against JAX itself (DESIGN.md section 14). Needs jax==0.10.2 (its jaxlib,
numpy and ml_dtypes come with it); ``import rpa`` never imports it.

- rpa.jax.pallas: JAX's own Pallas ragged paged attention kernel on the CPU, in TPU
  interpret mode with two run-time patches (run_pallas, patched_kernel, check_version,
  PatchError, PallasError); ``python -m rpa.jax.pallas CASE.npz -o OUT.npz``.
- rpa.jax.validators: JAX's validators on an rpa.Case, and their outcome against
  rpa.validate(case, mode="jax").
- rpa.jax.reference: JAX's ref_ragged_paged_attention on an rpa.Case (eager or one jax.jit).
- rpa.jax.cases: the cross-check's random and strict-valid case generators.
- rpa.jax.cross_check: the cross-check the ctest label ``jax`` and ``rpa campaign --pallas``
  run: ``python -m rpa.jax.cross_check --pallas 480 --min-generated 100 --seed 1 corpus/modes``.
- rpa.jax.tpu_inference, rpa.jax.v3_cases, rpa.jax.v3_cross_check: tpu-inference 0.32.0's v3
  kernels' validators and references on v3 cases, and the cross-check of the ctest label
  ``jax_v3`` (DESIGN.md section 16). They need jax==0.11.2 (Python >= 3.12) and
  tpu-inference==0.32.0 instead: ``scripts/python_v3_venv.sh build/v3venv``.

Set up the virtualenv (jax==0.10.2 and this package) with
``scripts/python_venv.sh build/venv``. The modules import JAX when first used, not when
imported; the command lines set JAX_PLATFORMS=cpu (unless it is set) before they do.
"""
from __future__ import annotations

import importlib.util

PINNED_JAX = "0.10.2"

if importlib.util.find_spec("jax") is None:
    raise ImportError(f"rpa.jax needs jax=={PINNED_JAX} (pip install jax=={PINNED_JAX}, or "
                      "make a virtualenv with scripts/python_venv.sh build/venv)")

__all__ = ["PINNED_JAX"]
