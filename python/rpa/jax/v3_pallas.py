"""Runs tpu-inference's v3 Pallas kernels (kernel.py, kernel_hd64.py) on the CPU in TPU
interpret mode (issue 23; v3-contract.md sections 4 and 6).

Needs the virtualenv of ``scripts/python_v3_venv.sh`` (jax==0.11.2, tpu-inference==0.32.0
without its dependencies); the modules are loaded as ``rpa.jax.tpu_inference`` loads them,
never through ``import tpu_inference``.

As shipped, both kernels fail in interpret mode: the interpreter applies only indexing
transforms to refs (``'ReshapeTransform' / 'BitcastTransform' object has no attribute
'indices'``). Seven source patches per file, applied at run time to a copy of the module's
source (the installed files are never changed), turn each reshaped or bitcast *ref* into an
indexed ref, or into a load followed by a reshape or ``pltpu.bitcast`` of the *value*: the
interpreter's ``pltpu.bitcast`` packs along the second-minor dimension exactly as the ref
bitcast does, so the kernel sees the same bits (``PATCHES`` lists each with why). Each must
match exactly once (whitespace aside), or PatchError says which one: a new tpu-inference
or JAX fails loudly, never silently unpatched.

On a CPU, ``get_tpu_version()`` is -1 and the kernels cannot pick default block sizes or a
VMEM limit; ``tpu_version`` (5, 6 or 7) patches the module's ``get_tpu_version`` so that
generation's heuristics and code paths run (one module instance per generation: the jit
cache keys on shapes, not on the version). ``vmem_limit_bytes`` defaults to 100 MiB, as the
package's tests pass it (interpret mode does not enforce it).

Interpret mode waits forever on a DMA semaphore that nothing will signal; a watchdog fails
the interpreter's shared memory, and the run raises PallasError with stage "timeout", naming
the case: after ``timeout_s``, or once a wait has sat ``STALL_S`` (3 s) with no copy pending on
its core (interpret mode runs one core and runs each DMA when a wait needs it, so nothing can
signal such a wait). The interpreter's state is reset after any failure.

Interpret mode reads a *negative* page index by numpy's wrap-around (page P - 7 for -7)
where a TPU's DMA would fault; ``run_v3_pallas`` refuses a case whose used page indices are
out of range (stage "input") instead of returning what no TPU computes.

- ``run_v3_pallas(case, tpu_version=None, timeout_s=120)``: (out, updated kv_cache) as numpy
  arrays: out [T, Hq, D] as the kernel returns it (rows past cu_q_lens[distribution[2]] hold
  the input queries: the output aliases q), the cache in its packed layout.
- As a command: ``python -m rpa.jax.v3_pallas CASE.npz -o OUT.npz [--tpu-version N]`` writes
  the case with the kernel's ``out`` and ``kv_cache_out``; exit 1 with one line when the
  kernel raises, hangs or the case is refused.
"""
from __future__ import annotations

import argparse
import inspect
import logging
import os
import re
import sys
import types
import warnings
from typing import Any, Optional

import numpy as np

from rpa.jax import tpu_inference
from rpa.jax.pallas import PallasError, PatchError, Watchdog, remember

# The package's tests pass vmem_limit_bytes=100 MiB; interpret mode does not enforce it.
DEFAULT_VMEM_LIMIT_BYTES = 100 * 1024 * 1024
TPU_VERSIONS = (5, 6, 7)

# (what, original source, replacement), matched with any run of whitespace standing for any
# other. "both": kernel.py and kernel_hd64.py; "v3" / "hd64": one file.
PATCHES = (
    ("both", "fetch DMA: a copy from the cache reshaped to [pages * page_size, ...] (the "
     "interpreter cannot apply the reshape); index the page, then the slots: a copy never "
     "crosses a page (sz <= page_size). A copy of nothing indexes page 0: the kernel starts "
     "one per page slot of the KV block, also past the sequence's pages, where page_indices "
     "may hold anything (rpa.gen's padding: 2^31 - 1), and interpret mode indexes the page "
     "even for an empty slice (IndexError) where a TPU's DMA copies nothing",
     "cache_hbm_ref.at[pl.ds( page_indices_ref[page_idx] * page_size, sz)]",
     "kv_cache_hbm_ref.at[jnp.where(sz > 0, page_indices_ref[page_idx], 0), pl.ds(0, sz)]"),
    ("both", "cache-update DMA: the same for the write of the new tokens",
     "cache_hbm_ref.at[pl.ds( page_indices_ref[page_indices_offset + i] * page_size + "
     "ignore, sz, )]",
     "updated_kv_cache_hbm_ref.at[page_indices_ref[page_indices_offset + i], "
     "pl.ds(ignore, sz)]"),
    ("both", "new-KV fetch DMA: with nothing to copy from keys/values (update_kv_cache=False, "
     "or a KV block the cache fills) it still starts at q_end, which is T for the last "
     "sequence, and interpret mode calls a zero-length read at an array's end out of bounds "
     "(the TPU's DMA, bounds checks disabled, copies nothing); start such a copy at 0",
     "kv_hbm_ref.at[pl.ds(new_kv_len_start, bkv_sz_frm_new)]",
     "kv_hbm_ref.at[pl.ds(jnp.where(bkv_sz_frm_new > 0, new_kv_len_start, 0), "
     "bkv_sz_frm_new)]"),
    ("both", "load_bq: a bitcast, indexed, reshaped ref of the q buffer; load, then bitcast "
     "the value",
     "q_ref = (bq_x2_ref.bitcast( jnp.uint32).at[bq_sem_idx, kv_head_idx].reshape(",
     "q_ref = (pltpu.bitcast(bq_x2_ref[bq_sem_idx, kv_head_idx], jnp.uint32).reshape("),
    ("both", "load_bkv / strided_load_bkv: the same for the KV buffer",
     "kv_ref = (bkv_x2_ref.bitcast(jnp.uint32).at[bkv_sem_idx].reshape(",
     "kv_ref = (pltpu.bitcast(bkv_x2_ref[bkv_sem_idx], jnp.uint32).reshape("),
    ("v3", "strided_load: its ref is now a value, where a static strided pl.ds means "
     "slice(start, start + n, step) (too few rows); slice the rows the strided load reads, "
     "from the value followed by sz rows of all-ones bits (NaN as a float), so that a read "
     "past the buffer's end, which the TPU makes unchecked into whatever VMEM follows, neither "
     "raises nor (as dynamic_slice's clamping would) shifts the rows it does read",
     "[ref[pl.ds(start + i, sz // step, step)] for i in range(folds)]",
     "[lax.dynamic_slice_in_dim(jnp.concatenate([ref, lax.bitcast_convert_type(jnp.full("
     "(sz, ref.shape[1]), -1, jnp.int32), ref.dtype)]), start + i, (sz // step - 1) * step + "
     "1, 0)[::step] for i in range(folds)]"),
    ("v3", "output store: a strided store through a bitcast, reshaped view of the output "
     "buffer; store the value, bitcast to the buffer's layout (the same bits)",
     "out_ref = (bo_x2_ref.at[bo_sem_idx].bitcast(jnp.int32).reshape( actual_num_kv_heads * "
     "bq_sz * num_q_heads_per_kv_head_per_packing, head_dim, )) out = pltpu.bitcast(out, "
     "out_ref.dtype).reshape(out_ref.shape) strided_store(out_ref, 0, out_ref.shape[0], 1, "
     "out)",
     "bo_x2_ref[bo_sem_idx] = pltpu.bitcast(pltpu.bitcast(out, jnp.int32).reshape("
     "*bo_x2_ref.shape[1:-2], 1, bo_x2_ref.shape[-1]), bo_x2_ref.dtype)"),
    ("hd64", "output store: a bitcast, reshaped view of the output buffer; the same",
     "bo_x2_ref.at[bo_sem_idx].bitcast(jnp.int32).reshape( actual_num_kv_heads, bq_sz * "
     "num_q_heads_per_kv_head_per_packing, actual_head_dim_x2, )[...] = "
     "pltpu.bitcast(out, jnp.int32)",
     "bo_x2_ref[bo_sem_idx] = pltpu.bitcast(pltpu.bitcast(out, jnp.int32).reshape("
     "*bo_x2_ref.shape[1:-2], 1, bo_x2_ref.shape[-1]), bo_x2_ref.dtype)"),
    ("hd64", "prologue: zero-fills the KV buffers through a bitcast, reshaped view; zero "
     "them in their own dtype (the same bits)",
     "bkv_x2_int32_ref = bkv_x2_ref.bitcast(jnp.int32).reshape( (2, -1, 8, 128)) zeros = "
     "jnp.zeros(bkv_x2_int32_ref.shape[1:], jnp.int32)",
     "bkv_x2_int32_ref = bkv_x2_ref\n        zeros = jnp.zeros(bkv_x2_ref.shape[1:], "
     "bkv_x2_ref.dtype)"),
)

_FILES = {"tpu_inference_v3": ("v3", "kernel"), "tpu_inference_v3_hd64": ("hd64", "kernel_hd64")}
_patched: dict[tuple[str, Optional[int]], types.ModuleType] = {}


def _pattern(old: str) -> "re.Pattern[str]":
    return re.compile(r"\s*".join(re.escape(token) for token in old.split()))


def patch_source(source: str, dialect: str, filename: Optional[str] = None) -> str:
    """The kernel file's source with its seven patches; PatchError, naming the file, the patch
    and the source it looked for, unless each matches once."""
    which, name = _FILES[dialect]
    name = filename or f"{name}.py"
    for files, what, old, new in PATCHES:
        if files not in ("both", which):
            continue
        found = list(_pattern(old).finditer(source))
        if len(found) != 1:
            raise PatchError(f"{name}: {what.split(':')[0]}: expected the source `{old}` "
                             f"exactly once, found it {len(found)} times (tpu-inference "
                             f"{tpu_inference.PINNED_TPU_INFERENCE} and JAX "
                             f"{tpu_inference.PINNED_JAX_V3} are what the patches were "
                             f"written for)")
        m = found[0]
        source = source[:m.start()] + new + source[m.end():]
    return source


def module_from_source(source: str, filename: str, dialect: str,
                       tpu_version: Optional[int] = None,
                       name: Optional[str] = None) -> types.ModuleType:
    """A v3 kernel module compiled from source (already patched, or as it is for a TPU) in
    tpu-inference's v3 package, so that its imports resolve as the shipped file's do; with
    tpu_version, its get_tpu_version returns it."""
    if tpu_version is not None and tpu_version not in TPU_VERSIONS:
        raise ValueError(f"tpu_version={tpu_version}: the kernels know {TPU_VERSIONS} (and 8)")
    tpu_inference.modules()  # the package and the modules the kernel files import
    module = types.ModuleType(name or f"rpa_patched_{_FILES[dialect][1]}_v{tpu_version}")
    module.__file__ = filename
    module.__package__ = tpu_inference.V3_PACKAGE
    exec(compile(source, filename, "exec"),  # pylint: disable=exec-used
         module.__dict__)
    if tpu_version is not None:
        module.__dict__["get_tpu_version"] = lambda: tpu_version
        if dialect == "tpu_inference_v3_hd64":
            module.__dict__["get_tuned_block_sizes"] = _tuned_lookup(tpu_version)
    return module


def patched_module(dialect: str, tpu_version: Optional[int] = None) -> types.ModuleType:
    """The dialect's kernel module, patched, compiled from its source into a module of our
    own (tpu-inference's is left as it is); with tpu_version, its get_tpu_version returns
    it."""
    key = (dialect, tpu_version)
    if key in _patched:
        return _patched[key]
    if tpu_version is not None and tpu_version not in TPU_VERSIONS:
        raise ValueError(f"tpu_version={tpu_version}: the kernels know {TPU_VERSIONS} (and 8)")
    original = tpu_inference.kernel_module(dialect)
    source = patch_source(inspect.getsource(original), dialect)
    module = module_from_source(source, original.__file__ or "<kernel>", dialect, tpu_version)
    _patched[key] = module
    return module


def entry_point(module: types.ModuleType, dialect: str) -> Any:
    """The dialect's kernel function in a kernel module."""
    return (module.ragged_paged_attention if dialect == "tpu_inference_v3" else
            module.ragged_paged_attention_hd64)


# The device names tuned_block_sizes_hd64's table is keyed by, per generation.
DEVICE_NAMES = {5: "TPU v5e", 6: "TPU v6e", 7: "TPU v7"}


def _tuned_lookup(tpu_version: int) -> Any:
    """kernel_hd64's get_tuned_block_sizes as it runs on that generation: its table keyed
    by the generation's device name, its fallback by the generation (the lookup asks
    get_device_name and get_tpu_version, which off a TPU raise and return -1)."""
    tuned = sys.modules[f"{tpu_inference.V3_PACKAGE}.tuned_block_sizes_hd64"]
    lookup = tuned.get_tuned_block_sizes

    def on_generation(*args: Any, **kwargs: Any) -> Any:
        saved = tuned.get_device_name, tuned.get_tpu_version
        tuned.get_device_name = lambda *_a, **_k: DEVICE_NAMES[tpu_version]
        tuned.get_tpu_version = lambda: tpu_version
        # A table miss is logged as a warning (the fallback is what the kernel then runs).
        log = tuned.logger
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            return lookup(*args, **kwargs)
        finally:
            tuned.get_device_name, tuned.get_tpu_version = saved
            log.setLevel(level)

    return on_generation


def with_block_sizes(case: Any, tpu_version: Optional[int]) -> Any:
    """The case with the hd64 block sizes the kernel runs it with named (num_kv_pages_per_block,
    num_queries_per_block: the case's, else that generation's tuned table or its fallback),
    for the literal v3 schedule, which has no tuned tables; a kernel.py case as it is (rpa
    computes get_default_block_sizes itself)."""
    if case.dialect != "tpu_inference_v3_hd64" or (
            case.num_kv_pages_per_block is not None and case.num_queries_per_block is not None):
        return case
    if tpu_version is None:
        return case
    patched_module(case.dialect, tpu_version)
    q, k = np.asarray(case.queries), np.asarray(case.keys)
    cache = np.asarray(case.kv_cache)
    pps = np.asarray(case.page_indices).size // np.asarray(case.kv_lens).size
    bkv_p, bq = _tuned_lookup(tpu_version)(q.dtype, cache.dtype, q.shape[1], k.shape[1],
                                           q.shape[2], cache.shape[1], q.shape[0], pps,
                                           case.sliding_window)
    return case.replace(num_kv_pages_per_block=int(bkv_p), num_queries_per_block=int(bq))


def used_page_indices_in_range(case: Any) -> Optional[str]:
    """None, or why a page slot a sequence uses holds an index outside [0, total pages)."""
    kv_lens = np.asarray(case.kv_lens).reshape(-1).astype(np.int64)
    pages = np.asarray(case.page_indices).reshape(-1).astype(np.int64)
    dist = np.asarray(case.distribution).reshape(-1).astype(np.int64)
    total, page_size = case.kv_cache.shape[0], case.kv_cache.shape[1]
    num_seqs = int(dist[2]) if dist.size == 3 else 0
    pps = pages.size // max(kv_lens.size, 1)
    for i in range(min(num_seqs, kv_lens.size)):
        for j in range(-(-int(max(kv_lens[i], 0)) // max(page_size, 1))):
            at = i * pps + j
            if at >= pages.size or not 0 <= pages[at] < total:
                value = int(pages[at]) if at < pages.size else "none"
                return (f"sequence {i} uses page slot {at} = {value}, outside [0, {total}) "
                        f"(interpret mode would wrap a negative index where a TPU's DMA "
                        f"faults)")
    return None


def _kwargs(case: Any, module: types.ModuleType) -> dict[str, Any]:
    _, kwargs = case.call_args()
    keywords = inspect.signature(entry_point(module, case.dialect)).parameters
    kwargs = {k: v for k, v in kwargs.items() if k in keywords}
    if kwargs.get("vmem_limit_bytes") is None:
        kwargs["vmem_limit_bytes"] = DEFAULT_VMEM_LIMIT_BYTES
    return kwargs


def run_v3_pallas(case: Any, tpu_version: Optional[int] = None, timeout_s: float = 120.0,
                  name: str = "case", module: Optional[types.ModuleType] = None,
                  cache: Optional[dict[Any, Any]] = None) -> tuple[np.ndarray, np.ndarray]:
    """Runs the case's v3 kernel in TPU interpret mode: (out, updated kv_cache).

    Block sizes: the case's, else (with tpu_version) that generation's heuristics. module:
    the kernel module to run (default: tpu-inference's, patched_module()); a modified copy of
    the file loads with module_from_source(patch_source(...)). cache: a dict that keeps the
    last compiled programs (rpa.jax.pallas.CACHE_SIZE) by their shapes, dtypes and keywords,
    so that calls of one shape compile once. Raises PallasError: stage "input" (a used page index out of range), "trace", "run"
    or "timeout"; PatchError when a patch does not apply."""
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from jax.experimental.pallas import tpu as pltpu  # pylint: disable=import-outside-toplevel
    from jax._src import dispatch  # pylint: disable=import-outside-toplevel
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call  # pylint: disable=import-outside-toplevel

    bad = used_page_indices_in_range(case)
    if bad:
        raise PallasError("input", ValueError(bad))
    if module is None:
        module = patched_module(case.dialect, tpu_version)
    fn = entry_point(module, case.dialect)
    args, _ = case.call_args()
    kwargs = _kwargs(case, module)
    # Copies: the jit donates q and the cache.
    jargs = [None if a is None else jnp.array(a, copy=True) for a in args]
    key = (id(module), tuple(None if a is None else (a.shape, str(a.dtype)) for a in jargs),
           tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    compiled = cache.get(key) if cache is not None else None
    if compiled is None:
        try:
            with warnings.catch_warnings(), pltpu.force_tpu_interpret_mode():
                warnings.simplefilter("ignore")
                lowered = jax.jit(lambda *a: fn(*a, **kwargs)).trace(*jargs).lower()
                compiled = lowered.compile()
        except Exception as e:  # pylint: disable=broad-except
            raise PallasError("trace", e) from e
        remember(cache, key, compiled)
    watchdog = Watchdog(timeout_s, name)
    try:
        with warnings.catch_warnings(), watchdog:
            warnings.simplefilter("ignore")
            out, cache = jax.block_until_ready(compiled(*jargs))
            dispatch.runtime_tokens.block_until_ready()
            out, cache = np.asarray(out), np.asarray(cache)
    except Exception as e:  # pylint: disable=broad-except
        interpret_pallas_call.reset_tpu_interpret_mode_state()
        dispatch.runtime_tokens.clear()
        raise PallasError("timeout" if watchdog.fired else "run", e) from e
    return out, cache


def main(argv: Optional[list[str]] = None) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import rpa  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python -m rpa.jax.v3_pallas",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("case", help="a v3 case file (.npz)")
    parser.add_argument("-o", "--output", required=True,
                        help="write the case with the kernel's out and kv_cache_out")
    parser.add_argument("--tpu-version", type=int, choices=TPU_VERSIONS,
                        help="run that generation's code path and default block sizes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds (default 120)")
    args = parser.parse_args(argv)
    case = rpa.Case.load(args.case)
    if case.dialect not in _FILES:
        parser.error(f"{args.case} is a {case.dialect} case; this runs tpu-inference's v3")
    try:
        out, cache = run_v3_pallas(case, args.tpu_version, args.timeout, args.case)
    except PallasError as e:
        print(f"rpa.jax.v3_pallas: {args.case}: the v3 kernel did not run: {e}", file=sys.stderr)
        return 1
    case.replace(out=out, kv_cache_out=cache, expected=None, expected_kv_cache=None).save(
        args.output)
    print(f"rpa.jax.v3_pallas: {args.case}: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
