"""Runs JAX's Pallas ragged paged attention kernel on the CPU (TPU interpret mode).

JAX's TPU interpret mode (`pltpu.force_tpu_interpret_mode()`) executes the shipped Pallas
kernel with its grid, DMAs and semaphores on the host (DESIGN.md section 14). As shipped
in JAX 0.10.2 (the version pinned in PINNED_JAX), two things stop it; both are patched
here at run time, in memory, never in the installed files:

1. The kernel reshapes the DMA'd KV buffer *ref* (`cur_async_copy_kv.wait().reshape(`);
   the interpreter only understands indexing transforms ("'ReshapeTransform' object has
   no attribute 'indices'"). Patch: load the buffer and reshape the value
   (`.wait()[...].reshape(`), and bitcast that value with `pltpu.bitcast` where
   `strided_load_kv` bitcast the ref (`ref.bitcast(jnp.uint32)`): it only indexes and
   bitcasts what it is given, so the result is the same.
2. The interpreter's masked store (`SharedMemory.swap_buffer_content`) marks lanes out of
   bounds along dimension 0 for every dimension (`in_bounds_mask[in_bounds_shape[i] :]`),
   so the kernel's masked stores into `acc_ref.at[:, a:b]` views fail with "Out-of-bounds
   masked swap". Patch: index dimension i, which is what the loop means.

Each patch is a source replacement that must match exactly once; when a JAX release
changes either spot, PatchError says which one, loudly. Everything else runs as JAX ships
it, with interpret mode's defaults (scratch and buffers start as NaN, DMAs run when
waited on, out-of-bounds reads raise).

As a module: `run_pallas(arrays, params, num_kv_pages_per_block, num_queries_per_block)`
returns the kernel's whole output [T, Hq, D] in q's dtype, or raises PallasError (stage
'trace' or 'run'); `case_arrays_params(case)` splits an rpa.Case into those arrays and
params. As a command:

    python -m rpa.jax.pallas CASE.npz -o OUT.npz [--blocks BKV BQ]

writes the case with the Pallas output as `out` (block sizes: the case's own, else
--blocks, which `rpa run --json` reports for rpa's plan); exit 0, or 1 with one line
naming the stage and the error when the kernel raises.
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
import textwrap
import threading
import time
import types
import warnings
from typing import Any, Optional

import numpy as np

import rpa
from rpa._case import ARRAYS
from rpa.jax import PINNED_JAX

# (what, original source, replacement): the kernel module's patches.
_KERNEL_PATCHES = (
    ("kernel: reshape of the DMA'd KV buffer ref",
     "kv_ref = cur_async_copy_kv.wait().reshape(",
     "kv_ref = cur_async_copy_kv.wait()[...].reshape("),
    ("kernel: bitcast of the KV buffer in strided_load_kv",
     "b_ref = ref.bitcast(jnp.uint32)",
     "b_ref = pltpu.bitcast(ref, jnp.uint32)"),
)
_MASK_PATCH = (
    "interpreter: masked store's in-bounds mask (SharedMemory.swap_buffer_content)",
    "in_bounds_mask[in_bounds_shape[i] :] = False",
    "in_bounds_mask[(slice(None),) * i + (slice(in_bounds_shape[i], None),)] = False",
)

PARAM_NAMES = ("sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale",
               "v_scale")
_INT32_MAX = 2**31 - 1


class PatchError(RuntimeError):
    """A run-time patch did not apply exactly once: the installed JAX is not the one
    the patches were written for."""


class PallasError(RuntimeError):
    """The Pallas kernel raised. stage: 'trace' (building the kernel), 'run', 'timeout' (the
    watchdog stopped a run that hung) or, for a v3 case, 'input'."""

    def __init__(self, stage, error):
        self.stage = stage
        self.error = error
        first = str(error).strip().splitlines()
        super().__init__(f"{stage}: {type(error).__name__}: {first[-1] if first else ''}")


def _replace_once(source, old, new, what):
    count = source.count(old)
    if count != 1:
        raise PatchError(f"{what}: expected the source `{old}` exactly once, found it "
                         f"{count} times (JAX {_jax_version()}; patches written for "
                         f"{PINNED_JAX})")
    return source.replace(old, new)


def _jax_version():
    import jax  # pylint: disable=import-outside-toplevel
    return jax.__version__


_PATCHED = {}


def patch_kernel_source(source, filename="kernel.py"):
    """A kernel file's source (JAX's kernel.py, or a modified copy of it) with the kernel
    patches applied; PatchError, naming the file, the patch and the source it looked for,
    unless each matches exactly once."""
    for what, old, new in _KERNEL_PATCHES:
        try:
            source = _replace_once(source, old, new, what)
        except PatchError as e:
            raise PatchError(f"{filename}: {e}") from None
    return source


def install_interpreter_patch():
    """Installs the interpreter's masked-store patch (once); PatchError when it does not
    apply."""
    if "interpreter" in _PATCHED:
        return
    from jax._src.pallas.mosaic.interpret import shared_memory  # pylint: disable=import-outside-toplevel
    method = shared_memory.SharedMemory.swap_buffer_content
    what, old, new = _MASK_PATCH
    method_source = _replace_once(textwrap.dedent(inspect.getsource(method)), old, new, what)
    namespace = {}
    exec(compile(method_source, shared_memory.__file__, "exec"),  # pylint: disable=exec-used
         shared_memory.__dict__, namespace)
    shared_memory.SharedMemory.swap_buffer_content = namespace["swap_buffer_content"]
    _PATCHED["interpreter"] = True


KERNEL_PACKAGE = "jax.experimental.pallas.ops.tpu.ragged_paged_attention"


def module_from_source(source, filename, name="rpa_patched_ragged_paged_attention"):
    """The kernel module compiled from source (in the package of JAX's kernel, so that its
    imports resolve as the shipped file's do)."""
    module = types.ModuleType(name)
    module.__file__ = filename
    module.__package__ = KERNEL_PACKAGE
    exec(compile(source, filename, "exec"), module.__dict__)  # pylint: disable=exec-used
    return module


def patched_kernel():
    """The kernel module with both kernel patches applied, compiled from its source into a
    module of our own (JAX's module is left as it is); the interpreter patch is installed
    on first use. Raises PatchError when a patch does not apply."""
    if "kernel" in _PATCHED:
        return _PATCHED["kernel"]
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel  # pylint: disable=import-outside-toplevel

    source = patch_kernel_source(inspect.getsource(kernel))
    module = module_from_source(source, kernel.__file__)
    install_interpreter_patch()
    _PATCHED["kernel"] = module
    return module


def check_version():
    """Raises PatchError unless the installed JAX is the pinned one."""
    version = _jax_version()
    if version != PINNED_JAX:
        raise PatchError(f"JAX {version} is installed; this harness is pinned to "
                         f"{PINNED_JAX} (pip install jax=={PINNED_JAX})")


def run_pallas(arrays, params, num_kv_pages_per_block, num_queries_per_block, kernel=None,
               cache=None, timeout_s=120.0, name="case"):
    """Runs the Pallas kernel in TPU interpret mode.

    Args:
      arrays: q, kv_pages (numpy / ml_dtypes arrays), kv_lens, page_indices, cu_q_lens,
        num_seqs.
      params: sm_scale, sliding_window, soft_cap, mask_value, k_scale, v_scale (None or
        absent: unset), as Python numbers.
      num_kv_pages_per_block, num_queries_per_block: the block sizes (both needed: the
        kernel's own defaults come from a table of TPU generations).
      kernel: the kernel module to run (default: JAX's, patched_kernel()); a modified copy
        loads with module_from_source(patch_kernel_source(...)).
      cache: a dict that keeps the last CACHE_SIZE compiled programs by their shapes,
        dtypes and keywords, so that calls of one shape compile once (default: compile
        every call).
      timeout_s, name: the watchdog (Watchdog): a run that stalls in a semaphore wait no
        copy will signal, or outlasts timeout_s, raises PallasError with stage "timeout".
    Returns:
      The whole output [T, Hq, D] in q's dtype (rows past cu_q_lens[num_seqs] hold what
      the kernel left there).
    Raises:
      PallasError: the kernel raised while tracing or running, or hung ("timeout").
    """
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from jax.experimental.pallas import tpu as pltpu  # pylint: disable=import-outside-toplevel
    from jax._src import dispatch  # pylint: disable=import-outside-toplevel
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call  # pylint: disable=import-outside-toplevel

    if kernel is None:
        kernel = patched_kernel()
    else:
        install_interpreter_patch()
    kwargs = {key: params.get(key) for key in PARAM_NAMES}
    if kwargs["sm_scale"] is None:
        kwargs["sm_scale"] = 1.0
    if kwargs["mask_value"] is None:
        kwargs["mask_value"] = kernel.DEFAULT_MASK_VALUE
    for key in ("k_scale", "v_scale", "soft_cap", "sm_scale", "mask_value"):
        if kwargs[key] is not None:
            kwargs[key] = float(kwargs[key])  # the kernel asserts isinstance(x, float)
    if kwargs["sliding_window"] is not None:
        kwargs["sliding_window"] = int(kwargs["sliding_window"])
    args = [jnp.asarray(arrays[key]) for key in ARRAYS]
    call = kernel.ragged_paged_attention
    key = (id(kernel), tuple((a.shape, str(a.dtype)) for a in args),
           tuple(sorted((k, repr(v)) for k, v in kwargs.items())),
           int(num_kv_pages_per_block), int(num_queries_per_block))
    compiled = cache.get(key) if cache is not None else None
    if compiled is None:
        try:
            with warnings.catch_warnings(), pltpu.force_tpu_interpret_mode():
                warnings.simplefilter("ignore")
                compiled = call.trace(*args, **kwargs,
                                      num_kv_pages_per_block=int(num_kv_pages_per_block),
                                      num_queries_per_block=int(num_queries_per_block)
                                      ).lower().compile()
        except Exception as e:  # pylint: disable=broad-except
            raise PallasError("trace", e) from e
        remember(cache, key, compiled)
    watchdog = Watchdog(timeout_s, name)
    try:
        with warnings.catch_warnings(), watchdog:
            warnings.simplefilter("ignore")
            out = compiled(*args)
            out = np.asarray(jax.block_until_ready(out))
            # Its effect tokens too (and forget them): an error of this run surfaces here.
            dispatch.runtime_tokens.block_until_ready()
    except Exception as e:  # pylint: disable=broad-except
        # After a failure the interpreter keeps its state; the next call needs it reset.
        interpret_pallas_call.reset_tpu_interpret_mode_state()
        # The interpreter's callbacks are ordered effects: JAX keeps the failed run's
        # effect token and hands it to the next run, which then raises the same error.
        dispatch.runtime_tokens.clear()
        raise PallasError("timeout" if watchdog.fired else "run", e) from e
    return out


# How long a thread may sit in one semaphore wait with no copy left to run before the
# watchdog calls the run stalled. Interpret mode runs one core, and runs a DMA when a wait needs
# it: a wait whose semaphore has no pending copy and too low a count is never signalled. (A
# kernel run on several interpret-mode cores that signal each other's semaphores, which none of
# the three RPA kernels does, could wait longer than this and be stopped early.)
STALL_S = 3.0


def _stalled_wait(frame: Any) -> Optional[tuple[int, Any]]:
    """(id of the frame, count) when a thread's innermost frames are interpret mode's
    Semaphore.wait blocked on its condition with no copy pending on its core; else None."""
    if frame is None or frame.f_code.co_name != "wait" or frame.f_back is None:
        return None
    outer = frame.f_back
    if outer.f_code.co_name != "wait" or not outer.f_code.co_filename.endswith(
            os.path.join("interpret", "shared_memory.py")):
        return None
    local = outer.f_locals
    sem, core = local.get("self"), local.get("global_core_id")
    try:
        if len(sem.tasks[core]) > 0:
            return None
        return id(outer), int(sem.count_by_core[core])
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


class Watchdog:
    """Fails interpret mode's shared memory, which wakes every semaphore wait with the error:
    after timeout_s, or as soon as one wait has sat stall_s with nothing that could signal it
    (a hang the literal schedule predicts then costs seconds, not the whole timeout)."""

    def __init__(self, timeout_s: float, what: str, stall_s: float = STALL_S):
        self.fired = False
        self._what = what
        self._timeout_s, self._stall_s = timeout_s, stall_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rpa-interpret-watchdog", daemon=True)

    def _watch(self) -> None:
        start = time.monotonic()
        seen: dict[int, tuple[tuple[int, Any], float]] = {}
        # A wait stalled before this run began is another run's (one a caller gave up on).
        before = {id(frame.f_back) for frame in sys._current_frames().values()  # pylint: disable=protected-access
                  if _stalled_wait(frame) is not None}
        while not self._done.wait(min(0.25, self._timeout_s)):
            now = time.monotonic()
            if now - start >= self._timeout_s:
                self._fire(f"no progress in {self._timeout_s} s (a semaphore nothing signals)")
                return
            frames = sys._current_frames()  # pylint: disable=protected-access
            for tid in list(seen):
                if tid not in frames:
                    del seen[tid]
            for tid, frame in frames.items():
                state = _stalled_wait(frame)
                if state is None or state[0] in before:
                    seen.pop(tid, None)
                    continue
                if tid not in seen or seen[tid][0] != state:
                    seen[tid] = (state, now)
                elif now - seen[tid][1] >= self._stall_s:
                    self._fire(f"a semaphore wait with no copy left to signal it ({self._stall_s:g} "
                               f"s stalled): it hangs")
                    return

    def _fire(self, why: str) -> None:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call  # pylint: disable=import-outside-toplevel
        memory = getattr(interpret_pallas_call, "_shared_memory", None)
        if memory is not None:
            self.fired = True
            memory.set_failed(TimeoutError(f"{self._what}: {why}"), top_level=False)

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()


# How many compiled programs a cache keeps (the oldest goes first): a campaign runs its calls
# grouped by compile key, so a few suffice, and each holds its executable's memory.
CACHE_SIZE = 16


def remember(cache, key, compiled):
    """Keeps compiled under key in cache (when there is one), dropping the oldest entries
    past CACHE_SIZE."""
    if cache is None:
        return
    cache[key] = compiled
    while len(cache) > CACHE_SIZE:
        cache.pop(next(iter(cache)))


def case_arrays_params(case):
    """Splits an rpa.Case into (arrays, params) for run_pallas."""
    arrays = {name: getattr(case, name) for name in ARRAYS}
    params = {name: getattr(case, name) for name in PARAM_NAMES}
    return arrays, params


# --- what the kernel does with a case's shapes -------------------------------------------

def seqs(case):
    """[(q_start, q_end, kv_len, page row)] of the sequences i < num_seqs, the values
    clipped into the arrays' ranges (JAX accepts some that are not)."""
    num_seqs = np.asarray(case.num_seqs).reshape(-1)
    cu = np.asarray(case.cu_q_lens).reshape(-1).astype(np.int64)
    kv_lens = np.asarray(case.kv_lens).reshape(-1).astype(np.int64)
    t = case.q.shape[0]
    ns = int(np.clip(int(num_seqs[0]) if num_seqs.size else 0, 0,
                     min(kv_lens.size, max(cu.size - 1, 0))))
    return [(int(np.clip(cu[i], 0, t)), int(np.clip(cu[i + 1], 0, t)), int(kv_lens[i]), i)
            for i in range(ns)]


def defined_rows(case):
    """How many rows of the output the sequences define (cu_q_lens[num_seqs], clipped)."""
    s = seqs(case)
    return s[-1][1] if s else 0


def traceable(case):
    """(True, '') if the Pallas kernel can be traced on the case's shapes: q [T, Hq, D]
    and kv_pages [P, S, Hc, D] with D % 128 == 0 (its broadcast_to_shape asserts it; JAX's
    validators do not check it); else (False, why)."""
    q, kv = np.asarray(case.q), np.asarray(case.kv_pages)
    if q.ndim != 3 or kv.ndim != 4:
        return False, f"q rank {q.ndim}, kv_pages rank {kv.ndim}"
    if q.shape[2] % 128 or kv.shape[3] % 128:
        return False, f"head_dim {q.shape[2]} / {kv.shape[3]} not a multiple of 128"
    return True, ""


def default_blocks(case):
    """The block sizes the Pallas kernel runs with on the CPU: the case's when it sets both,
    else get_tuned_block_sizes's untuned default (min(pages_per_seq, 128), min(T, 32)) (the
    kernel ignores one set without the other)."""
    bkv, bq = case.num_kv_pages_per_block, case.num_queries_per_block
    if bkv is not None and bq is not None:
        return int(bkv), int(bq)
    pps = np.asarray(case.page_indices).shape[-1]
    return min(pps, 128), min(case.q.shape[0], 32)


def steps(case, blocks):
    """How many KV steps the Pallas program takes (heads blocks x, per query block, the KV
    blocks of each sequence it overlaps), or None when a kv_len walks out of int32."""
    bkv, bq = blocks
    s = case.kv_pages.shape[1]
    hc = case.kv_pages.shape[2]
    if bkv <= 0 or bq <= 0:
        return 0  # the kernel cannot be built
    total = 0
    for q_start, q_end, kv_len, _ in seqs(case):
        if kv_len + bkv * s - 1 > _INT32_MAX:
            return None
        q_blocks = max(1, -(-q_end // bq) - q_start // bq)
        total += q_blocks * max(1, -(-max(kv_len, 0) // max(bkv * s, 1)))
    return total * max(1, hc // 2)


def main(argv=None):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # interpret mode needs no accelerator
    parser = argparse.ArgumentParser(prog="python -m rpa.jax.pallas",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("case", help="a case file (.npz)")
    parser.add_argument("-o", "--output", required=True, help="write the case with `out`")
    parser.add_argument("--blocks", nargs=2, type=int, metavar=("BKV", "BQ"),
                        help="num_kv_pages_per_block and num_queries_per_block when the "
                        "case sets neither")
    args = parser.parse_args(argv)
    check_version()
    case = rpa.Case.load(args.case)
    arrays, params = case_arrays_params(case)
    bkv, bq = case.num_kv_pages_per_block, case.num_queries_per_block
    if bkv is None or bq is None:
        if not args.blocks:
            parser.error("the case does not set both block sizes: pass --blocks BKV BQ")
        bkv, bq = args.blocks
    try:
        out = run_pallas(arrays, params, bkv, bq)
    except PallasError as e:
        print(f"rpa.jax.pallas: {args.case}: the Pallas kernel raised at {e}",
              file=sys.stderr)
        return 1
    case.replace(out=out, expected=None).save(args.output)
    print(f"rpa.jax.pallas: {args.case}: wrote {args.output} (blocks {bkv} x {bq})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
