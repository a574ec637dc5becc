#!/usr/bin/env python3
"""`rpa campaign --cases N --shard I/N` and `rpa merge`, end to end: three shards of seed 5's
first 240 cases, merged in a shuffled order, give the summary.json, summary.md and summary an
unsharded run of the same cases gives (all but the wall clock); each shard checked its residue
class of the indices; a merge of a merge is the same again; bad --shard values, --cases with
--seconds, shards of different campaigns, a missing or duplicate shard, and a missing or cut
short state are refused with one line and the documented exit code.

Usage: cli_shard_merge_test.py RPA_BINARY REPO_ROOT
"""
import json
import os
import random
import re
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import check, finish, rpa  # noqa: E402  (reads argv)

CASES, SEED, SHARDS = 240, 5, 3


def summary(directory):
    with open(os.path.join(directory, "summary.json")) as f:
        s = json.load(f)
    return s


def without_seconds(s):
    return {k: v for k, v in s.items() if k != "seconds"}


def markdown(directory):
    with open(os.path.join(directory, "summary.md")) as f:
        return re.sub(r" cases in [0-9.]+ s ", " cases in T s ", f.read(), count=1)


def summary_lines(stdout):
    """The summary on stdout without its wall clock and without the report line (its paths)."""
    lines = [line for line in stdout.splitlines() if not line.startswith("report: ")]
    if lines:
        lines[0] = re.sub(r"^rpa campaign: [0-9.]+ s, ", "rpa campaign: T s, ", lines[0])
    return lines


def all_cases(s):
    return s["cases"] + sum(s["v3"]["cases"].values())


with tempfile.TemporaryDirectory() as tmp:
    whole = os.path.join(tmp, "whole")
    p = rpa("campaign", "--cases", str(CASES), "--seed", str(SEED), "--report", whole)
    check("unsharded --cases run: exit 0", p.returncode == 0, p.stdout[-300:] + p.stderr[-300:])
    check("progress counts to the cases asked", f"{CASES}/{CASES} cases, " in p.stderr,
          p.stderr[-300:])
    w = summary(whole)
    check("unsharded: exactly the cases asked", all_cases(w) == CASES, str(all_cases(w)))
    check("unsharded: shard 0/1 and the cases asked",
          w.get("shard") == "0/1" and w.get("cases_asked") == CASES, str(w)[:200])
    check("unsharded: a state file", os.path.exists(os.path.join(whole, "campaign-state.txt")))

    shard_dirs = []
    for i in range(SHARDS):
        d = os.path.join(tmp, f"shard{i}")
        shard_dirs.append(d)
        q = rpa("campaign", "--cases", str(CASES), "--seed", str(SEED), "--shard", f"{i}/{SHARDS}",
                "--report", d)
        check(f"shard {i}: exit 0", q.returncode == 0, q.stdout[-300:] + q.stderr[-300:])
        check(f"shard {i}: the first line names the shard",
              q.stdout.startswith("rpa campaign: ") and f", shard {i}/{SHARDS}, "
              in q.stdout.splitlines()[0], q.stdout[:200])
        s = summary(d)
        mine = [k for k in range(CASES) if k % SHARDS == i]
        check(f"shard {i}: summary.json says the shard and the cases asked",
              s.get("shard") == f"{i}/{SHARDS}" and s.get("cases_asked") == CASES, str(s)[:200])
        check(f"shard {i}: its residue class, jax and v3 cases alike",
              all_cases(s) == len(mine) and s["cases"] == sum(1 for k in mine if k % 4 != 3),
              f'{s["cases"]} jax, {all_cases(s)} in all, want {len(mine)}')
        check(f"shard {i}: progress counts its own cases", f"{len(mine)}/{len(mine)} cases, "
              in q.stderr, q.stderr[-300:])
    shards = [summary(d) for d in shard_dirs]
    check("the shards' cases add up to the cases asked",
          sum(all_cases(s) for s in shards) == CASES, str([all_cases(s) for s in shards]))

    order = list(shard_dirs)
    random.Random(7).shuffle(order)
    if order == shard_dirs:
        order.reverse()
    merged = os.path.join(tmp, "merged")
    junit = os.path.join(tmp, "merged.xml")
    m = rpa("merge", *order, "-o", merged, "--junit", junit)
    check("merge: exit 0", m.returncode == 0, m.stdout[-300:] + m.stderr[-300:])
    ms = summary(merged)
    check("merge: summary.json equals the unsharded run's but for the seconds",
          without_seconds(ms) == without_seconds(w),
          str({k: (v, ms.get(k)) for k, v in w.items() if ms.get(k) != v})[:600])
    check("merge: the longest shard's seconds",
          ms["seconds"] == max(s["seconds"] for s in shards), f'{ms["seconds"]}')
    check("merge: summary.md equals the unsharded run's but for the time",
          markdown(merged) == markdown(whole))
    check("merge: the summary on stdout equals the unsharded run's but for the time",
          summary_lines(m.stdout) == summary_lines(p.stdout), m.stdout[:300])
    for name in ("report.html", "campaign-state.txt"):
        check(f"merge: writes {name}", os.path.exists(os.path.join(merged, name)))
    with open(os.path.join(merged, "campaign-state.txt")) as f:
        state = f.read().splitlines()
    workers = []
    for d in shard_dirs:
        with open(os.path.join(d, "campaign-state.txt")) as f:
            workers += [int(line.split()[1]) for line in f if line.startswith("workers ")]
    check("merge: the merged state is shard 0/1 on the shards' workers together",
          state[0] == "rpa-campaign-state 1" and "shard 0/1" in state
          and f"workers {sum(workers)}" in state and state[-1] == "end", str(state[:12]))
    report = ET.parse(junit).getroot()
    cases = list(report.iter("testcase"))
    check("merge --junit: one test case per check class, no failures",
          len(cases) >= 9 and not list(report.iter("failure"))
          and any(c.get("name") == f'validation (strict) vs spec model ({w["cases"]} checks)'
                  for c in cases), ET.tostring(report)[:300])

    # Merges nest: a merged report is one shard (0/1) of its campaign.
    again = os.path.join(tmp, "again")
    n = rpa("merge", merged, "-o", again)
    check("merge of a merge: exit 0 and the same summary.json",
          n.returncode == 0 and without_seconds(summary(again)) == without_seconds(ms),
          n.stderr[-300:])

    # A timed shard: its share of the indices for the seconds asked.
    timed = os.path.join(tmp, "timed")
    t = rpa("campaign", "--seconds", "1", "--seed", str(SEED), "--shard", "1/2", "--report", timed)
    ts = summary(timed) if t.returncode == 0 else {}
    check("a timed shard runs", t.returncode == 0 and ts.get("shard") == "1/2"
          and "cases_asked" not in ts and all_cases(ts) > 0, t.stderr[-300:])

    # Usage errors: one line naming the option (then the usage text), exit 64.
    for value in ("3/3", "x", "1/0", "-1/2", "1/2/3", "0/4097", "", "1/2 "):
        q = rpa("campaign", "--cases", "3", "--shard", value)
        first = q.stderr.splitlines()[0] if q.stderr else ""
        check(f"--shard '{value}': exit 64 naming --shard and the value",
              q.returncode == 64 and first.startswith("rpa: --shard ") and f"'{value}'" in first,
              q.stderr[:200])
    q = rpa("campaign", "--cases", "10", "--seconds", "5")
    first = q.stderr.splitlines()[0] if q.stderr else ""
    check("--cases with --seconds: exit 64 naming both", q.returncode == 64
          and "--cases" in first and "--seconds" in first, q.stderr[:200])
    for value in ("0", "1000000001", "x"):
        q = rpa("campaign", "--cases", value)
        check(f"--cases {value}: exit 64", q.returncode == 64
              and q.stderr.startswith("rpa: --cases takes"), q.stderr[:200])
    q = rpa("campaign", "--cases", "3", "--shard", "1/3", "--pallas", "1")
    check("--pallas in a shard other than 0: exit 64", q.returncode == 64
          and "--pallas" in q.stderr.splitlines()[0], q.stderr[:200])
    q = rpa("merge", shard_dirs[0])
    check("merge without -o: exit 64", q.returncode == 64 and "-o" in q.stderr.splitlines()[0],
          q.stderr[:200])

    def refused(what, code, args, words):
        q = rpa("merge", *args, "-o", os.path.join(tmp, "refused"))
        lines = q.stderr.splitlines()
        check(f"merge {what}: exit {code}, one line", q.returncode == code and len(lines) == 1
              and lines[0].startswith("rpa merge: ") and all(x in lines[0] for x in words),
              f"{q.returncode} {q.stderr[:300]}")
        check(f"merge {what}: nothing written", not os.path.exists(
            os.path.join(tmp, "refused", "summary.md")))

    other = os.path.join(tmp, "other_seed")
    q = rpa("campaign", "--cases", str(CASES), "--seed", "6", "--shard", "1/3", "--report", other)
    check("a shard of seed 6 runs", q.returncode == 0, q.stderr[-200:])
    refused("of different seeds", 2, [shard_dirs[0], other, shard_dirs[2]],
            [other, "shard 1/3 of seed 6", shard_dirs[0], "of seed 5"])
    refused("with a shard missing", 2, [shard_dirs[0], shard_dirs[2]],
            ["shards 0/3 and 2/3 given; 1/3 is missing"])
    refused("with a shard twice", 2, [shard_dirs[0], shard_dirs[1], shard_dirs[1], shard_dirs[2]],
            ["are both shard 1/3"])
    four = os.path.join(tmp, "four")
    q = rpa("campaign", "--cases", str(CASES), "--seed", str(SEED), "--shard", "1/4",
            "--report", four)
    refused("of different splits", 2, [shard_dirs[0], four], [four, "4 shards", "3 shards"])
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    refused("of a directory without a state", 3, [shard_dirs[0], empty],
            [os.path.join(empty, "campaign-state.txt")])
    cut = os.path.join(tmp, "cut")
    os.makedirs(cut)
    with open(os.path.join(shard_dirs[1], "campaign-state.txt"), "rb") as f:
        text = f.read()
    for size, label in ((len(text) // 2, "cut in half"), (len(text) - 4, "cut before 'end'"),
                        (3, "cut to 3 bytes")):
        with open(os.path.join(cut, "campaign-state.txt"), "wb") as f:
            f.write(text[:size])
        refused(f"of a state {label}", 3, [shard_dirs[0], cut, shard_dirs[2]],
                [os.path.join(cut, "campaign-state.txt") + ": line "])
    with open(os.path.join(cut, "campaign-state.txt"), "wb") as f:
        f.write(bytes(range(256)) * 4)
    refused("of a binary file", 3, [cut], ["campaign-state.txt: line 1: "])

sys.exit(finish("cluster.shard_merge"))
