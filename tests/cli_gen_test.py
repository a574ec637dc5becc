#!/usr/bin/env python3
"""`rpa gen` end to end: seeded cases of each profile are strict-valid and agree, edge
cases are rejected exactly as the printed spec-model verdicts say, --spec replays a case
byte for byte, and usage errors exit 64.

Usage: cli_gen_test.py RPA_BINARY REPO_ROOT
"""
import json
import re
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import check, finish, rpa  # noqa: E402  (reads argv)


def printed(stdout, key):
    """The value after '  KEY: ' in gen's report."""
    for line in stdout.splitlines():
        if line.startswith(f"  {key}: "):
            return line[len(key) + 4:]
    return None


def verdict(path, mode):
    p = rpa("validate", path, "--mode", mode, "--json")
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return f"unparsable: {p.stdout} {p.stderr}"
    return "valid" if j.get("valid") else f"{j['rule']}: {j['message']}"


with tempfile.TemporaryDirectory() as tmp:
    case = os.path.join(tmp, "case.npz")
    for profile in ("decode", "prefill", "mixed"):
        for seed in (1, 2):
            p = rpa("gen", "--seed", str(seed), "--profile", profile, "-o", case)
            check(f"{profile} {seed} exit", p.returncode == 0, p.stderr)
            check(f"{profile} {seed} says its profile", p.stdout.startswith(f"{profile} batch"),
                  p.stdout[:80])
            check(f"{profile} {seed} expected valid", printed(p.stdout, "expected strict") == "valid")
            c = rpa("check", case, "--threads", "2")
            check(f"{profile} {seed} kernel agrees", c.returncode == 0, c.stdout + c.stderr)

    rejected = 0
    for seed in range(1, 31):
        p = rpa("gen", "--seed", str(seed), "--profile", "edge", "-o", case)
        check(f"edge {seed} exit", p.returncode == 0, p.stderr)
        for mode in ("strict", "jax"):
            want = printed(p.stdout, f"expected {mode}")
            got = verdict(case, mode)
            check(f"edge {seed} {mode} verdict", got == want, f"want {want!r}, got {got!r}")
            rejected += want != "valid"
    check("edge cases are mostly rejected", rejected >= 30, f"{rejected} of 60 verdicts")

    p = rpa("gen", "--seed", "7", "--profile", "edge", "-o", case)
    spec = printed(p.stdout, "spec")
    again = os.path.join(tmp, "again.npz")
    r = rpa("gen", "--spec", spec, "-o", again)
    check("--spec exit", r.returncode == 0, r.stderr)
    check("--spec reprints the same spec", printed(r.stdout, "spec") == spec)
    with open(case, "rb") as a, open(again, "rb") as b:
        check("--spec writes the same bytes", a.read() == b.read())
    check("--spec takes upper-case hex", rpa("gen", "--spec", spec.upper(), "-o", again).returncode == 0)
    p1 = rpa("gen", "--seed", "11", "-o", case)
    p2 = rpa("gen", "--seed", "11", "-o", again)
    with open(case, "rb") as a, open(again, "rb") as b:
        same_report = p1.stdout.splitlines()[:-1] == p2.stdout.splitlines()[:-1]  # not "wrote"
        check("--seed repeats byte for byte", a.read() == b.read() and same_report)

    for args, what in [
        (["--seed", "1"], "no -o"),
        (["--spec", "xyz", "-o", case], "bad hex"),
        (["--seed", "1", "--spec", "00", "-o", case], "both sources"),
        (["--seed", "1", "--profile", "huge", "-o", case], "unknown profile"),
        (["--seed", "-3", "-o", case], "negative seed"),
        (["--seed", "1", "--size", "401", "-o", case], "size past the full bounds"),
        (["--spec", spec, "--size", "100", "-o", case], "--size with --spec"),
        (["--spec", spec[:-2], "-o", case], "truncated spec"),
        (["--spec", spec + "00", "-o", case], "padded spec"),
        (["--spec", "", "-o", case], "empty spec"),
        (["--bogus", "1", "-o", case], "unknown option"),
    ]:
        p = rpa("gen", *args)
        check(f"usage: {what}", p.returncode == 64 and p.stderr.startswith("rpa: "), p.stderr[:100])

    # The v3 dialects: every seeded case is valid in both modes (the v3 validators' own
    # verdicts, printed) and computes with the reference; --spec v3:HEX replays it.
    for dialect in ("tpu_inference_v3", "tpu_inference_v3_hd64"):
        for profile in ("decode", "prefill", "mixed", "long", "edge"):
            seed = 5
            p = rpa("gen", "--dialect", dialect, "--seed", str(seed), "--profile", profile,
                    "--size", "40", "-o", case)
            label = f"{dialect} {profile}"
            check(f"{label} exit", p.returncode == 0, p.stderr)
            check(f"{label} names its dialect", p.stdout.startswith(dialect + ","), p.stdout[:80])
            check(f"{label} printed valid", printed(p.stdout, "expected strict") == "valid"
                  and printed(p.stdout, "expected native") == "valid", p.stdout)
            for mode in ("strict", "native"):
                got = verdict(case, mode)
                check(f"{label} {mode} valid", got == "valid", got)
            r = rpa("run", case, "--impl", "reference")
            check(f"{label} reference runs", r.returncode == 0, r.stdout + r.stderr)
            spec = printed(p.stdout, "spec")
            check(f"{label} spec is v3 hex", spec is not None and spec.startswith("v3:"), spec)
            r = rpa("gen", "--spec", spec, "-o", again)
            with open(case, "rb") as a, open(again, "rb") as b:
                check(f"{label} --spec writes the same bytes", r.returncode == 0
                      and a.read() == b.read(), r.stderr)
    # The long tier: valid in both modes, kv_len past int16's range, past the spec's bounds (the
    # case file replays it: the spec line says so instead of aborting in the encoder).
    for dialect in ("tpu_inference_v3", "tpu_inference_v3_hd64"):
        p = rpa("gen", "--dialect", dialect, "--seed", "1", "--profile", "long32k", "-o", case)
        label = f"{dialect} long32k"
        check(f"{label} exit", p.returncode == 0, p.stderr)
        check(f"{label} printed valid", printed(p.stdout, "expected strict") == "valid"
              and printed(p.stdout, "expected native") == "valid", p.stdout)
        check(f"{label} has no spec", (printed(p.stdout, "spec") or "").startswith("none"),
              p.stdout)
        lens = re.findall(r"\d+/(\d+)", p.stdout.split("sequences (q_len/kv_len):")[1].split("\n")[0])
        check(f"{label} kv_len past int16", lens and all(32768 <= int(n) <= 65536 for n in lens),
              lens)
    p = rpa("gen", "--seed", "1", "--profile", "long32k", "-o", case)
    check("usage: long32k for jax", p.returncode == 64 and "profile long32k takes the v3" in p.stderr,
          p.stderr[:100])
    p = rpa("gen", "--dialect", "tpu_inference_v3", "--seed", "9", "--head-dim", "240", "-o",
            case)
    check("v3 --head-dim", p.returncode == 0 and ", 240], kv" in p.stdout, p.stdout[:120])
    p = rpa("gen", "--dialect", "tpu_inference_v3", "--seed", "9", "-o", case)
    spec = printed(p.stdout, "spec")
    for args, what in [
        (["--dialect", "tpu_v9", "--seed", "1", "-o", case], "unknown dialect"),
        (["--dialect", "tpu_inference_v3_hd64", "--seed", "1", "--head-dim", "128", "-o", case],
         "hd64 head_dim"),
        (["--dialect", "tpu_inference_v3_hd64", "--spec", spec, "-o", case], "spec of the other dialect"),
        (["--dialect", "tpu_inference_v3", "--spec", "00", "-o", case], "jax spec for v3"),
        (["--spec", spec[:-2], "-o", case], "truncated v3 spec"),
        (["--dialect", "tpu_inference_v3", "--seed", "1", "--profile", "huge", "-o", case],
         "unknown v3 profile"),
    ]:
        p = rpa("gen", *args)
        check(f"usage: {what}", p.returncode == 64 and p.stderr.startswith("rpa: "), p.stderr[:100])
    p = rpa("gen", "--dialect", "jax", "--seed", "11", "-o", case)
    p2 = rpa("gen", "--seed", "11", "-o", again)
    with open(case, "rb") as a, open(again, "rb") as b:
        check("--dialect jax is the default", p.returncode == 0 and a.read() == b.read())

sys.exit(finish("cli.gen"))
