"""rpa.Case: the arrays and parameters of one ragged paged attention call (DESIGN.md sections
2, 7 and 16: the jax dialect, and tpu-inference's v3 dialects), and how they cross into the
C++ library (rpa._rpa)."""
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

# The tpu-inference v3 dialects (DESIGN.md section 16): kernel.py's ragged_paged_attention and
# kernel_hd64.py's ragged_paged_attention_hd64, their arrays and keywords in signature order.
DIALECTS = ("jax", "tpu_inference_v3", "tpu_inference_v3_hd64")
V3_ARRAYS = ("queries", "keys", "values", "kv_cache", "kv_lens", "page_indices", "cu_q_lens",
             "distribution")
V3_KEYWORDS = {
    "tpu_inference_v3": ("use_causal_mask", "update_kv_cache", "skip_kv_mask", "sm_scale",
                         "sliding_window", "soft_cap", "out_dtype", "mask_value", "q_scale",
                         "k_scale", "v_scale", "chunk_prefill_size", "d_block_sizes",
                         "p_block_sizes", "m_block_sizes", "vmem_limit_bytes"),
    "tpu_inference_v3_hd64": ("sm_scale", "sliding_window", "soft_cap", "mask_value", "q_scale",
                              "k_scale", "v_scale", "chunk_prefill_size",
                              "num_kv_pages_per_block", "num_queries_per_block",
                              "vmem_limit_bytes"),
}
# The kernels' keywords a case does not hold (they change how the kernel runs, not what it
# computes), with the only values from_v3_call accepts: their defaults.
V3_RUN_KEYWORDS = {
    "tpu_inference_v3": {"debug_mode": False, "disable_bounds_checks": True,
                         "disable_semaphore_checks": True},
    "tpu_inference_v3_hd64": {"debug_mode": False},
}
V3_BOOL_PARAMS = ("use_causal_mask", "update_kv_cache", "skip_kv_mask")
V3_BOOL_DEFAULTS = {"use_causal_mask": True, "update_kv_cache": True, "skip_kv_mask": False}
V3_FLOAT_PARAMS = ("sm_scale", "soft_cap", "mask_value", "q_scale", "k_scale", "v_scale")
V3_INT_PARAMS = ("sliding_window", "chunk_prefill_size", "num_kv_pages_per_block",
                 "num_queries_per_block", "vmem_limit_bytes")
V3_BLOCK_PARAMS = ("d_block_sizes", "p_block_sizes", "m_block_sizes")
V3_PARAMS = V3_BOOL_PARAMS + V3_FLOAT_PARAMS + V3_INT_PARAMS + V3_BLOCK_PARAMS + ("out_dtype",)
RESULTS = ("out", "expected")
V3_RESULTS = ("out", "expected", "kv_cache_out", "expected_kv_cache")
# Every array field and every parameter field of rpa.Case, whatever the dialect.
ALL_ARRAYS = tuple(dict.fromkeys(ARRAYS + V3_ARRAYS + ("attention_sink",) + V3_RESULTS))
ALL_PARAMS = tuple(dict.fromkeys(PARAMS + V3_PARAMS))

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


def _bool_param(name: str, v: Any) -> Optional[bool]:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ValueError(f"{name}: expected a bool or None, got {v!r}")


def _block_param(name: str, v: Any) -> Optional[tuple[int, int, int, int]]:
    if v is None:
        return None
    try:
        t = tuple(v)
    except TypeError:
        raise ValueError(f"{name}: expected 4 ints (bq_sz, bkv_sz, bq_csz, bkv_csz) or None, "
                         f"got {v!r}") from None
    if len(t) != 4:
        raise ValueError(f"{name}: expected 4 ints (bq_sz, bkv_sz, bq_csz, bkv_csz), got {v!r}")
    return tuple(_int_param(name, x) for x in t)  # type: ignore[return-value]


def _dtype_param(name: str, v: Any) -> Optional[str]:
    """A dtype (numpy's, ml_dtypes', jnp.float32, or its name) as its name."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    try:
        return np.dtype(v).name
    except TypeError:
        raise ValueError(f"{name}: expected a dtype or None, got {v!r}") from None


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
    """One ragged paged attention call, in one of three dialects (``dialect``):

    - "jax" (the default): the six arrays and the parameters of JAX's
      ``ragged_paged_attention`` (q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs);
    - "tpu_inference_v3" / "tpu_inference_v3_hd64": the arguments of tpu-inference's v3
      ``ragged_paged_attention`` / ``ragged_paged_attention_hd64`` (queries, keys, values,
      kv_cache in the packed layout, kv_lens, flat page_indices, cu_q_lens, distribution,
      hd64's optional attention_sink, and the keywords; DESIGN.md section 16).

    Optionally results to check (``out``, and for v3 ``kv_cache_out``, the updated cache) and
    known answers (``expected``, ``expected_kv_cache``). A parameter that is None is absent
    (the kernel's default). Arrays are numpy arrays (ml_dtypes for bfloat16 and float8)."""

    q: Optional[np.ndarray] = None
    kv_pages: Optional[np.ndarray] = None
    kv_lens: Optional[np.ndarray] = None
    page_indices: Optional[np.ndarray] = None
    cu_q_lens: Optional[np.ndarray] = None
    num_seqs: Optional[np.ndarray] = None
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
    #: "jax", "tpu_inference_v3" or "tpu_inference_v3_hd64".
    dialect: str = "jax"
    # -- the v3 dialects' arrays (kv_lens, page_indices, cu_q_lens are shared) and keywords --
    queries: Optional[np.ndarray] = None
    keys: Optional[np.ndarray] = None
    values: Optional[np.ndarray] = None
    kv_cache: Optional[np.ndarray] = None
    distribution: Optional[np.ndarray] = None
    attention_sink: Optional[np.ndarray] = None
    use_causal_mask: Optional[bool] = None
    update_kv_cache: Optional[bool] = None
    skip_kv_mask: Optional[bool] = None
    out_dtype: Optional[str] = None
    q_scale: Optional[float] = None
    chunk_prefill_size: Optional[int] = None
    d_block_sizes: Optional[tuple[int, int, int, int]] = None
    p_block_sizes: Optional[tuple[int, int, int, int]] = None
    m_block_sizes: Optional[tuple[int, int, int, int]] = None
    kv_cache_out: Optional[np.ndarray] = None
    expected_kv_cache: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect: expected one of {', '.join(DIALECTS)}, got "
                             f"{self.dialect!r}")
        required, allowed = self._array_names()
        for name in ALL_ARRAYS:
            v = getattr(self, name)
            if v is None:
                if name in required:
                    raise ValueError(f"{name} is missing (a {self.dialect} case needs "
                                     f"{', '.join(required)})")
                continue
            if name not in allowed:
                raise ValueError(f"{name}: not an array of a {self.dialect} case")
            setattr(self, name, as_numpy(name, v))
        keywords = self._param_names()
        for name in ALL_PARAMS:
            if name not in keywords and getattr(self, name) is not None:
                raise ValueError(f"{name}: not a parameter of a {self.dialect} case")
        if self.dialect == "tpu_inference_v3":
            # kernel.py's bools always have a value: its defaults where not given.
            for name, default in V3_BOOL_DEFAULTS.items():
                if getattr(self, name) is None:
                    setattr(self, name, default)
        self.out_dtype = _dtype_param("out_dtype", self.out_dtype)
        for name in V3_BLOCK_PARAMS:
            setattr(self, name, _block_param(name, getattr(self, name)))

    def _array_names(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(required, allowed) array fields of the case's dialect."""
        if self.dialect == "jax":
            return ARRAYS, ARRAYS + RESULTS
        optional = ("attention_sink",) if self.dialect == "tpu_inference_v3_hd64" else ()
        return V3_ARRAYS, V3_ARRAYS + optional + V3_RESULTS

    def _param_names(self) -> tuple[str, ...]:
        return PARAMS if self.dialect == "jax" else V3_KEYWORDS[self.dialect]

    @property
    def is_v3(self) -> bool:
        """True for the tpu-inference v3 dialects."""
        return self.dialect != "jax"

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
        CPU). For tpu-inference's v3 kernels see from_v3_call."""
        return cls(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                   sm_scale=sm_scale, sliding_window=sliding_window, soft_cap=soft_cap,
                   mask_value=mask_value, k_scale=k_scale, v_scale=v_scale,
                   num_kv_pages_per_block=num_kv_pages_per_block,
                   num_queries_per_block=num_queries_per_block,
                   vmem_limit_bytes=vmem_limit_bytes)

    @classmethod
    def from_v3_call(cls, queries: ArrayLike, keys: ArrayLike, values: ArrayLike,
                     kv_cache: ArrayLike, kv_lens: ArrayLike, page_indices: ArrayLike,
                     cu_q_lens: ArrayLike, distribution: ArrayLike,
                     attention_sink: Optional[ArrayLike] = None, *,
                     dialect: str = "tpu_inference_v3", **keywords: Any) -> "Case":
        """The case of a call of tpu-inference 0.32.0's v3 kernel: ``ragged_paged_attention(
        queries, keys, values, kv_cache, kv_lens, page_indices, cu_q_lens, distribution,
        **keywords)`` (dialect "tpu_inference_v3", kernel.py) or
        ``ragged_paged_attention_hd64(..., distribution, attention_sink, **keywords)``
        (dialect "tpu_inference_v3_hd64"): exactly the kernel's positional and keyword
        arguments (numpy, ml_dtypes or JAX arrays; out_dtype a dtype or its name). A keyword
        the kernel does not take raises TypeError, as the call would; debug_mode and the
        Mosaic checks' switches are accepted at their defaults only (a case does not hold
        them)."""
        if dialect not in V3_KEYWORDS:
            raise ValueError(f"dialect: expected tpu_inference_v3 or tpu_inference_v3_hd64, "
                             f"got {dialect!r}")
        function = ("ragged_paged_attention" if dialect == "tpu_inference_v3"
                    else "ragged_paged_attention_hd64")
        if attention_sink is not None and dialect != "tpu_inference_v3_hd64":
            raise TypeError(f"{function}() takes 8 positional arguments (attention_sink is "
                            "ragged_paged_attention_hd64's)")
        params: dict[str, Any] = {}
        for name, value in keywords.items():
            if name in V3_KEYWORDS[dialect]:
                params[name] = value
            elif name in V3_RUN_KEYWORDS[dialect]:
                if value != V3_RUN_KEYWORDS[dialect][name]:
                    raise ValueError(f"{name}={value!r}: a case holds what the kernel "
                                     f"computes, not how it runs ({name} must be "
                                     f"{V3_RUN_KEYWORDS[dialect][name]!r})")
            else:
                raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
        if params.get("sm_scale", 1.0) is None:
            raise ValueError("sm_scale: expected a float, got None")
        params.setdefault("sm_scale", 1.0)
        return cls(dialect=dialect, queries=queries, keys=keys, values=values,
                   kv_cache=kv_cache, kv_lens=kv_lens, page_indices=page_indices,
                   cu_q_lens=cu_q_lens, distribution=distribution,
                   attention_sink=attention_sink, **params)

    def call_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(args, kwargs) for the dialect's kernel call ``f(*args, **kwargs)``: jax: the six
        arrays and every parameter that is set (sm_scale always); v3: the eight arrays (hd64:
        and attention_sink when set) and every keyword that is set (sm_scale and kernel.py's
        bools always; out_dtype as a numpy / ml_dtypes dtype, block sizes as tuples)."""
        if self.dialect == "jax":
            args = tuple(getattr(self, n) for n in ARRAYS)
            kwargs = {n: getattr(self, n) for n in PARAMS
                      if getattr(self, n) is not None or n == "sm_scale"}
            return args, kwargs
        args = tuple(getattr(self, n) for n in V3_ARRAYS)
        if self.attention_sink is not None:
            args += (self.attention_sink,)
        kwargs = {n: getattr(self, n) for n in V3_KEYWORDS[self.dialect]
                  if getattr(self, n) is not None}
        if "out_dtype" in kwargs:
            kwargs["out_dtype"] = _LOGICAL.get(kwargs["out_dtype"], np.dtype(kwargs["out_dtype"]))
        return args, kwargs

    def replace(self, **changes: Any) -> "Case":
        """A copy with some fields changed, e.g. ``case.replace(out=o, soft_cap=None)``."""
        return dataclasses.replace(self, **changes)

    # -- case files (.npz, DESIGN.md sections 7 and 16), through the CLI's reader and writer --
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
        """([(name, (dtype name, array))], {parameter: value}) for rpa._rpa; the parameters
        carry the dialect under "dialect"."""
        _, allowed = self._array_names()
        arrays = []
        for name in allowed:
            v = getattr(self, name)
            if v is not None:
                arrays.append((name, to_native(name, as_numpy(name, v))))
        params: dict[str, Any] = {"dialect": self.dialect}
        if self.dialect == "jax":
            params.update({n: _float_param(n, getattr(self, n)) for n in FLOAT_PARAMS})
            params.update({n: _int_param(n, getattr(self, n)) for n in INT_PARAMS})
        else:
            for n in V3_KEYWORDS[self.dialect]:
                v = getattr(self, n)
                if n in V3_BOOL_PARAMS:
                    params[n] = _bool_param(n, v)
                elif n in V3_FLOAT_PARAMS:
                    params[n] = _float_param(n, v)
                elif n in V3_INT_PARAMS:
                    params[n] = _int_param(n, v)
                elif n in V3_BLOCK_PARAMS:
                    params[n] = _block_param(n, v)
                else:
                    params[n] = _dtype_param(n, v)
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
        """Same dialect, arrays (dtype, shape and bits: NaN payloads included) and
        parameters."""
        if not isinstance(other, Case):
            return NotImplemented
        if self.dialect != other.dialect:
            return False
        for name in ALL_ARRAYS:
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and (a.dtype != b.dtype or a.shape != b.shape
                                  or a.tobytes() != b.tobytes()):
                return False
        return all(getattr(self, n) == getattr(other, n) or
                   (getattr(self, n) != getattr(self, n) and getattr(other, n) != getattr(other, n))
                   for n in ALL_PARAMS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self.is_v3:
            parts = [f"dialect={self.dialect!r}"]
            parts += [f"{n}={_shape_text(getattr(self, n))}" for n in ("queries", "kv_cache")]
            try:
                parts.append(f"distribution={np.asarray(self.distribution).tolist()}")
            except (TypeError, ValueError):
                parts.append(f"distribution={_shape_text(self.distribution)}")
            shown = [n for n in V3_KEYWORDS[self.dialect]
                     if getattr(self, n) is not None
                     and getattr(self, n) != V3_BOOL_DEFAULTS.get(n, 1.0 if n == "sm_scale" else None)]
            parts += [f"{n}={getattr(self, n)!r}" for n in shown]
            results = [n for n in ("out", "kv_cache_out") if getattr(self, n) is not None]
        else:
            parts = [f"{n}={_shape_text(getattr(self, n))}" for n in ("q", "kv_pages")]
            try:
                parts.append(f"num_seqs={int(np.asarray(self.num_seqs).reshape(-1)[0])}")
            except (IndexError, TypeError, ValueError):
                parts.append(f"num_seqs={_shape_text(self.num_seqs)}")
            parts += [f"{n}={getattr(self, n)!r}" for n in PARAMS
                      if getattr(self, n) is not None and not (n == "sm_scale" and self.sm_scale == 1.0)]
            results = ["out"] if self.out is not None else []
        parts += [f"{n}={_shape_text(getattr(self, n))}" for n in results]
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
