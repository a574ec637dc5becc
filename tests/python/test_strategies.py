"""rpa.strategies: Hypothesis draws bytes, the fuzzers' decoder (ByteSource) makes the case,
so the cases are the generators' own, every strict rule is reachable, and a failing case
shrinks with its bytes."""
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import rpa
from rpa import strategies


def q_lens(case):
    n = int(case.num_seqs[0])
    return [int(case.cu_q_lens[i + 1] - case.cu_q_lens[i]) for i in range(n)]


@settings(max_examples=60)
@given(strategies.cases())
def test_valid_cases_are_strict_valid_and_the_kernel_agrees(case):
    assert rpa.validate(case).valid, case
    assert rpa.check(case).verdict == "agree"


@settings(max_examples=20)
@given(strategies.cases(profile="decode", head_dim=128, max_seqs=4))
def test_the_profile_and_head_dim_hold(case):
    assert case.q.shape[2] == 128 and all(q == 1 for q in q_lens(case)), case
    assert rpa.validate(case).valid


@settings(max_examples=80)
@given(strategies.invalid_cases())
def test_strict_validation_reports_the_rule_the_spec_model_expects(drawn):
    case, rule = drawn
    assert rpa.validate(case).rule == rule, case


@settings(max_examples=80)
@given(strategies.invalid_cases(mode="jax"))
def test_jax_validation_reports_the_rule_the_spec_model_expects(drawn):
    case, rule = drawn
    assert rpa.validate(case, mode="jax").rule == rule, case


def test_the_strategies_reach_every_strict_rule():
    # As Mutations.ReachEveryRule: each strict rule through the mutations named after it;
    # kv_len_overflows_int32, which no mutation is named after, through the block mutation
    # whose huge variant overflows the block arithmetic.
    # Small shapes keep each search short (the default bounds take ~2 s a rule), and
    # Phase.generate takes the first case of the rule (shrinking each took 60 s in all).
    through = {"kv_len_overflows_int32": "kv_pages_per_block_bad"}
    strict_rules = [r for r in rpa.rules() if r[2]]
    reached = set()
    for name, _in_jax, _in_strict, _crash, mutations in strict_rules:
        assert mutations or name in through, f"{name}: no mutation reaches it"
        case, rule = find(strategies.invalid_cases(rule=name, mutation=through.get(name),
                                                   max_seqs=4, max_kv_len=64, max_head_dim=16),
                          lambda drawn: True,
                          settings=settings(max_examples=300, database=None,
                                            phases=[Phase.generate],
                                            suppress_health_check=list(HealthCheck)))
        assert rule == name and rpa.validate(case).rule == name, (name, case)
        reached.add(name)
    assert reached == {r[0] for r in strict_rules} and len(reached) >= 45


def test_a_failing_case_shrinks_with_its_bytes():
    # Hypothesis lowers and deletes bytes; the decoder reads fewer sequences, fewer heads,
    # smaller dimensions from them. (A choice drawn late, such as a parameter, ties down the
    # bytes before it and shrinks less: its position moves when they shrink.)
    shrink = settings(max_examples=500, database=None, derandomize=True)
    case = find(strategies.cases(), lambda c: c.q.shape[1] >= 4 and any(q_lens(c)), settings=shrink)
    # One query row of 4 heads of dimension 1 over one kv head, float32, no parameters (the
    # shrinker keeps an empty sequence before it: dropping it moves every later byte).
    assert case.q.shape == (1, 4, 1) and case.kv_pages.shape == (1, 1, 4, 1), case
    assert sum(q_lens(case)) == 1 and len(q_lens(case)) <= 2, case
    assert case.q.dtype.name == "float32" and case.soft_cap is None and case.sm_scale == 1.0
    assert rpa.gen(spec=case.spec) == case  # its spec replays it
    case = find(strategies.cases(), lambda c: sum(q > 0 for q in q_lens(c)) >= 2, settings=shrink)
    assert case.q.shape == (2, 1, 1) and len(q_lens(case)) <= 3, case


def test_bad_strategy_arguments_fail_at_definition():
    with pytest.raises(ValueError, match="profile takes"):
        strategies.cases(profile="huge")
    with pytest.raises(ValueError, match="no rule named"):
        strategies.invalid_cases(rule="no_such_rule")
    with pytest.raises(ValueError, match="no mutation named"):
        strategies.invalid_cases(mutation="no_such_mutation")
    with pytest.raises(ValueError, match="mode takes"):
        strategies.invalid_cases(mode="lenient")
    with pytest.raises(ValueError, match="head_dim"):
        strategies.cases(head_dim=256, max_head_dim=128)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategies.production_calls("tpu_inference_v3_hd64"))
def test_production_calls_are_strict_valid_and_replay(case):
    """Production calls through Hypothesis: strict-valid, replayed by their prod: spec, and the
    tiled kernel agrees with the reference (a few: each takes seconds)."""
    assert case.spec.startswith("prod:") and "production call" in case.description
    assert rpa.validate(case, mode="strict").valid, case.description
    assert rpa.gen(spec=case.spec) == case
    assert rpa.check(case, rpa.kernel(case)).ok


def test_production_calls_shrink_to_the_smallest_recipe():
    """The empty byte string is the low end of every choice: the first model, float32 q...
    and Hypothesis's minimal example of any production call is that one."""
    smallest = find(strategies.production_calls("jax"), lambda case: True)
    assert "llama-3-8b" in smallest.description and "128 slots" in smallest.description
    with pytest.raises(ValueError, match="dialect"):
        strategies.production_calls("nope")


# --- the v3 dialects (tpu-inference's kernel.py and kernel_hd64.py) ----------------------------

V3_DIALECTS = ("tpu_inference_v3", "tpu_inference_v3_hd64")


@pytest.mark.parametrize("dialect", V3_DIALECTS)
def test_v3_valid_cases_are_strict_valid_and_the_kernel_agrees(dialect):
    @settings(max_examples=40, deadline=None)
    @given(strategies.cases(dialect=dialect, max_seqs=4, max_kv_len=64))
    def check(case):
        assert case.dialect == dialect and case.spec.startswith("v3:"), case
        assert rpa.validate(case).valid and rpa.validate(case, mode="native").valid, case
        assert rpa.check(case, rpa.kernel(case)).ok, case.description
        assert rpa.gen(spec=case.spec) == case  # its spec replays it
    check()


@pytest.mark.parametrize("dialect", V3_DIALECTS)
@pytest.mark.parametrize("mode", ("strict", "native"))
def test_v3_validation_reports_the_rule_the_spec_model_expects(dialect, mode):
    @settings(max_examples=60, deadline=None)
    @given(strategies.invalid_cases(dialect=dialect, mode=mode, max_seqs=4, max_kv_len=64))
    def check(drawn):
        case, rule = drawn
        assert "mutated by" in case.description and case.spec is None
        assert rpa.validate(case, mode=mode).rule == rule, case.description
    check()


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@pytest.mark.parametrize("dialect", V3_DIALECTS)
def test_the_v3_strategies_reach_every_strict_rule(dialect):
    # As V3Mutations.ReachEveryRule: each strict rule of the dialect through the mutation named
    # after it. The pairs no input reaches in strict mode (casegen/v3_unreachable.h, which the
    # C++ test checks the validator never reports) are the only ones left out.
    unreachable = dict(rpa._rpa.v3_strict_unreachable(dialect))
    # A call with the other dialect's keyword is no rpa.Case (from_v3_call raises TypeError).
    unreachable["keyword_not_in_dialect"] = "not an rpa.Case"
    strict_rules = [r[0] for r in rpa.rules(dialect) if r[2]]
    assert set(unreachable) <= set(strict_rules)
    reached = set()
    for name in strict_rules:
        if name in unreachable:
            continue
        # Phase.generate: any case of the rule will do (shrinking each would take ~1 s).
        case, rule = find(strategies.invalid_cases(rule=name, dialect=dialect, max_seqs=4,
                                                   max_kv_len=32, max_head_dim=64),
                          lambda drawn: True,
                          settings=settings(max_examples=300, database=None,
                                            phases=[Phase.generate],
                                            suppress_health_check=list(HealthCheck)))
        assert rule == name and rpa.validate(case).rule == name, (name, case.description)
        reached.add(name)
    assert reached == set(strict_rules) - set(unreachable)
    assert len(reached) >= {"tpu_inference_v3": 60, "tpu_inference_v3_hd64": 55}[dialect]


def test_a_failing_v3_case_shrinks_with_its_bytes():
    shrink = settings(max_examples=500, database=None, derandomize=True)

    def seqs(c):
        return int(c.distribution[2])

    case = find(strategies.cases(dialect="tpu_inference_v3"),
                lambda c: c.queries.shape[1] >= 4 and seqs(c) >= 1, settings=shrink)
    # One sequence, 4 query heads over one kv head, the smallest head_dim and page.
    assert seqs(case) == 1 and case.queries.shape[1] == 4 and case.keys.shape[1] == 1, case
    assert case.queries.shape[2] == 1 and case.queries.dtype.name == "float32", case
    assert case.soft_cap is None and case.sliding_window is None, case


def test_bad_v3_strategy_arguments_fail_at_definition():
    with pytest.raises(ValueError, match="dialect takes"):
        strategies.cases(dialect="tpu_inference_v4")
    with pytest.raises(ValueError, match="no rule named no_such_rule in dialect"):
        strategies.invalid_cases(rule="no_such_rule", dialect="tpu_inference_v3")
    with pytest.raises(ValueError, match="not written for tpu_inference_v3"):
        strategies.invalid_cases(mutation="sink_rank", dialect="tpu_inference_v3")
    with pytest.raises(ValueError, match="head_dim takes 64 alone"):
        strategies.cases(dialect="tpu_inference_v3_hd64", head_dim=128)
    with pytest.raises(ValueError, match="jax_accepts"):
        strategies.cases(dialect="tpu_inference_v3", jax_accepts=True)
    with pytest.raises(ValueError, match="not an rpa.Case"):
        strategies.invalid_cases(rule="keyword_not_in_dialect", dialect="tpu_inference_v3")
