"""The functions of the rpa package: validate, reference, kernel, check, gen, workload. Each
calls the C++ function the matching CLI command calls, with the CLI's own options."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from typing import Any, Optional

import numpy as np

from rpa import _rpa
from rpa._case import ArrayLike, Case, as_numpy, from_native


class Rejected(ValueError):
    """Validation rejected the case, so it has no defined output (or, in jax mode, JAX
    raises). ``rule`` and ``message`` are the rule's id and JAX-style message (None where the
    literal schedule cannot run the dtypes), ``mode`` the mode that rejected it."""

    def __init__(self, why: str, rule: Optional[str], message: Optional[str], mode: str):
        super().__init__(why)
        self.why, self.rule, self.message, self.mode = why, rule, message, mode


class KernelDoesNotReturn(RuntimeError):
    """The literal v3 schedule (rpa.kernel(case, schedule="literal") on a v3 case) reached a
    point where tpu-inference's kernel does not return: ``kind`` "trace" (it cannot trace),
    "run" (interpret mode raises) or "hang" (a DMA wait nothing satisfies); ``why`` says
    where."""

    def __init__(self, stop: str):
        super().__init__(stop)
        self.kind, _, self.why = stop.partition(": ")


class CheckFailed(AssertionError):
    """A check's verdict was mismatch or biased. The message is what ``rpa check`` prints,
    then the command that replays the saved case (``path``) with the CLI."""

    def __init__(self, text: str, result: "CheckResult", path: Optional[str]):
        super().__init__(text)
        self.result, self.path = result, path


def _python_names(message: str) -> str:
    """A CLI option error in the package's names: '--dot-passes takes 6, 3 or 1' ->
    'dot_passes takes 6, 3 or 1'."""
    return re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), message)


def _call(fn, *args):
    try:
        return fn(*args)
    except ValueError as e:
        raise ValueError(_python_names(str(e))) from None


def _flags(**options: Any) -> list[str]:
    flags: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def _rejected(r: dict) -> Rejected:
    return Rejected(r["why"], r["rule"], r["message"], r["mode"])


# -- validation ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Failure:
    """One failing rule: its id, JAX-style message, whether JAX crashes there instead of
    raising (jax mode), and the line rpa validate prints."""

    rule: str
    message: str
    jax_crash: bool
    line: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What validation says of a case in one mode. True when valid; ``rule``, ``message`` and
    ``jax_crash`` are those of the first failing rule, ``failures`` every failing rule in
    table order."""

    valid: bool
    mode: str
    failures: tuple[Failure, ...]

    @property
    def rule(self) -> Optional[str]:
        return self.failures[0].rule if self.failures else None

    @property
    def message(self) -> Optional[str]:
        return self.failures[0].message if self.failures else None

    @property
    def jax_crash(self) -> bool:
        return bool(self.failures) and self.failures[0].jax_crash

    def __bool__(self) -> bool:
        return self.valid

    def __str__(self) -> str:
        if self.valid:
            return f"valid in {self.mode} mode"
        return f"rejected in {self.mode} mode by {self.failures[0].line}"


def validate(case: Case, mode: str = "strict", target: Optional[str] = None) -> Verdict:
    """Validates the case as ``rpa validate --all`` does. mode: "strict" (exactly the inputs
    with a defined output) or "jax" (JAX 0.10.2's own validators); target: the TPU generation
    whose VMEM/SMEM bound strict mode (default v6e).

    A case of a tpu-inference v3 dialect takes mode "strict" or "native" (tpu-inference
    0.32.0's own static_validate_inputs then dynamic_validate_inputs, with their messages as
    they print for JAX-array arguments, plus the rules where its kernel crashes although they
    accept: ``jax_crash``); it has no target. Every failing rule is listed."""
    if case.is_v3:
        if target is not None:
            raise ValueError("target goes with the jax dialect, not " + case.dialect)
        arrays, params = case._native()
        failures = _call(_rpa.v3_validate, arrays, params, mode, True)
        return Verdict(not failures, mode,
                       tuple(Failure(*f) for f in failures))
    if mode == "native":
        mode = "jax"  # the jax dialect's native mode
    arrays, params = case._native()
    failures = _call(_rpa.validate, arrays, params,
                     _flags(mode=mode, target=target, all=True))
    return Verdict(not failures, mode, tuple(Failure(*f) for f in failures))


# -- computing -------------------------------------------------------------------------------
def _not_v3(case: Case, what: str) -> None:
    if case.is_v3:
        raise ValueError(f"{what} takes a jax-dialect case, not {case.dialect} (rpa.reference "
                         "and rpa.check take both)")


def _run(case: Case, **options: Any) -> Any:
    arrays, params = case._native()
    if case.is_v3:  # what rpa run does with a v3 case: (out, kv_cache)
        rejection, result, stop = _call(_rpa.v3_run, arrays, params, _flags(**options))
        if rejection is not None:
            raise _rejected(rejection)
        if stop is not None:
            raise KernelDoesNotReturn(stop)
        return from_native(result[0]), from_native(result[1])
    rejection, out = _call(_rpa.run, arrays, params, _flags(**options))
    if rejection is not None:
        raise _rejected(rejection)
    return from_native(out)


def reference(case: Case, semantics: str = "kernel", mode: str = "strict",
              target: Optional[str] = None) -> Any:
    """The dense reference's output o [T, Hq, D] in q's dtype (``rpa run --impl reference``).
    semantics: "kernel" (as JAX's Pallas kernel rounds) or "reference" (as JAX's
    ref_ragged_paged_attention). Rows past cu_q_lens[num_seqs] are 0. Raises Rejected unless
    strict validation accepts the case.

    For a tpu-inference v3 case: (out, kv_cache), the output [T, Hq, D] in the queries' dtype
    (rows past cu_q_lens[distribution[2]] 0) and the cache after the fused update
    (reference/v3_reference.h); semantics "kernel" (the v3 kernel in exact arithmetic) or
    "reference" (ref_ragged_paged_attention(_hd64) step for step). Raises Rejected unless
    strict validation accepts the case."""
    return _run(case, impl="reference", semantics=semantics, mode=mode, target=target)


def _v3_strict(case: Case, mode: str, target: Optional[str]) -> None:
    """Raises Rejected unless strict validation accepts the v3 case (what the v3 reference
    and comparison need)."""
    if mode != "strict" or target is not None:
        raise ValueError(f"a {case.dialect} case computes in strict mode only, with no target")
    verdict = validate(case, mode="strict")
    if not verdict.valid:
        raise Rejected(f"rejected in strict mode by {verdict.failures[0].line}", verdict.rule,
                       verdict.message, "strict")


def kernel(case: Case, schedule: str = "default", threads: Optional[int] = None,
           mode: str = "strict", target: Optional[str] = None) -> np.ndarray:
    """The TPU-tiled kernel's output o [T, Hq, D] in q's dtype (``rpa run --impl kernel``).
    schedule: "default" (fast) or "literal" (the Pallas program step by step; with
    mode="jax" it runs any input JAX accepts). threads: worker threads, None for every core
    (the bits never depend on it). Raises Rejected when validation rejects the case.

    For a tpu-inference v3 case: (out, kv_cache), the output and the cache after the fused
    update. The default schedule (kernel/v3_kernel.h) computes strict-valid cases; "literal"
    runs tpu-inference's own program step by step (schedule/v3_program.h: its passes, DMAs,
    double buffers, NaN scratch and out_dtype accumulators) on any call ``mode`` accepts
    (mode="native": whatever tpu-inference's validators accept), on ``target``'s TPU
    generation (default v6e; it picks kernel.py's default block sizes and int16 positions;
    hd64 calls must name their block sizes), and returns every row as the kernel leaves it
    (rows no pass stores hold the queries; hd64: zeros). Raises KernelDoesNotReturn where the kernel
    cannot trace, raises or hangs."""
    return _run(case, impl="kernel", schedule=schedule, threads=threads, mode=mode,
                target=target)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The grid and blocks the tiled kernel runs a case with (``rpa run --impl kernel --json``):
    the Pallas program's for the literal schedule. rows: the rows the sequences define."""

    rows: int
    kv_pages_per_block: int
    queries_per_block: int
    q_heads_per_block: int
    combined_kv_heads_per_block: int
    num_heads_blocks: int
    num_q_blocks: int
    vmem_bytes: int


def plan(case: Case, schedule: str = "default", mode: str = "strict",
         target: Optional[str] = None) -> Plan:
    """How rpa.kernel would run the case, without running it: its block sizes (JAX's untuned
    defaults for the literal schedule in jax mode, as the Pallas kernel takes them), heads per
    block, grid and VMEM. Raises Rejected as rpa.kernel does."""
    _not_v3(case, "rpa.plan")
    arrays, params = case._native()
    rejection, report = _call(_rpa.plan, arrays, params,
                              _flags(impl="kernel", schedule=schedule, mode=mode, target=target))
    if rejection is not None:
        raise _rejected(rejection)
    return Plan(**report)


def path_features(case: Case, target: Optional[str] = None) -> dict[str, int]:
    """The path features of the program the case's call runs (DESIGN.md section 17): name ->
    count of each branch and block kind its literal program walks (jax: the Pallas walk on the
    plan the literal schedule runs; v3: kernel.py's passes or kernel_hd64.py on ``target``'s
    generation, default v6e), without data. A call the dialect's native validation rejects
    gives {"rejected.RULE": 1}."""
    arrays, params = case._native()
    return dict(_call(_rpa.path_features, arrays, params, target or ""))


# -- checking --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mismatch:
    """The first element outside the tolerance."""

    seq: int
    row_in_seq: int
    row: int
    head: int
    col: int
    got: float
    want: float
    allowed: float


@dataclasses.dataclass(frozen=True)
class Bias:
    """Signed error in ulps of the output dtype (DESIGN.md section 6)."""

    biased: bool
    elements: int
    units: int
    exact_share: float
    mean_ulp: float
    se_ulp: float
    mean_toward_zero_ulp: float
    se_toward_zero_ulp: float


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The verdict of a check and what it rests on (the fields of ``rpa check --json``).

    verdict: "agree", "mismatch", "biased" or "rejected". share_of_tolerance: the worst
    element's error as a share of its tolerance. discrimination: the least tolerance /
    |want| (below 1 an all-zero output fails). The check's power, for both dialects (None
    where not stated: a rejected case, a v3 check against the literal schedule; a weight
    where nothing is guaranteed): min_detectable_key_weight, the least weight of a dropped
    key this check is sure to catch (in the row it watches closest), key_weight_every_row,
    the same wherever the key is dropped, and rejects_zero, whether an all-zero output
    fails. text: the lines ``rpa check`` prints."""

    verdict: str
    case: Case
    flags: tuple[str, ...]
    text: Optional[str] = None
    detail: str = ""
    share_of_tolerance: Optional[float] = None
    discrimination: Optional[float] = None
    min_detectable_key_weight: Optional[float] = None
    key_weight_every_row: Optional[float] = None
    rejects_zero: Optional[bool] = None
    max_abs_err: Optional[float] = None
    atol: Optional[float] = None
    rtol: Optional[float] = None
    compared: int = 0
    mismatches: int = 0
    first_mismatch: Optional[Mismatch] = None
    bias: Optional[Bias] = None
    rejection: Optional[Rejected] = None
    #: The C++ check's own time (validation, the computations, the comparison), as
    #: ``rpa check --json`` reports it.
    seconds: Optional[float] = None
    json: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True for "agree"."""
        return self.verdict == "agree"

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.text.rstrip("\n") if self.text else f"case: {self.verdict} ({self.detail})"

    def raise_for_verdict(self, save_dir: Optional[str] = None) -> "CheckResult":
        """Returns self when the verdict is "agree". A mismatch or a bias raises CheckFailed:
        the case (with the output checked) is saved under save_dir (default: $RPA_FAILURE_DIR,
        else rpa-failures/ in the temporary directory) and the message ends with the
        ``rpa check`` command that replays it. A rejected case raises Rejected."""
        if self.verdict == "agree":
            return self
        if self.verdict == "rejected" and self.rejection is not None:
            raise self.rejection
        path = _save_failure(self.case, save_dir)
        replay = " ".join(["rpa check", path, *self.flags])
        raise CheckFailed(f"{self}\nreplay: {replay}", self, path)


def _save_failure(case: Case, save_dir: Optional[str]) -> str:
    folder = save_dir or os.environ.get("RPA_FAILURE_DIR") or os.path.join(
        tempfile.gettempdir(), "rpa-failures")
    os.makedirs(folder, exist_ok=True)
    data = case.to_bytes()
    path = os.path.join(folder, f"case-{hashlib.sha256(data).hexdigest()[:16]}.npz")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _optional_float(j: dict, key: str) -> Optional[float]:
    v = j.get(key)
    return None if v is None else float(v)


def check(case: Case, out: Optional[ArrayLike] = None, *, semantics: Optional[str] = None,
          oracle: str = "reference", schedule: Optional[str] = None, mode: str = "strict",
          target: Optional[str] = None, threads: Optional[int] = None, dot_passes: int = 6,
          allow_bias: bool = False, label: str = "case") -> CheckResult:
    """Checks an output as ``rpa check`` does: ``out`` (else the case's own ``out``, else the
    tiled kernel's output with ``schedule``) against the dense reference in ``semantics``
    (default "kernel"), or with oracle="literal" against the literal schedule (the Pallas
    program) under the schedule tolerance. allow_bias: a biased output still agrees.
    A tpu-inference v3 case checks out=(out, kv_cache) (else the case's out and kv_cache_out)
    against the v3 reference, or with oracle="literal" against the literal v3 schedule on
    any call mode accepts (mode="native"; target: the TPU generation).
    dot_passes: the bfloat16 passes a TPU makes of a float32 dot (6, 3 or 1). The result's
    text names the case ``label``. Raises ValueError for options that do not fit together."""
    if case.is_v3:
        return _v3_check(case, out, semantics=semantics, oracle=oracle, schedule=schedule,
                         mode=mode, target=target, dot_passes=dot_passes, allow_bias=allow_bias,
                         label=label)
    if out is not None:
        case = case.replace(out=as_numpy("out", out))
    # The replay command takes the options that decide the verdict (the bits never depend on
    # the thread count).
    replay_flags = tuple(_flags(mode=mode, target=target, semantics=semantics, oracle=oracle,
                                schedule=schedule, dot_passes=dot_passes, allow_bias=allow_bias))
    flags = list(replay_flags) + _flags(threads=threads)
    arrays, params = case._native()
    verdict, detail, js, text, rejection = _call(_rpa.check, arrays, params, flags, label)
    if verdict == "unreadable":  # an `out` of another shape or dtype than q's
        raise ValueError(detail.replace(f"{label}: member 'out.npy' is", "out:", 1))
    if js is None:
        return CheckResult(verdict, case, replay_flags, detail=detail,
                           rejection=_rejected(rejection) if rejection else None)
    j = json.loads(js)
    b = j["bias"]
    first = j.get("first")
    return CheckResult(
        verdict, case, replay_flags, text=text, detail=detail,
        share_of_tolerance=float(j["max_tolerance_used"]),
        discrimination=_optional_float(j, "discrimination"),
        min_detectable_key_weight=_optional_float(j, "min_detectable_key_weight"),
        key_weight_every_row=_optional_float(j, "key_weight_every_row"),
        rejects_zero=bool(j["rejects_zero"]),
        max_abs_err=float(j["max_abs_err"]), atol=float(j["atol"]), rtol=float(j["rtol"]),
        compared=int(j["compared"]), mismatches=int(j["mismatches"]),
        first_mismatch=Mismatch(**first) if first else None,
        bias=Bias(**b), seconds=float(j["seconds"]), json=j)


def _v3_check(case: Case, out: Any, *, semantics: Optional[str], oracle: str,
              schedule: Optional[str], mode: str, target: Optional[str], dot_passes: int,
              allow_bias: bool, label: str) -> CheckResult:
    """rpa.check for a tpu-inference v3 case: ``out`` (else the case's) and the case's
    ``kv_cache_out`` against the v3 dense reference in ``semantics`` (oracle/v3_compare.h):
    the cache bit for bit, the defined rows within the semantics' tolerance; with
    oracle="literal", against the literal v3 schedule (schedule/v3_program.h, on ``target``'s TPU
    generation, default v6e) under the schedule tolerance, every row, on any call ``mode``
    accepts (mode="native": any call tpu-inference's validators accept)."""
    if oracle not in ("reference", "literal") or schedule is not None or dot_passes != 6 \
            or allow_bias:
        raise ValueError(f"a {case.dialect} case is checked against the dense reference or the "
                         "literal v3 schedule (oracle), with no schedule, dot_passes or "
                         "allow_bias")
    if oracle == "literal" and semantics is not None:
        raise ValueError("semantics chooses the dense reference's rounding points; "
                         "oracle=\"literal\" compares with the literal v3 schedule instead")
    if out is not None:
        out_tuple = out if isinstance(out, tuple) else (out, None)
        changes = {"out": as_numpy("out", out_tuple[0])}
        if out_tuple[1] is not None:
            changes["kv_cache_out"] = as_numpy("kv_cache_out", out_tuple[1])
        case = case.replace(**changes)
    if case.out is None or case.kv_cache_out is None:
        raise ValueError("a v3 check needs out and kv_cache_out (pass out=(out, kv_cache) or "
                         "set both on the case)")
    semantics = semantics or "kernel"
    flags = tuple(_flags(oracle="literal", mode=mode, target=target) if oracle == "literal"
                  else _flags(semantics=semantics))
    try:
        if oracle == "literal":
            verdict = validate(case, mode=mode)
            if not verdict.valid:
                why = verdict.failures[0].line if verdict.failures else "rejected"
                raise _rejected({"why": f"rejected in {mode} mode by {why}",
                                 "rule": verdict.rule, "message": verdict.message, "mode": mode})
        else:
            _v3_strict(case, mode, target)
    except Rejected as r:
        return CheckResult("rejected", case, flags, detail=r.why, rejection=r)
    arrays, params = case._native()
    j = _call(_rpa.v3_check, arrays, params, semantics, oracle, target or "v6e")
    verdict = "agree" if j["agree"] else "mismatch"
    first = j["first"]
    mismatch = None
    if first is not None:
        row, head, col, got, want, allowed = first
        cu = np.asarray(case.cu_q_lens)
        n = int(case.distribution[2])
        seq = int(np.searchsorted(cu[:n + 1], row, side="right")) - 1
        seq = min(max(seq, 0), max(n - 1, 0))
        mismatch = Mismatch(seq, row - int(cu[seq]), row, head, col, got, want, allowed)
    text = f"{label}: {verdict} ({j['text']})"
    if j["power"] is not None:  # as rpa check words it
        text += f"; power: {j['power']}"
    return CheckResult(verdict, case, flags, text=text, detail=j["text"],
                       share_of_tolerance=float(j["max_share"]),
                       min_detectable_key_weight=_optional_float(j, "min_detectable_key_weight"),
                       key_weight_every_row=_optional_float(j, "key_weight_every_row"),
                       rejects_zero=j["rejects_zero"],
                       max_abs_err=float(j["max_abs_err"]), compared=int(j["compared"]),
                       mismatches=int(j["mismatches"]), first_mismatch=mismatch, json=j)


# -- generating ------------------------------------------------------------------------------
def _generated(native: tuple) -> Case:
    arrays, params, spec, description, _strict, _jax = native
    return Case._from_native((arrays, params), spec=spec, description=description)


def gen(seed: Optional[int] = None, *, profile: Optional[str] = None, size: int = 100,
        head_dim: Optional[int] = None, spec: Optional[str] = None,
        dialect: str = "jax") -> Case:
    """A generated case, as ``rpa gen`` writes it: from a seed (profile "decode", "prefill",
    "mixed", "long", "edge", "long32k" (v3 dialects: one or two sequences of kv_len 32768 to
    65536, the campaign's long tier; past the spec's bounds, so ``case.spec`` is empty and the
    case file replays it) or "production" (a serving-shaped call of a real model, any dialect;
    its spec starts with "prod:" and names the dialect), None for any mix; size 0 to 400
    scales the batch as in a RapidCheck run; head_dim fixes the head dimension), or from the
    hex ``spec`` a property,
    the campaign or a generated case (``case.spec``) printed. dialect: "jax", or
    "tpu_inference_v3" / "tpu_inference_v3_hd64" (``rpa gen --dialect``: a valid v3 call;
    its spec starts with "v3:", and gen(spec=...) takes it whatever the dialect named)."""
    if (seed is None) == (spec is None):
        raise ValueError("gen takes one of seed and spec")
    if spec is not None:
        if profile is not None or head_dim is not None:
            raise ValueError("profile and head_dim go with seed, not spec")
        if spec.startswith("prod:"):
            return _generated(_call(_rpa.production_gen_spec, spec))
        if spec.startswith("v3:"):
            return _generated(_call(_rpa.v3_gen_spec, spec))
        return _generated(_call(_rpa.gen_spec, spec))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed takes a non-negative integer (got {seed!r})")
    if profile == "production":
        if head_dim is not None:
            raise ValueError("head_dim does not go with profile production (the model fixes it)")
        return _generated(_call(_rpa.production_gen, int(seed) % 2**64, dialect))
    if dialect != "jax":
        return _generated(_call(_rpa.v3_gen, int(seed) % 2**64, dialect, profile or "",
                                int(size), head_dim))
    return _generated(_call(_rpa.gen, int(seed) % 2**64, profile or "", int(size), head_dim))


def workload(name: str = "decode", dtype: str = "float32") -> Case:
    """One of ``rpa bench``'s workloads: "decode" (16 sequences, 1 query, kv 1024),
    "prefill" (512 queries, kv 512) or "mixed" (JAX's test mix); 32 q heads, 8 kv heads,
    head_dim 128, page size 16; dtype "float32" or "bfloat16"."""
    return Case._from_native(_call(_rpa.workload, name, dtype))


def rules(dialect: str = "jax") -> list[tuple[str, bool, bool, bool, list[str]]]:
    """The rule table: (rule id, checked in jax mode, checked in strict mode, JAX crashes
    there instead of raising, the named mutations that break it). For a v3 dialect: (rule id,
    checked in native mode, checked in strict mode, tpu-inference crashes there, [])."""
    if dialect != "jax":
        return [tuple(r) for r in _call(_rpa.v3_rules, dialect)]  # type: ignore[misc]
    return [tuple(r) for r in _rpa.rules()]  # type: ignore[misc]


__all__ = ["Rejected", "CheckFailed", "Failure", "Verdict", "validate", "reference", "kernel",
           "Plan", "plan",
           "Mismatch", "Bias", "CheckResult", "check", "gen", "workload", "rules"]
