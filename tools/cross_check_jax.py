#!/usr/bin/env python3
"""Cross-checks rpa against JAX: validation (jax mode), and the dense reference.

Validation: `rpa validate --mode jax` is compared with JAX's own validation.

For every case, JAX's validation is called exactly as a user would call it from numpy
arrays (bfloat16 / float8 as ml_dtypes arrays, parameters as Python floats and ints,
absent parameters as None):

    dynamic_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                            sm_scale=..., ..., vmem_limit_bytes=...)
    get_min_heads_per_blk(num_q_heads, num_combined_kv_heads, q.dtype, kv_pages.dtype)

and its outcome (accepted, a ValueError raised by one of those validators, or anything
else: another exception, or a ValueError from inside numpy / JAX) is compared with
`rpa validate CASE --mode jax --json`:

- JAX accepts                 -> rpa must say valid, or reject with a jax_crash rule
                                 (JAX misbehaves silently there);
- a validator's ValueError    -> rpa must reject with a rule that is not jax_crash and
                                 the same message. JAX prints numpy scalars and jax
                                 Arrays in its dynamic messages (`np.int32(3)`,
                                 `Array(3, dtype=int32)`) where rpa prints `3`
                                 (DESIGN.md section 3); those reprs are normalized;
- any other exception         -> rpa must reject with a jax_crash rule.

Set up (once) a CPU JAX in a virtualenv and build rpa:

    /root/.pyenv/shims/python3 -m venv /tmp/jaxvenv
    /tmp/jaxvenv/bin/pip install jax numpy ml_dtypes
    cmake -S . -B /tmp/xc-build -G Ninja && cmake --build /tmp/xc-build --target rpa

Run it on case files or directories (every .npz below them), or on random cases:

    /tmp/jaxvenv/bin/python tools/cross_check_jax.py --rpa /tmp/xc-build/rpa corpus/modes
    /tmp/jaxvenv/bin/python tools/cross_check_jax.py --rpa /tmp/xc-build/rpa \\
        --random 2000 --seed 1 --keep /tmp/xc-diffs

It prints one line per case (OK or DIFF, with both sides), a tally of what JAX did on
the inputs rpa flags jax_crash, and last `cross_check_jax: N passed, M failed`. The exit
status is 1 if any case differs. --keep DIR copies each differing random case there.

Reference mode checks rpa's dense reference against JAX's own ref_ragged_paged_attention
on N random strict-valid cases:

    /tmp/jaxvenv/bin/python tools/cross_check_jax.py --rpa /tmp/xc-build/rpa \\
        --reference 300 --seed 1 --keep /tmp/xc-ref-diffs [--jit]

Each case is built valid by construction (reference_case): 1-6 sequences mixing decode
(q_len 1) and prefill (q_len up to kv_len), kv_len 1..80, shuffled pages, garbage page
indices past each sequence's last page and in padding slots (garbage kv_lens and
cu_q_lens there too), NaN in every unused page slot and q row, dtypes and head counts
only as the kernel's XLA tiling takes them, and random sm_scale, sliding_window,
soft_cap, mask_value, k_scale, v_scale. Strict `rpa validate` must accept every one (a
rejection is a generator bug and fails). JAX's reference runs on CPU (eagerly, every
argument a jnp array, about 5 s a case, nearly all of it XLA compiling each jnp operation
for its shapes; --jit compiles each case as one jax.jit instead, about 5x faster, but
XLA's fusion then rounds an element differently here and there). Its defined rows,
padded with zeros to q's shape, are saved as `out`, and `rpa check --semantics reference
--json` compares them with rpa's reference in JAX's reference semantics (p and p.V rounded
to V's dtype) under that semantics' tolerance. Each disagreement prints the case and rpa's
JSON (first mismatch, got, want, allowed); --keep DIR copies the case, with JAX's output
as `out`, there. The tolerance used, max |jax - rpa| / (atol + rtol * |rpa|) over
defined elements (rpa's output from `rpa run --impl reference --semantics reference`), is
tabulated per dtype
combination and per data scale. The last line is `cross_check_jax reference: N passed,
M failed`; the exit status is 1 on any failure.

Pallas mode runs JAX's own Pallas kernel in TPU interpret mode on the CPU
(tools/pallas_interpret.py, DESIGN.md section 14) on N cases from `rpa gen --head-dim 128`
(profiles decode, prefill, mixed, edge in turn, sizes 0..Z, seeds drawn from S) and on
the case files given whose head_dim is a multiple of 128 (the others cannot be traced):

    /tmp/jaxvenv/bin/python tools/cross_check_jax.py --rpa /tmp/xc-build/rpa \
        --pallas 120 --seed 1 [--size-max 24] [--keep DIR] [corpus/modes ...]

For each case: (1) JAX's validators against `rpa validate --mode jax`, as above; if JAX
accepts, (2) the Pallas kernel with the block sizes JAX gives it (the case's when it sets
both, else min(pages_per_seq, 128) x min(T, 32)), which `rpa run --schedule literal
--mode jax --json` must report: where Pallas raises, rpa must flag a jax_crash rule (rpa
flagging one where Pallas runs is a note); (3) where both run, rpa's literal schedule
against Pallas on the defined rows: `rpa check --oracle literal --mode jax` on Pallas's
output, under rpa's schedule tolerance (oracle/tolerance.cc: much tighter than the
reference tolerance where logits are small); the undefined rows are compared bit for bit,
for information; (4) if strict mode accepts, `rpa check --semantics reference` on JAX's
reference (one jax.jit), `rpa check` (the kernel semantics) on Pallas's output, and the
default schedule against Pallas within rpa's tolerance (beyond the schedule tolerance:
counted; JAX's reference outside the kernel semantics: counted, finding 11); (5) if strict rejects, how far Pallas is from
JAX's reference (informational), printed with the strict rule where it differs by more
than 1e-3 of max |reference|. One line per case; the summary has the outcomes,
a per (q, kv) dtype table of the literal's largest tolerance used and |difference| and
its share of bit-identical elements, and the edge cases Pallas ran on. The last line is
`cross_check_jax pallas: N passed, M failed`. No JAX, another JAX than the pinned one, or
a patch that does not apply exits 1 with the reason: nothing is skipped.
"""

import argparse
import collections
import dataclasses
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

# Validation never needs an accelerator; this keeps JAX from probing for one.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpa_case  # noqa: E402

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

_PARAMS = rpa_case.FLOAT_PARAMS + rpa_case.INT_PARAMS
_INT32_MAX = 2**31 - 1
_INT32_MIN = -2**31


def _kernel_module():
    """Imports JAX's ragged paged attention kernel module (slow: imports JAX)."""
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel
    return kernel


@dataclasses.dataclass
class JaxOutcome:
    """What JAX did: kind is 'accepted', 'value_error' (a validator's own raise) or
    'crash' (any other exception, a ValueError from inside numpy / JAX included)."""
    kind: str
    message: str = ""
    error_type: str = ""
    where: str = ""  # file:line function of the innermost frame, for crashes

    def describe(self):
        if self.kind == "accepted":
            return "accepted"
        if self.kind == "value_error":
            return f"ValueError: {self.message}"
        return f"{self.error_type} at {self.where}: {self.message}"


@dataclasses.dataclass
class RpaOutcome:
    """rpa's verdict: valid, or the rule with its message and jax_crash flag; error is
    set when rpa did not give a verdict (unreadable case, bad exit code)."""
    valid: bool = False
    rule: str = ""
    message: str = ""
    jax_crash: bool = False
    error: str = ""

    def describe(self):
        if self.error:
            return f"no verdict: {self.error}"
        if self.valid:
            return "valid"
        crash = " (jax_crash)" if self.jax_crash else ""
        return f"{self.rule}{crash}: {self.message}"


def _is_validator_raise(exc, kernel):
    """True if exc is a ValueError raised by a `raise ValueError(` statement of JAX's
    kernel.py (not a failed tuple unpacking, numpy's truth-value error or jnp.max's
    empty-reduction error, which are ValueErrors too)."""
    if type(exc) is not ValueError:
        return False
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    kernel_file = os.path.realpath(kernel.__file__)
    return (os.path.realpath(frame.filename) == kernel_file and
            (frame.line or "").lstrip().startswith("raise ValueError"))


def jax_outcome(kernel, case, present):
    """Runs JAX's validation on a loaded case.

    Args:
      kernel: JAX's ragged_paged_attention kernel module.
      case: a dict from rpa_case.load_case.
      present: the parameter names the case file sets (the others are passed as None).
    Returns:
      A JaxOutcome.
    """
    params = {name: (case[name] if name in present else None) for name in _PARAMS}
    q, kv_pages = case["q"], case["kv_pages"]
    try:
        with warnings.catch_warnings():
            # int32 scalar arithmetic wraps with a RuntimeWarning, as it would for a user.
            warnings.simplefilter("ignore")
            kernel.dynamic_validate_inputs(q, kv_pages, case["kv_lens"], case["page_indices"],
                                           case["cu_q_lens"], case["num_seqs"], **params)
            kernel.get_min_heads_per_blk(q.shape[1], kv_pages.shape[2], q.dtype,
                                         kv_pages.dtype)
    except Exception as e:  # pylint: disable=broad-except
        if _is_validator_raise(e, kernel):
            return JaxOutcome("value_error", message=str(e))
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return JaxOutcome("crash", message=str(e).splitlines()[0] if str(e) else "(no message)",
                          error_type=type(e).__name__,
                          where=f"{os.path.basename(frame.filename)}:{frame.lineno} "
                          f"{frame.name}")
    return JaxOutcome("accepted")


def rpa_outcome(rpa, path):
    """Runs `rpa validate PATH --mode jax --json` and returns an RpaOutcome."""
    proc = subprocess.run([rpa, "validate", path, "--mode", "jax", "--json"],
                          capture_output=True, text=True, check=False)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        out = None
    if not isinstance(out, dict) or proc.returncode not in (0, 2) or "valid" not in out:
        detail = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
        return RpaOutcome(error=f"exit {proc.returncode}: {detail[0] if detail else ''}")
    if out["valid"] != (proc.returncode == 0):
        return RpaOutcome(error=f"exit {proc.returncode} with {proc.stdout.strip()}")
    if out["valid"]:
        return RpaOutcome(valid=True)
    return RpaOutcome(rule=out.get("rule", ""), message=out.get("message", ""),
                      jax_crash=bool(out.get("jax_crash", False)))


# JAX's dynamic messages format numpy scalars and jax Arrays with repr; rpa prints the
# plain number (DESIGN.md section 3).
_REPRS = (
    re.compile(r"np\.u?int(?:8|16|32|64)\((-?\d+)\)"),
    re.compile(r"np\.float(?:16|32|64)\(([^()]*)\)"),
    re.compile(r"Array\((-?[\w.+-]+), dtype=\w+(?:, weak_type=True)?\)"),
    re.compile(r"np\.(True|False)_"),
)


def normalize_message(message):
    """Replaces numpy scalar and jax Array reprs in a JAX message by the plain number (or
    True / False), as Python prints a plain int, float or bool."""
    for pattern in _REPRS:
        message = pattern.sub(r"\1", message)
    return message


def compare(jax, rpa):
    """Returns (agree, note) for a JAX outcome and an rpa outcome."""
    if rpa.error:
        return False, "rpa gave no verdict"
    if jax.kind == "accepted":
        if rpa.valid:
            return True, ""
        if rpa.jax_crash:
            return True, "JAX accepts silently where rpa flags jax_crash"
        return False, "JAX accepts, rpa rejects"
    if jax.kind == "value_error":
        if rpa.valid:
            return False, "JAX raises ValueError, rpa accepts"
        if rpa.jax_crash:
            return False, "JAX raises a clean ValueError where rpa flags jax_crash"
        if rpa.message == jax.message:
            return True, ""
        if rpa.message == normalize_message(jax.message):
            return True, "reprs normalized"
        return False, "messages differ"
    if rpa.valid:
        return False, "JAX crashes, rpa accepts"
    if not rpa.jax_crash:
        return False, "JAX crashes, rpa's rule is not jax_crash"
    return True, ""


def present_params(path):
    """The parameter members a case file sets."""
    with np.load(path, allow_pickle=False) as z:
        return frozenset(z.files) & frozenset(_PARAMS)


@dataclasses.dataclass
class Tally:
    """Counts, and what JAX did where rpa flags jax_crash."""
    passed: int = 0
    failed: int = 0
    normalized: int = 0
    crash_outcomes: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)

    def add(self, jax, rpa, agree, note):
        if agree:
            self.passed += 1
            self.normalized += note == "reprs normalized"
        else:
            self.failed += 1
        if not rpa.error and not rpa.valid and rpa.jax_crash:
            what = "accepted" if jax.kind == "accepted" else (
                "clean ValueError" if jax.kind == "value_error" else
                f"{jax.error_type} at {jax.where}")
            self.crash_outcomes[(rpa.rule, what)] += 1


def check_file(kernel, rpa, path, tally, label=None, details=""):
    """Cross-checks one case file, prints its line, and returns whether both agree."""
    label = label or path
    try:
        case = rpa_case.load_case(path)
        present = present_params(path)
    except Exception as e:  # pylint: disable=broad-except
        tally.failed += 1
        print(f"DIFF {label}: load_case failed: {type(e).__name__}: {e}{details}")
        return False
    jax = jax_outcome(kernel, case, present)
    rpa_side = rpa_outcome(rpa, path)
    agree, note = compare(jax, rpa_side)
    tally.add(jax, rpa_side, agree, note)
    note_text = f" [{note}]" if note else ""
    print(f"{'OK  ' if agree else 'DIFF'} {label}:{note_text} jax: {jax.describe()} | "
          f"rpa: {rpa_side.describe()}{details if not agree else ''}")
    return agree


def case_paths(paths):
    """Each file given, and every .npz below each directory given, sorted."""
    for path in paths:
        if os.path.isdir(path):
            found = []
            for root, _, files in os.walk(path):
                found.extend(os.path.join(root, f) for f in files if f.endswith(".npz"))
            yield from sorted(found)
        else:
            yield path


# --- random cases -------------------------------------------------------------------

_DATA_DTYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64,
    "int32": np.int32, "int8": np.int8, "bool": np.bool_,
    "uint8": np.uint8, "uint16": np.uint16,  # raw bits with no dtype name
}
if ml_dtypes is not None:
    _DATA_DTYPES.update(bfloat16=ml_dtypes.bfloat16, float8_e4m3fn=ml_dtypes.float8_e4m3fn,
                         float8_e5m2=ml_dtypes.float8_e5m2)
# Common dtypes are listed more than once to be picked more often.
_DATA_DTYPE_PICKS = ("float32", "float32", "bfloat16", "bfloat16", "float8_e4m3fn",
                     "float8_e5m2", "float16", "float64", "int32", "int8", "bool", "uint8",
                     "uint16")
_INDEX_DTYPES = ("int64", "float32", "int16", "uint32", "int8", "float64")
_NUM_SEQS_DTYPES = ("int64", "int16", "int8", "uint8", "uint32", "uint64", "float32",
                    "float64", "bool")
_PARAM_VALUES = {
    "sm_scale": (1.0, 0.125, 0.0, -0.0, -1.0, float("nan"), float("inf"), -float("inf"),
                 1e300, 1e-5),
    "soft_cap": (0.0, -0.0, 1.0, 30.0, -2.0, float("nan"), float("inf"), -float("inf"),
                 1e-300, 1e300),
    "mask_value": (-1e30, -2.381976426469702e38, 0.0, -0.0, 1.0, -float("inf"),
                   float("inf"), float("nan"), -1e300),
    "k_scale": (1.0, 0.5, 0.0, -0.0, -1.0, float("nan"), float("inf"), 1e300),
    "v_scale": (1.0, 0.5, 0.0, -0.0, -1.0, float("nan"), -float("inf"), 1e-300),
    "sliding_window": (1, 2, 3, 128, 0, -1, -2**63, 2**62),
    "num_kv_pages_per_block": ("pps", "pps+1", 1, 2, 0, -1, 2**40),
    "num_queries_per_block": (1, 2, 8, 0, -1, 2**40),
    "vmem_limit_bytes": (1, 2**20, 32 * 2**20, 2**40, 0, -1, -2**63),
}
# Mutations applied to a valid base, by phase: dims, then values, then representation.
_DIM_MUTATIONS = ("q_heads_zero", "kv_heads_zero", "combined_odd", "heads_not_divisible",
                  "heads_not_tileable", "heads_many", "head_dim_zero", "head_dim_mismatch",
                  "page_size_zero", "pages_zero", "max_num_seqs_zero", "pages_per_seq_zero",
                  "tokens_zero")
_VALUE_MUTATIONS = ("num_seqs_value", "kv_lens_padding", "kv_len_negative", "kv_len_huge",
                    "kv_len_over_pages", "cu_q_lens_shuffle", "cu_q_lens_first",
                    "cu_q_lens_extreme", "total_over_tokens", "q_len_over_kv_len",
                    "page_index_out_of_range")
_REPR_MUTATIONS = ("q_rank", "kv_pages_rank", "page_indices_rank", "num_seqs_shape",
                   "kv_lens_shape", "cu_q_lens_shape", "index_dtype", "num_seqs_dtype",
                   "q_dtype", "kv_dtype", "q_dtype", "kv_dtype")


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _data(rng, shape, dtype_name):
    """A random q / kv_pages array of the shape in the dtype (values do not matter)."""
    if dtype_name in ("uint8", "uint16", "int8", "int32"):
        return rng.integers(0, 100, shape).astype(_DATA_DTYPES[dtype_name])
    return rng.standard_normal(shape).astype(_DATA_DTYPES[dtype_name])


def _reshape_rank(rng, x):
    """x with one axis dropped or one of size 1 (or 2) inserted."""
    if x.ndim > 0 and rng.random() < 0.5:
        axis = int(rng.integers(x.ndim))
        return np.take(x, 0, axis=axis) if x.shape[axis] else np.sum(x, axis=axis)
    axis = int(rng.integers(x.ndim + 1))
    return np.repeat(np.expand_dims(x, axis), int(rng.integers(1, 3)), axis=axis)


def random_case(rng):
    """Builds one small random case around a valid base.

    Returns:
      (arrays, params, description): the six input arrays, the set parameters, and a
      one-line description with the mutations applied and the case's values.
    """
    names = [_pick(rng, _DIM_MUTATIONS + _VALUE_MUTATIONS + _REPR_MUTATIONS)
             for _ in range(_pick(rng, (0, 1, 1, 1, 2, 2, 3)))]
    applied = []

    # Dims of a valid base, then dim mutations.
    hkv = _pick(rng, (1, 2, 4))
    ratio = _pick(rng, (1, 2))
    d = dict(T=int(rng.integers(1, 7)), Hq=hkv * ratio, D=_pick(rng, (1, 2, 4)),
             P=int(rng.integers(1, 6)), S=_pick(rng, (1, 2, 3, 4)), Hc=2 * hkv,
             N=int(rng.integers(1, 5)), pps=int(rng.integers(1, 4)))
    d["Dk"] = d["D"]
    for m in names:
        if m not in _DIM_MUTATIONS:
            continue
        applied.append(m)
        if m == "q_heads_zero":
            d["Hq"] = 0
        elif m == "kv_heads_zero":
            d["Hc"] = 0
        elif m == "combined_odd":
            d["Hc"] = _pick(rng, (1, 3, 5))
        elif m == "heads_not_divisible":
            d["Hc"], d["Hq"] = _pick(rng, ((4, 3), (4, 1), (8, 6), (6, 4), (4, 5)))
        elif m == "heads_not_tileable":
            d["Hc"] = _pick(rng, (6, 10, 12, 14, 18, 20))
            d["Hq"] = d["Hc"] // 2 * _pick(rng, (1, 2, 3))
        elif m == "heads_many":
            d["Hc"] = _pick(rng, (16, 32, 48))
            d["Hq"] = d["Hc"] // 2 * _pick(rng, (1, 3))
        elif m == "head_dim_zero":
            d["D"] = d["Dk"] = 0
        elif m == "head_dim_mismatch":
            d["Dk"] = d["D"] + (1 if d["D"] == 0 else _pick(rng, (-1, 1)))
        elif m == "page_size_zero":
            d["S"] = 0
        elif m == "pages_zero":
            d["P"] = 0
        elif m == "max_num_seqs_zero":
            d["N"] = 0
        elif m == "pages_per_seq_zero":
            d["pps"] = 0
        elif m == "tokens_zero":
            d["T"] = 0

    # A consistent batch for those dims.
    n, pps, s = d["N"], d["pps"], d["S"]
    ns = int(rng.integers(0, n + 1))
    # int64 while mutating; the int32 cast at the end wraps, as a user's astype would.
    kv_lens = np.zeros(n, np.int64)
    cu = np.zeros(n + 1, np.int64)
    budget = d["T"]
    for i in range(ns):
        kv_lens[i] = rng.integers(0, pps * s + 1)
        q_len = int(rng.integers(0, min(int(kv_lens[i]), budget) + 1))
        budget -= q_len
        cu[i + 1] = cu[i] + q_len
    cu[ns + 1:] = cu[ns]
    page_indices = (rng.integers(0, d["P"], (n, pps)) if d["P"] else
                    np.zeros((n, pps), np.int64)).astype(np.int32)
    num_seqs = np.array([ns], np.int32)

    for m in names:
        if m not in _VALUE_MUTATIONS:
            continue
        applied.append(m)
        if m == "num_seqs_value":
            num_seqs[0] = _pick(rng, (-1, -2, -n - 1, -n - 2, 0, n, n + 1, n + 2,
                                      _INT32_MAX, _INT32_MIN))
        elif m == "kv_lens_padding" and ns < n:
            kv_lens[ns:] = rng.integers(-5, pps * s + 6, n - ns)
        elif m == "kv_len_negative" and n:
            kv_lens[int(rng.integers(n))] = _pick(rng, (-1, -2, -s - 1, _INT32_MIN))
        elif m == "kv_len_huge" and n:
            kv_lens[int(rng.integers(n))] = _INT32_MAX - int(rng.integers(0, max(s, 1) + 1))
        elif m == "kv_len_over_pages" and n:
            kv_lens[int(rng.integers(n))] = pps * s + int(rng.integers(1, max(s, 1) + 2))
        elif m == "cu_q_lens_shuffle":
            cu[1:] = rng.permutation(cu[1:])
            if rng.random() < 0.5 and n:
                cu[int(rng.integers(1, n + 1))] -= int(rng.integers(1, 4))
        elif m == "cu_q_lens_first":
            cu[0] = _pick(rng, (1, -1, 2))
        elif m == "cu_q_lens_extreme":
            cu[int(rng.integers(n + 1))] = _pick(rng, (_INT32_MAX, _INT32_MIN, _INT32_MIN + 1))
        elif m == "total_over_tokens":
            cu[ns:] += d["T"] + 1 - cu[ns]
        elif m == "q_len_over_kv_len" and ns:
            i = int(rng.integers(ns))
            cu[i + 1:] += int(kv_lens[i]) + 1 - (int(cu[i + 1]) - int(cu[i]))
        elif m == "page_index_out_of_range" and page_indices.size:
            page_indices.flat[int(rng.integers(page_indices.size))] = _pick(
                rng, (d["P"], d["P"] + 5, -1, _INT32_MAX))

    q_dtype = kv_dtype = "float32"
    if rng.random() < 0.5:
        q_dtype = kv_dtype = _pick(rng, ("bfloat16", "float32"))
    arrays = dict(kv_lens=kv_lens.astype(np.int32), page_indices=page_indices,
                  cu_q_lens=cu.astype(np.int32), num_seqs=num_seqs)
    q_shape = [d["T"], d["Hq"], d["D"]]
    kv_shape = [d["P"], d["S"], d["Hc"], d["Dk"]]
    reshape = set()
    for m in names:
        if m not in _REPR_MUTATIONS:
            continue
        if m == "q_rank":
            reshape.add("q")
        elif m == "kv_pages_rank":
            reshape.add("kv_pages")
        elif m == "page_indices_rank":
            arrays["page_indices"] = _reshape_rank(rng, arrays["page_indices"])
        elif m == "num_seqs_shape":
            v = arrays["num_seqs"].reshape(-1)[:1]
            v = v if v.size else np.zeros(1, v.dtype)
            arrays["num_seqs"] = _pick(rng, (v.reshape(()), v.reshape(1, 1), np.repeat(v, 2),
                                             v[:0]))
        elif m == "kv_lens_shape":
            v = arrays["kv_lens"].reshape(-1)
            arrays["kv_lens"] = _pick(rng, (np.append(v, 0), v[:max(v.size - 1, 0)],
                                            v.reshape(-1, 1)))
        elif m == "cu_q_lens_shape":
            v = arrays["cu_q_lens"].reshape(-1)
            arrays["cu_q_lens"] = _pick(rng, (v[:max(v.size - 1, 0)], np.append(v, 0),
                                              v.reshape(1, -1)))
        elif m == "index_dtype":
            name = _pick(rng, ("kv_lens", "page_indices", "cu_q_lens"))
            arrays[name] = arrays[name].astype(_pick(rng, _INDEX_DTYPES))
        elif m == "num_seqs_dtype":
            dtype = _pick(rng, _NUM_SEQS_DTYPES)
            value = arrays["num_seqs"]
            if dtype == "uint64" and rng.random() < 0.5:
                value = np.full(value.shape, _pick(rng, (2**63 + 1, 2**64 - 1)), np.uint64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # negative values wrap in unsigned types
                arrays["num_seqs"] = value.astype(dtype)
        elif m == "q_dtype":
            q_dtype = _pick(rng, _DATA_DTYPE_PICKS)
        elif m == "kv_dtype":
            kv_dtype = _pick(rng, _DATA_DTYPE_PICKS)
        applied.append(m)
    if q_dtype not in _DATA_DTYPES:  # no ml_dtypes
        q_dtype = "float32"
    if kv_dtype not in _DATA_DTYPES:
        kv_dtype = "float32"
    arrays["q"] = _data(rng, q_shape, q_dtype)
    arrays["kv_pages"] = _data(rng, kv_shape, kv_dtype)
    for name in reshape:
        arrays[name] = _reshape_rank(rng, arrays[name])

    params = {}
    for name, values in _PARAM_VALUES.items():
        if rng.random() < 0.3:
            value = _pick(rng, values)
            params[name] = {"pps": pps, "pps+1": pps + 1}[value] if isinstance(
                value, str) else value
    text = ("mutations=[" + ", ".join(applied) + "] " +
            " ".join(f"{k}={v}" for k, v in d.items()) +
            f" q={arrays['q'].dtype}{list(arrays['q'].shape)}"
            f" kv_pages={arrays['kv_pages'].dtype}{list(arrays['kv_pages'].shape)}" +
            "".join(f" {k}={arrays[k].dtype}{np.array2string(arrays[k], separator=',')}"
                    .replace("\n", "") for k in ("num_seqs", "kv_lens", "cu_q_lens",
                                                 "page_indices")) +
            "".join(f" {k}={v!r}" for k, v in params.items()))
    return arrays, params, text


def write_case(path, arrays, params):
    """Writes a case with rpa_case.save_case; where it refuses (raw uint8 / uint16 q or
    kv_pages with no dtype name, which JAX takes as they are), with np.savez."""
    try:
        rpa_case.save_case(path, **arrays, **params)
        return
    except (TypeError, ValueError):
        pass
    members = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    for name, dtype_member in (("q", "q_dtype"), ("kv_pages", "kv_dtype")):
        logical = members[name].dtype.name
        if logical in rpa_case.STORAGE_DTYPES and logical != "float32":
            members[name] = members[name].view(rpa_case.STORAGE_DTYPES[logical])
            members[dtype_member] = np.array(logical)
    for name, value in params.items():
        members[name] = (np.float64(value) if name in rpa_case.FLOAT_PARAMS
                         else np.int64(value))
    with open(path, "wb") as f:
        np.savez(f, **members)


def run_random(kernel, rpa, count, seed, keep, tally):
    """Cross-checks `count` random cases from `seed`."""
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="cross_check_jax.") as tmp:
        for i in range(count):
            arrays, params, text = random_case(rng)
            path = os.path.join(tmp, f"random_{seed}_{i}.npz")
            write_case(path, arrays, params)
            label = f"random seed={seed} #{i}"
            if not check_file(kernel, rpa, path, tally, label=label, details=f"\n     {text}"):
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    shutil.copy(path, keep)
            os.remove(path)


# --- reference mode: rpa's dense reference against JAX's ref_ragged_paged_attention ---

# (q dtype, kv dtype) combinations, and (num_q_heads, num_kv_heads) shapes, drawn from.
_REF_DTYPE_COMBOS = (("float32", "float32"), ("bfloat16", "bfloat16"),
                     ("bfloat16", "float8_e4m3fn"), ("bfloat16", "float8_e5m2"),
                     ("float32", "float8_e4m3fn"))
_REF_HEADS = ((1, 1), (2, 1), (4, 2), (8, 2), (4, 4), (8, 8), (16, 2))
_REF_PAGE_SIZES = (1, 2, 4, 8, 16)
_REF_HEAD_DIMS = (1, 8, 32, 128)
# get_dtype_packing: how many elements of the dtype share one 32-bit word.
_PACKING = {"float32": 1, "bfloat16": 2, "float8_e4m3fn": 4, "float8_e5m2": 4}
_REF_PARAM_NAMES = ("sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale",
                    "v_scale")


def _xla_fully_tileable(n, packing):
    """JAX's can_be_xla_fully_tiled (get_min_heads_per_blk): the one head-count condition
    on a strict-valid case that depends on the dtypes."""
    if n % packing:
        return False
    n //= packing
    return n in (1, 2, 4, 8) or n % 8 == 0


def _garbage_index(rng, num_pages):
    """An index the definition never reads: out of range either way, or a real page."""
    return int(_pick(rng, (-1, -7, _INT32_MIN, _INT32_MAX, num_pages, num_pages + 7,
                           int(rng.integers(0, 1 << 30)),
                           int(rng.integers(0, max(num_pages, 1))))))


def _normal(rng, shape, scale, dtype_name):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(
        _DATA_DTYPES[dtype_name])


def reference_case(rng):
    """Builds one strict-valid case constructively (no rejection loop).

    Returns:
      (arrays, params, info): the six input arrays (q / kv_pages as float32 or ml_dtypes
      arrays), the parameters to pass (sm_scale always; the others only when set), and a
      dict describing the case (dtypes, dims, sequences, data scales) for messages.
    """
    q_dtype, kv_dtype = _pick(rng, _REF_DTYPE_COMBOS)
    # Only head counts the kernel's XLA tiling takes for this KV dtype (strict rejects the
    # rest with heads_not_tileable): fp8 KV needs num_combined_kv_heads % 4 == 0.
    heads = [h for h in _REF_HEADS if _xla_fully_tileable(2 * h[1], _PACKING[kv_dtype])]
    hq, hkv = _pick(rng, heads)
    d = _pick(rng, _REF_HEAD_DIMS)
    s = _pick(rng, _REF_PAGE_SIZES)

    ns = int(rng.integers(1, 7))
    seqs = []
    for _ in range(ns):
        kv_len = int(rng.integers(1, 81))
        if rng.random() < 0.5:
            q_len = 1  # decode
        elif rng.random() < 0.3:
            q_len = kv_len  # a whole prompt
        else:
            q_len = int(rng.integers(1, kv_len + 1))  # prefill after a cached prefix
        seqs.append((q_len, kv_len))
    n = ns + int(rng.integers(0, 3))  # max_num_seqs, with padding slots
    used_pages = [-(-kv_len // s) for _, kv_len in seqs]
    pps = max(used_pages) + int(rng.integers(0, 3))
    num_pages = sum(used_pages) + int(rng.integers(0, 4))
    total = sum(q for q, _ in seqs)
    t = total + int(rng.integers(0, 4))  # max_num_batched_tokens, with padding rows

    q_scale = _pick(rng, (1.0,) * 8 + (10.0, 0.01))
    kv_scale = _pick(rng, (1.0,) * 8 + (10.0, 0.01))
    q = _normal(rng, (t, hq, d), q_scale, q_dtype)
    q[total:] = np.nan  # rows past cu_q_lens[num_seqs] belong to no sequence
    kv_pages = np.full((num_pages, s, 2 * hkv, d), np.nan, np.float32).astype(
        _DATA_DTYPES[kv_dtype])
    kv_lens = np.zeros(n, np.int32)
    cu = np.zeros(n + 1, np.int32)
    page_indices = np.zeros((n, pps), np.int32)
    free = list(rng.permutation(num_pages))  # a shuffled free list, as an allocator's
    for i, (q_len, kv_len) in enumerate(seqs):
        kv_lens[i] = kv_len
        cu[i + 1] = cu[i] + q_len
        for j in range(pps):
            if j >= used_pages[i]:
                page_indices[i, j] = _garbage_index(rng, num_pages)
                continue
            page = int(free.pop())
            page_indices[i, j] = page
            used = min(s, kv_len - j * s)
            kv_pages[page, :used] = _normal(rng, (used, 2 * hkv, d), kv_scale, kv_dtype)
    # Padding sequence slots: garbage everywhere (strict ignores them, as the definition).
    for i in range(ns, n):
        kv_lens[i] = _pick(rng, (0, -3, _INT32_MAX, int(rng.integers(0, 10**6))))
        cu[i + 1] = _pick(rng, (int(cu[ns]), -1, _INT32_MAX, int(rng.integers(0, 10**6))))
        for j in range(pps):
            page_indices[i, j] = _garbage_index(rng, num_pages)

    max_kv_len = max(kv_len for _, kv_len in seqs)
    params = dict(sm_scale=float(_pick(rng, (1.0 / np.sqrt(d), 1.0, 0.3))))
    if rng.random() < 0.3:
        params["sliding_window"] = int(rng.integers(1, max_kv_len + 6))
    if rng.random() < 0.3:
        params["soft_cap"] = float(_pick(rng, (5.0, 50.0)))
    if rng.random() < 0.5:
        # Strict mode (mask_value_too_large) takes only mask values so negative that a
        # masked weight is exactly 0: at most -1e30.
        params["mask_value"] = float(_pick(rng, (-1e30, -1e35, -1e38, -2.381976426469702e38)))
    for name in ("k_scale", "v_scale"):
        if rng.random() < 0.3:
            params[name] = float(_pick(rng, (0.5, 2.0)))
    arrays = dict(q=q, kv_pages=kv_pages, kv_lens=kv_lens, page_indices=page_indices,
                  cu_q_lens=cu, num_seqs=np.array([ns], np.int32))
    info = dict(dtypes=f"{q_dtype}/{kv_dtype}", Hq=hq, Hkv=hkv, D=d, S=s, T=t, N=n,
                pps=pps, P=num_pages, seqs=seqs, q_scale=q_scale, kv_scale=kv_scale)
    return arrays, params, info


def describe_reference_case(info, params):
    seqs = ",".join(f"({q},{kv})" for q, kv in info["seqs"])
    return (f"{info['dtypes']} Hq={info['Hq']} Hkv={info['Hkv']} D={info['D']} "
            f"S={info['S']} T={info['T']} N={info['N']} pps={info['pps']} P={info['P']} "
            f"(q_len,kv_len)=[{seqs}] data_scale q={info['q_scale']:g} "
            f"kv={info['kv_scale']:g} " +
            " ".join(f"{k}={v!r}" for k, v in params.items()))


def jax_reference(kernel, arrays, params, jit=False):
    """JAX's ref_ragged_paged_attention on the case, on CPU, padded with zero rows to q's
    shape (JAX returns only the cu_q_lens[num_seqs] defined rows).

    By default the call is eager, as JAX's tests make it: every argument a jnp array, each
    jnp operation compiled on its own for its shapes (most of the time goes there). With
    jit, the call is one jax.jit over q and kv_pages with the index arrays as constants
    (its Python loop over sequences needs them concrete): one compilation per case, about
    5x faster, but XLA then fuses operations and an element may round differently from
    the eager call (one float32 ulp, or one step of a bfloat16 / float8 rounding).
    """
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    kwargs = {name: params.get(name) for name in _REF_PARAM_NAMES}
    if jit:
        index = [np.asarray(arrays[name]) for name in rpa_case.REQUIRED_ARRAYS[2:]]
        call = jax.jit(lambda q, kv: kernel.ref_ragged_paged_attention(q, kv, *index,
                                                                       **kwargs))
        got = call(jnp.asarray(arrays["q"]), jnp.asarray(arrays["kv_pages"]))
    else:
        args = [jnp.asarray(arrays[name]) for name in rpa_case.REQUIRED_ARRAYS]
        got = kernel.ref_ragged_paged_attention(*args, **kwargs)
    got = np.asarray(got)
    q = arrays["q"]
    rows = int(arrays["cu_q_lens"][int(arrays["num_seqs"][0])])
    if got.shape != (rows,) + q.shape[1:] or got.dtype != q.dtype:
        raise ValueError(f"JAX returned {got.dtype}{list(got.shape)}, expected "
                         f"{q.dtype}{[rows] + list(q.shape[1:])}")
    out = np.zeros(q.shape, q.dtype)
    out[:rows] = got
    return out


def _rpa_json(rpa, *args):
    """Runs rpa with args; returns (exit code, parsed JSON or None, stderr text)."""
    proc = subprocess.run([rpa, *args], capture_output=True, text=True, check=False)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        out = None
    return proc.returncode, out, (proc.stderr.strip() or proc.stdout.strip())


def tolerance_used(jax_out, rpa_out, rows, atol, rtol):
    """max over defined rows of |jax - rpa| / (atol + rtol * |rpa|) (rpa's comparison:
    NaN == NaN and equal infinities count 0, any other non-finite pair counts inf)."""
    a = np.asarray(jax_out[:rows], np.float64)
    b = np.asarray(rpa_out[:rows], np.float64)
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same_special = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
        err = np.abs(a - b)
        allowed = atol + rtol * np.abs(b)
        ratio = np.where(allowed > 0, err / np.where(allowed > 0, allowed, 1.0),
                         np.where(err == 0, 0.0, np.inf))
    ratio = np.where(same_special, 0.0, ratio)
    ratio = np.where(np.isfinite(a) & np.isfinite(b) | same_special, ratio, np.inf)
    return float(ratio.max())


@dataclasses.dataclass
class ReferenceTally:
    passed: int = 0
    failed: int = 0
    rejected: int = 0       # strict rejected a generated case: a generator bug
    jax_errors: int = 0     # JAX's reference raised
    jax_nan: int = 0        # JAX's reference put NaN / inf into a defined row
    inconsistent: int = 0   # rpa check's verdict and the recomputed tolerance used disagree
    # dtype combo -> list of (tolerance used, case label)
    used: collections.defaultdict = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list))
    # "q xA, kv xB" data scales -> list of tolerance used
    by_scale: collections.defaultdict = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list))
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def check_reference_case(kernel, rpa, path, arrays, params, info, label, tally, jit=False):
    """One reference case: JAX's output saved as `out`, `rpa check`, tolerance used.
    Returns True if both sides agree."""
    text = describe_reference_case(info, params)
    combo = info["dtypes"]
    rc, verdict, err = _rpa_json(rpa, "validate", path, "--json")
    if rc != 0:
        tally.rejected += 1
        tally.failed += 1
        tally.outcomes[(combo, "rejected")] += 1
        print(f"DIFF {label}: strict validation rejects a generated case (generator bug): "
              f"exit {rc} {json.dumps(verdict) if verdict else err}\n     {text}")
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = jax_reference(kernel, arrays, params, jit)
    except Exception as e:  # pylint: disable=broad-except
        tally.jax_errors += 1
        tally.failed += 1
        tally.outcomes[(combo, "jax error")] += 1
        print(f"DIFF {label}: JAX's ref_ragged_paged_attention raised "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n     {text}")
        return False
    rows = int(arrays["cu_q_lens"][int(arrays["num_seqs"][0])])
    jax_nonfinite = not np.all(np.isfinite(np.asarray(out[:rows], np.float32)))
    rpa_case.save_case(path, **arrays, out=out, **params)
    rc, cmp, err = _rpa_json(rpa, "check", path, "--semantics", "reference", "--json")
    if rc not in (0, 1) or not isinstance(cmp, dict) or "agree" not in cmp:
        tally.failed += 1
        tally.outcomes[(combo, "no verdict")] += 1
        print(f"DIFF {label}: rpa check gave no verdict: exit {rc}: {err}\n     {text}")
        return False
    agree = bool(cmp["agree"]) and rc == 0
    # rpa's own output, for the tolerance used.
    rpa_out_path = path[:-len(".npz")] + ".rpa.npz"
    rc_run, _, err_run = _rpa_json(rpa, "run", path, "--impl", "reference", "--semantics",
                                   "reference", "-o", rpa_out_path, "--json")
    used = float("nan")
    if rc_run == 0:
        rpa_out = rpa_case.load_case(rpa_out_path)["out"]
        os.remove(rpa_out_path)
        used = tolerance_used(out, rpa_out, rows, cmp["atol"], cmp["rtol"])
        tally.used[combo].append((used, label))
        tally.by_scale[f"q x{info['q_scale']:g}, kv x{info['kv_scale']:g}"].append(used)
        if (used <= 1.0) != agree:
            tally.inconsistent += 1
            print(f"NOTE {label}: rpa check says agree={agree} but the recomputed tolerance "
                  f"used is {used:.4g}")
    else:
        print(f"NOTE {label}: rpa run failed: exit {rc_run}: {err_run}")
    if jax_nonfinite:
        tally.jax_nan += 1
        print(f"NOTE {label}: JAX's reference has NaN / inf in a defined row (a JAX finding "
              f"if rpa's has none)")
    if agree:
        tally.passed += 1
        tally.outcomes[(combo, "agree")] += 1
        print(f"OK   {label}: {combo} tolerance used {used:.3g}")
        return True
    tally.failed += 1
    tally.outcomes[(combo, "disagree")] += 1
    print(f"DIFF {label}: tolerance used {used:.4g}\n     {text}\n     {json.dumps(cmp)}")
    return False


def run_reference(kernel, rpa, count, seed, keep, jit=False):
    """Checks rpa's dense reference against JAX's on `count` random strict-valid cases."""
    rng = np.random.default_rng(seed)
    tally = ReferenceTally()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cross_check_jax.") as tmp:
        for i in range(count):
            arrays, params, info = reference_case(rng)
            path = os.path.join(tmp, f"reference_{seed}_{i}.npz")
            rpa_case.save_case(path, **arrays, **params)
            label = f"reference seed={seed} #{i}"
            if not check_reference_case(kernel, rpa, path, arrays, params, info, label,
                                        tally, jit):
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    shutil.copy(path, keep)
            os.remove(path)
    elapsed = time.monotonic() - start

    print("\ntolerance used = max |jax - rpa| / (atol + rtol * |rpa|) over defined elements "
          "(1.0 = the tolerance's edge)")
    header = (f"{'q/kv dtypes':30} {'cases':>5} {'agree':>5} {'diff':>4} {'max':>10} "
              f"{'p99':>10} {'median':>10}  worst case")
    print(header)
    for combo in (f"{q}/{kv}" for q, kv in _REF_DTYPE_COMBOS):
        values = tally.used.get(combo, [])
        cases = sum(n for (c, _), n in tally.outcomes.items() if c == combo)
        agree = tally.outcomes[(combo, "agree")]
        if values:
            v = np.array([u for u, _ in values])
            worst = max(values, key=lambda x: x[0])
            print(f"{combo:30} {cases:5} {agree:5} {cases - agree:4} {v.max():10.4g} "
                  f"{np.percentile(v, 99):10.4g} {np.median(v):10.4g}  {worst[1]}")
        else:
            print(f"{combo:30} {cases:5} {agree:5} {cases - agree:4} {'-':>10} {'-':>10} "
                  f"{'-':>10}")
    print(f"{'data scale':30} {'cases':>5} {'max':>10} {'p99':>10} {'median':>10}")
    for scale, values in sorted(tally.by_scale.items()):
        v = np.array(values)
        print(f"{scale:30} {v.size:5} {v.max():10.4g} {np.percentile(v, 99):10.4g} "
              f"{np.median(v):10.4g}")
    print(f"strict rejections of generated cases: {tally.rejected}; JAX errors: "
          f"{tally.jax_errors}; JAX outputs with NaN / inf: {tally.jax_nan}; verdicts "
          f"inconsistent with the tolerance used: {tally.inconsistent}")
    rate = count / elapsed if elapsed else 0.0
    print(f"{count} cases in {elapsed:.1f} s, JAX {'jit' if jit else 'eager'} "
          f"({rate:.2f} cases/s)")
    print(f"cross_check_jax reference: {tally.passed} passed, {tally.failed} failed")
    return tally.failed == 0


# --- Pallas mode: JAX's Pallas kernel (TPU interpret mode) against rpa ---------------

_PALLAS_PROFILES = ("decode", "prefill", "mixed", "edge")
# Every (q dtype, kv dtype) pair the kernel takes; the summary lists each, run or not.
_PALLAS_DTYPE_PAIRS = tuple((q, kv) for q in ("float32", "bfloat16")
                            for kv in ("float32", "bfloat16", "float8_e4m3fn", "float8_e5m2"))
# `rpa run` arguments of the literal schedule (on whatever jax mode accepts) and of the
# default (fast) schedule (strict mode only).
_LITERAL_RUN = ("--impl", "kernel", "--schedule", "literal", "--mode", "jax")
_DEFAULT_RUN = ("--impl", "kernel", "--schedule", "default")
# The interpreter runs every grid cell and KV step in Python (a few ms each); a case that
# would take more steps than this (int32 kv_len near its max, say) is not interpreted.
_PALLAS_MAX_STEPS = 20000
_EDGE_FEATURES = (
    ("no_seqs", "num_seqs 0"),
    ("empty_seq", "an empty sequence (q_len 0)"),
    ("kv_len_zero", "a sequence with kv_len 0"),
    ("one_token", "one query token in the batch"),
    ("shared_pages", "shared pages (two sequences' used pages overlap)"),
    ("bkv_eq_pps", "num_kv_pages_per_block == pages_per_seq"),
    ("bq_ge_t", "num_queries_per_block >= T"),
)


def _pallas_module():
    """tools/pallas_interpret.py (imports JAX)."""
    import pallas_interpret  # pylint: disable=import-outside-toplevel
    return pallas_interpret


def _dtype_name(x):
    return np.asarray(x).dtype.name


def _seqs(case):
    """[(q_start, q_end, kv_len, page row)] of the sequences i < num_seqs, the values
    clipped into the arrays' ranges (JAX accepts some that are not)."""
    num_seqs = np.asarray(case["num_seqs"]).reshape(-1)
    cu = np.asarray(case["cu_q_lens"]).reshape(-1).astype(np.int64)
    kv_lens = np.asarray(case["kv_lens"]).reshape(-1).astype(np.int64)
    t = case["q"].shape[0]
    ns = int(np.clip(int(num_seqs[0]) if num_seqs.size else 0, 0,
                     min(kv_lens.size, max(cu.size - 1, 0))))
    return [(int(np.clip(cu[i], 0, t)), int(np.clip(cu[i + 1], 0, t)), int(kv_lens[i]), i)
            for i in range(ns)]


def _defined_rows(case):
    seqs = _seqs(case)
    return seqs[-1][1] if seqs else 0


def pallas_traceable(case):
    """(True, '') if the Pallas kernel can be traced on the case's shapes: q [T, Hq, D]
    and kv_pages [P, S, Hc, D] with D % 128 == 0 (its broadcast_to_shape asserts it; JAX's
    validators do not check it); else (False, why)."""
    q, kv = np.asarray(case["q"]), np.asarray(case["kv_pages"])
    if q.ndim != 3 or kv.ndim != 4:
        return False, f"q rank {q.ndim}, kv_pages rank {kv.ndim}"
    if q.shape[2] % 128 or kv.shape[3] % 128:
        return False, f"head_dim {q.shape[2]} / {kv.shape[3]} not a multiple of 128"
    return True, ""


def jax_default_blocks(case):
    """The block sizes the Pallas kernel runs with on the CPU: the case's when it sets both,
    else get_tuned_block_sizes's untuned default (min(pages_per_seq, 128), min(T, 32)) (the
    kernel ignores one set without the other)."""
    bkv, bq = case["num_kv_pages_per_block"], case["num_queries_per_block"]
    if bkv is not None and bq is not None:
        return int(bkv), int(bq)
    pps = np.asarray(case["page_indices"]).shape[-1]
    return min(pps, 128), min(case["q"].shape[0], 32)


def pallas_steps(case, blocks):
    """How many KV steps the Pallas program takes (heads blocks x, per query block, the KV
    blocks of each sequence it overlaps), or None when a kv_len walks out of int32."""
    bkv, bq = blocks
    s = case["kv_pages"].shape[1]
    hc = case["kv_pages"].shape[2]
    if bkv <= 0 or bq <= 0:
        return 0  # the kernel cannot be built
    steps = 0
    for q_start, q_end, kv_len, _ in _seqs(case):
        if kv_len + bkv * s - 1 > _INT32_MAX:
            return None
        q_blocks = max(1, -(-q_end // bq) - q_start // bq)
        steps += q_blocks * max(1, -(-max(kv_len, 0) // max(bkv * s, 1)))
    return steps * max(1, hc // 2)


def _same_bits(a, b):
    """Elementwise: equal bits, or both NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.zeros(a.shape, bool)
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    fa, fb = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a.view(bits) == b.view(bits)) | (np.isnan(fa) & np.isnan(fb))


def edge_features(case, blocks):
    """The _EDGE_FEATURES names the case has."""
    seqs = _seqs(case)
    found = set()
    if not seqs:
        found.add("no_seqs")
    if any(q_end - q_start == 0 for q_start, q_end, _, _ in seqs):
        found.add("empty_seq")
    if any(kv_len == 0 for _, _, kv_len, _ in seqs):
        found.add("kv_len_zero")
    if _defined_rows(case) == 1:
        found.add("one_token")
    pages = np.asarray(case["page_indices"])
    s = max(case["kv_pages"].shape[1], 1)
    used = [set(pages[i][:int(np.clip(-(-kv_len // s), 0, pages.shape[-1]))].tolist())
            for _, _, kv_len, i in seqs]
    if any(used[a] & used[b] for a in range(len(used)) for b in range(a)):
        found.add("shared_pages")
    if blocks[0] == pages.shape[-1]:
        found.add("bkv_eq_pps")
    if blocks[1] >= case["q"].shape[0]:
        found.add("bq_ge_t")
    return found


@dataclasses.dataclass
class PallasTally:
    passed: int = 0
    failed: int = 0
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    validation: Tally = dataclasses.field(default_factory=Tally)
    # (q dtype, kv dtype) -> [cases, max tolerance used, max |diff|, identical, elements,
    #                         worst label]
    pairs: dict = dataclasses.field(default_factory=dict)
    strict_valid: int = 0
    default_beyond_schedule: int = 0   # default schedule != Pallas beyond the schedule tol
    ref_outside_kernel: int = 0        # strict-valid: JAX's reference fails the kernel semantics
    undefined_identical: int = 0       # literal's undefined rows bit-identical to Pallas's
    undefined_compared: int = 0
    crash_runs: int = 0                # rpa flags jax_crash, Pallas runs
    findings: int = 0                  # strict rejects, Pallas != JAX's reference
    pallas_ran: int = 0
    edges: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def add_pair(self, pair, used, max_abs, same, total, label):
        entry = self.pairs.setdefault(pair, [0, 0.0, 0.0, 0, 0, ""])
        entry[0] += 1
        if used > entry[1] or not entry[5]:
            entry[5] = label
        entry[1] = max(entry[1], used)
        entry[2] = max(entry[2], max_abs)
        entry[3] += same
        entry[4] += total


def _save_with_out(path, case, out):
    """Writes the case (its arrays and set parameters) with `out`."""
    arrays = {name: case[name] for name in rpa_case.REQUIRED_ARRAYS}
    params = {name: case[name] for name in _PARAMS if case[name] is not None}
    write_case(path, dict(arrays, out=out), params)


def _rpa_check_out(rpa, path, case, out, mode=None, semantics=None):
    """Saves out as the case's `out` at path and runs `rpa check --json` (in mode, in the
    dense reference's semantics: rpa's default, kernel, unless given).
    Returns (exit code, JSON or None, error text)."""
    _save_with_out(path, case, out)
    extra = ("--mode", mode) if mode else ()
    extra += ("--semantics", semantics) if semantics else ()
    return _rpa_json(rpa, "check", path, *extra, "--json")


def _ref_params(case):
    params = {name: case[name] for name in _REF_PARAM_NAMES}
    if params["sm_scale"] is None:
        params["sm_scale"] = 1.0
    return params


def _pallas_where(error):
    """Where the Pallas kernel raised: the innermost frame in JAX's kernel.py (its asserts
    carry no message), else the innermost frame."""
    frames = traceback.extract_tb(error.error.__traceback__)
    kernel_frames = [f for f in frames if os.path.basename(f.filename) == "kernel.py"]
    frame = (kernel_frames or frames or [None])[-1]
    if frame is None:
        return ""
    return f" at {os.path.basename(frame.filename)}:{frame.lineno} `{(frame.line or '').strip()}`"


def _jax_reference_or_error(kernel, case):
    arrays = {name: case[name] for name in rpa_case.REQUIRED_ARRAYS}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jax_reference(kernel, arrays, _ref_params(case), jit=True), ""
    except Exception as e:  # pylint: disable=broad-except
        first = str(e).strip().splitlines()
        return None, f"{type(e).__name__}: {first[0] if first else ''}"


def check_pallas_case(kernel, pallas, rpa, path, label, tally, tmp):
    """Runs the Pallas-mode checks on one case file and prints its line (and, below it,
    what differs). Returns True unless something failed."""
    fails, notes, ran = [], [], []
    try:
        case = rpa_case.load_case(path)
        present = present_params(path)
    except Exception as e:  # pylint: disable=broad-except
        tally.failed += 1
        tally.outcomes["unreadable"] += 1
        print(f"DIFF {label}: load_case failed: {type(e).__name__}: {e}")
        return False
    pair = (_dtype_name(case["q"]), _dtype_name(case["kv_pages"]))
    dtypes = f"{pair[0]}/{pair[1]}"

    def finish(outcome):
        tally.outcomes[outcome] += 1
        ok = not fails
        tally.passed += ok
        tally.failed += not ok
        what = ", ".join(ran)
        print(f"{'OK  ' if ok else 'DIFF'} {label}: {dtypes} {outcome}"
              f"{' [' + what + ']' if what else ''}")
        for line in fails:
            print(f"     FAIL {line}")
        for line in notes:
            print(f"     note {line}")
        return ok

    # 1. JAX's validators against rpa's jax mode.
    jax = jax_outcome(kernel, case, present)
    rpa_jax = rpa_outcome(rpa, path)
    agree, note = compare(jax, rpa_jax)
    tally.validation.add(jax, rpa_jax, agree, note)
    ran.append("validate")
    if not agree:
        fails.append(f"validation: {note}: jax: {jax.describe()} | rpa: {rpa_jax.describe()}")
    if jax.kind != "accepted":
        text = jax.describe()
        ran.append(text if len(text) <= 100 else text[:97] + "...")
        return finish("JAX rejects" if jax.kind == "value_error" else "JAX crashes")
    traceable, why = pallas_traceable(case)
    if not traceable:
        notes.append(f"Pallas not run: {why}")
        return finish("JAX accepts, not traceable")

    # 2. The Pallas kernel, with the block sizes JAX gives it, which the literal schedule
    # must report (and use).
    blocks = jax_default_blocks(case)
    rows = _defined_rows(case)
    literal = None
    if rpa_jax.valid:
        lit_path = os.path.join(tmp, "literal.npz")
        rc, info, err = _rpa_json(rpa, "run", path, *_LITERAL_RUN, "-o", lit_path, "--json")
        ran.append("literal")
        if rc != 0 or not isinstance(info, dict):
            fails.append(f"rpa run --schedule literal --mode jax: exit {rc}: {err}")
        else:
            literal = rpa_case.load_case(lit_path)["out"]
            got = info.get("blocks")
            if got is None or [int(x) for x in got] != list(blocks):
                fails.append(f"rpa literal blocks {got}, JAX runs {list(blocks)}")
            if info.get("schedule") != "literal":
                fails.append(f"rpa run reports schedule {info.get('schedule')!r}")
            # rpa reports cu_q_lens[num_seqs] as it is; outside [0, T] it means 0 or T rows.
            got_rows = info.get("rows")
            if (not isinstance(got_rows, int) or
                    min(max(got_rows, 0), case["q"].shape[0]) != rows):
                fails.append(f"rpa run reports rows {got_rows}, the case has {rows} defined")
    steps = pallas_steps(case, blocks)
    if steps is None:
        notes.append("Pallas not run: a kv_len's KV walk wraps int32 (it would not end)")
        if rpa_jax.valid:
            fails.append("rpa jax mode accepts a case whose KV walk wraps int32")
        return finish("JAX accepts, KV walk wraps")
    if steps > _PALLAS_MAX_STEPS:
        notes.append(f"Pallas not run: {steps} KV steps (more than {_PALLAS_MAX_STEPS} to "
                     "interpret)")
        return finish("JAX accepts, too long to interpret")
    arrays, params = pallas.case_arrays_params(case)
    ran.append(f"pallas {blocks[0]}x{blocks[1]}")
    try:
        out = pallas.run_pallas(arrays, params, *blocks)
    except pallas.PallasError as e:
        if rpa_jax.jax_crash:
            return finish(f"Pallas raises ({e.stage}), rpa {rpa_jax.rule} (jax_crash)")
        if rpa_jax.valid:
            fails.append(f"JAX accepts, Pallas raises at {e.stage}, rpa says valid: {e}"
                         f"{_pallas_where(e)}")
        else:
            notes.append(f"Pallas raises at {e}{_pallas_where(e)}")
        return finish(f"Pallas raises ({e.stage})")
    tally.pallas_ran += 1
    for name in edge_features(case, blocks):
        tally.edges[name] += 1
    if rpa_jax.jax_crash:
        tally.crash_runs += 1
        notes.append(f"rpa flags jax_crash ({rpa_jax.rule}) but Pallas runs")
        return finish("Pallas runs, rpa jax_crash")
    if literal is None:
        return finish("Pallas runs")

    # 3. The literal schedule against Pallas on the defined rows, under rpa's schedule
    # tolerance (oracle/tolerance.cc, schedule_tolerance): `rpa check --oracle literal` on
    # Pallas's output, which also reports how much of the tolerance was used.
    check_path = os.path.join(tmp, "with_out.npz")
    _save_with_out(check_path, case, out)
    rc_o, cmp_o, err = _rpa_json(rpa, "check", check_path, "--oracle", "literal", "--mode",
                                 "jax", "--json")
    ran.append("rpa check --oracle literal")
    if rc_o not in (0, 1) or not isinstance(cmp_o, dict) or "agree" not in cmp_o:
        fails.append(f"rpa check --oracle literal --mode jax on Pallas's output: exit {rc_o}: "
                     f"{json.dumps(cmp_o) if cmp_o else err}")
        return finish("Pallas runs")
    atol, rtol = cmp_o["atol"], cmp_o["rtol"]
    used = cmp_o["max_tolerance_used"] if cmp_o["agree"] else float("inf")
    same_bits = _same_bits(literal[:rows], out[:rows])
    tally.add_pair(pair, used, cmp_o["max_abs_err"], int(same_bits.sum()),
                   int(same_bits.size), label)
    ran.append(f"literal~pallas {used:.3g} ({int(same_bits.sum())}/{same_bits.size} "
               "identical)")
    if rc_o != 0 or not cmp_o["agree"]:
        fails.append(f"literal vs Pallas (rpa check --oracle literal): {json.dumps(cmp_o)}")
    if rows < out.shape[0]:
        tally.undefined_compared += 1
        same_undefined = _same_bits(literal[rows:], out[rows:])
        if np.all(same_undefined):
            tally.undefined_identical += 1
        else:
            differ = same_undefined.size - int(same_undefined.sum())
            notes.append(f"undefined rows (informational): {differ} of {same_undefined.size} "
                         f"elements differ from Pallas's in their bits")

    # 4. / 5. Strict mode.
    rc, strict, err = _rpa_json(rpa, "validate", path, "--json")
    if rc not in (0, 2) or not isinstance(strict, dict):
        fails.append(f"rpa validate (strict): exit {rc}: {err}")
        return finish("Pallas runs")
    ref, ref_err = _jax_reference_or_error(kernel, case)
    ran.append("jax reference")
    if rc == 0:
        tally.strict_valid += 1
        if ref is None and not _seqs(case):
            # ref_ragged_paged_attention concatenates the sequences' outputs: none, none.
            notes.append(f"JAX's reference cannot run without sequences: {ref_err}")
        elif ref is None:
            fails.append(f"JAX's reference raised on a strict-valid case: {ref_err}")
        else:
            # JAX's reference against rpa's in the same (reference) semantics; against the
            # kernel semantics it may differ (finding 11: it rounds p and p.V to V's dtype).
            rc_c, cmp, err = _rpa_check_out(rpa, check_path, case, ref, semantics="reference")
            if rc_c != 0:
                fails.append(f"rpa check --semantics reference on JAX's reference: exit {rc_c}: "
                             f"{json.dumps(cmp) if cmp else err}")
            rc_k, _, _ = _rpa_check_out(rpa, check_path, case, ref)
            tally.ref_outside_kernel += rc_k == 1
        # Pallas's output against the kernel semantics (rpa's default), the oracle's claim.
        rc_c, cmp, err = _rpa_check_out(rpa, check_path, case, out)
        ran.append("rpa check pallas")
        if rc_c != 0 or not isinstance(cmp, dict):
            fails.append(f"rpa check on Pallas's output: exit {rc_c}: "
                         f"{json.dumps(cmp) if cmp else err}")
        else:
            default_path = os.path.join(tmp, "default.npz")
            rc_d, _, err = _rpa_json(rpa, "run", path, *_DEFAULT_RUN, "-o", default_path,
                                     "--json")
            ran.append("default")
            if rc_d != 0:
                fails.append(f"rpa run --schedule default: exit {rc_d}: {err}")
            else:
                default = rpa_case.load_case(default_path)["out"]
                # The kernel semantics' per-element terms (float32, MXU, logits), at their
                # largest everywhere.
                used_rpa = tolerance_used(default, out, rows,
                                          cmp["atol"] + cmp.get("max_element_atol", 0.0),
                                          cmp["rtol"])
                if not used_rpa <= 1.0:
                    fails.append(f"default schedule vs Pallas: rpa's tolerance used "
                                 f"{used_rpa:.4g}")
                used_sched = tolerance_used(default, out, rows, atol, rtol)
                if not used_sched <= 1.0:
                    tally.default_beyond_schedule += 1
                    notes.append(f"default schedule differs from Pallas beyond the schedule "
                                 f"tolerance ({used_sched:.3g}; rpa's {used_rpa:.3g})")
        return finish("strict valid")
    rule = strict.get("rule", "?")
    if ref is None:
        notes.append(f"strict {rule}; JAX's reference raised: {ref_err}")
        return finish(f"strict rejects ({rule})")
    # Informational: where strict mode rejects, how far Pallas is from JAX's reference
    # (rpa claims no reference tolerance there). Relative to max |reference|.
    with np.errstate(all="ignore"):
        a = np.asarray(out[:rows], np.float64)
        b = np.asarray(ref[:rows], np.float64)
        scale = float(np.nanmax(np.abs(b), initial=0.0))
        diff = float(np.nanmax(np.abs(a - b), initial=0.0))
        nan_mismatch = int(np.sum(np.isnan(a) != np.isnan(b)))
    ran.append(f"pallas~jax reference {diff:.3g} of max {scale:.3g}")
    if diff > 1e-3 * max(scale, 1e-30) or nan_mismatch:
        tally.findings += 1
        notes.append(f"Pallas differs from JAX's reference by {diff:.4g} (max |ref| "
                     f"{scale:.4g}, {nan_mismatch} NaN mismatches); strict rule {rule}: "
                     f"{strict.get('message', '')}")
    return finish(f"strict rejects ({rule})")


def generate_pallas_case(rpa, path, seed, profile, size):
    """`rpa gen` with head_dim 128; returns '' or the error."""
    proc = subprocess.run([rpa, "gen", "--seed", str(seed), "--profile", profile, "--size",
                           str(size), "--head-dim", "128", "-o", path],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return f"exit {proc.returncode}: {lines[-1] if lines else ''}"
    return ""


def run_pallas_mode(kernel, pallas, rpa, count, seed, size_max, paths, keep, min_generated=0):
    """The Pallas mode: `count` generated cases from `seed` and the case files in paths
    that Pallas can trace. Prints a line per case and the summary; returns True if none
    failed and the Pallas kernel ran on at least min_generated of the generated cases."""
    # The interpreter logs each exception raised in its callbacks (an out-of-bounds read,
    # say) with a traceback before it reaches run_pallas as a PallasError; the case's line
    # reports it.
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)
    tally = PallasTally()
    generated_ran = 0  # generated cases the Pallas kernel ran on (it did not raise)
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    skipped = 0

    def keep_case(path, name):
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(path, os.path.join(keep, name))

    with tempfile.TemporaryDirectory(prefix="cross_check_jax.") as tmp:
        for path in case_paths(paths):
            try:
                traceable, why = pallas_traceable(rpa_case.load_case(path))
            except Exception as e:  # pylint: disable=broad-except
                traceable, why = True, str(e)  # check_pallas_case reports it
            if not traceable:
                skipped += 1
                print(f"SKIP {path}: {why}")
                continue
            if not check_pallas_case(kernel, pallas, rpa, path, path, tally, tmp):
                keep_case(path, os.path.basename(path))
        for i in range(count):
            profile = _PALLAS_PROFILES[i % len(_PALLAS_PROFILES)]
            case_seed = int(rng.integers(0, 2**32))
            size = int(rng.integers(0, size_max + 1))
            name = f"pallas_{seed}_{i}_{profile}_{case_seed}_{size}.npz"
            path = os.path.join(tmp, name)
            label = f"pallas seed={seed} #{i} (gen --seed {case_seed} --profile {profile} " \
                    f"--size {size})"
            err = generate_pallas_case(rpa, path, case_seed, profile, size)
            if err:
                tally.failed += 1
                tally.outcomes["rpa gen failed"] += 1
                print(f"DIFF {label}: rpa gen failed: {err}")
                continue
            ran_before = tally.pallas_ran
            if not check_pallas_case(kernel, pallas, rpa, path, label, tally, tmp):
                keep_case(path, name)
            generated_ran += tally.pallas_ran - ran_before
            os.remove(path)
    elapsed = time.monotonic() - start

    print("\ncases by outcome:")
    for outcome, n in sorted(tally.outcomes.items(), key=lambda x: (-x[1], x[0])):
        print(f"  {n:5}  {outcome}")
    for (rule, what), n in sorted(tally.validation.crash_outcomes.items()):
        print(f"jax_crash rule {rule}: JAX {what} x{n}")
    print("\nliteral schedule vs Pallas on defined rows, per dtype pair (used = max |rpa - "
          "pallas| / (atol + rtol |pallas|), schedule tolerance; 1.0 = its edge)")
    print(f"{'q/kv dtypes':28} {'cases':>5} {'max used':>10} {'max |diff|':>11} "
          f"{'identical':>10}  worst case")
    extra = sorted(set(tally.pairs) - set(_PALLAS_DTYPE_PAIRS))
    for pair in _PALLAS_DTYPE_PAIRS + tuple(extra):
        entry = tally.pairs.get(pair)
        name = f"{pair[0]}/{pair[1]}"
        if not entry:
            print(f"{name:28} {0:5} {'-':>10} {'-':>11} {'-':>10}")
            continue
        cases, used, max_abs, same, total, worst = entry
        share = f"{100.0 * same / total:.2f}%" if total else "-"
        print(f"{name:28} {cases:5} {used:10.3g} {max_abs:11.3g} {share:>10}  {worst}")
    print(f"\nstrict-valid cases: {tally.strict_valid} (rpa check --semantics reference on "
          f"JAX's reference, rpa check --semantics kernel on Pallas, the default schedule "
          f"against Pallas); default schedule beyond the schedule tolerance of Pallas: "
          f"{tally.default_beyond_schedule}; JAX's reference outside the kernel semantics "
          f"(it rounds p to V's dtype): {tally.ref_outside_kernel}")
    print(f"literal's undefined rows bit-identical to Pallas's: {tally.undefined_identical} "
          f"of {tally.undefined_compared} cases with undefined rows")
    print(f"rpa flags jax_crash where Pallas runs: {tally.crash_runs}; strict-rejected cases "
          f"where Pallas differs from JAX's reference by more than 1e-3 of its max: "
          f"{tally.findings}")
    print(f"edge cases among the {tally.pallas_ran} cases Pallas ran:")
    for name, text in _EDGE_FEATURES:
        print(f"  {tally.edges[name]:5}  {text}")
    if skipped:
        print(f"{skipped} case files skipped (Pallas cannot trace them)")
    print(f"{tally.passed + tally.failed} cases in {elapsed:.1f} s; the Pallas kernel ran on "
          f"{generated_ran} of the {count} generated ones and "
          f"{tally.pallas_ran - generated_ran} case files")
    if generated_ran < min_generated:
        tally.failed += 1
        print(f"DIFF the Pallas kernel ran on {generated_ran} generated cases, fewer than "
              f"--min-generated {min_generated}")
    print(f"cross_check_jax pallas: {tally.passed} passed, {tally.failed} failed")
    return tally.failed == 0


def _default_rpa():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = os.path.join(root, "build", "release", "rpa")
    return built if os.path.exists(built) else (shutil.which("rpa") or built)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Compare `rpa validate --mode jax` with JAX's validation, and rpa's "
        "dense reference with JAX's ref_ragged_paged_attention.")
    parser.add_argument("paths", nargs="*", help="case files, or directories of .npz")
    parser.add_argument("--rpa", default=_default_rpa(), help="the rpa binary")
    parser.add_argument("--random", type=int, default=0, metavar="N",
                        help="also check N random small cases")
    parser.add_argument("--reference", type=int, default=0, metavar="N",
                        help="check rpa's dense reference against JAX's "
                        "ref_ragged_paged_attention on N random strict-valid cases")
    parser.add_argument("--jit", action="store_true",
                        help="--reference: run JAX's reference as one jax.jit per case "
                        "(about 5x faster; an element may round differently from the eager "
                        "call)")
    parser.add_argument("--pallas", type=int, default=None, metavar="N",
                        help="run JAX's Pallas kernel in TPU interpret mode on N generated "
                        "cases and on the case files given (--pallas 0: those only) against "
                        "rpa's literal schedule, validation, reference and default schedule")
    parser.add_argument("--min-generated", type=int, default=0, metavar="K",
                        help="--pallas: fail unless the Pallas kernel ran (did not raise) on "
                        "at least K of the generated cases")
    parser.add_argument("--size-max", type=int, default=24, metavar="Z",
                        help="--pallas: `rpa gen` sizes are drawn from 0..Z (default 24)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the random cases")
    parser.add_argument("--keep", metavar="DIR", help="copy differing random cases here")
    args = parser.parse_args(argv)
    if not args.paths and not args.random and not args.reference and args.pallas is None:
        parser.error("give case files / directories, --random N, --reference N or "
                     "--pallas N")
    if not 0 <= args.size_max <= 400:
        parser.error("--size-max must be in 0..400")
    if not os.path.exists(args.rpa) and not shutil.which(args.rpa):
        parser.error(f"no rpa binary at {args.rpa} (build it, or pass --rpa)")
    if (args.reference or args.pallas is not None) and ml_dtypes is None:
        parser.error("--reference and --pallas need ml_dtypes (JAX installs it)")

    # No JAX, or one the Pallas patches do not fit, fails loudly: nothing is skipped.
    try:
        kernel = _kernel_module()
        pallas = None
        if args.pallas is not None:
            pallas = _pallas_module()
            pallas.check_version()
            pallas.patched_kernel()
    except Exception as e:  # pylint: disable=broad-except
        traceback.print_exc()
        print(f"cross_check_jax: cannot set up JAX: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    ok = True
    # With --pallas, the case files given are checked in the Pallas mode.
    validation_paths = [] if pallas else args.paths
    if validation_paths or args.random:
        tally = Tally()
        for path in case_paths(validation_paths):
            check_file(kernel, args.rpa, path, tally)
        if args.random:
            run_random(kernel, args.rpa, args.random, args.seed, args.keep, tally)
        for (rule, what), n in sorted(tally.crash_outcomes.items()):
            print(f"jax_crash rule {rule}: JAX {what} x{n}")
        if tally.normalized:
            print(f"({tally.normalized} agreeing messages needed numpy / jax Array reprs "
                  "normalized)")
        print(f"cross_check_jax: {tally.passed} passed, {tally.failed} failed")
        ok = not tally.failed
    if args.reference:
        ok = run_reference(kernel, args.rpa, args.reference, args.seed, args.keep,
                           args.jit) and ok
    if pallas:
        ok = run_pallas_mode(kernel, pallas, args.rpa, args.pallas, args.seed, args.size_max,
                             args.paths, args.keep, args.min_generated) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
