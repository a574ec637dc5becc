"""rpa.campaign: generated calls through *your* kernel, each result checked, each failure shrunk
to a small call (issue 36; docs/python.md, "A campaign against your kernel").

A call is drawn from random bytes by the generators' decoder (rpa._draw, the one the Hypothesis
strategies and the fuzzers read), in the kernel's own signature (``case.call_args()``), and the
kernel's result is judged:

- mode="strict": calls strict validation accepts (for the jax dialect also JAX's validators,
  so that a kernel written to JAX's contract is never asked what it may refuse), checked against
  the definition (``rpa.check``: the dense reference in kernel semantics);
- mode="native": calls the dialect's own validators accept (valid calls and calls broken by one
  named mutation that the library's validators let through), checked against the literal
  schedule of the library's Pallas program (``rpa.check(..., oracle="literal")``);
- mode="both" (the default): strict and native calls alike, each judged as its mode says, so
  the regions where the shipped kernel departs from the definition are still walked, against
  the program it should follow.

Calls led by the program's paths (issue 46): before any plain draw, the campaign draws
``cover`` (default 512) candidate calls (cheap: decoded, no kernel call), takes each one's path
features (``rpa.path_features``: the literal program's branches and block kinds, walked without data)
and sends first the calls that add features not yet covered (greedy cover, most new features
first, the cheaper of equals by the walk's estimate of the call's interpret-mode cost,
``interpret_seconds``; a dear call only for what no cheap one walks), cheapest first; the rest
of the budget goes to plain draws. A call estimated dearer than the timeout is not sent. The
result's ``reach`` says, for every feature the candidates reached under the campaign's bounds,
the first call that walked it.

A call whose check fails, that raises, or that does not return within ``timeout_s`` (the
watchdog) is a finding of that kind. A mismatch or a raise is shrunk: the bytes are cut, zeroed
and lowered, and a candidate is run only when it decodes to a call the mode draws that is
smaller (fewer array elements, then fewer parameters set) than the current one; the smallest
that still fails the same way is the finding. Each drawn call runs ``calls_per_shape`` times
(default 4), with its own data and with data from other seeds: the same shapes, sequences and
keywords, so one compile of a jitted kernel serves them all. Calls are drawn in batches and run
grouped by their compile key (shapes, dtypes and keywords); ``CampaignResult.compile_keys``
counts the keys, the compiles a kernel that compiles once per key makes.

With ``report=DIR`` the campaign writes what ``rpa campaign --report`` writes: summary.json,
report.html, junit.xml, and one case file per finding (finding-N.npz, with the kernel's output
where it returned one), which ``rpa check`` replays to the same verdict.
"""
from __future__ import annotations

import html
import json
import os
import platform
import sys
import time
from typing import Any, Callable, Optional
from xml.sax.saxutils import escape as xml_escape

from rpa import _api
from rpa._campaign_calls import (CHEAP_CALL_S, CampaignInterrupted, CampaignResult, Finding,
                                 LONG_TIER, MODES, TARGETS, TPU_VERSIONS, _Budget, _Planner,
                                 _Runner, _Settings, _Tally, _groups, _kernel_name, _run_calls,
                                 _shrink_first, _with_jax_blocks)
from rpa._case import DIALECTS, Case
from rpa._draw import DEFAULT_MAX_BYTES, bounds as draw_bounds, check_profile


def campaign(kernel: Callable[..., Any], *, dialect: str = "jax", calls: Optional[int] = None,
             seconds: Optional[float] = None, seed: int = 0, profile: Optional[str] = None,
             mode: str = "both", report: Optional[str] = None,
             head_dim: Optional[int] = None, max_seqs: int = 4,
             max_kv_len: Optional[int] = None,
             max_head_dim: int = 128, max_page_size: int = 16,
             max_bytes: int = DEFAULT_MAX_BYTES, batch: int = 64, calls_per_shape: int = 4,
             shrink_calls: int = 150, cover: int = 512, integer_edges: bool = True,
             timeout_s: float = 300.0, target: Optional[str] = None,
             replay: Optional[str] = None, progress: Optional[bool] = None,
             cluster: Optional[str] = None,
             worker_resources: Optional[dict[str, float]] = None,
             max_findings: Optional[int] = None) -> CampaignResult:
    """Runs generated calls through ``kernel`` and checks each result (module docstring).

    kernel: called as ``kernel(*args, **kwargs)`` with ``case.call_args()`` of the dialect
    ("jax": JAX's ragged_paged_attention signature, returns the output [T, Hq, D];
    "tpu_inference_v3" / "tpu_inference_v3_hd64": tpu-inference's, returns (out, kv_cache)).
    calls or seconds: how many calls, or for how long (one of them). seed: the random stream.
    profile: the batch mix (as rpa.gen; "long32k", the v3 dialects' long tier: one or two
    sequences of kv_len 32768 to 65536, each call estimated at 4 to 15 s in interpret mode and
    run as a campaign of its own). mode: "strict", "native" or "both" (the default: the
    two alike, each call judged as its mode says). report: a folder for
    summary.json, calls.tsv, report.html, junit.xml and the finding files. head_dim, max_*: the
    generators' bounds (as rpa.strategies.cases; max_kv_len defaults to 64, and to none for
    profile "long32k", which it narrows only from 32768 up); a jax call's head_dim defaults to
    128, as JAX's validators take multiples of 128 only.
    batch: calls drawn at a time and run grouped by compile key. calls_per_shape: each drawn
    call runs with this many data seeds (its own and others: the same shapes, sequences and
    keywords, so one compile). cover: how many candidate calls the path-feature cover draws
    before the first call (default 512, which reaches every feature of the default bounds in 24
    calls; 0: plain draws only; module docstring). integer_edges (v3 dialects; default True):
    some windows put the longest sequence's last key + window at the wrap of kernel.py's int16
    or int32 positions (or 1 or 16 below it), and some page tables sit at the int16 switch
    (pages_per_seq * page_size 32767, or a page past it), in calls as short as the others.
    shrink_calls: the kernel calls
    shrinking may spend per finding. timeout_s: the watchdog (a call that does not return is a
    finding; on one machine the campaign stops, as the call cannot be taken back; on a cluster
    the worker is replaced and the campaign goes on); a drawn call whose interpret-mode cost
    the walk estimates past it (``interpret_seconds``; at least CHEAP_CALL_S) is not sent
    (``CampaignResult.too_dear``). target: the TPU generation
    the literal schedule runs (native mode; default v6e). replay: the command line that runs
    this campaign's kernel (`python -m rpa campaign --kernel ...`), for the findings' replay
    lines. progress: a line on stderr every 10 s (default: when stderr is a terminal or the
    run is long). cluster: None runs here; "ray" (the Ray cluster at $RAY_ADDRESS, else a new
    one on this machine for this campaign) or a Ray address ("HOST:PORT",
    "ray://HOST:10001") runs the calls as Ray tasks (rpa._cluster). worker_resources: what each
    task asks the cluster for ({"TPU": 1}, {"CPU": 2}, a custom resource). max_findings: stop
    sending calls once this many different failures are found (None: the whole budget; 1:
    fail fast, as rpa.jax.mutants runs it; on a cluster the calls already sent finish). Ctrl-C
    stops the campaign: the report of what finished is written and CampaignInterrupted (a
    KeyboardInterrupt) raised, holding that result. Returns a CampaignResult; raises
    ValueError for arguments that do not fit."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect takes {', '.join(DIALECTS)} (got {dialect!r})")
    if mode not in MODES:
        raise ValueError(f"mode takes strict, native or both (got {mode!r})")
    if (calls is None) == (seconds is None):
        raise ValueError("campaign takes one of calls and seconds")
    if calls is not None and (isinstance(calls, bool) or int(calls) < 1):
        raise ValueError(f"calls takes a positive number (got {calls!r})")
    if seconds is not None and not float(seconds) > 0:
        raise ValueError(f"seconds takes a positive number (got {seconds!r})")
    if batch < 1 or calls_per_shape < 1:
        raise ValueError(f"batch and calls_per_shape take >= 1 (got {batch}, {calls_per_shape})")
    if isinstance(cover, bool) or int(cover) < 0:
        raise ValueError(f"cover takes >= 0 candidate calls (got {cover!r})")
    if max_findings is not None and (isinstance(max_findings, bool) or int(max_findings) < 1):
        raise ValueError(f"max_findings takes a positive number or None (got {max_findings!r})")
    if shrink_calls < 0 or not timeout_s > 0:
        raise ValueError(f"shrink_calls takes >= 0 and timeout_s > 0 (got {shrink_calls}, "
                         f"{timeout_s})")
    if not callable(kernel):
        raise ValueError(f"kernel must be callable (got {type(kernel).__name__})")
    if target is not None and target not in TARGETS:
        raise ValueError(f"target takes {', '.join(TARGETS)} (got {target!r})")
    if worker_resources is not None and cluster is None:
        raise ValueError("worker_resources goes with cluster (the resources each Ray task asks "
                         "for)")
    if dialect == "jax" and head_dim is None:
        head_dim = 128  # JAX's validators take multiples of 128 (head_dim_not_lane_multiple)
    if max_kv_len is None:  # 64; the long tier's own range (32768 to 65536) otherwise
        max_kv_len = 0 if profile == LONG_TIER else 64
    limits = (max_seqs, max_kv_len, max_head_dim, max_page_size)
    check_profile(profile, head_dim, draw_bounds(*limits), dialect)
    settings = _Settings(dialect, mode, profile, head_dim, limits, float(timeout_s), target,
                         int(shrink_calls), bool(integer_edges))
    drawer = settings.drawer()
    # Calls estimated dearer than the timeout in interpret mode are not sent; a timeout under
    # CHEAP_CALL_S is one for a kernel that does not run in interpret mode: the estimates do not
    # hold for it, and only what no kernel could trace in time is left out.
    planner = _Planner(drawer, int(seed), max_bytes, calls_per_shape, int(cover), target,
                       max(settings.timeout_s, CHEAP_CALL_S))
    result = CampaignResult(_kernel_name(kernel), dialect, mode, profile, int(seed),
                            target=target)
    if replay is None:
        replay = getattr(kernel, "rpa_replay", None)
    start = time.monotonic()
    if progress is None:
        progress = sys.stderr.isatty() or (seconds or 0) > 30 or (calls or 0) > 200
    deadline = None if seconds is None else start + float(seconds)
    tally = _Tally(result)
    budget = _Budget(calls, deadline, planner, batch, max_findings, tally)
    if cluster is not None:
        from rpa import _cluster  # pylint: disable=import-outside-toplevel
        _cluster.run(kernel, settings, budget, tally, cluster, worker_resources, progress)
    else:
        _run_here(kernel, settings, budget, tally, progress)
    tally.finish()
    if budget.found_enough() and not result.stopped:
        result.stopped = (f"max_findings={max_findings} reached after {result.calls} of "
                          f"{calls if calls is not None else 'the'} calls")
    result.reach = planner.reach(set(tally.verdicts))
    result.too_dear = planner.too_dear
    result.seconds = time.monotonic() - start
    if report:
        write_report(result, report, replay)
    if result.stopped and result.stopped.startswith("interrupted"):
        raise CampaignInterrupted(result)
    return result




def _run_here(kernel: Callable[..., Any], settings: _Settings, budget: _Budget, tally: _Tally,
              progress: bool) -> None:
    """The calls in this process, one after another; a failure is shrunk when first seen."""
    drawer, runner, result = settings.drawer(), settings.runner(kernel), tally.result
    last = time.monotonic()
    try:
        while not runner.hung:
            drawn = budget.next_batch()
            if drawn is None:
                result.stopped = budget.planner.exhausted_line() or result.stopped
                break
            for group in _groups(drawn):
                left = group
                while left and not runner.hung and not budget.out_of_time(result.calls > 0):
                    # Up to the first call that fails a new way, which is shrunk at once.
                    ran = _run_calls(runner, drawer, left,
                                     lambda k: budget.out_of_time(result.calls + k > 0),
                                     known=set(tally.first))
                    tally.add(ran)
                    if ran.interrupted:
                        raise KeyboardInterrupt
                    for signature, call, out in tally.unshrunk():
                        if runner.hung and out.kind != "hang":
                            continue  # no more kernel calls: kept as drawn (_Tally.finish)
                        tally.shrunk(signature, _shrink_first(call, out, drawer, runner,
                                                              settings.shrink_calls,
                                                              budget.deadline))
                    left = ran.unrun
                if runner.hung:
                    result.stopped = f"a call did not return in {runner.timeout_s:g} s"
                    break
                if budget.out_of_time():
                    break
                now = time.monotonic()
                if progress and now - last >= 10:
                    last = now
                    print(budget.progress(tally), file=sys.stderr)
    except KeyboardInterrupt:
        result.stopped = f"interrupted (Ctrl-C) after {result.calls} calls"


# -- the report ----------------------------------------------------------------------------------

def _finding_replay(f: Finding, path: str, result: CampaignResult, replay: Optional[str]) -> str:
    if f.kind in ("mismatch", "biased"):
        flags = []
        if f.mode == "native":
            flags = ["--oracle", "literal", "--mode",
                     "jax" if result.dialect == "jax" else "native"]
            if result.target:
                flags += ["--target", result.target]
        return " ".join(["rpa check", path, *flags])
    if replay is None and "<locals>" in result.kernel:
        return (f"run {result.kernel} on the call in {path} (rpa.Case.load(...).call_args()): "
                f"it is not importable")
    base = replay or f"python -m rpa campaign --kernel {result.kernel} --dialect {result.dialect}"
    if result.target and "--tpu-version" not in base:
        base += f" --tpu-version {TPU_VERSIONS[result.target]}"
    return f"{base} --mode {f.mode} --case {path}"


def write_report(result: CampaignResult, folder: str, replay: Optional[str] = None) -> None:
    """Writes summary.json, calls.tsv (each call: its number, a hash of its bytes and data seed,
    its verdict), report.html, junit.xml and finding-N.npz into folder."""
    os.makedirs(folder, exist_ok=True)
    result.report = folder
    for n, f in enumerate(result.findings, 1):
        path = os.path.join(folder, f"finding-{n}.npz")
        f.case.save(path)
        f.case_file = path
        f.replay = _finding_replay(f, path, result, replay)
    with open(os.path.join(folder, "summary.json"), "w", encoding="utf-8") as out:
        json.dump(result.to_json(), out, indent=1)
        out.write("\n")
    with open(os.path.join(folder, "calls.tsv"), "w", encoding="utf-8") as out:
        out.write("call\tbytes_and_data_seed_sha256\tverdict\n")
        out.writelines(f"{i}\t{ident}\t{v}\n" for i, ident, v in result.call_log)
    with open(os.path.join(folder, "junit.xml"), "w", encoding="utf-8") as out:
        out.write(_junit(result))
    with open(os.path.join(folder, "report.html"), "w", encoding="utf-8") as out:
        out.write(_html(result))


def _junit(result: CampaignResult) -> str:
    cases = [f'  <testcase classname="rpa.campaign.{xml_escape(result.dialect)}" '
             f'name="{result.passed} of {result.calls} calls agree" '
             f'time="{result.seconds:.3f}"/>']
    for n, f in enumerate(result.findings, 1):
        message = xml_escape(f.detail, {'"': "&quot;"})
        body = xml_escape(f"{f.case.description or ''}\nreplay: {f.replay}")
        cases.append(f'  <testcase classname="rpa.campaign.{xml_escape(result.dialect)}" '
                     f'name="finding-{n} {f.kind}" time="0">\n'
                     f'    <failure type="{f.kind}" message="{message}">{body}</failure>\n'
                     f'  </testcase>')
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name="rpa.campaign" tests="{len(cases)}" '
            f'failures="{len(result.findings)}" errors="0" time="{result.seconds:.3f}">\n'
            + "\n".join(cases) + "\n</testsuite>\n")


def _html(result: CampaignResult) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>finding-{n}</td><td>{e(f.kind)}</td><td>{e(f.size())}</td>"
        f"<td>{e(f.original_size())}</td><td>{f.shrink_steps} / {f.shrink_calls}</td>"
        f"<td><code>{e(f.detail)}</code></td><td><code>{e(f.replay or '')}</code></td></tr>"
        for n, f in enumerate(result.findings, 1))
    findings = (f"<table><tr><th>file</th><th>kind</th><th>shrunk to</th><th>drawn as</th>"
                f"<th>steps / calls</th><th>what failed</th><th>replay</th></tr>{rows}</table>"
                if result.findings else "<p>Nothing found.</p>")
    machine = f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>rpa campaign: {e(result.kernel)}</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}
td,th{{border:1px solid #ccc;padding:.3em;vertical-align:top}}table{{border-collapse:collapse}}
</style></head><body>
<h1>rpa campaign: {e(result.kernel)}</h1>
<p>Dialect {e(result.dialect)}, {e(result.mode)} mode, profile {e(result.profile or 'any')},
seed {result.seed}; {result.calls} calls ({result.passed} agree) in {result.seconds:.1f} s over
{result.compile_keys} compile keys; shrinking ran {result.shrink_calls} more calls; the worst
agreeing output used {result.max_share_of_tolerance:.3g} of its tolerance. {e(machine)}.
{('Stopped: ' + e(result.stopped) + '.') if result.stopped else ''}</p>
<h2>Findings</h2>
{findings}
<h2>Path features</h2>
{_reach_html(result)}
</body></html>
"""


def _reach_html(result: CampaignResult) -> str:
    """The reach table: each feature the candidates reached, the first call that walked it."""
    if not result.reach:
        return "<p>No path-feature cover (cover=0).</p>"
    rows = "".join(f"<tr><td><code>{html.escape(f)}</code></td>"
                   f"<td>{'-' if c is None else c}</td></tr>"
                   for f, c in sorted(result.reach.items()))
    return (f"<p>{result.reached()} of {len(result.reach)} features reachable under the "
            f"campaign's bounds were walked.</p><table><tr><th>feature</th><th>first call</th>"
            f"</tr>{rows}</table>")


def run_one(kernel: Callable[..., Any], path: str, mode: str = "strict",
            timeout_s: float = 300.0, target: Optional[str] = None) -> tuple[Optional[str], str]:
    """Runs the kernel on one case file and judges it as the campaign does: (kind or None,
    the line that says why)."""
    case = Case.load(path).replace(out=None, expected=None)
    if case.is_v3:
        case = case.replace(kv_cache_out=None, expected_kv_cache=None)
    if mode == "both":  # the case's own: strict where strict validation accepts it
        mode = "strict" if _api.validate(case).valid else "native"
    runner = _Runner(kernel, case.dialect, mode, timeout_s, target)
    out = runner.run(_with_jax_blocks(case))
    return out.kind, out.detail or "agree"

