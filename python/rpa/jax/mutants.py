"""The campaign's power against the shipped kernel files (issue 46, item 5): small mutants of a
kernel file, the equivalent ones dropped, a campaign on each.

    python -m rpa.jax.mutants --dialect jax --calls 24 --seed 1 --limit 12 --report DIR

1. **Mutants.** Each mutant changes one token inside the kernel's own functions (not its
   validators, reference or block-size tables, ``KERNEL_FUNCTIONS``): a comparison (``<`` and
   ``<=``, ``>`` and ``>=``, ``==`` and ``!=``), an arithmetic operator (``+`` and ``-``), or a
   small integer literal (0, 1, 2: off by one up). A mutant whose text rpa's interpret-mode
   patches no longer match, or that no longer compiles, is left out (``unpatchable``).
   ``--limit N`` takes N of them, spread evenly over the file (the same N every run).
2. **Equivalent mutants** change no output: each mutant and the shipped file run the same
   ``--probe`` calls (drawn from seed 12345, strict and native, as the campaign draws them);
   a mutant whose outputs (and cache) are equal bit for bit on all of them, raising where the
   file raises, is dropped.
3. **The campaign** runs on each other mutant twice, with the same budget and seed: as issue 36
   ran it (``mode="strict", cover=0``, "before") and with the defaults ("after": the
   path-feature cover, strict and native calls, integer edges). Killed: the campaign found
   something (shrinking is off: ``shrink_calls=0``). Calls to the first finding are reported.

The report (``DIR/mutants.json`` and ``DIR/mutants.md``) lists every mutant with its line, the
change, whether it is equivalent, and each campaign's verdict; the score is killed /
non-equivalent. Needs the dialect's JAX (jax==0.10.2, or the v3 virtualenv).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import json
import os
import sys
import time
import tokenize
from typing import Any, Optional

import numpy as np

# The functions whose tokens are mutated, by dialect: the kernels' bodies and the DMA helpers
# they call, never the validators, the reference or the tuned-block tables.
KERNEL_FUNCTIONS = {
    "jax": ("ragged_paged_attention_kernel", "ragged_paged_attention",
            "MultiPageAsyncCopyDescriptor"),
    "tpu_inference_v3": ("_ragged_paged_attention_kernel", "_ragged_paged_attention_kernel_loop",
                         "merge_kv", "prepare_inputs", "prepare_outputs",
                         "ragged_paged_attention"),
    "tpu_inference_v3_hd64": ("_ragged_paged_attention_kernel", "merge_kv", "prepare_inputs",
                              "prepare_outputs", "ragged_paged_attention_hd64"),
}
KEYWORDS = ("return", "if", "elif", "else", "and", "or", "not", "in", "is", "lambda", "yield",
            "assert")
SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-",
         "-": "+"}


@dataclasses.dataclass
class Mutant:
    line: int
    col: int
    old: str
    new: str
    source: str = dataclasses.field(repr=False, default="")

    def name(self) -> str:
        return f"L{self.line}:{self.col} {self.old} -> {self.new}"


def _spans(source: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The line spans of the named functions and classes (nested ones included)."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.append((first, node.end_lineno or node.lineno))
    return spans


def mutants(source: str, dialect: str) -> list[Mutant]:
    """Every one-token mutant inside the dialect's kernel functions, in source order."""
    spans = _spans(source, KERNEL_FUNCTIONS[dialect])
    lines = source.splitlines(keepends=True)
    out: list[Mutant] = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        row, col = tok.start
        if not any(a <= row <= b for a, b in spans):
            previous = tok
            continue
        new = None
        if tok.type == tokenize.OP and tok.string in SWAPS:
            # A unary sign (after an operator, an opening bracket or a keyword) is left alone.
            unary = tok.string in "+-" and (
                previous is None or
                (previous.type == tokenize.OP and previous.string not in (")", "]", "}")) or
                (previous.type == tokenize.NAME and previous.string in KEYWORDS))
            if not unary:
                new = SWAPS[tok.string]
        elif tok.type == tokenize.NUMBER and tok.string in ("0", "1", "2"):
            new = str(int(tok.string) + 1)
        if new is not None:
            line = lines[row - 1]
            text = line[:col] + new + line[col + len(tok.string):]
            mutated = "".join(lines[:row - 1] + [text] + lines[row:])
            out.append(Mutant(row, col, tok.string, new, mutated))
        previous = tok
    return out


def spread(items: list[Any], limit: Optional[int]) -> list[Any]:
    """`limit` items evenly spread over the list (all of them without a limit)."""
    if limit is None or limit >= len(items):
        return list(items)
    return [items[(k * len(items)) // limit] for k in range(limit)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _defined_rows(call: Any) -> int:
    """The output rows the definition gives (those of the call's sequences): rows past them
    are padding, whatever a kernel writes there."""
    sequences = (int(np.asarray(call.distribution)[2]) if call.is_v3 else
                 int(np.asarray(call.num_seqs).reshape(-1)[0]))
    return int(np.asarray(call.cu_q_lens)[sequences])


def _outcome(kernel: Any, call: Any) -> Any:
    """("out", the output's defined rows [and the cache]) or ("raised", the exception's
    type): a mutant that changes only padding rows (JAX's L494:71 stores one row past a
    sequence's, which the next sequence overwrites or which is padding) is equivalent."""
    args, kwargs = call.call_args()
    try:
        got = kernel(*[None if a is None else np.array(a, copy=True) for a in args], **kwargs)
    except Exception as e:  # pylint: disable=broad-except
        return ("raised", type(e).__name__)
    rows = _defined_rows(call)
    if isinstance(got, (tuple, list)):  # v3: (out, kv_cache)
        return ("out", (np.asarray(got[0])[:rows],) + tuple(got[1:]))
    return ("out", np.asarray(got)[:rows])


def probe_calls(dialect: str, n: int, target: Optional[str]) -> list[Any]:
    """n calls as the campaign's defaults draw them from seed 12345: the cover of 512
    candidates' path features (strict and native), so that the probes walk the program's
    branches rather than n small plain draws, then plain draws where n is more."""
    from rpa import _campaign_calls, _draw  # pylint: disable=import-outside-toplevel
    settings = _campaign_calls._Settings(dialect, "both", None, 128 if dialect == "jax" else None,
                                         (4, 64, 128, 16), 120.0, target, 0, True)
    planner = _campaign_calls._Planner(settings.drawer(), 12345, _draw.DEFAULT_MAX_BYTES, 1, 512,
                                       target, settings.timeout_s)
    calls: list[Any] = []
    while len(calls) < n:  # the cover's calls, then plain draws (a batch stops at the cover's end)
        more = planner.batch(n - len(calls))
        if not more:
            break
        calls += more
    return [c.case for c in calls]


def _campaign_verdict(result: Any) -> dict[str, Any]:
    first = min((f.first_call for f in result.findings), default=None)
    return {"killed": not result.ok, "first_call": first, "calls": result.calls,
            "findings": [f"{f.kind} ({f.mode})" for f in result.findings],
            "seconds": round(result.seconds, 1)}


CAMPAIGNS = {"before": {"mode": "strict", "cover": 0}, "after": {}}


def run(dialect: str, calls: int, seed: int, limit: Optional[int], probes: int,
        target: Optional[str], report: Optional[str], source: Optional[str] = None,
        tpu_version: int = 6, only: Optional[list[str]] = None,
        campaigns: tuple[str, ...] = ("before", "after"), resume: bool = False) -> dict[str, Any]:
    """Mutants of the shipped file (or `source`), equivalence on the probes, the campaigns
    named (CAMPAIGNS: "before", as issue 36 ran it; "after", the defaults). resume: the rows of
    `report`'s mutants.json (a run of the same dialect, calls, seed and probes) are kept and
    their mutants not run again: a whole file's score over several sittings."""
    import rpa  # pylint: disable=import-outside-toplevel
    from rpa.jax.kernel_file import KernelFile  # pylint: disable=import-outside-toplevel
    if source is None:
        if dialect == "jax":
            from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as shipped
            source = inspect.getsource(shipped)
        else:
            from rpa.jax import tpu_inference  # pylint: disable=import-outside-toplevel
            source = inspect.getsource(tpu_inference.kernel_module(dialect))
    path = os.path.join(report or ".", f"{dialect}_kernel.py")
    original = KernelFile(path, dialect, source=source, tpu_version=tpu_version)
    calls_probe = probe_calls(dialect, probes, target)
    want = [_outcome(original, c) for c in calls_probe]
    rows = _resumed(report, dialect, calls, seed, probes) if resume else []
    done = {r["mutant"] for r in rows}
    start = time.monotonic()
    chosen = spread(mutants(source, dialect), limit)
    if only:
        chosen = [m for m in mutants(source, dialect) if f"L{m.line}:{m.col}" in only]
    for m in chosen:
        if m.name() in done:
            continue
        row: dict[str, Any] = {"mutant": m.name(), "line": m.line}
        try:
            kernel = KernelFile(path, dialect, source=m.source, tpu_version=tpu_version)
        except Exception as e:  # pylint: disable=broad-except  (a patch or the file's syntax)
            row["status"] = f"unpatchable: {type(e).__name__}"
            rows.append(row)
            continue
        got = [_outcome(kernel, c) for c in calls_probe]
        if all(g[0] == w[0] and (_same(g[1], w[1]) if g[0] == "out" else g[1] == w[1])
               for g, w in zip(got, want)):
            row["status"] = "equivalent"
            rows.append(row)
            continue
        row["status"] = "non-equivalent"
        for label in campaigns:
            # Killed at the first finding: the calls after it would not change the verdict
            # (a kernel.py mutant's 24 calls took 2 to 6 minutes, most killed by call 5).
            result = rpa.campaign(kernel, dialect=dialect, calls=calls, seed=seed,
                                  shrink_calls=0, target=target, max_findings=1,
                                  **CAMPAIGNS[label])
            row[label] = _campaign_verdict(result)
        rows.append(row)
        said = ", ".join(f"{label} {row[label]['killed']}" for label in campaigns)
        print(f"rpa.jax.mutants: {m.name()}: killed {said} ({time.monotonic() - start:.0f} s)",
              file=sys.stderr)
        _write(report, _summary(dialect, calls, seed, probes, target, rows, start))
    summary = _summary(dialect, calls, seed, probes, target, rows, start)
    _write(report, summary)
    return summary


def _summary(dialect: str, calls: int, seed: int, probes: int, target: Optional[str],
             rows: list[dict[str, Any]], start: float) -> dict[str, Any]:
    live = [r for r in rows if r["status"] == "non-equivalent"]
    return {
        "dialect": dialect, "calls": calls, "seed": seed, "probes": probes, "target": target,
        "mutants": len(rows), "equivalent": sum(r["status"] == "equivalent" for r in rows),
        "unpatchable": sum(r["status"].startswith("unpatchable") for r in rows),
        "non_equivalent": len(live),
        # None: that campaign was not run (--campaigns).
        "killed_before": (sum(r["before"]["killed"] for r in live if "before" in r)
                          if any("before" in r for r in live) or not live else None),
        "killed_after": (sum(r["after"]["killed"] for r in live if "after" in r)
                         if any("after" in r for r in live) or not live else None),
        "seconds": round(time.monotonic() - start, 1), "rows": rows,
    }


def _resumed(report: Optional[str], dialect: str, calls: int, seed: int,
             probes: int) -> list[dict[str, Any]]:
    """The rows of report/mutants.json, where it is a run of the same settings (else
    ValueError: its verdicts would not be this run's)."""
    path = os.path.join(report or ".", "mutants.json")
    if not report or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        before = json.load(f)
    settings = (dialect, calls, seed, probes)
    if (before["dialect"], before["calls"], before["seed"], before["probes"]) != settings:
        raise ValueError(f"--resume: {path} is a run of dialect {before['dialect']}, "
                         f"{before['calls']} calls, seed {before['seed']}, {before['probes']} "
                         f"probes, not {dialect}, {calls}, {seed}, {probes}")
    return list(before["rows"])


def _write(report: Optional[str], summary: dict[str, Any]) -> None:
    """The report so far (rewritten after each mutant: a long run can be read as it goes)."""
    if not report:
        return
    os.makedirs(report, exist_ok=True)
    with open(os.path.join(report, "mutants.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(report, "mutants.md"), "w", encoding="utf-8") as f:
        f.write(markdown(summary))


def _count(killed: Optional[int]) -> str:
    return "not run" if killed is None else str(killed)


def markdown(s: dict[str, Any]) -> str:
    n = s["non_equivalent"]
    lines = [f"{s['dialect']}: {s['mutants']} mutants, {s['equivalent']} equivalent on "
             f"{s['probes']} probe calls, {s['unpatchable']} unpatchable; of {n} non-equivalent, "
             f"killed within {s['calls']} calls at seed {s['seed']}: "
             f"{_count(s['killed_before'])} before (strict, plain draws), "
             f"{_count(s['killed_after'])} after (the defaults)", "",
             "| mutant | status | before: killed at call | after: killed at call |",
             "|---|---|---|---|"]
    for r in s["rows"]:
        b, a = r.get("before"), r.get("after")
        cell = lambda v: "" if v is None else (str(v["first_call"]) if v["killed"] else "survived")
        lines.append(f"| `{r['mutant']}` | {r['status']} | {cell(b)} | {cell(a)} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rpa.jax.mutants", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--dialect", default="jax", choices=tuple(KERNEL_FUNCTIONS))
    p.add_argument("--calls", type=int, default=24)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=int, help="mutants to take, spread over the file")
    p.add_argument("--probes", type=int, default=8, help="calls that decide equivalence")
    p.add_argument("--target", choices=("v5e", "v6e", "7x"))
    p.add_argument("--report", metavar="DIR")
    p.add_argument("--list", action="store_true", help="print the mutants and stop")
    p.add_argument("--only", nargs="+", metavar="LLINE:COL",
                   help="these mutants (as --list names them, e.g. L503:63) instead of --limit")
    p.add_argument("--campaigns", nargs="+", choices=tuple(CAMPAIGNS),
                   default=list(CAMPAIGNS), help="which campaigns run on each mutant")
    p.add_argument("--resume", action="store_true",
                   help="keep the rows of --report's mutants.json and run only the mutants it "
                   "lacks (the same dialect, calls, seed and probes)")
    p.add_argument("--require-killed", action="store_true",
                   help="exit 1 unless every mutant taken is non-equivalent and killed by each "
                        "campaign run (a test's assertion)")
    a = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if a.list:
        if a.dialect == "jax":
            from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as shipped
            source = inspect.getsource(shipped)
        else:
            from rpa.jax import tpu_inference  # pylint: disable=import-outside-toplevel
            source = inspect.getsource(tpu_inference.kernel_module(a.dialect))
        for m in spread(mutants(source, a.dialect), a.limit):
            print(m.name())
        return 0
    if a.resume and not a.report:
        p.error("--resume takes --report DIR (the run to go on with)")
    try:
        s = run(a.dialect, a.calls, a.seed, a.limit, a.probes, a.target, a.report, only=a.only,
                campaigns=tuple(a.campaigns), resume=a.resume)
    except ValueError as e:
        print(f"rpa.jax.mutants: {e}", file=sys.stderr)
        return 2
    print(markdown(s))
    if a.require_killed:
        missed = [r["mutant"] for r in s["rows"] if r["status"] != "non-equivalent" or
                  not all(r[label]["killed"] for label in a.campaigns)]
        if missed or not s["rows"]:
            print(f"rpa.jax.mutants: not killed within {a.calls} calls: "
                  f"{', '.join(missed) or 'no mutant taken'}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
