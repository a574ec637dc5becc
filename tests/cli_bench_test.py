#!/usr/bin/env python3
"""`rpa bench` end to end on its smallest preset: `--preset decode --threads 1,1,all --runs 3
--json` (--runs 1 where RPA_BENCH_RUNS=1: the sanitizer build, whose runs look for memory
errors, which one timed call walks as three do) measures the limits once per distinct thread count, times the kernel on each (3 calls:
the test reads the fields, not the speed, and runs under ASan too), checks it
against the reference, and reports every field docs/kernel.md's Performance table is read
from. Nothing here asserts a speed (speed belongs to the benchmark itself); it asserts that
the sweep, the limits and the agreement are what the run says.

Usage: cli_bench_test.py RPA_BINARY REPO_ROOT
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import check, finish, rpa  # noqa: E402  (reads argv)


def main():
    cores = os.cpu_count() or 1
    runs = int(os.environ.get("RPA_BENCH_RUNS", "3"))
    p = rpa("bench", "--preset", "decode", "--threads", "1,1,all", "--runs", str(runs), "--json")
    check("bench exits 0 (the kernel agrees)", p.returncode == 0, f"rc={p.returncode} {p.stderr[-400:]!r}")
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        check("bench --json prints one JSON object", False, f"{e}: {p.stdout[:200]!r}")
        return
    sweep = [1] if cores == 1 else [1, cores]
    check("the sweep drops repeats, 'all' is every core",
          [m["threads"] for m in j["limits"]] == sweep, j["limits"])
    for m in j["limits"]:
        check(f"limits on {m['threads']} threads measured",
              m["triad_gb_per_s"] > 0 and m["gemm_gflop_per_s"] > 0, m)
    rows = j["results"]
    check("one row per workload, dtype and thread count",
          sorted((r["dtype"], r["threads"]) for r in rows) ==
          sorted((t, n) for t in ("float32", "bfloat16") for n in sweep), rows)
    for r in rows:
        label = f"{r['workload']}/{r['dtype']} on {r['threads']} threads"
        check(f"{label}: agrees with the reference", r["agree"] is True, r)
        limit = next(m for m in j["limits"] if m["threads"] == r["threads"])
        check(f"{label}: %triad is against its own thread count's triad",
              abs(r["pct_triad"] - 100 * r["gb_per_s"] / limit["triad_gb_per_s"]) < 1e-6 * r["pct_triad"] + 1e-9, r)
        # The roofline from this run's own limits (which bound binds depends on the machine:
        # a busy one measures a lower GEMM peak).
        memory_s = r["kv_bytes"] / (limit["triad_gb_per_s"] * 1e9)
        compute_s = r["useful_flops"] / (limit["gemm_gflop_per_s"] * 1e9)
        check(f"{label}: the bound is the longer of the two",
              r["bound"] == ("memory" if memory_s >= compute_s else "compute"), r)
        want = 100 * max(memory_s, compute_s) / (r["kernel_ms"] * 1e-3)
        check(f"{label}: %limit is the roofline over the kernel's time",
              abs(r["pct_limit"] - want) < 1e-6 * want, (r["pct_limit"], want))
    check(f"--runs {runs}: {runs} timed kernel calls per row", all(r["kernel_runs"] == runs for r in rows), rows)
    check("all_agree", j["all_agree"] is True)
    check("no v3 pairs without v3 workloads", j["v3_over_jax_pct_limit"] == [], j["v3_over_jax_pct_limit"])

    # The v3 dialect on the same shapes, and both dialects timed in alternation.
    p = rpa("bench", "--preset", "v3-decode", "--threads", "1", "--runs", str(runs), "--json")
    check("bench --preset v3-decode exits 0", p.returncode == 0, f"rc={p.returncode} {p.stderr[-400:]!r}")
    j = json.loads(p.stdout)
    rows = j["results"]
    check("a jax and a v3 row per dtype",
          sorted((r["dialect"], r["dtype"]) for r in rows) ==
          sorted((d, t) for d in ("jax", "tpu_inference_v3") for t in ("float32", "bfloat16")), rows)
    check("every row agrees with its dialect's reference", all(r["agree"] for r in rows), rows)
    for r in rows:
        twin = next(t for t in rows if t["dtype"] == r["dtype"] and t["dialect"] != r["dialect"])
        check(f"{r['workload']}/{r['dtype']}: the same flops and KV bytes as its twin",
              (r["useful_flops"], r["kv_bytes"]) == (twin["useful_flops"], twin["kv_bytes"]), (r, twin))
    pairs = j["v3_over_jax_pct_limit"]
    check("one pair per dtype", sorted(q["dtype"] for q in pairs) == ["bfloat16", "float32"], pairs)
    for q in pairs:
        check(f"pair {q['dtype']}: {2 * runs + 1} rounds (2 x {runs} + 1), ordered quartiles",
              q["rounds"] == 2 * runs + 1 and 0 < q["p25"] <= q["median"] <= q["p75"], q)

    # A production-size call (harness/production_bench.h) through every implementation, once.
    p = rpa("bench", "--preset", "production:jax-long", "--threads", "1", "--json")
    check("bench --preset production:jax-long exits 0", p.returncode == 0, f"rc={p.returncode} {p.stderr[-400:]!r}")
    j = json.loads(p.stdout)
    calls = j["calls"]
    check("one call, the one named", [c["name"] for c in calls] == ["jax-long"], calls)
    c = calls[0]
    with tempfile.TemporaryDirectory() as tmp:
        g = rpa("gen", "--profile", "production", "--dialect", "jax", "--seed", str(c["seed"]), "-o",
                os.path.join(tmp, "call.npz"))
    check("its spec is rpa gen's for the same seed", f"spec: {c['spec']}" in g.stdout, (c["spec"], g.stdout[-300:]))
    check("a production-size call: 2^30 multiply-adds, a 128K-token sequence",
          c["macs"] == 1 << 30 and c["max_kv_len"] == 131072 and c["memory_bytes"] > 100 << 20, c)
    stages = [s["name"] for s in c["stages"]]
    check("every stage, in order", stages == ["materialize", "validate", "reference", "tiled", "literal"], stages)
    check("every stage timed", all(s["seconds"] > 0 for s in c["stages"]), c["stages"])
    check("both kernels checked and agreeing",
          [s.get("agree") for s in c["stages"]] == [None, None, None, True, True], c["stages"])
    check("the total is the stages' sum",
          abs(c["total_seconds"] - sum(s["seconds"] for s in c["stages"])) < 1e-9, c)
    check("all_agree", j["all_agree"] is True and j["threads"] == 1, j)
    p = rpa("bench", "--preset", "production:nope")
    check("an unknown call name is a usage error naming the calls",
          p.returncode == 64 and "jax-long" in p.stderr, (p.returncode, p.stderr[:200]))
    for bad in ("0", "x", "1001"):
        p = rpa("bench", "--preset", "decode", "--runs", bad)
        check(f"--runs {bad} is a usage error naming the range",
              p.returncode == 64 and "--runs takes a count" in p.stderr, (p.returncode, p.stderr[:200]))
    p = rpa("bench", "--preset", "production:jax-long", "--runs", "3")
    check("--runs does not apply to production", p.returncode == 64 and "--runs" in p.stderr,
          (p.returncode, p.stderr[:200]))
    p = rpa("bench", "--preset", "production", "--threads", "1,2")
    check("production takes one thread count", p.returncode == 64 and "one thread count" in p.stderr,
          (p.returncode, p.stderr[:200]))


main()
sys.exit(finish("rpa bench CLI"))
