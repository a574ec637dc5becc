"""rpa.Case: the arrays and parameters of one ragged paged attention call (DESIGN.md sections
2 and 7), and how they cross into the C++ library (rpa._rpa)."""
from __future__ import annotations

import dataclasses
import operator
import os
from typing import Any, Optional, Union

import ml_dtypes
import numpy as np

from rpa import _rpa

ArrayLike = Any  # numpy / ml_dtypes arrays, JAX arrays, anything with __array__ or __dlpack__
PathLike = Union[str, "os.PathLike[str]"]

ARRAYS = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")
FLOAT_PARAMS = ("sm_scale", "soft_cap", "mask_value", "k_scale", "v_scale")
INT_PARAMS = ("sliding_window", "num_kv_pages_per_block", "num_queries_per_block",
              "vmem_limit_bytes")
PARAMS = ("sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale", "v_scale",
          "num_kv_pages_per_block", "num_queries_per_block", "vmem_limit_bytes")

# The dtypes numpy has no buffer format for: they cross as their bits.
_BITS = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
         "float16": np.uint16}
_LOGICAL = {"bfloat16": np.dtype(ml_dtypes.bfloat16),
            "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
            "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
            "float16": np.dtype(np.float16)}
_INT64 = (-(2**63), 2**63 - 1)


def as_numpy(name: str, x: ArrayLike) -> np.ndarray:
    """x as a numpy array without a copy where it allows one (numpy, ml_dtypes, a CPU JAX
    array through __array__, a DLPack producer)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float, bool, np.generic)):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise ValueError(f"{name}: expected an array (numpy, ml_dtypes, __array__ or DLPack), "
                     f"got {type(x).__name__}")


def to_native(name: str, a: np.ndarray) -> tuple[str, Any]:
    """(dtype name, array) as the C++ side reads it: bfloat16, float8 and float16 as their
    bits, never converted through float."""
    dtype = a.dtype.name
    bits = _BITS.get(dtype)
    if bits is not None and a.dtype == _LOGICAL[dtype]:
        return dtype, a.view(bits)
    return dtype, a


def from_native(typed: tuple[str, np.ndarray]) -> np.ndarray:
    """The numpy array of a (dtype name, array) the C++ side returned."""
    dtype, a = typed
    logical = _LOGICAL.get(dtype)
    return a.view(logical) if logical is not None else a


def _float_param(name: str, v: Any) -> Optional[float]:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a float or None, got {v!r}") from None


def _int_param(name: str, v: Any) -> Optional[int]:
    if v is None:
        return None
    try:
        i = operator.index(v)
    except TypeError:
        raise ValueError(f"{name}: expected an int or None, got {v!r}") from None
    if not _INT64[0] <= i <= _INT64[1]:
        raise ValueError(f"{name}: {i} does not fit in int64 (a case file holds int64)")
    return i


@dataclasses.dataclass(eq=False)
class Case:
    """One ragged paged attention call: the six arrays and the parameters of JAX's
    ``ragged_paged_attention``, by their names, and optionally an output to check (``out``)
    and a known answer (``expected``), both in q's dtype. A parameter that is None is absent
    (JAX's default). Arrays are numpy arrays (ml_dtypes for bfloat16 and float8)."""

    q: np.ndarray
    kv_pages: np.ndarray
    kv_lens: np.ndarray
    page_indices: np.ndarray
    cu_q_lens: np.ndarray
    num_seqs: np.ndarray
    sm_scale: float = 1.0
    sliding_window: Optional[int] = None
    soft_cap: Optional[float] = None
    mask_value: Optional[float] = None
    k_scale: Optional[float] = None
    v_scale: Optional[float] = None
    num_kv_pages_per_block: Optional[int] = None
    num_queries_per_block: Optional[int] = None
    vmem_limit_bytes: Optional[int] = None
    out: Optional[np.ndarray] = None
    expected: Optional[np.ndarray] = None
    #: For a generated case: the hex `rpa gen --spec HEX` and rpa.gen(spec=HEX) rebuild it from.
    spec: Optional[str] = None
    #: For a generated case: its batch in words ("mixed batch, 3 sequences, ...").
    description: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ARRAYS + ("out", "expected"):
            v = getattr(self, name)
            if v is not None or name in ARRAYS:
                setattr(self, name, as_numpy(name, v))

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_call(cls, q: ArrayLike, kv_pages: ArrayLike, kv_lens: ArrayLike,
                  page_indices: ArrayLike, cu_q_lens: ArrayLike, num_seqs: ArrayLike, *,
                  sm_scale: float = 1.0, sliding_window: Optional[int] = None,
                  soft_cap: Optional[float] = None, mask_value: Optional[float] = None,
                  k_scale: Optional[float] = None, v_scale: Optional[float] = None,
                  num_kv_pages_per_block: Optional[int] = None,
                  num_queries_per_block: Optional[int] = None,
                  vmem_limit_bytes: Optional[int] = None) -> "Case":
        """The case of a call ``ragged_paged_attention(q, kv_pages, kv_lens, page_indices,
        cu_q_lens, num_seqs, **params)``: exactly JAX's positional and keyword arguments
        (JAX 0.10.2's kernel.py). JAX arrays are read through ``__array__`` (no copy on the
        CPU)."""
        return cls(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                   sm_scale=sm_scale, sliding_window=sliding_window, soft_cap=soft_cap,
                   mask_value=mask_value, k_scale=k_scale, v_scale=v_scale,
                   num_kv_pages_per_block=num_kv_pages_per_block,
                   num_queries_per_block=num_queries_per_block,
                   vmem_limit_bytes=vmem_limit_bytes)

    def call_args(self) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
        """(args, kwargs) for ``ragged_paged_attention(*args, **kwargs)``: the six arrays, and
        every parameter that is set (sm_scale always)."""
        args = tuple(getattr(self, n) for n in ARRAYS)
        kwargs = {n: getattr(self, n) for n in PARAMS
                  if getattr(self, n) is not None or n == "sm_scale"}
        return args, kwargs

    def replace(self, **changes: Any) -> "Case":
        """A copy with some fields changed, e.g. ``case.replace(out=o, soft_cap=None)``."""
        return dataclasses.replace(self, **changes)

    # -- case files (.npz, DESIGN.md section 7), through the CLI's reader and writer -------
    @classmethod
    def load(cls, path: PathLike, max_bytes: Optional[int] = None) -> "Case":
        """Reads a case file as ``rpa check`` does; ValueError with its one-line error (the
        path first) when the file is missing or malformed."""
        limit = _rpa.default_max_bytes if max_bytes is None else int(max_bytes)
        return cls._from_native(_rpa.read_case(os.fspath(path), limit))

    @classmethod
    def from_bytes(cls, data: bytes, max_bytes: Optional[int] = None) -> "Case":
        """A case from the bytes of an .npz."""
        limit = _rpa.default_max_bytes if max_bytes is None else int(max_bytes)
        return cls._from_native(_rpa.read_case_bytes(bytes(data), limit))

    def save(self, path: PathLike) -> None:
        """Writes the case file ``rpa check PATH`` reads (stored members, bfloat16 and float8 as
        bits with q_dtype / kv_dtype)."""
        arrays, params = self._native()
        _rpa.write_case(os.fspath(path), arrays, params)

    def to_bytes(self) -> bytes:
        """The .npz as bytes (what save() writes)."""
        arrays, params = self._native()
        return _rpa.write_case_bytes(arrays, params)

    # -- crossing into C++ -----------------------------------------------------------------
    def _native(self) -> tuple[list[tuple[str, tuple[str, Any]]], dict[str, Any]]:
        arrays = []
        for name in ARRAYS + ("out", "expected"):
            v = getattr(self, name)
            if v is not None:
                arrays.append((name, to_native(name, as_numpy(name, v))))
        params: dict[str, Any] = {n: _float_param(n, getattr(self, n)) for n in FLOAT_PARAMS}
        params.update({n: _int_param(n, getattr(self, n)) for n in INT_PARAMS})
        if params["sm_scale"] is None:
            raise ValueError("sm_scale: expected a float, got None")
        return arrays, params

    @classmethod
    def _from_native(cls, native: tuple[dict, dict], spec: Optional[str] = None,
                     description: Optional[str] = None) -> "Case":
        arrays, params = native
        fields = {name: from_native(typed) for name, typed in arrays.items()}
        return cls(**fields, **params, spec=spec, description=description)

    # -- comparison and display ------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        """Same arrays (dtype, shape and bits: NaN payloads included) and parameters."""
        if not isinstance(other, Case):
            return NotImplemented
        for name in ARRAYS + ("out", "expected"):
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and (a.dtype != b.dtype or a.shape != b.shape
                                  or a.tobytes() != b.tobytes()):
                return False
        return all(getattr(self, n) == getattr(other, n) or
                   (getattr(self, n) != getattr(self, n) and getattr(other, n) != getattr(other, n))
                   for n in PARAMS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{n}={_shape_text(getattr(self, n))}" for n in ("q", "kv_pages")]
        try:
            parts.append(f"num_seqs={int(np.asarray(self.num_seqs).reshape(-1)[0])}")
        except (IndexError, TypeError, ValueError):
            parts.append(f"num_seqs={_shape_text(self.num_seqs)}")
        parts += [f"{n}={getattr(self, n)!r}" for n in PARAMS
                  if getattr(self, n) is not None and not (n == "sm_scale" and self.sm_scale == 1.0)]
        if self.out is not None:
            parts.append(f"out={_shape_text(self.out)}")
        if self.spec is not None:
            # The whole hex is case.spec; a failing Hypothesis example prints this repr.
            spec = self.spec if len(self.spec) <= 64 else f"{self.spec[:48]}...({len(self.spec)} hex digits)"
            parts.append(f"spec={spec!r}")
        return "Case(" + ", ".join(parts) + ")"


def _shape_text(a: Any) -> str:
    if a is None:
        return "None"
    a = np.asarray(a)
    return f"{a.dtype.name}{list(a.shape)}"
