"""Cross-checks rpa's tpu-inference v3 dialects against tpu-inference 0.32.0 itself
(DESIGN.md section 16; ctest label ``jax_v3``), in the virtualenv of
``scripts/python_v3_venv.sh build/v3venv``:

    build/v3venv/bin/python -m rpa.jax.v3_cross_check --cases 600 --reference 100 --seed 1

Validation: --cases N calls of both dialects (kernel.py, kernel_hd64.py; half each): valid
ones (rpa.jax.v3_cases.random_case, and rpa.gen(dialect=...)) and invalid ones made by
mutating valid ones so that every rule of tpu-inference's validators trips (v3_cases.MUTATIONS,
taken in turn), plus the package's own ValueError tests. tpu-inference's
``dynamic_validate_inputs`` (static, then per-sequence checks), called with JAX arrays as vLLM
calls it, against ``rpa.validate(case, mode="native")``: where tpu-inference raises its
ValueError, rpa must reject with a rule that is not a crash rule and exactly its message; where
it accepts, rpa must accept or name a crash rule (its kernel fails there although its
validators accept); where the validators raise anything else, rpa must name a crash rule.

Reference: --reference M strict-valid calls (v3_cases.random_case, v3_cases.reference_case and
rpa.gen(dialect=...) in turn, or with --fixed-shapes reference_case alone, whose few shapes
let the eager reference reuse its compilations; rpa.validate(mode="strict") accepts them, the
generators' other cases are counted, not checked) and the package's test scenarios
(v3_cases.scenarios: every parametrization of its two test files that computes an output,
rebuilt step for step as its harness builds them; --scenarios quick keeps the small ones,
--scenarios cover a covering set of those, every feature in fewer calls)
through tpu-inference's ``ref_ragged_paged_attention(_hd64)`` (eager, as its tests call it)
and ``rpa.check(case, (out, kv_cache), semantics="reference")``: the updated cache must be
bit-equal to rpa's and the defined output rows inside the tolerance of oracle/v3_compare.h.

Pallas: --pallas K generated calls (v3_cases.reference_case's few fixed shapes, so most runs
reuse a compilation, and random_case's every option in turn; both dialects; TPU generations 5,
6 and 7 in turn) and --pallas-scenarios the package's test scenarios through tpu-inference's
own kernels in TPU interpret mode (rpa.jax.v3_pallas: seven source patches per kernel file, a
watchdog). Every call its validators accept runs; on a strict-valid one the kernel must run and
its output and cache must agree with rpa's kernel semantics (``rpa.check``; the cache bit for
bit); what it does with the others is counted per strict rule.

One line per disagreement, with the case saved (the tpu-inference results as out /
kv_cache_out) under $RPA_FAILURE_DIR (else rpa-v3-failures/ in the temporary directory) and
the line that replays it (``--replay PATH``); then counts per dialect, per mutation and per
(q, KV) dtype pair with the largest |difference| and share of the tolerance, and last
``v3_cross_check: N passed, M failed``. Exit status 1 on any disagreement, or when tpu-inference
0.32.0 and jax 0.11.2 are not installed.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import os
import sys
import tempfile
import time
from typing import Any, Optional

import numpy as np

V3 = "tpu_inference_v3"
HD64 = "tpu_inference_v3_hd64"


@dataclasses.dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    # validation: (dialect, tpu-inference outcome kind) -> count; mutation -> outcome kinds
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    mutations: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(
        collections.Counter))
    rules: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(
        collections.Counter))
    # reference: (dialect, q dtype, kv dtype) -> [count, max |diff|, max share, scenarios]
    pairs: dict = dataclasses.field(default_factory=dict)
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    notes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: list = dataclasses.field(default_factory=list)

    def add_pair(self, case, result, scenario: bool) -> None:
        add_pair(self.pairs, case, result, scenario)


def add_pair(pairs: dict, case, result, scenario: bool) -> None:
    """Counts an agreeing check in pairs[(dialect, q dtype, kv dtype)]: [count, max |diff|,
    max share of the tolerance, scenarios]."""
    key = (case.dialect, case.queries.dtype.name, case.kv_cache.dtype.name)
    row = pairs.setdefault(key, [0, 0.0, 0.0, 0])
    row[0] += 1
    row[1] = max(row[1], result.max_abs_err or 0.0)
    row[2] = max(row[2], result.share_of_tolerance or 0.0)
    row[3] += scenario


def print_pairs(pairs: dict) -> None:
    print(f"  {'dialect':24s} {'q':9s} {'kv':14s} {'cases':>5s} {'scenarios':>9s} "
          f"{'max |diff|':>11s} {'of tolerance':>12s}")
    for (dialect, q, kv), (n, diff, share, sc) in sorted(pairs.items()):
        print(f"  {dialect:24s} {q:9s} {kv:14s} {n:5d} {sc:9d} {diff:11.4g} {share:12.3g}")


def failure_dir() -> str:
    return os.environ.get("RPA_FAILURE_DIR") or os.path.join(tempfile.gettempdir(),
                                                              "rpa-v3-failures")


def save_failure(case) -> str:
    folder = failure_dir()
    os.makedirs(folder, exist_ok=True)
    try:
        data = case.to_bytes()
    except ValueError as e:  # a case the writer cannot hold: say so, keep going
        return f"(not saved: {e})"
    path = os.path.join(folder, f"v3-case-{hashlib.sha256(data).hexdigest()[:16]}.npz")
    with open(path, "wb") as f:
        f.write(data)
    return path


def fail(tally: Tally, label: str, case, why: str) -> None:
    tally.failed += 1
    path = save_failure(case)
    line = (f"DIFF {label}: {why}\n  case: {case!r}\n  saved: {path}\n  replay: "
            f"{sys.executable} -m rpa.jax.v3_cross_check --replay {path}")
    tally.failures.append(line)
    print(line, flush=True)


# -- validation ------------------------------------------------------------------------------
def compare_validation(tpu, verdict) -> Optional[str]:
    """None when rpa's native verdict is what tpu-inference's validators require, else why
    not."""
    if tpu.kind == "accepted":
        if verdict.valid or verdict.jax_crash:
            return None
        return f"tpu-inference accepts, rpa rejects: {verdict.rule}: {verdict.message}"
    if tpu.kind == "value_error":
        if verdict.valid:
            return f"tpu-inference raises ValueError: {tpu.message!r}; rpa accepts"
        if verdict.jax_crash:
            return (f"tpu-inference raises its ValueError {tpu.message!r}; rpa names crash rule "
                    f"{verdict.rule}")
        if verdict.message != tpu.message:
            return (f"messages differ:\n    tpu-inference: {tpu.message!r}\n    rpa "
                    f"({verdict.rule}): {verdict.message!r}")
        return None
    if verdict.valid:
        return f"tpu-inference's validators crash ({tpu.describe()}); rpa accepts"
    if not verdict.jax_crash:
        return (f"tpu-inference's validators crash ({tpu.describe()}); rpa's rule {verdict.rule} "
                "is not a crash rule")
    return None


def check_validation(case, label: str, tally: Tally, mutation: str = "valid") -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import tpu_inference  # pylint: disable=import-outside-toplevel
    tpu = tpu_inference.validator_outcome(case)
    try:
        verdict = rpa.validate(case, mode="native")
    except ValueError as e:
        fail(tally, label, case, f"rpa gives no verdict: {e}")
        return
    tally.outcomes[(case.dialect, tpu.kind)] += 1
    tally.mutations[(case.dialect, mutation)][tpu.kind] += 1
    tally.rules[case.dialect][verdict.rule or "(valid)"] += 1
    why = compare_validation(tpu, verdict)
    if why is None:
        tally.passed += 1
    else:
        fail(tally, label, case, why)


def run_validation(count: int, seed: int, tally: Tally) -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import v3_cases  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng([seed, 0])
    mutations = [0, 0]  # per dialect: the next mutation to apply
    for i in range(count):
        dialect = v3_cases.DIALECTS[i % 2]
        k = i // 2
        if k % 5 == 0:
            case = v3_cases.random_case(rng, dialect)
            check_validation(case, f"valid #{i} ({dialect})", tally)
        elif k % 5 == 1:
            case = rpa.gen(seed=seed * 100003 + i, dialect=dialect, size=int(rng.integers(0, 60)))
            check_validation(case, f"rpa.gen #{i} ({dialect}, spec {case.spec})", tally,
                             "rpa.gen")
        else:
            name, case = v3_cases.mutated_case(rng, dialect, mutations[i % 2])
            mutations[i % 2] += 1
            check_validation(case, f"mutation {name} #{i} ({dialect})", tally, name)
    for dialect in v3_cases.DIALECTS:
        for name, case in v3_cases.scenario_errors(dialect):
            check_validation(case, f"package test {name} ({dialect})", tally, "package:" + name)


def print_validation(tally: Tally) -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    print("validation: tpu-inference's outcome per dialect")
    for (dialect, kind), n in sorted(tally.outcomes.items()):
        print(f"  {dialect:24s} {kind:12s} {n}")
    print("validation: per mutation (tpu-inference's outcomes)")
    for (dialect, name), kinds in sorted(tally.mutations.items()):
        print(f"  {dialect:24s} {name:26s} " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    for dialect in (V3, HD64):
        native = [r[0] for r in rpa.rules(dialect) if r[1]]
        hit = tally.rules.get(dialect, {})
        missing = [r for r in native if r not in hit]
        print(f"  {dialect}: {len(native) - len(missing)} of {len(native)} native rules tripped"
              + (f"; never: {', '.join(missing)}" if missing else ""))


# -- reference -------------------------------------------------------------------------------
def check_reference(case, label: str, tally: Tally, scenario: bool = False) -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import tpu_inference  # pylint: disable=import-outside-toplevel
    try:
        out, cache = tpu_inference.reference(case)
    except Exception as e:  # pylint: disable=broad-except
        fail(tally, label, case, f"tpu-inference's reference raises {type(e).__name__}: {e}")
        return
    if out.dtype != case.queries.dtype:
        fail(tally, label, case, f"tpu-inference's reference returns {out.dtype}, the queries "
             f"are {case.queries.dtype} (out_dtype={case.out_dtype})")
        return
    cache, canonicalized = _nan_payloads(case, cache)
    if canonicalized:
        tally.notes["cache NaNs whose payload tpu-inference's reference (XLA) rewrote"] += 1
    checked = case.replace(out=out, kv_cache_out=cache)
    try:
        result = rpa.check(checked, semantics="reference")
    except ValueError as e:
        fail(tally, label, checked, f"rpa.check gives no verdict: {e}")
        return
    if result.verdict != "agree":
        fail(tally, label, checked, f"{result.verdict}: {result.detail}")
        return
    tally.passed += 1
    tally.add_pair(case, result, scenario)


def _nan_payloads(case, cache: np.ndarray) -> tuple[np.ndarray, int]:
    """tpu-inference's reference rewrites every page a sequence uses through an XLA gather and
    scatter, which on the CPU turns float8_e5m2 NaNs of other payloads (garbage in slots past
    kv_len) into 0x7f; the kernel DMAs only the new tokens, and rpa keeps every other bit. So
    where the reference's cache holds a NaN with other bits than the input's NaN, the input's
    bits are put back (counted as a note); any other difference stays for the comparison."""
    got = cache.view(np.uint8).reshape(-1)
    given = case.kv_cache.view(np.uint8).reshape(-1)
    if cache.dtype.itemsize != 1 or cache.shape != case.kv_cache.shape:
        return cache, 0
    differ = got != given
    nans = np.isnan(cache.astype(np.float32).reshape(-1)) & np.isnan(
        case.kv_cache.astype(np.float32).reshape(-1))
    swap = differ & nans
    if not swap.any():
        return cache, 0
    fixed = got.copy()
    fixed[swap] = given[swap]
    return fixed.view(cache.dtype).reshape(cache.shape), int(swap.sum())


def run_reference(count: int, seed: int, scenarios: str, tally: Tally,
                  fixed_shapes: bool = False) -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import v3_cases  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng([seed, 1])
    done, attempts = 0, 0
    while done < count and attempts < 20 * count + 20:
        dialect = v3_cases.DIALECTS[attempts % 2]
        if fixed_shapes:
            case = v3_cases.reference_case(rng, dialect)
            label = f"reference #{attempts} ({dialect}, fixed shapes)"
        elif attempts % 3 == 2:
            case = rpa.gen(seed=seed * 7919 + attempts, dialect=dialect,
                           size=int(rng.integers(0, 40)))
            label = f"rpa.gen reference #{attempts} ({dialect}, spec {case.spec})"
        else:
            case = (v3_cases.reference_case(rng, dialect) if attempts % 3 == 0
                    else v3_cases.random_case(rng, dialect, reference=True))
            label = f"reference #{attempts} ({dialect})"
        attempts += 1
        if case.dialect == V3 and not case.update_kv_cache:
            tally.skipped["update_kv_cache=False (the reference always writes)"] += 1
            continue
        verdict = rpa.validate(case, mode="strict")
        if not verdict.valid:
            tally.skipped[f"strict: {verdict.rule}"] += 1
            continue
        check_reference(case, label, tally)
        done += 1
    if done < count:
        print(f"only {done} of {count} generated cases were strict-valid in {attempts} tries")
        tally.failed += 1
    if scenarios == "none":
        return
    for dialect in v3_cases.DIALECTS:
        for name, build in v3_cases.scenarios(dialect, quick=scenarios == "quick",
                                               cover=scenarios == "cover"):
            start = time.perf_counter()
            case = build()
            verdict = rpa.validate(case, mode="strict")
            if not verdict.valid:
                fail(tally, f"package test {name} ({dialect})", case,
                     f"strict rejects the package's own test: {verdict}")
                continue
            check_reference(case, f"package test {name} ({dialect})", tally, scenario=True)
            print(f"  {dialect} {name}: {time.perf_counter() - start:.1f} s", flush=True)


def print_reference(tally: Tally) -> None:
    print("reference: tpu-inference's ref vs rpa.reference(semantics='reference'), cache "
          "bit-equal, out within oracle/v3_compare.h's tolerance")
    print_pairs(tally.pairs)
    for why, n in sorted(tally.skipped.items()):
        print(f"  not checked ({why}): {n}")
    for why, n in sorted(tally.notes.items()):
        print(f"  note: {why}: {n} cases")


# -- the Pallas kernels -----------------------------------------------------------------------
@dataclasses.dataclass
class PallasTally:
    ran: int = 0
    seconds: float = 0.0
    # (dialect, q dtype, kv dtype) -> [cases, max |diff|, max share of the tolerance]
    pairs: dict = dataclasses.field(default_factory=dict)
    # outcome -> count: "agree", "raised at <stage>: <error>", ...
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    versions: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # the literal v3 schedule against every run: (dialect, q dtype, kv dtype) -> [cases, max
    # |diff|, max share of the schedule tolerance, strict-rejected ones]; where it raised
    literal_pairs: dict = dataclasses.field(default_factory=dict)
    # what the calls the kernels ran exercise (features()) -> count
    coverage: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    literal_outcomes: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)


TARGETS = {5: "v5e", 6: "v6e", 7: "7x"}


def features(case) -> list[str]:
    """What a call exercises, for the coverage count of the kernel runs: its batch layout, mask
    options, scales, dtype pair, head_dim, sinks and block tuples at their bounds."""
    d0, d1, d2 = (int(x) for x in np.asarray(case.distribution).reshape(-1)[:3])
    cu = np.asarray(case.cu_q_lens).reshape(-1).astype(np.int64)
    kv = np.asarray(case.kv_lens).reshape(-1).astype(np.int64)
    q_lens = np.diff(cu[:d2 + 1]) if d2 > 0 else np.zeros(0, np.int64)
    out = [f"head_dim {np.asarray(case.queries).shape[2]}",
           f"q {case.queries.dtype.name}, kv {case.kv_cache.dtype.name}"]
    if d0 == d2 and d2 > 0:
        out.append("decode only")
    elif d0 == 0 and d1 == d2 and d2 > 0:
        out.append("prefill only" + (" with chunk_prefill_size" if case.chunk_prefill_size
                                     else " without chunk_prefill_size"))
    elif d2 > d1:
        out.append("mixed range")
    for lo, hi, name in ((0, d0, "decode"), (d0, d1, "prefill"), (d1, d2, "mixed")):
        if hi <= lo:
            out.append(f"empty {name} range")
    if d2 == 0:
        out.append("no sequence")
    if len(q_lens) and (q_lens == kv[:d2]).any():
        out.append("q_len == kv_len")
    if len(q_lens) and (kv[:d2] == 1).any():
        out.append("kv_len 1")
    if case.dialect == "tpu_inference_v3":
        out.append("causal" if case.use_causal_mask is not False else "not causal")
        if case.skip_kv_mask:
            out.append("skip_kv_mask")
        if case.update_kv_cache is False:
            out.append("update_kv_cache off")
        for which in ("d_block_sizes", "p_block_sizes", "m_block_sizes"):
            b = getattr(case, which)
            if b is not None and (b[0] == b[2] or b[1] == b[3]):
                out.append("block tuple with bq_sz == bq_csz or bkv_sz == bkv_csz")
                break
    elif case.attention_sink is not None:
        out.append("attention sinks")
    if case.sliding_window is not None:
        out.append("sliding window")
    for name in ("q_scale", "k_scale", "v_scale", "soft_cap"):
        if getattr(case, name) is not None:
            out.append(name)
    return out


def check_literal(case, out, cache, label: str, tally: Tally, pallas: PallasTally,
                  tpu_version: int, strict_rule: Optional[str]) -> None:
    """The literal v3 schedule against a kernel run, whatever strict says of the call: out
    (every row) within the schedule tolerance, the cache bit for bit (rpa.check,
    oracle="literal", native mode, that generation's code path)."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import v3_pallas  # pylint: disable=import-outside-toplevel
    named = v3_pallas.with_block_sizes(case, tpu_version).replace(out=out, kv_cache_out=cache)
    result = rpa.check(named, oracle="literal", mode="native", target=TARGETS[tpu_version])
    if result.verdict != "agree":
        pallas.literal_outcomes[f"ran, literal {result.verdict}"] += 1
        fail(tally, label, named, f"the v3 kernel vs the literal v3 schedule: {result.verdict}: "
             f"{result.detail}")
        return
    tally.passed += 1
    pallas.literal_outcomes["ran, literal agrees"] += 1
    key = (case.dialect, case.queries.dtype.name, case.kv_cache.dtype.name)
    row = pallas.literal_pairs.setdefault(key, [0, 0.0, 0.0, 0])
    row[0] += 1
    row[1] = max(row[1], result.max_abs_err or 0.0)
    row[2] = max(row[2], result.share_of_tolerance or 0.0)
    row[3] += strict_rule is not None


def check_literal_stops(case, label: str, tally: Tally, pallas: PallasTally, tpu_version: int,
                        stage: str) -> None:
    """Where the kernel raised (stage trace, run or timeout), the literal v3 schedule must
    say it does not return (KernelDoesNotReturn) or native validation must name a crash rule."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import v3_pallas  # pylint: disable=import-outside-toplevel
    native = rpa.validate(case, mode="native")
    if not native.valid:
        pallas.literal_outcomes[f"raised ({stage}), native crash rule {native.rule}"] += 1
        if native.jax_crash:
            tally.passed += 1
        else:
            fail(tally, label, case, f"the kernel raised ({stage}) where native rejects "
                 f"with {native.rule}, which is not a crash rule")
        return
    try:
        rpa.kernel(v3_pallas.with_block_sizes(case, tpu_version), schedule="literal",
                   mode="native", target=TARGETS[tpu_version])
    except rpa.KernelDoesNotReturn as e:
        pallas.literal_outcomes[f"raised ({stage}), literal stops ({e.kind})"] += 1
        tally.passed += 1
        return
    pallas.literal_outcomes[f"raised ({stage}), literal returns"] += 1
    fail(tally, label, case, f"the kernel raised ({stage}) where the literal v3 schedule "
         "returns")


def check_pallas(case, label: str, tally: Tally, pallas: PallasTally, tpu_version: int,
                 scenario: bool = False) -> None:
    """Runs tpu-inference's v3 kernel on a case its validators accept (v3_pallas, TPU
    interpret mode, that generation's code path): on a strict-valid case the output and cache
    must agree with rpa's kernel semantics (rpa.check, the bfloat16-accumulator tolerance
    where the kernel accumulates in bfloat16) and the kernel must run; elsewhere what it does
    is counted."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import tpu_inference, v3_pallas  # pylint: disable=import-outside-toplevel
    if tpu_inference.validate(case) is not None:
        pallas.outcomes["not run: tpu-inference's validators reject"] += 1
        return
    strict = rpa.validate(case, mode="strict")
    start = time.perf_counter()
    try:
        out, cache = v3_pallas.run_v3_pallas(case, tpu_version, name=label)
    except v3_pallas.PallasError as e:
        pallas.outcomes[f"raised ({'strict-valid' if strict.valid else strict.rule}): "
                        f"{e}"[:160]] += 1
        if strict.valid:
            fail(tally, label, case, f"the v3 kernel fails on a strict-valid case: {e}")
        if e.stage != "input":
            check_literal_stops(case, label, tally, pallas, tpu_version, e.stage)
        return
    finally:
        pallas.seconds += time.perf_counter() - start
    pallas.ran += 1
    pallas.versions[(case.dialect, tpu_version)] += 1
    for f in features(case):
        pallas.coverage[f] += 1
    check_literal(case, out, cache, label, tally, pallas, tpu_version,
                  None if strict.valid else strict.rule)
    if not strict.valid:
        pallas.outcomes[f"ran, strict rejects: {strict.rule}"] += 1
        return
    checked = case.replace(out=out, kv_cache_out=cache)
    result = rpa.check(checked)
    if result.verdict != "agree":
        fail(tally, label, checked, f"the v3 kernel vs rpa's kernel semantics: {result.verdict}: "
             f"{result.detail}")
        pallas.outcomes[f"strict-valid, {result.verdict}"] += 1
        return
    tally.passed += 1
    pallas.outcomes["strict-valid, agree"] += 1
    add_pair(pallas.pairs, case, result, scenario)


def run_layouts(count: int, seed: int, tally: Tally, pallas: PallasTally) -> None:
    """count calls of each batch layout rpa's generator makes (its decode, prefill and mixed
    profiles: a prefill range with chunk_prefill_size, which random_case rarely draws) and
    dialect through the kernels."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import v3_cases, v3_pallas  # pylint: disable=import-outside-toplevel
    for i in range(count):
        for dialect in v3_cases.DIALECTS:
            for profile in ("decode", "prefill", "mixed"):
                version = v3_pallas.TPU_VERSIONS[i % 3]
                case = rpa.gen(seed=seed * 1000 + i, dialect=dialect, profile=profile, size=30)
                check_pallas(case, f"layout {profile} #{i} ({dialect}, v{version})", tally,
                             pallas, version)


def pallas_chunk(items: list) -> tuple[Tally, PallasTally]:
    """(case, label, TPU version) items through check_pallas, on a cluster's worker (--ray)."""
    tally, pallas = Tally(), PallasTally()
    for case, label, version in items:
        check_pallas(case, label, tally, pallas, version)
    return tally, pallas


def pallas_items(count: int, seed: int) -> list:
    """run_pallas's count calls of seed, as (case, label, TPU generation): reference_case's
    fixed shapes and random_case in turn, both dialects, generations 5, 6, 7 in turn."""
    from rpa.jax import v3_cases, v3_pallas  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng([seed, 2])
    items = []
    for i in range(count):
        dialect = v3_cases.DIALECTS[i % 2]
        version = v3_pallas.TPU_VERSIONS[(i // 2) % 3]
        if (i // 2) % 4 == 3:
            case = v3_cases.random_case(rng, dialect)
            label = f"pallas #{i} ({dialect}, v{version})"
        else:
            case = v3_cases.reference_case(rng, dialect)
            label = f"pallas #{i} ({dialect}, v{version}, fixed shapes)"
        items.append((case, label, version))
    return items


def run_pallas(count: int, seed: int, scenarios: str, tally: Tally, pallas: PallasTally,
               ray: Optional[str] = None) -> None:
    """count cases through the kernels: v3_cases.reference_case (a few fixed shapes, so most
    runs reuse a compilation) and random_case (every option, new shapes) in turn, both
    dialects, TPU generations 5, 6, 7 in turn; then the package's scenarios. ray: the count
    cases as Ray tasks on that cluster ("ray" or an address; rpa._cluster.map_in_order), with
    the same lines in the same order and the same tallies."""
    from rpa.jax import v3_cases  # pylint: disable=import-outside-toplevel
    items = pallas_items(count, seed)
    if ray is None:
        for case, label, version in items:
            check_pallas(case, label, tally, pallas, version)
    elif items:
        # pylint: disable-next=import-outside-toplevel
        from rpa._cluster import add_tallies, map_in_order, row_combiner

        def add(value: tuple[Tally, PallasTally], printed: str) -> None:
            print(printed, end="", flush=True)
            add_tallies(tally, value[0], {"pairs": row_combiner("+mm+")})
            add_tallies(pallas, value[1], {"pairs": row_combiner("+mm"),
                                           "literal_pairs": row_combiner("+mm+")})

        where = map_in_order(ray, pallas_chunk, items, 2, add)
        print(f"(the {count} generated calls ran as Ray tasks of 2 on {where})", flush=True)
    if scenarios == "none":
        return
    for dialect in v3_cases.DIALECTS:
        for name, build in v3_cases.scenarios(dialect, quick=scenarios == "quick",
                                               cover=scenarios == "cover"):
            start = time.perf_counter()
            check_pallas(build(), f"package test {name} ({dialect})", tally, pallas, 6,
                         scenario=True)
            print(f"  {dialect} {name}: {time.perf_counter() - start:.1f} s", flush=True)


def run_production(count: int, seed: int, tally: Tally, pallas: PallasTally) -> list[str]:
    """count production calls of each v3 dialect (rpa.jax.production.interpret_calls: at most
    8 sequences and 64 MiB) through the kernels, on TPU v5, v6, v7 in turn; returns their
    specs, for the reach table."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax import production, v3_cases, v3_pallas  # pylint: disable=import-outside-toplevel
    specs = []
    for dialect in v3_cases.DIALECTS:
        for i, recipe in enumerate(production.interpret_calls(dialect, count, seed)):
            version = v3_pallas.TPU_VERSIONS[i % 3]
            start = time.perf_counter()
            check_pallas(rpa.gen(spec=recipe["spec"]),
                         f"production #{i} ({dialect}, v{version}): {recipe['spec']}", tally,
                         pallas, version)
            specs.append(recipe["spec"])
            print(f"  production #{i} ({dialect}): {time.perf_counter() - start:.1f} s\n    "
                  + recipe["description"].replace("\n", "\n    "), flush=True)
    return specs


def print_pallas(pallas: PallasTally) -> None:
    print(f"pallas: tpu-inference's v3 kernels in TPU interpret mode ran {pallas.ran} cases "
          f"({pallas.seconds:.1f} s); rpa.check of each strict-valid run, kernel semantics")
    print_pairs(pallas.pairs)
    print("  the calls that ran exercise: " + "; ".join(
        f"{f} {n}" for f, n in sorted(pallas.coverage.items())))
    for (dialect, version), n in sorted(pallas.versions.items()):
        print(f"  ran on TPU v{version}'s path: {dialect} {n}")
    for why, n in sorted(pallas.outcomes.items()):
        print(f"  {why}: {n}")
    print("literal: the literal v3 schedule (rpa.check oracle=\"literal\", native mode) against "
          "every run, schedule tolerance")
    print(f"  {'dialect':24s} {'q':9s} {'kv':14s} {'cases':>5s} {'strict-rej':>10s} "
          f"{'max |diff|':>11s} {'of tolerance':>12s}")
    for (dialect, q, kv), (n, diff, share, rej) in sorted(pallas.literal_pairs.items()):
        print(f"  {dialect:24s} {q:9s} {kv:14s} {n:5d} {rej:10d} {diff:11.4g} {share:12.3g}")
    for why, n in sorted(pallas.literal_outcomes.items()):
        print(f"  {why}: {n}")


def replay(paths: list[str], tally: Tally) -> None:
    import rpa  # pylint: disable=import-outside-toplevel
    for path in paths:
        case = rpa.Case.load(path)
        if not case.is_v3:
            print(f"{path}: a {case.dialect} case, not a v3 one")
            tally.failed += 1
            continue
        check_validation(case.replace(out=None, kv_cache_out=None), path, tally)
        if rpa.validate(case, mode="strict").valid:
            check_reference(case.replace(out=None, kv_cache_out=None), path, tally)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rpa.jax.v3_cross_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=600,
                        help="validation cases, both dialects (default 600)")
    parser.add_argument("--reference", type=int, default=100,
                        help="strict-valid generated cases through both references (default 100)")
    parser.add_argument("--scenarios", choices=("all", "quick", "cover", "none"), default="all",
                        help="the package's test scenarios through both references (cover: "
                        "quick's cross products as covering sets, v3_cases.scenarios)")
    parser.add_argument("--fixed-shapes", action="store_true",
                        help="draw the reference cases from v3_cases.reference_case's few "
                        "shapes only (the eager reference then reuses its compilations)")
    parser.add_argument("--pallas", type=int, default=0,
                        help="generated cases through tpu-inference's v3 kernels in TPU "
                        "interpret mode (default 0)")
    parser.add_argument("--pallas-scenarios", choices=("all", "quick", "cover", "none"),
                        default="none",
                        help="the package's test scenarios through its v3 kernels (cover: "
                        "quick's cross products as covering sets, v3_cases.scenarios)")
    parser.add_argument("--pallas-layouts", type=int, default=0, metavar="K",
                        help="K strict-valid calls of each batch layout (decode only, prefill "
                        "only with chunk_prefill_size, mixed) and dialect from rpa.gen through "
                        "the kernels, on TPU v5, v6, v7 in turn (default 0)")
    parser.add_argument("--pallas-production", type=int, default=0, metavar="K",
                        help="K production calls (rpa.gen profile=\"production\") of each "
                        "dialect with at most 8 sequences through the kernels, with the reach "
                        "table (default 0)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ray", nargs="?", const="ray", metavar="ADDRESS",
                        help="--pallas: run the generated calls as Ray tasks on the cluster at "
                        "ADDRESS (HOST:PORT), or without it at $RAY_ADDRESS, else on a new one "
                        "here; the lines and the tallies are those of a run here")
    parser.add_argument("--replay", nargs="+", metavar="CASE.npz",
                        help="check saved cases instead")
    args = parser.parse_args(argv)
    if args.ray is not None and not args.pallas:
        parser.error("--ray goes with --pallas N (its generated calls)")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        from rpa.jax import tpu_inference  # pylint: disable=import-outside-toplevel
        tpu_inference.modules()
    except ImportError as e:
        print(f"v3_cross_check: {e}")
        return 1
    tally = Tally()
    start = time.perf_counter()
    if args.replay:
        replay(args.replay, tally)
    else:
        if args.cases:
            run_validation(args.cases, args.seed, tally)
            print_validation(tally)
            print(f"validation: {time.perf_counter() - start:.1f} s", flush=True)
        if (args.pallas or args.pallas_scenarios != "none" or args.pallas_layouts
                or args.pallas_production):
            t = time.perf_counter()
            pallas = PallasTally()
            try:
                run_pallas(args.pallas, args.seed, args.pallas_scenarios, tally, pallas, args.ray)
            except ValueError as e:  # no Ray, or no cluster at that address
                print(f"v3_cross_check: --ray: {e}", file=sys.stderr)
                return 2
            run_layouts(args.pallas_layouts, args.seed, tally, pallas)
            specs = run_production(args.pallas_production, args.seed, tally, pallas)
            print_pallas(pallas)
            if args.pallas_production:
                from rpa.jax import production  # pylint: disable=import-outside-toplevel
                production.print_reach(specs)
            print(f"pallas: {time.perf_counter() - t:.1f} s", flush=True)
        if args.reference or args.scenarios != "none":
            t = time.perf_counter()
            run_reference(args.reference, args.seed, args.scenarios, tally, args.fixed_shapes)
            print_reference(tally)
            print(f"reference: {time.perf_counter() - t:.1f} s")
    if tally.failures:
        print(f"{len(tally.failures)} disagreements (cases saved under {failure_dir()})")
    print(f"v3_cross_check: {tally.passed} passed, {tally.failed} failed")
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
