"""A kernel file of yours as a kernel for rpa.campaign (issue 36): a modified copy of JAX's
``ragged_paged_attention/kernel.py`` (dialect "jax", jax==0.10.2) or of tpu-inference's v3
``kernel.py`` / ``kernel_hd64.py`` (dialects "tpu_inference_v3" / "tpu_inference_v3_hd64",
the v3 virtualenv), loaded as the shipped file is (in its package, so that its imports resolve)
with its entry point looked up by name.

- ``interpret=True`` (``--interpret``): the file runs in TPU interpret mode on the CPU, with
  rpa's run-time patches applied to *your* source (rpa.jax.pallas: two, and the interpreter's;
  rpa.jax.v3_pallas: seven). A patch that no longer matches raises PatchError naming your
  file, the patch and the source it looked for. Each compiled program is kept by its shapes,
  dtypes and keywords, so that calls of one shape compile once; a v3 call that waits on a
  semaphore nothing signals is stopped by interpret mode's watchdog (stage "timeout": as soon
  as the wait has sat 3 s with no copy pending, else after ``timeout_s``; both dialects).
- ``interpret=False``: the file runs as it is, which needs a TPU. That path cannot run on these
  CPU machines and is not tested here; off a TPU it raises ValueError saying so.
"""
from __future__ import annotations

import os
import types
from typing import Any, Optional

import numpy as np

from rpa._case import Case

ENTRY_POINTS = {"jax": "ragged_paged_attention", "tpu_inference_v3": "ragged_paged_attention",
                "tpu_inference_v3_hd64": "ragged_paged_attention_hd64"}


class KernelFile:
    """``kernel(*args, **kwargs)`` in the dialect's signature, running the file's entry point.
    Returns the output [T, Hq, D] (jax) or (out, kv_cache) (v3) as numpy arrays."""

    def __init__(self, path: str, dialect: str, interpret: bool = True,
                 tpu_version: Optional[int] = 6, timeout_s: float = 120.0,
                 source: Optional[str] = None, lazy: bool = False):
        if dialect not in ENTRY_POINTS:
            raise ValueError(f"dialect takes {', '.join(ENTRY_POINTS)} (got {dialect!r})")
        if source is None and not os.path.isfile(path):
            raise ValueError(f"--kernel-file {path}: no such file")
        self.path, self.dialect, self.interpret = path, dialect, interpret
        self.tpu_version, self.timeout_s = tpu_version, timeout_s
        self.cache: dict[Any, Any] = {}
        self.rpa_name = f"{path}:{ENTRY_POINTS[dialect]}"
        # The command that runs this kernel again (rpa.campaign's replay lines).
        self.rpa_replay = (f"python -m rpa campaign --kernel-file {path}"
                           f"{' --interpret' if interpret else ''} --dialect {dialect}"
                           f" --tpu-version {tpu_version or 6} --timeout {timeout_s:g}")
        if source is None:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        self.source = source
        self.lazy = lazy
        self._module: Optional[types.ModuleType] = None
        if not lazy:
            self._module = self._checked_module()

    @property
    def module(self) -> types.ModuleType:
        """The file compiled (and patched, in interpret mode); a lazy KernelFile compiles it
        here, at its first call: on a cluster's worker, not on the driver."""
        if self._module is None:
            self._module = self._checked_module()
        return self._module

    def _checked_module(self) -> types.ModuleType:
        path, dialect, source = self.path, self.dialect, self.source
        if not self.interpret:
            import jax  # pylint: disable=import-outside-toplevel
            if jax.default_backend() != "tpu":
                raise ValueError(f"--kernel-file {path} without --interpret runs the kernel as it "
                                 f"is, which needs a TPU; this JAX's backend is "
                                 f"{jax.default_backend()}: pass --interpret to run it in TPU "
                                 f"interpret mode on the CPU")
        module = self._load(source)
        if not hasattr(module, ENTRY_POINTS[dialect]):
            raise ValueError(f"--kernel-file {path} defines no {ENTRY_POINTS[dialect]} (the "
                             f"{dialect} dialect's entry point)")
        return module

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # To a cluster's workers (rpa._cluster) with the file's source, which each compiles
        # itself at its first call (lazy: a TPU worker's own backend decides): the file need not
        # be on their hosts, and compiled programs do not travel.
        return (KernelFile, (self.path, self.dialect, self.interpret, self.tpu_version,
                             self.timeout_s, self.source, True))

    def _load(self, source: str) -> types.ModuleType:
        name = "rpa_kernel_file_" + os.path.splitext(os.path.basename(self.path))[0]
        if self.dialect == "jax":
            from rpa.jax import pallas  # pylint: disable=import-outside-toplevel
            pallas.check_version()
            if self.interpret:
                source = pallas.patch_kernel_source(source, self.path)
            return pallas.module_from_source(source, self.path, name)
        from rpa.jax import v3_pallas  # pylint: disable=import-outside-toplevel
        if self.interpret:
            source = v3_pallas.patch_source(source, self.dialect, self.path)
        return v3_pallas.module_from_source(source, self.path, self.dialect,
                                            self.tpu_version if self.interpret else None, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.interpret:  # on a TPU, as the file is
            out = getattr(self.module, ENTRY_POINTS[self.dialect])(*args, **kwargs)
            if isinstance(out, tuple):
                return tuple(np.asarray(o) for o in out)
            return np.asarray(out)
        if self.dialect == "jax":
            from rpa.jax import pallas  # pylint: disable=import-outside-toplevel
            case = Case.from_call(*args, **kwargs)
            arrays, params = pallas.case_arrays_params(case)
            bkv, bq = pallas.default_blocks(case)
            return pallas.run_pallas(arrays, params, bkv, bq, kernel=self.module, cache=self.cache,
                                     timeout_s=self.timeout_s, name=self.path)
        from rpa.jax import v3_pallas  # pylint: disable=import-outside-toplevel
        case = Case.from_v3_call(*args, dialect=self.dialect, **kwargs)
        return v3_pallas.run_v3_pallas(case, self.tpu_version, self.timeout_s, self.path,
                                       module=self.module, cache=self.cache)
