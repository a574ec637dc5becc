"""JAX's own validation on an rpa.Case, and its outcome against rpa's jax mode.

For every case, JAX's validation is called exactly as a user would call it from numpy
arrays (bfloat16 / float8 as ml_dtypes arrays, parameters as Python floats and ints,
absent parameters as None):

    dynamic_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                            sm_scale=..., ..., vmem_limit_bytes=...)
    get_min_heads_per_blk(num_q_heads, num_combined_kv_heads, q.dtype, kv_pages.dtype)

and its outcome (accepted, a ValueError raised by one of those validators, or anything
else: another exception, or a ValueError from inside numpy / JAX) is compared with
`rpa.validate(case, mode="jax")` (what `rpa validate CASE --mode jax` says):

- JAX accepts                 -> rpa must say valid, or reject with a jax_crash rule
                                 (JAX misbehaves silently there);
- a validator's ValueError    -> rpa must reject with a rule that is not jax_crash and
                                 the same message. JAX prints numpy scalars and jax
                                 Arrays in its dynamic messages (`np.int32(3)`,
                                 `Array(3, dtype=int32)`) where rpa prints `3`
                                 (DESIGN.md section 3); those reprs are normalized;
- any other exception         -> rpa must reject with a jax_crash rule.
"""
from __future__ import annotations

import dataclasses
import os
import re
import traceback
import warnings

import rpa
from rpa._case import FLOAT_PARAMS, INT_PARAMS

PARAMS = FLOAT_PARAMS + INT_PARAMS


def kernel_module():
    """Imports JAX's ragged paged attention kernel module (slow: imports JAX)."""
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel  # pylint: disable=import-outside-toplevel
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
    set when rpa did not give a verdict (rpa.validate raised)."""
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


def jax_outcome(kernel, case):
    """Runs JAX's validation on a case.

    Args:
      kernel: JAX's ragged_paged_attention kernel module (kernel_module()).
      case: an rpa.Case; its parameters that are None are passed as None (sm_scale is 1.0
        when a case file leaves it out: JAX's validators do not look at it).
    Returns:
      A JaxOutcome.
    """
    params = {name: getattr(case, name) for name in PARAMS}
    q, kv_pages = case.q, case.kv_pages
    try:
        with warnings.catch_warnings():
            # int32 scalar arithmetic wraps with a RuntimeWarning, as it would for a user.
            warnings.simplefilter("ignore")
            kernel.dynamic_validate_inputs(q, kv_pages, case.kv_lens, case.page_indices,
                                           case.cu_q_lens, case.num_seqs, **params)
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


def rpa_outcome(case, mode="jax"):
    """rpa.validate(case, mode) (what `rpa validate CASE --mode MODE` says) as an
    RpaOutcome: valid, or the first failing rule."""
    try:
        verdict = rpa.validate(case, mode=mode)
    except Exception as e:  # pylint: disable=broad-except
        first = str(e).strip().splitlines()
        return RpaOutcome(error=f"{type(e).__name__}: {first[0] if first else ''}")
    if verdict.valid:
        return RpaOutcome(valid=True)
    return RpaOutcome(rule=verdict.rule, message=verdict.message, jax_crash=verdict.jax_crash)


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


def compare(jax, rpa_side):
    """Returns (agree, note) for a JAX outcome and an rpa outcome."""
    if rpa_side.error:
        return False, "rpa gave no verdict"
    if jax.kind == "accepted":
        if rpa_side.valid:
            return True, ""
        if rpa_side.jax_crash:
            return True, "JAX accepts silently where rpa flags jax_crash"
        return False, "JAX accepts, rpa rejects"
    if jax.kind == "value_error":
        if rpa_side.valid:
            return False, "JAX raises ValueError, rpa accepts"
        if rpa_side.jax_crash:
            return False, "JAX raises a clean ValueError where rpa flags jax_crash"
        if rpa_side.message == jax.message:
            return True, ""
        if rpa_side.message == normalize_message(jax.message):
            return True, "reprs normalized"
        return False, "messages differ"
    if rpa_side.valid:
        return False, "JAX crashes, rpa accepts"
    if not rpa_side.jax_crash:
        return False, "JAX crashes, rpa's rule is not jax_crash"
    return True, ""
