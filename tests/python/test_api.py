"""rpa.validate, rpa.reference, rpa.kernel and rpa.check give what the CLI gives for the same
case, every verdict included, and raise as documented."""
import glob
import json
import os

import ml_dtypes
import numpy as np
import pytest

import rpa

ROOT = os.environ.get("RPA_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
MODE_CASES = sorted(glob.glob(os.path.join(ROOT, "corpus", "modes", "*.npz")))


def test_the_mode_corpus_is_there():
    assert len(MODE_CASES) >= 30


@pytest.mark.parametrize("mode", ["strict", "jax"])
def test_validate_equals_rpa_validate_on_the_mode_corpus(rpa_cli, mode):
    for path in MODE_CASES:
        p = rpa_cli("validate", path, "--mode", mode, "--all", "--json")
        cli = json.loads(p.stdout)
        verdict = rpa.validate(rpa.Case.load(path), mode=mode)
        assert verdict.valid == cli["valid"] == (p.returncode == 0), path
        assert bool(verdict) == verdict.valid
        want = [(f["rule"], f["message"], f.get("jax_crash", False)) for f in cli.get("failures", [])]
        assert [(f.rule, f.message, f.jax_crash) for f in verdict.failures] == want, path
        if not verdict.valid:
            assert (verdict.rule, verdict.message) == (cli["rule"], cli["message"])
            assert str(verdict).startswith(f"rejected in {mode} mode by {verdict.rule}: ")
            # The line rpa validate prints on stderr, after "PATH: rejected in MODE mode by ".
            assert f"by {verdict.failures[0].line}" in p.stderr


def test_a_jax_crash_rule_says_so():
    case = rpa.Case.load(os.path.join(ROOT, "corpus", "modes", "kv_heads_zero.npz"))
    verdict = rpa.validate(case, mode="jax")
    assert verdict.rule == "kv_heads_zero" and verdict.jax_crash
    assert "JAX crashes" in verdict.failures[0].line
    assert not rpa.validate(case).jax_crash  # strict mode simply rejects


def test_seed_edges_vmem_limit_zero_and_soft_cap_zero():
    case = rpa.gen(seed=3, profile="mixed", size=60)
    assert rpa.validate(case).valid
    for params, rule in [(dict(vmem_limit_bytes=0), "vmem_limit_nonpositive"),
                         (dict(vmem_limit_bytes=-1), "vmem_limit_nonpositive"),
                         (dict(soft_cap=0.0), "soft_cap_zero"),
                         (dict(soft_cap=-0.0), "soft_cap_zero")]:
        verdict = rpa.validate(case.replace(**params))
        assert verdict.rule == rule, (params, verdict)
        with pytest.raises(rpa.Rejected) as e:
            rpa.kernel(case.replace(**params))
        assert e.value.rule == rule and e.value.mode == "strict"
        assert e.value.message == verdict.message
        assert isinstance(e.value, ValueError)
    # The other side of both boundaries is valid.
    assert rpa.validate(case.replace(soft_cap=1e-3)).valid
    assert rpa.validate(case.replace(vmem_limit_bytes=64 << 20)).valid


def test_kernel_bits_do_not_depend_on_threads_and_literal_runs_in_jax_mode():
    case = rpa.gen(seed=3, profile="mixed", size=60)
    one = rpa.kernel(case, threads=1)
    assert rpa.kernel(case, threads=2).tobytes() == one.tobytes()
    literal = rpa.kernel(case, schedule="literal")
    assert literal.dtype == one.dtype and literal.shape == one.shape
    assert rpa.check(case, literal).verdict == "agree"
    # A case JAX accepts and strict mode rejects: only the literal schedule in jax mode runs it.
    jax_only = rpa.Case.load(os.path.join(ROOT, "corpus", "modes", "page_index_negative.npz"))
    with pytest.raises(rpa.Rejected):
        rpa.kernel(jax_only, schedule="literal")
    assert rpa.kernel(jax_only, schedule="literal", mode="jax").shape == jax_only.q.shape


def test_reference_semantics_differ_where_finding_11_says():
    # float8 V: the reference semantics rounds p.V to float8, the kernel semantics does not.
    case = rpa.gen(seed=10, profile="mixed", size=60)
    assert case.kv_pages.dtype == np.dtype(ml_dtypes.float8_e5m2)
    kernel_sem = rpa.reference(case, semantics="kernel")
    reference_sem = rpa.reference(case, semantics="reference")
    assert kernel_sem.tobytes() != reference_sem.tobytes()
    assert rpa.check(case, kernel_sem, semantics="kernel").verdict == "agree"
    assert rpa.check(case, reference_sem, semantics="reference").verdict == "agree"


def truncated_toward_zero(case):
    """The float32 answer of a bfloat16 case, truncated to bfloat16 (a final cast that
    truncates): within the tolerance, half an ulp toward zero on average."""
    f32 = case.replace(q=case.q.astype(np.float32), kv_pages=case.kv_pages.astype(np.float32))
    exact = rpa.reference(f32)
    return (exact.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)


def test_every_check_verdict(tmp_path, rpa_cli):
    case = rpa.workload("decode", "bfloat16")
    out = rpa.kernel(case)
    agree = rpa.check(case, out)
    assert agree.verdict == "agree" and agree.ok and bool(agree)
    assert 0 <= agree.share_of_tolerance <= 1
    assert agree.discrimination < 1 and agree.min_detectable_key_weight < 0.1
    assert agree.rejects_zero is True and agree.json["rejects_zero"] is True
    assert agree.first_mismatch is None and agree.mismatches == 0
    assert agree.compared == case.q.size
    assert agree.raise_for_verdict() is agree
    # The kernel's own output, when no out is given.
    assert rpa.check(case).json["checked"] == "kernel"

    bad = out.copy()
    bad[3, 5, 7] = -bad[3, 5, 7] - 1
    mismatch = rpa.check(case, bad)
    assert mismatch.verdict == "mismatch" and not mismatch.ok
    m = mismatch.first_mismatch
    assert (m.row, m.head, m.col) == (3, 5, 7) and m.seq == 3 and m.row_in_seq == 0
    assert mismatch.share_of_tolerance > 1
    assert str(mismatch).startswith("case: MISMATCH between out and the reference")

    biased = rpa.check(case, truncated_toward_zero(case))
    assert biased.verdict == "biased", biased
    assert biased.share_of_tolerance <= 1 and biased.bias.biased
    assert biased.bias.mean_toward_zero_ulp > 0.3  # half an ulp toward zero
    assert rpa.check(case, truncated_toward_zero(case), allow_bias=True).verdict == "agree"

    rejected = rpa.check(case.replace(soft_cap=0.0), out)
    assert rejected.verdict == "rejected" and rejected.rejection.rule == "soft_cap_zero"
    with pytest.raises(rpa.Rejected):
        rejected.raise_for_verdict()

    # The literal schedule as the oracle, under the schedule tolerance.
    literal = rpa.check(case, out, oracle="literal")
    assert literal.verdict == "agree" and literal.json["oracle"] == "literal"


def test_raise_for_verdict_saves_the_case_and_the_cli_replays_it(tmp_path, rpa_cli):
    case = rpa.gen(seed=3, profile="mixed", size=60)
    bad = rpa.kernel(case)
    bad[1, 0, 0] = bad[1, 0, 0] + 100
    result = rpa.check(case, bad, semantics="kernel", threads=2)
    with pytest.raises(rpa.CheckFailed) as e:
        result.raise_for_verdict(save_dir=str(tmp_path))
    failed = e.value
    assert isinstance(failed, AssertionError) and failed.result is result
    assert os.path.dirname(failed.path) == str(tmp_path) and os.path.exists(failed.path)
    text, replay = str(failed).rsplit("\nreplay: ", 1)
    assert text == result.text.rstrip("\n")
    assert replay.startswith(f"rpa check {failed.path} ")
    p = rpa_cli(*replay.split()[1:])
    assert p.returncode == 1
    # The CLI prints what Python printed, naming the file instead of "case".
    assert p.stdout.replace(failed.path, "case") == result.text
    # $RPA_FAILURE_DIR is the default folder.
    os.environ["RPA_FAILURE_DIR"] = str(tmp_path / "env")
    try:
        with pytest.raises(rpa.CheckFailed) as e:
            result.raise_for_verdict()
        assert e.value.path.startswith(str(tmp_path / "env"))
    finally:
        del os.environ["RPA_FAILURE_DIR"]


def test_option_errors_are_value_errors_in_python_names():
    case = rpa.gen(seed=3, profile="mixed", size=60)
    out = rpa.kernel(case)
    for kwargs, message in [(dict(semantics="bogus"), "semantics takes kernel or reference"),
                            (dict(dot_passes=5), "dot_passes takes 6, 3 or 1"),
                            (dict(oracle="literal", schedule="literal"), "oracle literal"),
                            (dict(oracle="literal", semantics="kernel"), "semantics chooses"),
                            (dict(mode="lenient"), "mode takes native, jax or strict"),
                            (dict(target="v9"), "target takes one of")]:
        with pytest.raises(ValueError, match=message):
            rpa.check(case, out, **kwargs)
    with pytest.raises(ValueError, match="semantics takes kernel or reference"):
        rpa.reference(case, semantics="kernel2")
    with pytest.raises(ValueError, match="threads"):
        rpa.kernel(case, threads=-1)
    with pytest.raises(ValueError, match="workload dtype"):
        rpa.workload("decode", "float8_e4m3fn")


def test_rules_table_names_every_mutation():
    rules = rpa.rules()
    names = [r[0] for r in rules]
    assert len(names) == len(set(names)) >= 50
    assert ("soft_cap_zero", True, True, False, ["soft_cap_zero"]) in rules
    assert any(r[3] for r in rules)  # jax_crash rules exist


def test_plan_is_what_rpa_run_reports(tmp_path, rpa_cli):
    for case in (rpa.workload("decode"), rpa.workload("mixed", "bfloat16"),
                 rpa.gen(seed=71, profile="prefill", size=60)):  # valid in both modes
        case.save(tmp_path / "c.npz")
        for schedule, mode in (("default", "strict"), ("literal", "jax")):
            p = rpa_cli("run", tmp_path / "c.npz", "--impl", "kernel", "--schedule", schedule,
                        "--mode", mode, "--json")
            cli = json.loads(p.stdout)
            plan = rpa.plan(case, schedule=schedule, mode=mode)
            assert [plan.kv_pages_per_block, plan.queries_per_block] == cli["blocks"]
            assert [plan.q_heads_per_block, plan.combined_kv_heads_per_block] == cli["heads_per_block"]
            assert plan.rows == cli["rows"] and plan.vmem_bytes > 0
    with pytest.raises(rpa.Rejected):
        rpa.plan(case.replace(vmem_limit_bytes=0))
