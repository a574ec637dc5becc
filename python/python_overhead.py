#!/usr/bin/env python3
"""What the Python layer adds, and what releasing the GIL gives (issue 21's measurements).

1. `rpa.check` on one of `rpa bench`'s workloads, timed from Python, against the CLI's
   in-process time for the same case file (`rpa check CASE --json` reports its check's own
   seconds: validation, the tiled kernel, the reference, the comparison; no process start,
   no file read), and what the Python layer adds (its time less the C++ check's own).
2. Two Python threads each running rpa.kernel(threads=1) on the prefill workload, against
   the same calls one after the other: the speed-up is what releasing the GIL buys.

Medians of --repeat runs, all in one process and one session (this machine is noisy).
Usage: build/venv/bin/python python/python_overhead.py [--repeat N] [--workload decode]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import rpa


def cli_seconds(rpa_exe, path):
    """rpa check --json's own time for the case: its check, no process start, no file read."""
    p = subprocess.run([rpa_exe, "check", path, "--json"], check=True, capture_output=True,
                       text=True)
    return json.loads(p.stdout)["seconds"]


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--workload", default="decode")
    args = ap.parse_args()
    rpa_exe = os.path.join(os.path.dirname(sys.executable), "rpa")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            path = os.path.join(tmp, "case.npz")
            rpa.workload(args.workload, dtype).save(path)
            case = rpa.Case.load(path)  # the arrays the CLI's reader makes, as the CLI checks
            rpa.check(case)  # warm up
            cli, mem, own = [], [], []
            for _ in range(args.repeat):  # interleaved, so drift hits both alike
                cli.append(cli_seconds(rpa_exe, path))
                start = time.perf_counter()
                result = rpa.check(case)
                mem.append(time.perf_counter() - start)
                own.append(result.seconds)
            c, m, o = (statistics.median(x) for x in (cli, mem, own))
            print(f"{args.workload}/{dtype}: rpa check --json's check {c * 1e3:.1f} ms; rpa.check "
                  f"{m * 1e3:.1f} ms from Python ({m / c:.3f}x), of which the C++ check "
                  f"{o * 1e3:.1f} ms: the Python layer adds "
                  f"{statistics.median(a - b for a, b in zip(mem, own)) * 1e3:.2f} ms; medians "
                  f"of {args.repeat} (fastest: CLI {min(cli) * 1e3:.1f} ms, Python "
                  f"{min(mem) * 1e3:.1f} ms)")

    case = rpa.workload("prefill", "float32")
    calls = 4
    rpa.kernel(case, threads=1)
    one, two = [], []
    for _ in range(max(3, args.repeat // 3)):
        one.append(timed(lambda: [rpa.kernel(case, threads=1) for _ in range(2 * calls)]))

        def work():
            for _ in range(calls):
                rpa.kernel(case, threads=1)

        def both():
            ts = [threading.Thread(target=work) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        two.append(timed(both))
    s, p = statistics.median(one), statistics.median(two)
    print(f"prefill/float32, {2 * calls} rpa.kernel(threads=1) calls: one thread {s:.2f} s, "
          f"two Python threads {p:.2f} s: {s / p:.2f}x on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
