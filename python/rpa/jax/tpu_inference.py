"""tpu-inference's own v3 kernels' validators and references on an rpa.Case of a v3 dialect
(DESIGN.md section 16, v3-contract.md sections 0-3).

Needs tpu-inference==0.32.0 installed without its dependencies and the JAX it pins
(jax==0.11.2, jaxlib==0.11.2, Python >= 3.12): ``scripts/python_v3_venv.sh build/v3venv``.
``import tpu_inference`` pulls vLLM, torch and the GCE metadata server, so it is never
imported: an empty package module stands in for it (its path the installed package's), with
the two modules kernel_hd64.py's block-size table imports (``tpu_inference.logger``,
``tpu_inference.utils``) stubbed as they behave off a TPU. Only
``kernels/ragged_paged_attention/v3/{kernel,kernel_hd64,util,tuned_block_sizes_hd64}.py``
are loaded, unchanged.

Every call passes JAX arrays (``jnp.asarray``), as vLLM calls the kernel, so the validators'
messages print scalars as JAX does (``q_len=Array(8, dtype=int32)``); with JAX's default
32-bit mode jnp.asarray turns int64 and float64 arrays into int32 and float32 first.

- ``modules()``: (kernel, kernel_hd64), loaded once; ImportError naming what is missing.
- ``validator_outcome(case)``: what ``dynamic_validate_inputs`` (which runs
  ``static_validate_inputs`` first) does with the case: a JaxOutcome (accepted, a
  validator's ValueError, or another exception).
- ``validate(case)``: None, or the validator's message.
- ``reference(case)``: ``ref_ragged_paged_attention(_hd64)``'s (out, updated kv_cache) as
  numpy arrays (ml_dtypes for bfloat16 / float8).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import sys
import traceback
import types
import warnings
from typing import Any, Optional

import numpy as np

from rpa.jax.validators import JaxOutcome

PINNED_TPU_INFERENCE = "0.32.0"
PINNED_JAX_V3 = "0.11.2"
V3_PACKAGE = "tpu_inference.kernels.ragged_paged_attention.v3"
_V3 = V3_PACKAGE
_SETUP = "make the virtualenv with scripts/python_v3_venv.sh build/v3venv"

_modules: Optional[tuple[types.ModuleType, types.ModuleType]] = None


def _version(dist: str) -> Optional[str]:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package_dir() -> str:
    """The installed tpu_inference package's folder, after checking the pinned versions."""
    have = {name: _version(name) for name in ("tpu-inference", "jax", "jaxlib")}
    want = {"tpu-inference": PINNED_TPU_INFERENCE, "jax": PINNED_JAX_V3, "jaxlib": PINNED_JAX_V3}
    wrong = [f"{n}=={want[n]} (installed: {have[n] or 'none'})" for n in want if have[n] != want[n]]
    if wrong:
        raise ImportError(f"rpa.jax.tpu_inference needs {', '.join(wrong)}: {_SETUP}")
    dist = importlib.metadata.distribution("tpu-inference")
    folder = os.fspath(dist.locate_file("tpu_inference"))
    if not os.path.isfile(os.path.join(folder, "kernels", "ragged_paged_attention", "v3",
                                       "kernel.py")):
        raise ImportError(f"tpu-inference {PINNED_TPU_INFERENCE} is installed but {folder} has "
                          f"no kernels/ragged_paged_attention/v3/kernel.py: {_SETUP}")
    return folder


def _init_logger(name: str) -> logging.Logger:
    log = logging.getLogger(name)
    log.warning_once = log.warning  # type: ignore[attr-defined]
    log.info_once = log.info  # type: ignore[attr-defined]
    return log


def _get_device_name(*_args: Any, **_kwargs: Any) -> str:
    # What the real one raises off a TPU (tuned_block_sizes_hd64 asks it only when a block
    # size is not given).
    raise RuntimeError("Expected TPU devices")


def _stub(name: str, **attrs: Any) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module


def modules() -> tuple[types.ModuleType, types.ModuleType]:
    """(kernel, kernel_hd64): tpu-inference's v3 kernel modules, loaded once without
    ``import tpu_inference``. Raises ImportError when tpu-inference 0.32.0 or its JAX is
    missing (or another version is installed)."""
    global _modules  # pylint: disable=global-statement
    if _modules is not None:
        return _modules
    folder = _package_dir()
    package = sys.modules.get("tpu_inference")
    if package is None:
        package = types.ModuleType("tpu_inference")
        package.__path__ = [folder]
        sys.modules["tpu_inference"] = package
    elif list(getattr(package, "__path__", [])) != [folder]:
        raise ImportError(f"a module tpu_inference from {getattr(package, '__path__', '?')} is "
                          f"already imported; rpa.jax.tpu_inference loads {folder} itself")
    _stub("tpu_inference.logger", init_logger=_init_logger)
    _stub("tpu_inference.utils", get_device_name=_get_device_name)
    _modules = (importlib.import_module(f"{_V3}.kernel"),
                importlib.import_module(f"{_V3}.kernel_hd64"))
    return _modules


def kernel_module(dialect: str) -> types.ModuleType:
    """kernel.py for "tpu_inference_v3", kernel_hd64.py for "tpu_inference_v3_hd64"."""
    kernel, hd64 = modules()
    if dialect == "tpu_inference_v3":
        return kernel
    if dialect == "tpu_inference_v3_hd64":
        return hd64
    raise ValueError(f"not a tpu-inference v3 dialect: {dialect!r}")


# The keywords each dialect's dynamic_validate_inputs and reference take, as the kernel
# names them (v3-contract.md sections 1-3).
VALIDATOR_KEYWORDS = {
    "tpu_inference_v3": ("use_causal_mask", "skip_kv_mask", "sm_scale", "sliding_window",
                         "soft_cap", "out_dtype", "mask_value", "q_scale", "k_scale", "v_scale",
                         "chunk_prefill_size", "d_block_sizes", "p_block_sizes",
                         "m_block_sizes", "vmem_limit_bytes"),
    "tpu_inference_v3_hd64": ("sm_scale", "sliding_window", "soft_cap", "mask_value", "q_scale",
                              "k_scale", "v_scale", "chunk_prefill_size",
                              "num_kv_pages_per_block", "num_queries_per_block",
                              "vmem_limit_bytes"),
}
REFERENCE_KEYWORDS = {
    "tpu_inference_v3": ("use_causal_mask", "skip_kv_mask", "sm_scale", "sliding_window",
                         "soft_cap", "out_dtype", "mask_value", "q_scale", "k_scale", "v_scale"),
    "tpu_inference_v3_hd64": ("sm_scale", "sliding_window", "soft_cap", "mask_value", "q_scale",
                              "k_scale", "v_scale"),
}


def _call(case: Any, keywords: tuple[str, ...]) -> tuple[list[Any], dict[str, Any]]:
    """The case's arrays as JAX arrays (as vLLM passes them) and the keywords in `keywords`
    that the case sets (the kernel's defaults for the rest)."""
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    args, kwargs = case.call_args()
    jargs = [None if a is None else jnp.asarray(a) for a in args]
    return jargs, {k: v for k, v in kwargs.items() if k in keywords}


def _is_validator_raise(exc: BaseException, module: types.ModuleType) -> bool:
    """True if exc is a ValueError that a `raise ValueError(` statement of the kernel module
    raised (not one from inside JAX or numpy)."""
    if type(exc) is not ValueError:
        return False
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return (os.path.realpath(frame.filename) == os.path.realpath(module.__file__ or "") and
            (frame.line or "").lstrip().startswith("raise ValueError"))


def validator_outcome(case: Any) -> JaxOutcome:
    """Runs the dialect's ``dynamic_validate_inputs`` (``static_validate_inputs`` then the
    per-sequence checks, in source order) on the case's arrays as JAX arrays, with every
    keyword the case sets. kind: "accepted", "value_error" (a validator's raise; message is
    its text) or "crash" (any other exception)."""
    module = kernel_module(case.dialect)
    args, kwargs = _call(case, VALIDATOR_KEYWORDS[case.dialect])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module.dynamic_validate_inputs(*args, **kwargs)
    except Exception as e:  # pylint: disable=broad-except
        if _is_validator_raise(e, module):
            return JaxOutcome("value_error", message=str(e))
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return JaxOutcome("crash", message=str(e).splitlines()[0] if str(e) else "(no message)",
                          error_type=type(e).__name__,
                          where=f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}")
    return JaxOutcome("accepted")


def validate(case: Any) -> Optional[str]:
    """None when tpu-inference's validators accept the case, else the message of the
    ValueError they raise. Any other exception (a crash inside the validators) is raised
    again as RuntimeError naming it."""
    outcome = validator_outcome(case)
    if outcome.kind == "crash":
        raise RuntimeError(f"tpu-inference's validators crashed: {outcome.describe()}")
    return outcome.message if outcome.kind == "value_error" else None


def reference(case: Any) -> tuple[np.ndarray, np.ndarray]:
    """tpu-inference's ``ref_ragged_paged_attention`` (kernel.py) or
    ``ref_ragged_paged_attention_hd64`` on the case, eagerly on the CPU as the package's tests
    call it: (out, updated kv_cache) as numpy arrays. out has the queries' shape [T, Hq, D],
    its rows past cu_q_lens[distribution[2]] zero (the reference returns only the rows it
    computes), in the reference's dtype (out_dtype; hd64: the queries'). The reference
    always writes the new keys and values into the cache (it takes no update_kv_cache).
    Raises what tpu-inference raises (its validators' ValueError first)."""
    module = kernel_module(case.dialect)
    args, kwargs = _call(case, REFERENCE_KEYWORDS[case.dialect])
    fn = (module.ref_ragged_paged_attention if case.dialect == "tpu_inference_v3"
          else module.ref_ragged_paged_attention_hd64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, cache = fn(*args, **kwargs)
    got, cache = np.asarray(got), np.asarray(cache)
    queries = np.asarray(case.queries)
    rows = int(np.asarray(case.cu_q_lens)[int(np.asarray(case.distribution)[2])])
    if got.shape != (rows,) + queries.shape[1:]:
        raise ValueError(f"tpu-inference's reference returned {got.dtype}{list(got.shape)}, "
                         f"expected {[rows] + list(queries.shape[1:])}")
    out = np.zeros(queries.shape, got.dtype)
    out[:rows] = got
    return out, cache


__all__ = ["PINNED_TPU_INFERENCE", "PINNED_JAX_V3", "modules", "kernel_module",
           "validator_outcome", "validate", "reference", "VALIDATOR_KEYWORDS",
           "REFERENCE_KEYWORDS"]
