"""Calls per second of rpa.campaign against a real kernel in TPU interpret mode: in this
process, and on local Ray clusters of 1 and of 2 worker slots (rpa._local_cluster), the same
calls each time (the same seed), whose results must agree (docs/cluster.md quotes a run).

    build/venv/bin/python bench/cluster_throughput.py [--calls 48] [--seed 1] [--rounds 2]
        [--kernel-file PATH --dialect D]     (default: JAX 0.10.2's shipped kernel.py, jax)

Rounds alternate the three runs; the table gives each run's median and range of calls/s.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import rpa
from rpa._local_cluster import LocalCluster, loopback_environment


def shipped_kernel(dialect: str) -> str:
    if dialect == "jax":
        from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel
        return kernel.__file__
    from rpa.jax import tpu_inference
    kernel, hd64 = tpu_inference.modules()
    return (hd64 if dialect.endswith("_hd64") else kernel).__file__


def verdicts(result: rpa.CampaignResult) -> list:
    return [(i, h, v) for i, h, v in result.call_log]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--calls", type=int, default=48)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dialect", default="jax")
    parser.add_argument("--kernel-file")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    loopback_environment()
    from rpa.jax.kernel_file import KernelFile
    path = args.kernel_file or shipped_kernel(args.dialect)
    runs: dict[str, list[float]] = {"here": [], "1 worker": [], "2 workers": []}
    clusters = {"1 worker": LocalCluster(1), "2 workers": LocalCluster(2)}
    reference = None
    try:
        for r in range(args.rounds):
            for name in runs:
                cluster = clusters.get(name)
                # A new kernel each run: each compiles afresh, as a campaign's first calls do.
                kernel = KernelFile(path, args.dialect, interpret=True)
                start = time.monotonic()
                result = rpa.campaign(kernel, dialect=args.dialect, calls=args.calls,
                                      seed=args.seed,
                                      cluster=cluster.address if cluster else None)
                took = time.monotonic() - start
                runs[name].append(result.calls / took)
                print(f"round {r + 1}, {name}: {result.summary()}", flush=True)
                if reference is None:
                    reference = verdicts(result)
                elif verdicts(result) != reference:
                    print(f"DIFF: {name}'s calls or verdicts differ from the first run's")
                    return 1
    finally:
        for c in clusters.values():
            c.stop()
    print(f"\n{args.calls} calls of {path} ({args.dialect}, interpret mode), seed {args.seed}, "
          f"{platform.processor() or platform.machine()} with {os.cpu_count()} cores, "
          f"{args.rounds} rounds")
    print(f"{'run':10} {'calls/s median':>15} {'min':>7} {'max':>7}")
    for name, rates in runs.items():
        print(f"{name:10} {statistics.median(rates):15.2f} {min(rates):7.2f} {max(rates):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
