"""``python -m rpa campaign``: rpa.campaign against a kernel of yours, from the command line
(docs/cli.md, "A campaign against your kernel").

    python -m rpa campaign --kernel package.module:function --dialect D --calls N [options]
    python -m rpa campaign --kernel-file path/to/kernel.py --interpret --dialect D --calls N
    python -m rpa campaign --kernel ... --case finding-1.npz      (replay one call)
    python -m rpa campaign --kernel ... --ray [HOST:PORT] [--ray-resources TPU=1]  (docs/cluster.md)

Exit status: 0 nothing found, 1 findings, 2 usage or a kernel that cannot be loaded, 130
stopped by Ctrl-C (after writing the report of what finished).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Optional

from rpa._case import DIALECTS


def _load_callable(spec: str) -> Any:
    if ":" not in spec:
        raise ValueError(f"--kernel takes package.module:function (got {spec!r})")
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--kernel {spec}: cannot import {module_name}: {e}") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--kernel {spec}: {module_name} has no {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--kernel {spec}: {attr} is not callable")
    return obj


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rpa",
                                     description="rpa against a kernel of yours")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("campaign", help="generated calls through your kernel, each checked, "
                       "each failure shrunk to a small call")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--kernel", metavar="MODULE:FUNCTION",
                       help="a callable in the dialect's signature (importable)")
    which.add_argument("--kernel-file", metavar="PATH",
                       help="a copy of JAX's or tpu-inference's kernel file; its entry point by "
                       "name (ragged_paged_attention, or _hd64)")
    c.add_argument("--dialect", choices=DIALECTS, default="jax")
    c.add_argument("--interpret", action="store_true",
                   help="run --kernel-file in TPU interpret mode on the CPU, with rpa's patches "
                   "applied to it (without it the file runs as it is: a TPU host)")
    c.add_argument("--tpu-version", type=int, choices=(5, 6, 7), default=6,
                   help="the generation a v3 kernel file's heuristics and the literal schedule "
                   "assume (default 6)")
    budget = c.add_mutually_exclusive_group()
    budget.add_argument("--calls", type=int, help="how many calls (default 100)")
    budget.add_argument("--seconds", type=float, help="for how long")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--profile", help="decode, prefill, mixed, long, edge (default: any) or "
                   "long32k (v3: kv_len 32768 to 65536, the long tier)")
    c.add_argument("--mode", choices=("strict", "native", "both"), default="both",
                   help="strict calls against the definition, native calls against the literal "
                   "schedule, or both (default)")
    c.add_argument("--cover", type=int, default=512, metavar="N",
                   help="candidate calls whose path features the first calls cover (default "
                   "512, which reaches every feature of the default bounds in 24 calls; 0: "
                   "plain draws only)")
    c.add_argument("--no-integer-edges", dest="integer_edges", action="store_false",
                   help="v3: no windows or page tables at the int16/int32 position edges")
    c.add_argument("--report", metavar="DIR",
                   help="write summary.json, calls.tsv, report.html, junit.xml and the finding "
                   "files")
    c.add_argument("--head-dim", type=int)
    c.add_argument("--max-seqs", type=int, default=4)
    c.add_argument("--max-kv-len", type=int,
                   help="default 64 (--profile long32k: its own 32768 to 65536)")
    c.add_argument("--max-head-dim", type=int, default=128)
    c.add_argument("--max-page-size", type=int, default=16)
    c.add_argument("--max-findings", type=int, metavar="N",
                   help="stop sending calls once N different failures are found (default: the "
                   "whole budget)")
    c.add_argument("--shrink-calls", type=int, default=150,
                   help="kernel calls shrinking may spend per finding (default 150)")
    c.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a call may take before it is a hang (default 120)")
    c.add_argument("--ray", nargs="?", const="ray", metavar="ADDRESS",
                   help="run the calls as Ray tasks: on the cluster at ADDRESS (HOST:PORT, "
                   "ray://HOST:10001), or without it the one at $RAY_ADDRESS, else a new one on "
                   "this machine for this run")
    c.add_argument("--ray-resources", metavar="NAME=N[,NAME=N]",
                   help="what each task asks the cluster for, e.g. TPU=1 or CPU=2 (default "
                   "CPU=1)")
    c.add_argument("--case", metavar="FILE",
                   help="run the kernel on this case file alone and judge it (a finding's replay)")
    return parser


def _resources(text: Optional[str]) -> Optional[dict[str, float]]:
    if text is None:
        return None
    out: dict[str, float] = {}
    for item in text.split(","):
        name, eq, amount = item.partition("=")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not eq or not name.strip() or not value >= 0:
            raise ValueError(f"--ray-resources takes NAME=N[,NAME=N] with N >= 0 (got {item!r})")
        out[name.strip()] = value
    return out


def _kernel(args: argparse.Namespace) -> Any:
    if args.kernel:
        if args.interpret:
            raise ValueError("--interpret goes with --kernel-file (a callable runs as it is)")
        return _load_callable(args.kernel)
    try:
        from rpa.jax.kernel_file import KernelFile  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        need = ("jax==0.10.2 (pip install jax==0.10.2, or scripts/python_venv.sh DIR)"
                if args.dialect == "jax" else "jax==0.11.2 and tpu-inference==0.32.0 "
                "(scripts/python_v3_venv.sh DIR)")
        raise ValueError(f"--kernel-file with dialect {args.dialect} needs {need}") from e
    # Run natively on a cluster, the file compiles on each worker (on its TPU), not here.
    return KernelFile(args.kernel_file, args.dialect, interpret=args.interpret,
                      tpu_version=args.tpu_version, timeout_s=args.timeout,
                      lazy=args.ray is not None and not args.interpret)


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.interpret:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # unless set: interpret mode needs no TPU
    from rpa import _campaign  # pylint: disable=import-outside-toplevel
    target = {v: t for t, v in _campaign.TPU_VERSIONS.items()}[args.tpu_version]
    try:
        if args.ray_resources is not None and args.ray is None:
            raise ValueError("--ray-resources goes with --ray")
        if args.case and args.ray is not None:
            raise ValueError("--case replays one call here: leave out --ray")
        resources = _resources(args.ray_resources)
        kernel = _kernel(args)
    except (ValueError, ImportError, RuntimeError) as e:  # RuntimeError: rpa.jax's PatchError
        print(f"rpa campaign: {e}", file=sys.stderr)
        return 2
    if args.case:
        try:
            kind, line = _campaign.run_one(kernel, args.case, args.mode, args.timeout, target)
        except ValueError as e:
            print(f"rpa campaign: {args.case}: {e}", file=sys.stderr)
            return 2
        print(f"rpa campaign: {args.case}: {kind or 'agree'}: {line}")
        return 1 if kind else 0
    which = (f"--kernel {args.kernel}" if args.kernel else
             f"--kernel-file {args.kernel_file}" + (" --interpret" if args.interpret else ""))
    replay = (f"python -m rpa campaign {which} --dialect {args.dialect}"
              f" --tpu-version {args.tpu_version} --timeout {args.timeout:g}")
    try:
        result = _campaign.campaign(
            kernel, dialect=args.dialect,
            calls=args.calls if args.calls is not None or args.seconds is not None else 100,
            seconds=args.seconds, seed=args.seed, profile=args.profile, mode=args.mode,
            report=args.report, head_dim=args.head_dim, max_seqs=args.max_seqs,
            max_kv_len=args.max_kv_len, max_head_dim=args.max_head_dim,
            max_page_size=args.max_page_size, shrink_calls=args.shrink_calls, cover=args.cover,
            integer_edges=args.integer_edges,
            timeout_s=args.timeout, target=target, replay=replay, cluster=args.ray,
            worker_resources=resources, max_findings=args.max_findings)
    except _campaign.CampaignInterrupted as e:  # Ctrl-C: the report of what finished
        result = e.result
    except (ValueError, RuntimeError) as e:  # RuntimeError: a cluster's task failed
        print(f"rpa campaign: {e}", file=sys.stderr)
        return 2
    print(result.summary())
    interrupted = bool(result.stopped and result.stopped.startswith("interrupted"))
    for n, f in enumerate(result.findings, 1):
        print(f"  finding {n}: {f.kind}: {f.detail}")
        print(f"    shrunk to {f.size()} in {f.shrink_steps} steps ({f.shrink_calls} calls), "
              f"drawn as {f.original_size()}")
        if f.replay:
            print(f"    replay: {f.replay}")
    if args.report:
        print(f"rpa campaign: wrote {args.report}/summary.json, calls.tsv, report.html, junit.xml")
    return 130 if interrupted else 1 if result.findings else 0


if __name__ == "__main__":
    sys.exit(main())
