#!/usr/bin/env python3
"""`rpa check` on many cases, `rpa replay` on corpus folders, their --junit reports, and the
bias verdict end to end.

- check on files and directories: one line per case with its verdict and the worst error
  as a fraction of the tolerance, a total, the exit code of the worst (1 if any disagrees);
  --json; --junit with one test case per file.
- replay on a copy of corpus/: passes as committed; a wrong expectation, an unlisted case, a
  listed case that is missing, options that do not parse, each fail their line (exit 1);
  not a corpus folder is a usage error.
- bias: a bfloat16 case whose `out` is the kernel's float32 result truncated is 'biased'
  (exit 1, accepted by --allow-bias); the same result rounded to nearest even agrees.

Usage: cli_check_many_test.py RPA_BINARY REPO_ROOT (with the rpa package's python, for the
case files: scripts/python_venv.sh build/venv)
"""
import json
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET

import ml_dtypes
import numpy as np

import rpa as rpa_package

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_harness import ROOT, check, finish, rpa  # noqa: E402  (reads argv)
import make_mode_corpus  # noqa: E402


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_as_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def junit(path):
    suite = ET.parse(path).getroot().find("testsuite")
    return suite, suite.findall("testcase")


def check_many(work):
    d = os.path.join(work, "cases")
    os.makedirs(os.path.join(d, "sub"))
    for s in (1, 2):
        p = rpa("gen", "--seed", str(s), "--profile", "decode", "-o", os.path.join(d, f"ok{s}.npz"))
        check(f"gen {s}", p.returncode == 0, p.stderr)
    p = rpa("gen", "--seed", "3", "--profile", "prefill", "-o", os.path.join(d, "sub", "ok3.npz"))
    check("gen 3", p.returncode == 0, p.stderr)
    with open(os.path.join(d, "sub", "junk.npz"), "wb") as f:
        f.write(b"not a zip")
    with open(os.path.join(d, "ignored.txt"), "w") as f:
        f.write("not a case")
    case = make_mode_corpus.base(seed=1)
    rpa_package.Case(**case, out=np.full_like(case["q"], 7.0)).save(
        os.path.join(d, "bad_out.npz"))
    rpa_package.Case(**make_mode_corpus.with_(case, soft_cap=0.0)).save(
        os.path.join(d, "rejected.npz"))

    xml = os.path.join(work, "check.xml")
    p = rpa("check", d, "--junit", xml)
    lines = p.stdout.strip().splitlines()
    names = [os.path.basename(line.split(":")[0]) for line in lines[:-1]]
    check("one line per .npz below the folder, sorted", names ==
          ["bad_out.npz", "ok1.npz", "ok2.npz", "rejected.npz", "junk.npz", "ok3.npz"], str(names))
    verdicts = {os.path.basename(l.split(":")[0]): l.split(": ", 1)[1].split(" ")[0] for l in lines[:-1]}
    check("verdicts", verdicts == {"bad_out.npz": "mismatch", "ok1.npz": "agree", "ok2.npz": "agree",
                                   "rejected.npz": "rejected", "ok3.npz": "agree",
                                   "junk.npz": "unreadable"}, str(verdicts))
    check("agree lines give the tolerance used and the bias",
          all(" of tolerance; bias " in l for l in lines if ": agree (" in l), p.stdout)
    check("the rejection names the rule", "soft_cap_zero" in p.stdout, p.stdout)
    check("total", lines[-1] == "rpa check: 6 cases: 3 agree, 1 mismatch, 0 biased, 1 rejected, "
          "1 unreadable or not applicable", lines[-1])
    check("a mismatch among them exits 1", p.returncode == 1, str(p.returncode))
    suite, cases = junit(xml)
    check("junit: a test case per file", len(cases) == 6 and suite.get("tests") == "6", suite.attrib)
    outcome = {os.path.basename(c.get("name")): [x.tag for x in c] for c in cases}
    check("junit: mismatch fails, rejected and unreadable are errors",
          outcome["bad_out.npz"] == ["failure"] and outcome["rejected.npz"] == ["error"] and
          outcome["junk.npz"] == ["error"] and outcome["ok1.npz"] == [], str(outcome))
    check("junit: failures and errors counted", (suite.get("failures"), suite.get("errors")) == ("1", "2"),
          suite.attrib)

    p = rpa("check", os.path.join(d, "ok1.npz"), os.path.join(d, "sub"))
    check("files and folders together; unreadable worst without a mismatch: exit 3",
          p.returncode == 3 and p.stdout.count("\n") == 4, p.stdout)
    p = rpa("check", os.path.join(d, "ok1.npz"), os.path.join(d, "rejected.npz"))
    check("rejected worst: exit 2", p.returncode == 2, p.stdout)
    p = rpa("check", os.path.join(d, "ok1.npz"), os.path.join(d, "ok2.npz"), "--json")
    j = json.loads(p.stdout)
    check("--json: one object with every case and the total",
          p.returncode == 0 and [c["verdict"] for c in j["cases"]] == ["agree", "agree"] and
          j["total"]["agree"] == 2 and "bias" in j["cases"][0], p.stdout[:300])
    p = rpa("check", os.path.join(work, "missing"), os.path.join(d, "ok1.npz"))
    check("a missing path is an unreadable line", p.returncode == 3 and
          "no such file or directory" in p.stdout, p.stdout + p.stderr)
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    p = rpa("check", empty)
    check("a folder with no case: exit 3", p.returncode == 3 and "no case files" in p.stderr, p.stderr)
    p = rpa("check", os.path.join(d, "ok1.npz"), "--junit", "/nonexistent/dir/x.xml")
    check("an unwritable junit file: exit 3", p.returncode == 3 and "JUnit" in p.stderr, p.stderr)


def check_many_mixed(work):
    """jax and v3 cases in one folder: each checked in its dialect, one line each, --json
    naming the v3 ones' dialect and their cache comparison, JUnit for all."""
    d = os.path.join(work, "mixed")
    os.makedirs(d)
    p = rpa("gen", "--seed", "1", "--profile", "decode", "-o", os.path.join(d, "jax.npz"))
    check("mixed: gen jax", p.returncode == 0, p.stderr)
    for dialect, name in (("tpu_inference_v3", "v3.npz"), ("tpu_inference_v3_hd64", "hd64.npz")):
        p = rpa("gen", "--dialect", dialect, "--seed", "2", "-o", os.path.join(d, name))
        check(f"mixed: gen {dialect}", p.returncode == 0, p.stderr)
    # The v3 kernel's own result written into the case, then its cache corrupted in one
    # element: a cache mismatch.
    ran = os.path.join(d, "v3_ran.npz")
    p = rpa("run", os.path.join(d, "v3.npz"), "--impl", "kernel", "-o", ran)
    check("mixed: run v3 kernel", p.returncode == 0, p.stderr)
    with np.load(ran) as f:
        arrays = dict(f)
    arrays["kv_cache_out"] = arrays["kv_cache_out"].copy()
    flat = arrays["kv_cache_out"].reshape(-1)
    flat[0] = flat[0] ^ 1 if flat.dtype.kind in "ui" else np.nextafter(flat[0], np.inf)
    np.savez(os.path.join(d, "v3_cache_bad.npz"), **arrays)
    # A v3 case kernel.py accepts and strict rejects (decode q_len 2): rejected.
    shutil.copy(os.path.join(ROOT, "corpus", "modes", "v3_decode_q_len_two.npz"),
                os.path.join(d, "v3_rejected.npz"))
    xml = os.path.join(work, "mixed.xml")
    p = rpa("check", d, "--junit", xml)
    lines = p.stdout.strip().splitlines()
    verdicts = {os.path.basename(l.split(":")[0]): l.split(": ", 1)[1].split(" ")[0]
                for l in lines[:-1]}
    check("mixed: verdicts", verdicts == {
        "jax.npz": "agree", "v3.npz": "agree", "hd64.npz": "agree", "v3_ran.npz": "agree",
        "v3_cache_bad.npz": "mismatch", "v3_rejected.npz": "rejected"}, p.stdout)
    check("mixed: v3 agree lines give the tolerance used and the cache",
          all(" of tolerance (max error " in l and l.endswith("; cache equal)")
              for l in lines if l.split(":")[0].endswith(("/v3.npz", "/hd64.npz", "/v3_ran.npz"))),
          p.stdout)
    check("mixed: the cache mismatch line names the element",
          any("v3_cache_bad.npz: mismatch (cache: page " in l and "(1 elements differ)" in l
              for l in lines), p.stdout)
    check("mixed: the v3 rejection names its rule and mode",
          "strict mode (tpu_inference_v3) by decode_q_len_not_one" in p.stdout, p.stdout)
    check("mixed: total and exit 1", p.returncode == 1 and lines[-1] ==
          "rpa check: 6 cases: 4 agree, 1 mismatch, 0 biased, 1 rejected, 0 unreadable or not "
          "applicable", lines[-1])
    suite, cases = junit(xml)
    outcome = {os.path.basename(c.get("name")): [x.tag for x in c] for c in cases}
    check("mixed: junit", len(cases) == 6 and outcome["v3_cache_bad.npz"] == ["failure"]
          and outcome["v3_rejected.npz"] == ["error"] and outcome["v3.npz"] == [], str(outcome))
    p = rpa("check", d, "--json")
    j = {os.path.basename(c["path"]): c for c in json.loads(p.stdout)["cases"]}
    check("mixed: --json", j["v3.npz"].get("dialect") == "tpu_inference_v3"
          and j["hd64.npz"].get("dialect") == "tpu_inference_v3_hd64" and "dialect" not in j["jax.npz"]
          and j["v3_cache_bad.npz"].get("cache_differences") == 1
          and j["v3_cache_bad.npz"].get("cache_equal") is False
          and j["v3_rejected.npz"].get("rule") == "decode_q_len_not_one"
          and j["v3_rejected.npz"].get("mode") == "strict", p.stdout[:600])
    p = rpa("check", os.path.join(d, "v3.npz"), os.path.join(d, "jax.npz"), "--oracle", "literal")
    check("mixed: --oracle literal is not applicable to the v3 case without an out only",
          "v3.npz: not_applicable (--oracle literal needs a v3 case with `out` and "
          "`kv_cache_out`" in p.stdout and p.returncode == 64, p.stdout)


def replay(work):
    corpus = os.path.join(work, "corpus")
    shutil.copytree(os.path.join(ROOT, "corpus"), corpus)
    xml = os.path.join(work, "replay.xml")
    p = rpa("replay", corpus, "--junit", xml)
    check("the committed corpus replays", p.returncode == 0 and " passed, 0 failed" in p.stdout,
          p.stdout[-400:])
    suite, cases = junit(xml)
    classes = {c.get("classname") for c in cases}
    check("junit: modes, findings, regressions and every fuzz target",
          {"rpa.replay.modes", "rpa.replay.findings", "rpa.replay.regressions",
           "rpa.replay.fuzz/fuzz_validate", "rpa.replay.fuzz/fuzz_raw_inputs",
           "rpa.replay.fuzz/fuzz_differential", "rpa.replay.fuzz/fuzz_case_file",
           "rpa.replay.fuzz/fuzz_npy"} <= classes,
          str(classes))
    check("junit: as many cases as lines", int(suite.get("tests")) == p.stdout.count("\n") - 1,
          suite.attrib)

    modes = os.path.join(corpus, "modes")
    tsv = os.path.join(modes, "expectations.tsv")
    text = open(tsv).read()
    with open(tsv, "w") as f:
        f.write(text.replace("vmem_limit_zero\tvmem_limit_nonpositive\tvmem_limit_nonpositive",
                             "vmem_limit_zero\tvalid\tvmem_limit_nonpositive"))
    shutil.copy(os.path.join(modes, "head_dim_64.npz"), os.path.join(modes, "unlisted.npz"))
    os.remove(os.path.join(modes, "soft_cap_nan.npz"))
    regs = os.path.join(corpus, "regressions", "expectations.tsv")
    with open(regs, "a") as f:
        f.write("float8_pallas_kernel\t--no-such-flag\tagree\tplanted\n")
    p = rpa("replay", modes, os.path.join(corpus, "regressions"))
    fails = [l for l in p.stdout.splitlines() if ": FAIL (" in l]
    check("four planted problems, four failed lines, exit 1", p.returncode == 1 and len(fails) == 4,
          "\n".join(fails) + p.stdout[-200:])
    check("the wrong expectation names both verdicts",
          any("vmem_limit_zero.npz: FAIL (jax: got vmem_limit_nonpositive, expected valid)" in l
              for l in fails), "\n".join(fails))
    check("the unlisted case", any("unlisted.npz: FAIL (no line in expectations.tsv)" in l
                                   for l in fails), "\n".join(fails))
    check("the missing case", any(l.startswith("modes/soft_cap_nan.npz: FAIL") for l in fails),
          "\n".join(fails))
    check("the bad options", any("unknown option --no-such-flag" in l for l in fails),
          "\n".join(fails))
    # v3 cases: the `jax` column is the dialect's native mode.
    check("v3 mode cases replay", "modes/v3_decode_q_len_two.npz: ok (tpu_inference_v3 native "
          "valid, strict decode_q_len_not_one)" in p.stdout, p.stdout[-2000:])
    with open(tsv, "w") as f:
        f.write(text.replace("v3_sm_scale_nan\tvalid\t", "v3_sm_scale_nan\tsm_scale_nonfinite\t"))
    p = rpa("replay", modes)
    check("a wrong v3 native expectation names the dialect",
          "modes/v3_sm_scale_nan.npz: FAIL (tpu_inference_v3 native: got valid, expected "
          "sm_scale_nonfinite)" in p.stdout and p.returncode == 1, p.stdout[-600:])
    p = rpa("replay", os.path.join(corpus, "fuzz", "fuzz_validate"))
    check("one fuzz target folder", p.returncode == 0 and "fuzz/fuzz_validate/" in p.stdout,
          p.stdout[-200:])
    p = rpa("replay", work)
    check("not a corpus folder: usage", p.returncode == 64 and "no corpus folder" in p.stderr,
          p.stderr[:200])
    p = rpa("replay")
    check("no folder: usage", p.returncode == 64, p.stderr[:200])


def bias(work):
    # 16 rows x 16 query heads = 256 (row, head) units: enough for the verdict (oracle/bias.cc).
    case = make_mode_corpus.base(seed=4, seqs=[(4, 9), (6, 12), (6, 6)], hq=16, hkv=2)
    q_bits, kv_bits = to_bf16_bits(case["q"]), to_bf16_bits(case["kv_pages"])
    wide = dict(case, q=bf16_as_f32(q_bits), kv_pages=bf16_as_f32(kv_bits))
    wide_path, wide_out = os.path.join(work, "wide.npz"), os.path.join(work, "wide_out.npz")
    rpa_package.Case(**wide).save(wide_path)
    p = rpa("run", wide_path, "--impl", "kernel", "-o", wide_out)
    check("the kernel's float32 result", p.returncode == 0, p.stderr)
    f32 = rpa_package.Case.load(wide_out).out.astype(np.float32)
    truncated = (f32.view(np.uint32) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    truncated[nan] = to_bf16_bits(f32)[nan]
    bf16 = dict(case, q=q_bits.view(ml_dtypes.bfloat16), kv_pages=kv_bits.view(ml_dtypes.bfloat16))
    for name, out, want in (("nearest", to_bf16_bits(f32), "agree"), ("truncated", truncated, "biased")):
        path = os.path.join(work, f"{name}.npz")
        rpa_package.Case(**bf16, out=out.view(ml_dtypes.bfloat16)).save(path)
        p = rpa("check", path, "--json")
        j = json.loads(p.stdout)
        check(f"{name}: verdict {want}", j.get("verdict") == want and j.get("agree") is True and
              p.returncode == (0 if want == "agree" else 1), p.stdout)
        b = j.get("bias", {})
        toward_zero = b.get("mean_toward_zero_ulp", 0)
        check(f"{name}: bias numbers", b.get("units") == 256 and b.get("elements", 0) > 30000 and
              ((toward_zero > 0.3 and toward_zero > 6 * b["se_toward_zero_ulp"]) if want == "biased"
               else abs(toward_zero) < 0.1), str(b))
        p = rpa("check", path)
        check(f"{name}: text", p.stdout.startswith(path + (": BIASED: out is within the tolerance"
                                                          if want == "biased" else ": out agrees")),
              p.stdout)
        p = rpa("check", path, "--allow-bias")
        check(f"{name}: --allow-bias accepts it", p.returncode == 0 and
              ("accepted by --allow-bias" in p.stdout) == (want == "biased"), p.stdout)
        p = rpa("check", path, "--semantics", "reference", "--json")
        check(f"{name}: the reference semantics reports the bias, does not judge it",
              p.returncode == 0 and json.loads(p.stdout)["verdict"] == "agree", p.stdout[:300])


def main():
    with tempfile.TemporaryDirectory() as work:
        check_many(work)
        check_many_mixed(work)
        replay(work)
        bias(work)
    return finish("cli_check_many")


if __name__ == "__main__":
    sys.exit(main())
