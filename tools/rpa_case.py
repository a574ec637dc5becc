"""Write and read rpa case files (.npz), the format of DESIGN.md section 7.

A case is a numpy .npz archive with one .npy member per array and per parameter that is
set, named as in JAX's ragged_paged_attention. numpy cannot name bfloat16 or float8, so
those arrays are stored as their bits (uint16 / uint8) with the logical dtype in a 0-d
string member `q_dtype` / `kv_dtype`. This module does that conversion both ways; it needs
numpy, and uses ml_dtypes when it is installed (JAX always installs it).

Dumping a case from a JAX call (any jax.Array is copied to the host with np.asarray):

    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa_kernel
    import rpa_case  # tools/ on sys.path

    args = dict(q=q, kv_pages=kv_pages, kv_lens=kv_lens, page_indices=page_indices,
                cu_q_lens=cu_q_lens, num_seqs=num_seqs)
    params = dict(sm_scale=0.125, soft_cap=None, sliding_window=128)
    out = rpa_kernel.ragged_paged_attention(*args.values(), **params)
    rpa_case.save_case("case.npz", **args, out=out, **params)

then check it with `rpa check case.npz`. bfloat16 and float8 jax arrays arrive as ml_dtypes
arrays and need no q_dtype / kv_dtype argument. Parameters left at None are omitted (a
reader takes them as None); pass the ones you passed to JAX.

Without ml_dtypes, pass bfloat16 / float8 data as its bits (x.view(np.uint16) /
x.view(np.uint8)) together with q_dtype= / kv_dtype=.
"""

import math
import operator

import numpy as np

try:
    import ml_dtypes
except ImportError:  # bit arrays and dtype names still work
    ml_dtypes = None

# Logical dtypes a case file can name, and the numpy dtype their data is stored as.
STORAGE_DTYPES = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(np.uint16),
    "float8_e4m3fn": np.dtype(np.uint8),
    "float8_e5m2": np.dtype(np.uint8),
}
REQUIRED_ARRAYS = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")
OPTIONAL_ARRAYS = ("out", "expected")
FLOAT_PARAMS = ("sm_scale", "soft_cap", "mask_value", "k_scale", "v_scale")
INT_PARAMS = ("sliding_window", "num_kv_pages_per_block", "num_queries_per_block",
              "vmem_limit_bytes")
DTYPE_MEMBERS = ("q_dtype", "kv_dtype")
_KNOWN_MEMBERS = frozenset(REQUIRED_ARRAYS + OPTIONAL_ARRAYS + FLOAT_PARAMS + INT_PARAMS +
                           DTYPE_MEMBERS)


def _host_array(name, x):
    """Returns x as a C-ordered, little-endian numpy array (what the C++ reader accepts)."""
    a = np.asarray(x)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    # np.save writes fortran_order True for an F-contiguous array; the reader refuses it.
    # (np.require, not np.ascontiguousarray, which would turn a 0-d array into shape (1,).)
    a = np.require(a, requirements="C")
    if a.dtype.kind in "OSUVMmc" and a.dtype.name not in STORAGE_DTYPES:
        raise TypeError(f"{name} has dtype {a.dtype}, which a case file cannot hold")
    return a


def _encode(name, x, dtype_name, dtype_member):
    """Returns (array to store, logical dtype name or None) for q, kv_pages, out, expected.

    An ml_dtypes array is stored as its bits under its own name; uint16 / uint8 bits need
    the name in dtype_name. dtype_member is the argument that names it, for messages.
    """
    a = _host_array(name, x)
    if a.dtype.name in STORAGE_DTYPES and a.dtype.name != "float32":
        # An ml_dtypes bfloat16 / float8 array (kind 'V' to numpy).
        if dtype_name is not None and dtype_name != a.dtype.name:
            raise ValueError(f"{name} is {a.dtype.name} but {dtype_member}={dtype_name!r}")
        return a.view(STORAGE_DTYPES[a.dtype.name]), a.dtype.name
    if dtype_name is None:
        if a.dtype in (np.uint16, np.uint8):
            raise ValueError(
                f"{name} is {a.dtype} bits: pass {dtype_member}= ('bfloat16' for uint16, "
                f"'float8_e4m3fn' or 'float8_e5m2' for uint8) to say what they encode")
        return a, None
    if dtype_name not in STORAGE_DTYPES:
        raise ValueError(f"{dtype_member}={dtype_name!r} is not one of "
                         f"{', '.join(STORAGE_DTYPES)}")
    if a.dtype != STORAGE_DTYPES[dtype_name]:
        raise ValueError(f"{name} with {dtype_member}={dtype_name!r} must hold "
                         f"{STORAGE_DTYPES[dtype_name]} data, got {a.dtype}")
    return a, dtype_name


def _float_param(name, value):
    a = np.asarray(value)
    if a.shape != () or a.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a float, got {value!r}")
    # float32 values widen to float64 exactly, NaN payload and -0.0 included.
    return np.float64(a)


def _int_param(name, value):
    a = np.asarray(value)
    if a.shape != () or a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an int, got {value!r}")
    v = operator.index(a.item())
    if not -2**63 <= v < 2**63:
        raise ValueError(f"{name}={v} does not fit in int64")
    return np.int64(v)


def save_case(path, *, q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
              q_dtype=None, kv_dtype=None, out=None, expected=None, compressed=False,
              **params):
    """Writes a case file.

    q, kv_pages: numpy / JAX arrays. float32 is stored as is; ml_dtypes bfloat16 and
      float8_e4m3fn / float8_e5m2 arrays as their uint16 / uint8 bits plus a q_dtype /
      kv_dtype member. Bits given as uint16 / uint8 arrays need q_dtype= / kv_dtype=.
    kv_lens, page_indices, cu_q_lens, num_seqs: stored in their own dtype (int32 for a
      valid call; others are kept so that validation can reject them as JAX does).
    out, expected: optional, in q's dtype (a kernel's output to check, an oracle's answer).
    compressed: deflate the members (np.savez_compressed); the reader takes either.
    params: sm_scale, soft_cap, mask_value, k_scale, v_scale (stored as float64) and
      sliding_window, num_kv_pages_per_block, num_queries_per_block, vmem_limit_bytes
      (stored as int64). None means unset and is omitted. Unknown names raise TypeError.

    The file is written at `path` exactly (np.savez would append .npz to a bare name).
    """
    members = {}
    members["q"], q_name = _encode("q", q, q_dtype, "q_dtype")
    members["kv_pages"], kv_name = _encode("kv_pages", kv_pages, kv_dtype, "kv_dtype")
    for name, x in (("kv_lens", kv_lens), ("page_indices", page_indices),
                    ("cu_q_lens", cu_q_lens), ("num_seqs", num_seqs)):
        a = _host_array(name, x)
        if a.dtype.name in STORAGE_DTYPES and a.dtype.name != "float32":
            raise TypeError(f"{name} has dtype {a.dtype}, which a case file cannot hold")
        members[name] = a
    # A float32 array needs no name; the C++ writer omits it too.
    if q_name not in (None, "float32"):
        members["q_dtype"] = np.array(q_name)
    if kv_name not in (None, "float32"):
        members["kv_dtype"] = np.array(kv_name)
    for name, value in params.items():
        if name not in FLOAT_PARAMS and name not in INT_PARAMS:
            raise TypeError(f"unknown parameter {name!r} (known: "
                            f"{', '.join(FLOAT_PARAMS + INT_PARAMS)})")
        if value is None:
            continue
        members[name] = (_float_param(name, value) if name in FLOAT_PARAMS
                         else _int_param(name, value))
    for name, x in (("out", out), ("expected", expected)):
        if x is None:
            continue
        # The reader gives out / expected q's dtype whenever q has a dtype name.
        a, name_of_x = _encode(name, x, q_name if q_name not in (None, "float32") else None,
                               "q_dtype")
        if name_of_x not in (None, "float32") and q_name != name_of_x:
            raise ValueError(f"{name} is {name_of_x} but q is {q_name or members['q'].dtype}")
        members[name] = a
    save = np.savez_compressed if compressed else np.savez
    if hasattr(path, "write"):
        save(path, **members)
    else:
        with open(path, "wb") as f:
            save(f, **members)


def _logical(bits, dtype_name):
    if dtype_name is None or dtype_name == "float32" or ml_dtypes is None:
        return bits
    return bits.view(getattr(ml_dtypes, dtype_name))


def load_case(path):
    """Reads a case file into a dict.

    Keys: the six input arrays; 'out' and 'expected' (None when absent); 'q_dtype' and
    'kv_dtype' (the logical dtype names the file gives, None when it gives none); and every
    parameter name, as a Python float / int, or None when unset (sm_scale: 1.0, JAX's
    default). With ml_dtypes installed, bfloat16 / float8 arrays come back as ml_dtypes
    arrays; without it, as their uint16 / uint8 bits (see 'q_dtype' / 'kv_dtype').
    """
    with np.load(path, allow_pickle=False) as z:
        stored = {name: z[name] for name in z.files}
    unknown = sorted(set(stored) - _KNOWN_MEMBERS)
    if unknown:
        raise ValueError(f"{path}: unknown member {unknown[0]!r}.npy")
    missing = [name for name in REQUIRED_ARRAYS if name not in stored]
    if missing:
        raise ValueError(f"{path}: missing required member {missing[0]!r}.npy")
    case = {}
    for name in DTYPE_MEMBERS:
        case[name] = str(stored[name][()]) if name in stored else None
    for name in REQUIRED_ARRAYS + OPTIONAL_ARRAYS:
        case[name] = stored.get(name)
    for name in ("q", "out", "expected"):
        if case[name] is not None:
            case[name] = _logical(case[name], case["q_dtype"])
    case["kv_pages"] = _logical(case["kv_pages"], case["kv_dtype"])
    for name in FLOAT_PARAMS + INT_PARAMS:
        case[name] = stored[name][()].item() if name in stored else None
    if case["sm_scale"] is None:
        case["sm_scale"] = 1.0
    return case


def same_float(a, b):
    """True if two parameter values are the same float, bit for bit (-0.0 != 0.0, NaN ==
    NaN with the same payload); for comparing cases, where == is wrong on both counts."""
    if a is None or b is None:
        return a is b
    return (np.float64(a).tobytes() == np.float64(b).tobytes() and
            math.copysign(1.0, a) == math.copysign(1.0, b))
