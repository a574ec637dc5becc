"""Cross-checks rpa against JAX: validation (jax mode), the dense reference, and JAX's
Pallas kernel in TPU interpret mode.

Validation: `rpa.validate(case, mode="jax")` is compared with JAX's own validation
(rpa.jax.validators: JAX's validators called as a user calls them, and what their outcome
requires of rpa). Run it on case files or directories (every .npz below them), or on
random cases (rpa.jax.cases.random_case), in the virtualenv of scripts/python_venv.sh:

    build/venv/bin/python -m rpa.jax.cross_check corpus/modes
    build/venv/bin/python -m rpa.jax.cross_check --random 2000 --seed 1 --keep /tmp/xc-diffs

It prints one line per case (OK or DIFF, with both sides), a tally of what JAX did on
the inputs rpa flags jax_crash, and last `cross_check_jax: N passed, M failed`. The exit
status is 1 if any case differs. --keep DIR copies each differing random case there.

Reference mode checks rpa's dense reference against JAX's own ref_ragged_paged_attention
on N random strict-valid cases:

    build/venv/bin/python -m rpa.jax.cross_check --reference 300 --seed 1 \\
        --keep /tmp/xc-ref-diffs [--jit]

Each case is built valid by construction (rpa.jax.cases.reference_case): 1-6 sequences
mixing decode (q_len 1) and prefill (q_len up to kv_len), kv_len 1..80, shuffled pages,
garbage page indices past each sequence's last page and in padding slots (garbage kv_lens
and cu_q_lens there too), NaN in every unused page slot and q row, dtypes and head counts
only as the kernel's XLA tiling takes them, and random sm_scale, sliding_window,
soft_cap, mask_value, k_scale, v_scale. Strict `rpa.validate` must accept every one (a
rejection is a generator bug and fails). JAX's reference runs on CPU (eagerly, every
argument a jnp array, about 5 s a case, nearly all of it XLA compiling each jnp operation
for its shapes; --jit compiles each case as one jax.jit instead, about 5x faster, but
XLA's fusion then rounds an element differently here and there). Its defined rows,
padded with zeros to q's shape, are the `out` that `rpa.check(case, out,
semantics="reference")` (`rpa check --semantics reference`) compares with rpa's reference
in JAX's reference semantics (p and p.V rounded to V's dtype) under that semantics'
tolerance. Each disagreement prints the case and the check's JSON (first mismatch, got,
want, allowed); --keep DIR saves the case, with JAX's output as `out`, there. The
tolerance used, max |jax - rpa| / (atol + rtol * |rpa|) over defined elements (rpa's
output from `rpa.reference(case, semantics="reference")`), is tabulated per dtype
combination and per data scale. The last line is `cross_check_jax reference: N passed,
M failed`; the exit status is 1 on any failure.

Pallas mode runs JAX's own Pallas kernel in TPU interpret mode on the CPU
(rpa.jax.pallas, DESIGN.md section 14) on N cases from `rpa.gen(head_dim=128)` (the
generator of `rpa gen --head-dim 128`: profiles decode, prefill, mixed, edge in turn,
sizes 0..Z, seeds drawn from S) and on the case files given whose head_dim is a multiple
of 128 (the others cannot be traced):

    build/venv/bin/python -m rpa.jax.cross_check --pallas 120 --seed 1 [--size-max 24] \\
        [--keep DIR] [corpus/modes ...]

For each case: (1) JAX's validators against `rpa.validate(case, mode="jax")`, as above;
if JAX accepts, (2) the Pallas kernel with the block sizes JAX gives it (the case's when
it sets both, else min(pages_per_seq, 128) x min(T, 32)), with which rpa's literal
schedule (`rpa.kernel(case, schedule="literal", mode="jax")`) must plan: its output must
be bit for bit the one it gives with those block sizes set in the case; where Pallas
raises, rpa must flag a jax_crash rule (rpa flagging one where Pallas runs is a note); (3) where both run, rpa's literal schedule against
Pallas on the defined rows: `rpa.check(case, pallas_out, oracle="literal", mode="jax")`
(`rpa check --oracle literal --mode jax`), under rpa's schedule tolerance
(oracle/jax_tolerance.cc: much tighter than the reference tolerance where logits are small);
the undefined rows are compared bit for bit, for information; (4) if strict mode accepts,
`rpa.check(..., semantics="reference")` on JAX's reference (one jax.jit), `rpa.check`
(the kernel semantics) on Pallas's output, and the default schedule (`rpa.kernel(case)`)
against Pallas within rpa's tolerance (beyond the schedule tolerance: counted; JAX's
reference outside the kernel semantics: counted, finding 11); (5) if strict rejects, how
far Pallas is from JAX's reference (informational), printed with the strict rule where it
differs by more than 1e-3 of max |reference|. One line per case; the summary has the
outcomes, a per (q, kv) dtype table of the literal's largest tolerance used and
|difference| and its share of bit-identical elements, and the edge cases Pallas ran on.
The last line is `cross_check_jax pallas: N passed, M failed` (`rpa campaign --pallas`
reads it). No JAX, another JAX than the pinned one, or a patch that does not apply exits
1 with the reason: nothing is skipped.

rpa is called in-process (the rpa package: the functions the CLI calls), never as a
command; the `rpa` package in the running Python is the one checked.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

import rpa
from rpa._cluster import add_tallies, map_in_order, row_combiner
from rpa.jax import pallas
from rpa.jax.cases import (REF_DTYPE_COMBOS, describe_reference_case, random_case,
                           reference_case)
from rpa.jax.reference import jax_reference
from rpa.jax.validators import compare, jax_outcome, kernel_module, rpa_outcome


# --- validation mode -----------------------------------------------------------------

@dataclasses.dataclass
class Tally:
    """Counts, and what JAX did where rpa flags jax_crash."""
    passed: int = 0
    failed: int = 0
    normalized: int = 0
    crash_outcomes: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)

    def add(self, jax, rpa_side, agree, note):
        if agree:
            self.passed += 1
            self.normalized += note == "reprs normalized"
        else:
            self.failed += 1
        if not rpa_side.error and not rpa_side.valid and rpa_side.jax_crash:
            what = "accepted" if jax.kind == "accepted" else (
                "clean ValueError" if jax.kind == "value_error" else
                f"{jax.error_type} at {jax.where}")
            self.crash_outcomes[(rpa_side.rule, what)] += 1


def check_file(kernel, path, tally, label=None, details=""):
    """Cross-checks one case file (read with rpa.Case.load, as `rpa validate` reads it),
    prints its line, and returns whether both agree."""
    label = label or path
    try:
        case = rpa.Case.load(path)
    except Exception as e:  # pylint: disable=broad-except
        tally.failed += 1
        print(f"DIFF {label}: rpa.Case.load failed: {type(e).__name__}: {e}{details}")
        return False
    if case.is_v3:
        print(f"SKIP {label}: a {case.dialect} case (python -m rpa.jax.v3_cross_check checks "
              f"those against tpu-inference)")
        return True
    jax = jax_outcome(kernel, case)
    rpa_side = rpa_outcome(case)
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


def write_case(path, arrays, params):
    """Writes a random case with rpa.Case.save. It takes every input random_case makes,
    raw uint8 / uint16 q or kv_pages with no dtype name included (written as they are,
    which JAX takes as they are); sm_scale is written as 1.0 where random_case leaves it
    unset (JAX's default; its validators do not look at it)."""
    rpa.Case(**arrays, **params).save(path)


def run_random(kernel, count, seed, keep, tally):
    """Cross-checks `count` random cases from `seed`: each written to a case file and read
    back, as a user's dumped case would be."""
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="cross_check_jax.") as tmp:
        for i in range(count):
            arrays, params, text = random_case(rng)
            path = os.path.join(tmp, f"random_{seed}_{i}.npz")
            write_case(path, arrays, params)
            label = f"random seed={seed} #{i}"
            if not check_file(kernel, path, tally, label=label, details=f"\n     {text}"):
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    shutil.copy(path, keep)
            os.remove(path)


# --- reference mode: rpa's dense reference against JAX's ref_ragged_paged_attention ---

def _exit_status(result):
    """The exit status `rpa check` gives for a CheckResult's verdict."""
    return {"agree": 0, "mismatch": 1, "biased": 1}.get(result.verdict, 2)


def _check(case, out, **options):
    """rpa.check(case, out, **options) as (exit status rpa check would give, its --json
    dict or None, the reason when there is no JSON)."""
    try:
        result = rpa.check(case, out, **options)
    except ValueError as e:
        return 64, None, str(e)
    if not result.json:
        why = result.rejection.why if result.rejection is not None else result.detail
        return _exit_status(result), None, f"{result.verdict}: {why}"
    return _exit_status(result), result.json, ""


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


def _reference_diff(tally, combo, outcome, line):
    """Counts a failed reference case under its outcome and prints its DIFF line."""
    tally.failed += 1
    tally.outcomes[(combo, outcome)] += 1
    print(line)


def check_reference_case(kernel, case, params, info, label, tally, jit=False):
    """One reference case: JAX's output as `out`, `rpa.check`, tolerance used.
    Returns (whether both sides agree, the case to keep: with JAX's output as `out` once
    there is one)."""
    text = describe_reference_case(info, params)
    combo = info["dtypes"]
    strict = rpa_outcome(case, mode="strict")
    if not strict.valid:
        tally.rejected += 1
        _reference_diff(tally, combo, "rejected",
                        f"DIFF {label}: strict validation rejects a generated case (generator "
                        f"bug): {strict.describe()}\n     {text}")
        return False, case
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = jax_reference(case, jit, kernel)
    except Exception as e:  # pylint: disable=broad-except
        tally.jax_errors += 1
        _reference_diff(tally, combo, "jax error",
                        f"DIFF {label}: JAX's ref_ragged_paged_attention raised "
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n"
                        f"     {text}")
        return False, case
    rows = int(case.cu_q_lens[int(case.num_seqs[0])])
    jax_nonfinite = not np.all(np.isfinite(np.asarray(out[:rows], np.float32)))
    with_out = case.replace(out=out)
    rc, cmp, err = _check(with_out, None, semantics="reference")
    if rc not in (0, 1) or not isinstance(cmp, dict) or "agree" not in cmp:
        _reference_diff(tally, combo, "no verdict",
                        f"DIFF {label}: rpa check gave no verdict: exit {rc}: {err}\n     {text}")
        return False, with_out
    agree = bool(cmp["agree"]) and rc == 0
    # rpa's own output, for the tolerance used.
    used = float("nan")
    try:
        rpa_out = rpa.reference(case, semantics="reference")
    except Exception as e:  # pylint: disable=broad-except
        print(f"NOTE {label}: rpa.reference failed: {type(e).__name__}: {e}")
    else:
        used = tolerance_used(out, rpa_out, rows, cmp["atol"], cmp["rtol"])
        tally.used[combo].append((used, label))
        tally.by_scale[f"q x{info['q_scale']:g}, kv x{info['kv_scale']:g}"].append(used)
        if (used <= 1.0) != agree:
            tally.inconsistent += 1
            print(f"NOTE {label}: rpa check says agree={agree} but the recomputed tolerance "
                  f"used is {used:.4g}")
    if jax_nonfinite:
        tally.jax_nan += 1
        print(f"NOTE {label}: JAX's reference has NaN / inf in a defined row (a JAX finding "
              f"if rpa's has none)")
    if agree:
        tally.passed += 1
        tally.outcomes[(combo, "agree")] += 1
        print(f"OK   {label}: {combo} tolerance used {used:.3g}")
        return True, with_out
    _reference_diff(tally, combo, "disagree",
                    f"DIFF {label}: tolerance used {used:.4g}\n     {text}\n     {json.dumps(cmp)}")
    return False, with_out


def run_reference(kernel, count, seed, keep, jit=False):
    """Checks rpa's dense reference against JAX's on `count` random strict-valid cases."""
    rng = np.random.default_rng(seed)
    tally = ReferenceTally()
    start = time.monotonic()
    for i in range(count):
        arrays, params, info = reference_case(rng)
        case = rpa.Case(**arrays, **params)
        label = f"reference seed={seed} #{i}"
        ok, kept = check_reference_case(kernel, case, params, info, label, tally, jit)
        if not ok and keep:
            os.makedirs(keep, exist_ok=True)
            kept.save(os.path.join(keep, f"reference_{seed}_{i}.npz"))
    elapsed = time.monotonic() - start

    print("\ntolerance used = max |jax - rpa| / (atol + rtol * |rpa|) over defined elements "
          "(1.0 = the tolerance's edge)")
    header = (f"{'q/kv dtypes':30} {'cases':>5} {'agree':>5} {'diff':>4} {'max':>10} "
              f"{'p99':>10} {'median':>10}  worst case")
    print(header)
    for combo in (f"{q}/{kv}" for q, kv in REF_DTYPE_COMBOS):
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


def _dtype_name(x):
    return np.asarray(x).dtype.name


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
    seqs = pallas.seqs(case)
    found = set()
    if not seqs:
        found.add("no_seqs")
    if any(q_end - q_start == 0 for q_start, q_end, _, _ in seqs):
        found.add("empty_seq")
    if any(kv_len == 0 for _, _, kv_len, _ in seqs):
        found.add("kv_len_zero")
    if pallas.defined_rows(case) == 1:
        found.add("one_token")
    pages = np.asarray(case.page_indices)
    s = max(case.kv_pages.shape[1], 1)
    used = [set(pages[i][:int(np.clip(-(-kv_len // s), 0, pages.shape[-1]))].tolist())
            for _, _, kv_len, i in seqs]
    if any(used[a] & used[b] for a in range(len(used)) for b in range(a)):
        found.add("shared_pages")
    if blocks[0] == pages.shape[-1]:
        found.add("bkv_eq_pps")
    if blocks[1] >= case.q.shape[0]:
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jax_reference(case, jit=True, kernel=kernel), ""
    except Exception as e:  # pylint: disable=broad-except
        first = str(e).strip().splitlines()
        return None, f"{type(e).__name__}: {first[0] if first else ''}"


def _literal(case):
    """rpa's literal schedule in jax mode: (output, '') or (None, why it did not run)."""
    try:
        return rpa.kernel(case, schedule="literal", mode="jax"), ""
    except Exception as e:  # pylint: disable=broad-except
        return None, f"{type(e).__name__}: {e}"


def _check_literal_plan(case, blocks, rows, fails):
    """The literal schedule in jax mode plans the block sizes JAX gives the kernel and the
    rows the case defines (rpa.plan: what `rpa run --impl kernel --json` reports)."""
    try:
        plan = rpa.plan(case, schedule="literal", mode="jax")
    except Exception as e:  # pylint: disable=broad-except
        fails.append(f"rpa.plan(schedule='literal', mode='jax'): {type(e).__name__}: {e}")
        return
    got = [plan.kv_pages_per_block, plan.queries_per_block]
    if got != list(blocks):
        fails.append(f"rpa literal blocks {got}, JAX runs {list(blocks)}")
    # rpa reports cu_q_lens[num_seqs] clipped into [0, T], the rows the case defines.
    if plan.rows != rows:
        fails.append(f"rpa reports rows {plan.rows}, the case has {rows} defined")


def check_pallas_case(kernel, case, label, tally):
    """Runs the Pallas-mode checks on one case and prints its line (and, below it, what
    differs). Returns True unless something failed."""
    fails, notes, ran = [], [], []
    pair = (_dtype_name(case.q), _dtype_name(case.kv_pages))
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
    jax = jax_outcome(kernel, case)
    rpa_jax = rpa_outcome(case)
    agree, note = compare(jax, rpa_jax)
    tally.validation.add(jax, rpa_jax, agree, note)
    ran.append("validate")
    if not agree:
        fails.append(f"validation: {note}: jax: {jax.describe()} | rpa: {rpa_jax.describe()}")
    if jax.kind != "accepted":
        text = jax.describe()
        ran.append(text if len(text) <= 100 else text[:97] + "...")
        return finish("JAX rejects" if jax.kind == "value_error" else "JAX crashes")
    traceable, why = pallas.traceable(case)
    if not traceable:
        notes.append(f"Pallas not run: {why}")
        return finish("JAX accepts, not traceable")

    # 2. The Pallas kernel, with the block sizes JAX gives it, which the literal schedule
    # must plan (and use).
    blocks = pallas.default_blocks(case)
    rows = pallas.defined_rows(case)
    literal = None
    if rpa_jax.valid:
        literal, err = _literal(case)
        ran.append("literal")
        if literal is None:
            fails.append(f"rpa run --schedule literal --mode jax: {err}")
        else:
            _check_literal_plan(case, blocks, rows, fails)
    steps = pallas.steps(case, blocks)
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
    # tolerance (oracle/jax_tolerance.cc, schedule_tolerance): `rpa check --oracle literal` on
    # Pallas's output, which also reports how much of the tolerance was used.
    rc_o, cmp_o, err = _check(case, out, oracle="literal", mode="jax")
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
    strict = rpa_outcome(case, mode="strict")
    if strict.error:
        fails.append(f"rpa validate (strict): {strict.error}")
        return finish("Pallas runs")
    ref, ref_err = _jax_reference_or_error(kernel, case)
    ran.append("jax reference")
    if strict.valid:
        tally.strict_valid += 1
        if ref is None and not pallas.seqs(case):
            # ref_ragged_paged_attention concatenates the sequences' outputs: none, none.
            notes.append(f"JAX's reference cannot run without sequences: {ref_err}")
        elif ref is None:
            fails.append(f"JAX's reference raised on a strict-valid case: {ref_err}")
        else:
            # JAX's reference against rpa's in the same (reference) semantics; against the
            # kernel semantics it may differ (finding 11: it rounds p and p.V to V's dtype).
            rc_c, cmp, err = _check(case, ref, semantics="reference")
            if rc_c != 0:
                fails.append(f"rpa check --semantics reference on JAX's reference: exit {rc_c}: "
                             f"{json.dumps(cmp) if cmp else err}")
            rc_k, _, _ = _check(case, ref)
            tally.ref_outside_kernel += rc_k == 1
        # Pallas's output against the kernel semantics (rpa's default), the oracle's claim.
        rc_c, cmp, err = _check(case, out)
        ran.append("rpa check pallas")
        if rc_c != 0 or not isinstance(cmp, dict):
            fails.append(f"rpa check on Pallas's output: exit {rc_c}: "
                         f"{json.dumps(cmp) if cmp else err}")
        else:
            ran.append("default")
            try:
                default = rpa.kernel(case)
            except Exception as e:  # pylint: disable=broad-except
                fails.append(f"rpa run --schedule default: {type(e).__name__}: {e}")
            else:
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
    rule = strict.rule or "?"
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
                     f"{strict.message}")
    return finish(f"strict rejects ({rule})")


def generate_pallas_case(seed, profile, size):
    """rpa.gen with head_dim 128 (`rpa gen --seed S --profile P --size Z --head-dim 128`);
    returns (case, '') or (None, the error)."""
    try:
        return rpa.gen(seed, profile=profile, size=size, head_dim=128), ""
    except Exception as e:  # pylint: disable=broad-except
        lines = str(e).strip().splitlines()
        return None, f"{type(e).__name__}: {lines[-1] if lines else ''}"


def run_pallas_production(kernel, count, seed, tally):
    """count production calls (rpa.jax.production.interpret_calls: head_dim a multiple of 128,
    at most 8 sequences and 64 MiB) through the Pallas-mode checks; returns the specs of those
    checked, for the reach table."""
    from rpa.jax import production  # pylint: disable=import-outside-toplevel
    specs = []
    for i, recipe in enumerate(production.interpret_calls("jax", count, seed,
                                                          head_dim_multiple=128)):
        start = time.monotonic()
        case = rpa.gen(spec=recipe["spec"])
        check_pallas_case(kernel, case, f"production #{i} ({recipe['spec']})", tally)
        specs.append(recipe["spec"])
        print(f"     production #{i}: {time.monotonic() - start:.1f} s; "
              + recipe["description"].replace("\n", "\n     "), flush=True)
    return specs


def check_generated(items, kernel, tally):
    """The generated cases (seed, i, profile, case_seed, size) through the Pallas-mode checks:
    (how many the Pallas kernel ran on, [(file name, case)] of those that differ)."""
    ran, differ = 0, []
    for seed, i, profile, case_seed, size in items:
        name = f"pallas_{seed}_{i}_{profile}_{case_seed}_{size}.npz"
        label = f"pallas seed={seed} #{i} (gen --seed {case_seed} --profile {profile} " \
                f"--size {size})"
        case, err = generate_pallas_case(case_seed, profile, size)
        if case is None:
            tally.failed += 1
            tally.outcomes["rpa gen failed"] += 1
            print(f"DIFF {label}: rpa gen failed: {err}")
            continue
        ran_before = tally.pallas_ran
        if not check_pallas_case(kernel, case, label, tally):
            differ.append((name, case))
        ran += tally.pallas_ran - ran_before
    return ran, differ


def pallas_chunk(items):
    """check_generated on a cluster's worker (--ray): (its tally, ran, differ)."""
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)
    pallas.patched_kernel()
    tally = PallasTally()
    ran, differ = check_generated(items, kernel_module(), tally)
    return tally, ran, differ


def _add_pallas_pair(mine, theirs):
    # PallasTally.pairs rows: [cases, max used, max |diff|, identical, elements, worst label];
    # the worst label follows the larger "used", the earlier one on a tie (as add_pair).
    if theirs[1] > mine[1]:
        mine[5] = theirs[5]
    combine = row_combiner("+mm++")
    combine(mine, theirs)


def run_pallas_mode(kernel, count, seed, size_max, paths, keep, min_generated=0,
                    production_count=0, ray=None):
    """The Pallas mode: `count` generated cases from `seed` and the case files in paths
    that Pallas can trace. Prints a line per case and the summary; returns True if none
    failed and the Pallas kernel ran on at least min_generated of the generated cases.
    ray: run the generated cases as Ray tasks on that cluster ("ray" or an address;
    rpa._cluster.map_in_order), in the same order of lines and with the same tally."""
    # The interpreter logs each exception raised in its callbacks (an out-of-bounds read,
    # say) with a traceback before it reaches run_pallas as a PallasError; the case's line
    # reports it.
    logging.getLogger("jax._src.callback").setLevel(logging.CRITICAL)
    tally = PallasTally()
    generated_ran = 0  # generated cases the Pallas kernel ran on (it did not raise)
    rng = np.random.default_rng(seed)
    start = time.monotonic()
    skipped = 0

    def keep_case(path, case, name):
        if keep:
            os.makedirs(keep, exist_ok=True)
            if path:
                shutil.copy(path, os.path.join(keep, name))
            else:
                case.save(os.path.join(keep, name))

    for path in case_paths(paths):
        try:
            case = rpa.Case.load(path)
        except Exception as e:  # pylint: disable=broad-except
            tally.failed += 1
            tally.outcomes["unreadable"] += 1
            print(f"DIFF {path}: rpa.Case.load failed: {type(e).__name__}: {e}")
            keep_case(path, None, os.path.basename(path))
            continue
        if case.is_v3:
            skipped += 1
            print(f"SKIP {path}: a {case.dialect} case (not JAX's kernel)")
            continue
        traceable, why = pallas.traceable(case)
        if not traceable:
            skipped += 1
            print(f"SKIP {path}: {why}")
            continue
        if not check_pallas_case(kernel, case, path, tally):
            keep_case(path, case, os.path.basename(path))
    generated = []
    for i in range(count):
        profile = _PALLAS_PROFILES[i % len(_PALLAS_PROFILES)]
        case_seed = int(rng.integers(0, 2**32))
        size = int(rng.integers(0, size_max + 1))
        generated.append((seed, i, profile, case_seed, size))
    if ray is None:
        ran, differ = check_generated(generated, kernel, tally)
    else:
        ran, differ = 0, []

        def add(value, printed):
            nonlocal ran
            print(printed, end="", flush=True)
            add_tallies(tally, value[0], {"pairs": _add_pallas_pair})
            ran += value[1]
            differ.extend(value[2])

        where = map_in_order(ray, pallas_chunk, generated, 4, add)
        print(f"(the {count} generated cases ran as Ray tasks of 4 on {where})")
    generated_ran += ran
    for name, case in differ:
        keep_case(None, case, name)
    production_specs = run_pallas_production(kernel, production_count, seed, tally)
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
          f"{tally.pallas_ran - generated_ran} case files and production calls")
    if generated_ran < min_generated:
        tally.failed += 1
        print(f"DIFF the Pallas kernel ran on {generated_ran} generated cases, fewer than "
              f"--min-generated {min_generated}")
    if production_count:
        from rpa.jax import production  # pylint: disable=import-outside-toplevel
        production.print_reach(production_specs)
    print(f"cross_check_jax pallas: {tally.passed} passed, {tally.failed} failed")
    return tally.failed == 0


def main(argv=None):
    # Validation never needs an accelerator; this keeps JAX from probing for one.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    parser = argparse.ArgumentParser(
        prog="python -m rpa.jax.cross_check",
        description="Compare `rpa validate --mode jax` with JAX's validation, and rpa's "
        "dense reference with JAX's ref_ragged_paged_attention.")
    parser.add_argument("paths", nargs="*", help="case files, or directories of .npz")
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
    parser.add_argument("--production", type=int, default=0, metavar="K",
                        help="--pallas: also K production calls (rpa.gen profile="
                        "\"production\", head_dim a multiple of 128, at most 8 sequences) "
                        "through the same checks, with the reach table")
    parser.add_argument("--min-generated", type=int, default=0, metavar="K",
                        help="--pallas: fail unless the Pallas kernel ran (did not raise) on "
                        "at least K of the generated cases")
    parser.add_argument("--size-max", type=int, default=24, metavar="Z",
                        help="--pallas: `rpa gen` sizes are drawn from 0..Z (default 24)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the random cases")
    parser.add_argument("--ray", nargs="?", const="ray", metavar="ADDRESS",
                        help="--pallas: run the generated cases as Ray tasks on the cluster at "
                        "ADDRESS (HOST:PORT), or without it at $RAY_ADDRESS, else on a new one "
                        "here; the lines and the summary are those of a run here")
    parser.add_argument("--keep", metavar="DIR", help="copy differing random cases here")
    args = parser.parse_args(argv)
    if not args.paths and not args.random and not args.reference and args.pallas is None:
        parser.error("give case files / directories, --random N, --reference N or "
                     "--pallas N")
    if not 0 <= args.size_max <= 400:
        parser.error("--size-max must be in 0..400")
    if args.ray is not None and args.pallas is None:
        parser.error("--ray goes with --pallas (the Pallas mode's generated cases)")

    # No JAX, or one the Pallas patches do not fit, fails loudly: nothing is skipped.
    try:
        kernel = kernel_module()
        if args.pallas is not None:
            pallas.check_version()
            pallas.patched_kernel()
    except Exception as e:  # pylint: disable=broad-except
        traceback.print_exc()
        print(f"cross_check_jax: cannot set up JAX: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    ok = True
    # With --pallas, the case files given are checked in the Pallas mode.
    validation_paths = [] if args.pallas is not None else args.paths
    if validation_paths or args.random:
        tally = Tally()
        for path in case_paths(validation_paths):
            check_file(kernel, path, tally)
        if args.random:
            run_random(kernel, args.random, args.seed, args.keep, tally)
        for (rule, what), n in sorted(tally.crash_outcomes.items()):
            print(f"jax_crash rule {rule}: JAX {what} x{n}")
        if tally.normalized:
            print(f"({tally.normalized} agreeing messages needed numpy / jax Array reprs "
                  "normalized)")
        print(f"cross_check_jax: {tally.passed} passed, {tally.failed} failed")
        ok = not tally.failed
    if args.reference:
        ok = run_reference(kernel, args.reference, args.seed, args.keep, args.jit) and ok
    if args.pallas is not None:
        try:
            ok = run_pallas_mode(kernel, args.pallas, args.seed, args.size_max, args.paths,
                                 args.keep, args.min_generated, args.production,
                                 args.ray) and ok
        except ValueError as e:  # no Ray, or no cluster at that address
            print(f"cross_check_jax: --ray: {e}", file=sys.stderr)
            return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
