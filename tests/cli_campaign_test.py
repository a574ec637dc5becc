#!/usr/bin/env python3
"""`rpa campaign` end to end: a short run checks cases in both modes and on the kernel,
finds nothing on the current code, and writes a JSON and a markdown report whose numbers
add up; bad options exit 64, an unwritable report directory exits 3.

Usage: cli_campaign_test.py RPA_BINARY REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import check, finish, rpa  # noqa: E402  (reads argv)

with tempfile.TemporaryDirectory() as tmp:
    report = os.path.join(tmp, "report")
    p = rpa("campaign", "--seconds", "2", "--seed", "3", "--report", report)
    check("exit 0 (no findings)", p.returncode == 0, p.stdout[-400:] + p.stderr[-400:])
    check("summary line", p.stdout.startswith("rpa campaign: "), p.stdout[:100])
    check("progress on stderr", " cases, " in p.stderr, p.stderr[:200])
    with open(os.path.join(report, "summary.json")) as f:
        s = json.load(f)
    check("cases drawn", s["cases"] >= 50, str(s["cases"]))
    check("half of them mutated", abs(s["mutated_cases"] * 2 - s["cases"]) <= 1,
          f'{s["mutated_cases"]} of {s["cases"]}')
    check("both modes checked per case", s["validation_checks"] == 2 * s["cases"])
    for mode in ("strict", "jax"):
        check(f"{mode} verdicts add up", sum(s[f"{mode}_verdicts"].values()) == s["cases"])
    valid = s["strict_verdicts"].get("valid", 0)
    check("every strict-valid case went to the kernel", s["kernel_checks"] == valid,
          f'{s["kernel_checks"]} vs {valid}')
    check("strict rejected the mutated ones", s["cases"] - valid >= s["mutated_cases"] * 0.8)
    check("raw calls from the valid cases", 0 < s["raw_calls"] <= valid
          and s["raw_ran"] <= s["raw_strict_accepted"] <= s["raw_calls"],
          f'{s["raw_calls"]} raw, {s["raw_strict_accepted"]} accepted, {s["raw_ran"]} run')
    check("no findings", s["findings_total"] == 0 and s["findings"] == [], str(s["findings"])[:300])
    used = s["max_tolerance_used"]
    check("tolerance use per dtype pair within 1", used and all(0 <= v <= 1 for v in used.values()),
          str(used))
    keys = s.get("min_detectable_key_weight", {})
    check("least dropped key weight caught, per pair with checks",
          set(keys) == set(used) and all(0 < k["median"] <= k["largest"] < 1 for k in keys.values()),
          str(keys))
    # Every fourth case is of a v3 dialect (kernel.py's and hd64's in turn), half of each
    # dialect's with one or two named mutations, each mode's verdict the v3 spec model's (no
    # finding); the unmutated ones valid in both modes, and the tiled kernel agrees with the
    # v3 reference on them.
    v3 = s.get("v3", {})
    v3_cases = v3.get("cases", {})
    mutated = v3.get("mutated_cases", {})
    check("v3 cases from both dialects", set(v3_cases) == {"tpu_inference_v3",
                                                            "tpu_inference_v3_hd64"}
          and sum(v3_cases.values()) >= 10, str(v3_cases))
    check("half of each dialect's cases mutated", set(mutated) == set(v3_cases) and all(
        abs(2 * mutated[d] - n) <= 2 for d, n in v3_cases.items()), f"{mutated} {v3_cases}")
    for mode in ("native", "strict"):
        verdicts = v3.get(f"{mode}_verdicts", {})
        check(f"v3 {mode} verdicts per dialect add up, rules other than valid among them",
              {d: sum(r.values()) for d, r in verdicts.items()} == v3_cases and all(
                  len(r) > 1 and r.get("valid", 0) >= v3_cases[d] - mutated[d]
                  for d, r in verdicts.items()), str(verdicts)[:400])
    strict_valid = sum(r.get("valid", 0) for r in v3.get("strict_verdicts", {}).values())
    check("every v3 case strict accepts went to the kernel, mutated ones among them",
          v3.get("kernel_checks") == strict_valid
          and strict_valid > sum(v3_cases.values()) - sum(mutated.values())
          and sum(v3.get("kernel_checks_per_pair", {}).values()) == v3.get("kernel_checks"),
          f"strict valid {strict_valid}: " + str(v3)[:300])
    hist = v3.get("tolerance_histogram", {})
    check("v3 error / tolerance histograms, per dialect and pair, count the kernel checks",
          set(hist) == set(v3.get("kernel_checks_per_pair", {})) and all(
              sum(h.values()) == v3["kernel_checks_per_pair"][k] and len(h) == 13
              for k, h in hist.items()), str(hist)[:300])
    v3_used = v3.get("max_tolerance_used", {})
    check("v3 tolerance use per dialect and dtype pair within 1", v3_used
          and set(v3_used) == set(v3.get("tolerance_at_max", {}))
          and all(k.split(" ")[0] in v3_cases and 0 <= u <= 1 for k, u in v3_used.items()),
          str(v3_used))
    # The v3 checks' power, as the jax dialect's: the least dropped key weight caught per
    # dialect and dtype pair, and the checks an all-zero output would pass.
    v3_keys = v3.get("min_detectable_key_weight", {})
    check("v3: least dropped key weight caught, per dialect and pair with checks",
          v3_keys and set(v3_keys) <= set(v3.get("kernel_checks_per_pair", {}))
          and all(0 < k["median"] <= k["largest"] < 1 for k in v3_keys.values()), str(v3_keys))
    check("v3: the checks an all-zero output would pass are counted",
          isinstance(v3.get("could_not_reject_zero"), int), str(v3)[:300])
    past = v3.get("past_float32", {})
    check("v3: the checks that left rows out past float32's range are counted, with the pairs",
          isinstance(past.get("checks"), int) and isinstance(past.get("pairs"), int)
          and 0 <= past["checks"] <= v3.get("kernel_checks", 0)
          and past["checks"] <= past["pairs"], str(past))
    check("summary line says them", f"  v3 {past.get('checks')} kernel checks left out "
          f"{past.get('pairs')} (row, head) pairs where" in p.stdout, p.stdout[-2000:])
    check("summary line names the v3 key weight", "and the least weight of a dropped key caught "
          "(median / largest), per dialect and q/kv dtypes:" in p.stdout
          and f", v3 {v3.get('could_not_reject_zero')}\n" in p.stdout, p.stdout[:2000])
    check("summary names the v3 cases", f" and {sum(v3_cases.values())} tpu-inference v3 cases"
          in p.stdout.splitlines()[0] and "  tpu_inference_v3_hd64: " in p.stdout
          and "v3 kernel vs v3 reference (kernel semantics; cache bit for bit)" in p.stdout,
          p.stdout[:300])
    with open(os.path.join(report, "summary.md")) as f:
        md = f.read()
    check("markdown v3 tables", "| dialect | rule | native | strict |" in md
          and "| tpu_inference_v3 | valid | " in md
          and "| dialect q / kv | 0 | <1e-5 |" in md, md[-800:])
    check("markdown report", md.startswith("# rpa campaign") and "| rule | strict | jax |" in md)
    check("markdown key weight column", "least dropped key weight caught (median / largest)" in md)
    check("markdown v3 key weight column", "| tolerance there | least dropped key weight caught "
          "(median / largest) |" in md and "v3 kernel-semantics checks could not have rejected"
          in md, md[-1200:])
    check("summary line names the key weight", "dropped key caught (median / largest)" in p.stdout,
          p.stdout[:600])

    # Fewer MXU passes loosen the kernel semantics' float32 tolerance: the same cases then use
    # less of it, and the least key weight caught grows.
    one = os.path.join(tmp, "one_pass")
    q = rpa("campaign", "--seconds", "2", "--seed", "3", "--report", one, "--dot-passes", "1")
    check("--dot-passes 1 runs", q.returncode == 0, q.stdout[-300:] + q.stderr[-300:])
    with open(os.path.join(one, "summary.json")) as f:
        s1 = json.load(f)
    f32 = "float32/float32"
    if f32 in keys and f32 in s1.get("min_detectable_key_weight", {}):
        check("one pass: a larger least key weight for float32",
              s1["min_detectable_key_weight"][f32]["largest"] > keys[f32]["largest"],
              f'{s1["min_detectable_key_weight"][f32]} vs {keys[f32]}')

    # A run whose cases hold a valid side of k_scale_nonfinite (the largest float32) on a
    # float32 call: seed 8's first 200 cases have one (found by trying seeds 1-8; 2176 pairs).
    # Its rows past float32's range are left out, counted, and not a finding.
    far = os.path.join(tmp, "past_float32")
    q = rpa("campaign", "--cases", "200", "--seed", "8", "--report", far)
    check("--cases 200 --seed 8: no findings", q.returncode == 0, q.stdout[-300:] + q.stderr[-300:])
    with open(os.path.join(far, "summary.json")) as f:
        past8 = json.load(f)["v3"]["past_float32"]
    check("seed 8: a check left (row, head) pairs out past float32's range",
          past8["checks"] >= 1 and past8["pairs"] >= past8["checks"], str(past8))
    check("seed 8: the summary line says so", f"  v3 {past8['checks']} kernel checks left out "
          f"{past8['pairs']} (row, head) pairs" in q.stdout, q.stdout[-1500:])

    check("summary names the sizes", "sizes 0..100" in p.stdout and s["max_size"] == 100)
    check("summary says the Pallas check did not run",
          "Pallas kernel (TPU interpret mode): not run" in p.stdout and
          s["pallas"].startswith("not run"), s.get("pallas", "")[:100])
    missing = dict(os.environ, RPA_JAX_PYTHON=os.path.join(tmp, "no-such-python"))
    q = subprocess.run([sys.argv[1], "campaign", "--seconds", "600", "--pallas", "2"],
                       capture_output=True, text=True, env=missing)
    check("--pallas without JAX exits 3 before the run",
          q.returncode == 3 and "--pallas needs JAX" in q.stderr and " cases, " not in q.stderr,
          q.stderr[-200:])
    q = rpa("campaign", "--seconds", "1", "--max-size", "400", "--seed", "9223372036854775807")
    check("--max-size 400 and the largest seed", q.returncode == 0 and "sizes 0..400" in q.stdout,
          q.stdout[:200] + q.stderr[-200:])
    for args, what in [(["--seconds", "0"], "zero seconds"), (["--seconds", "x"], "not a number"),
                       (["--seed", "-1"], "negative seed"), (["--bogus"], "unknown option"),
                       (["--report"], "missing value"), (["--report", ""], "empty report"),
                       (["--seed", "9223372036854775808"], "seed past int64"),
                       (["--max-size", "401"], "size past the full bounds"),
                       (["--pallas", "x"], "--pallas not a number"),
                       (["--dot-passes", "2"], "--dot-passes not 6, 3 or 1")]:
        q = rpa("campaign", *args)
        check(f"usage: {what}", q.returncode == 64 and q.stderr.startswith("rpa: "), q.stderr[:100])
    # --profile production: every case a production call (jax, kernel.py, hd64 in turn), and a
    # reach table whose counts add up to the calls. Seed 21's first calls are small (7 and
    # 9 MiB): one second lets each worker take one.
    prod = os.path.join(tmp, "production")
    q = rpa("campaign", "--profile", "production", "--seconds", "1", "--seed", "21",
            "--report", prod)
    check("--profile production: exit 0", q.returncode == 0, q.stdout[-400:] + q.stderr[-400:])
    with open(os.path.join(prod, "summary.json")) as f:
        sp = json.load(f)
    reach = sp.get("production_reach", {})
    calls = {d: r["calls"] for d, r in reach.items()}
    check("production: the jax call and the kernel.py call ran", calls.get("jax", 0) >= 1
          and calls.get("tpu_inference_v3", 0) >= 1 and set(calls) <= {
              "jax", "tpu_inference_v3", "tpu_inference_v3_hd64"}, str(calls))
    check("production: every call went through the checks",
          sp["cases"] == calls.get("jax", 0)
          and sum(sp["v3"]["cases"].values()) == sum(calls.values()) - calls.get("jax", 0)
          and sp["kernel_checks"] == sp["strict_verdicts"].get("valid", 0) == sp["cases"],
          str(sp)[:400])
    for d, r in reach.items():
        models = sum(n for item, n in r["items"].items() if item.startswith("model "))
        check(f"production reach {d}: one model per call, every item at most the calls",
              models == r["calls"] and all(0 <= n <= r["calls"] for n in r["items"].values())
              and "edge int32_window_at" in r["items"], str(r)[:300])
        check(f"production reach {d}: the extremes", 0 < r["highest_position"] + 1
              == r["longest_kv_len"] <= 131072 and r["most_rows"] >= 1, str(r)[:300])
    check("production: no findings", sp["findings_total"] == 0, str(sp["findings"])[:300])
    check("production: the summary prints the reach table",
          "  production reach (each item: the calls that drew it):\n    jax: " in q.stdout
          and "production calls, longest kv_len " in q.stdout, q.stdout[-1500:])
    with open(os.path.join(prod, "summary.md")) as f:
        check("production: markdown reach tables", "## Production reach" in f.read())
    q = rpa("campaign", "--profile", "huge", "--seconds", "1")
    check("usage: --profile takes production", q.returncode == 64
          and "--profile takes production" in q.stderr, q.stderr[:200])
    blocked = os.path.join(tmp, "file")
    open(blocked, "w").close()
    q = rpa("campaign", "--seconds", "600", "--report", os.path.join(blocked, "sub"))
    check("unwritable report exits 3 before the run", q.returncode == 3 and "cannot write" in q.stderr
          and " cases, " not in q.stderr, q.stderr[-200:])

sys.exit(finish("cli.campaign"))
