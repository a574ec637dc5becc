"""rpa.Case and the API on tpu-inference's v3 dialects (DESIGN.md section 16): the kernel's
arguments in and out, the .npz round trip through the C++ reader and writer, native and
strict validation, the reference's (out, kv_cache) and the check. Expected messages are
tpu-inference 0.32.0's own, pasted from a run of its validators (python -m
rpa.jax.v3_cross_check in the virtualenv of scripts/python_v3_venv.sh)."""
import json

import ml_dtypes
import numpy as np
import pytest

import rpa

V3 = "tpu_inference_v3"
HD64 = "tpu_inference_v3_hd64"


def small_call(dialect=V3, kv_dtype=np.float32):
    """One sequence (q_len 3, kv_len 5) over pages of 4 tokens; 2 q heads over 1 kv head."""
    rng = np.random.default_rng(0)
    d = 64 if dialect == HD64 else 32
    packing = 4 // np.dtype(kv_dtype).itemsize
    rows = (-(-1 // packing)) if dialect == HD64 else -(-2 // packing)
    lanes = 128
    args = (rng.standard_normal((4, 2, d)).astype(np.float32),
            rng.standard_normal((4, 1, d)).astype(kv_dtype),
            rng.standard_normal((4, 1, d)).astype(kv_dtype),
            rng.standard_normal((3, 4, rows, packing, lanes)).astype(kv_dtype),
            np.array([5, 0], np.int32), np.array([2, 0, 1, 1], np.int32),
            np.array([0, 3, 3], np.int32), np.array([0, 0, 1], np.int32))
    return args


@pytest.mark.parametrize("dialect", [V3, HD64])
def test_from_v3_call_and_call_args_round_trip(dialect):
    args = small_call(dialect)
    keywords = {"sm_scale": 0.5, "soft_cap": 30.0}
    if dialect == V3:
        keywords["m_block_sizes"] = (8, 8, 4, 4)
    else:
        keywords["num_kv_pages_per_block"] = 2
    case = rpa.Case.from_v3_call(*args, dialect=dialect, **keywords)
    assert case.dialect == dialect and case.is_v3
    got_args, got_keywords = case.call_args()
    assert len(got_args) == 8
    for a, b in zip(args, got_args):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for name, value in keywords.items():
        assert got_keywords[name] == value
    assert rpa.Case.from_v3_call(*got_args, dialect=dialect, **got_keywords) == case
    assert rpa.Case.from_bytes(case.to_bytes()) == case


def test_keywords_are_the_kernels():
    args = small_call(V3)
    with pytest.raises(TypeError, match="num_kv_pages_per_block"):
        rpa.Case.from_v3_call(*args, num_kv_pages_per_block=2)
    with pytest.raises(TypeError, match="attention_sink"):
        rpa.Case.from_v3_call(*args, np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="debug_mode"):
        rpa.Case.from_v3_call(*args, debug_mode=True)
    assert rpa.Case.from_v3_call(*args, debug_mode=False) == rpa.Case.from_v3_call(*args)


def test_bfloat16_and_float8_cross_as_bits():
    args = small_call(V3, kv_dtype=ml_dtypes.float8_e5m2)
    args = (args[0].astype(ml_dtypes.bfloat16),) + args[1:]
    case = rpa.Case.from_v3_call(*args)
    back = rpa.Case.from_bytes(case.to_bytes())
    assert back.queries.dtype == np.dtype(ml_dtypes.bfloat16)
    assert back.kv_cache.dtype == np.dtype(ml_dtypes.float8_e5m2)
    assert back.kv_cache.tobytes() == case.kv_cache.tobytes()


@pytest.mark.parametrize("dialect", [V3, HD64])
def test_native_messages_are_tpu_inferences(dialect):
    case = rpa.Case.from_v3_call(*small_call(dialect), dialect=dialect)
    assert rpa.validate(case, mode="native").valid
    # tpu-inference 0.32.0, both kernels: "soft_cap=0.0 must not be 0.0." and
    # "sliding_window=0 must be positive." (its own tests' ValueErrors)
    verdict = rpa.validate(case.replace(soft_cap=0.0), mode="native")
    assert verdict.message == "soft_cap=0.0 must not be 0.0."
    verdict = rpa.validate(case.replace(sliding_window=0), mode="native")
    assert verdict.message == "sliding_window=0 must be positive."
    # The dynamic checks print the per-sequence values as JAX scalars (vLLM passes arrays).
    lens = case.kv_lens.copy()
    lens[0] = 2
    verdict = rpa.validate(case.replace(kv_lens=lens), mode="native")
    assert verdict.message == ("Require 0 < q_len=Array(3, dtype=int32) <= "
                               "kv_len=Array(2, dtype=int32) at sequence 0.")


@pytest.mark.parametrize("dialect", [V3, HD64])
def test_reference_and_check(dialect):
    case = rpa.Case.from_v3_call(*small_call(dialect), dialect=dialect)
    out, cache = rpa.reference(case, semantics="reference")
    assert out.shape == case.queries.shape and cache.shape == case.kv_cache.shape
    assert rpa.check(case, (out, cache), semantics="reference").ok
    # The fused update wrote the new tokens (kv_len - q_len .. kv_len - 1) into the cache.
    assert not np.array_equal(cache, case.kv_cache)
    wrong = cache.copy()
    wrong.reshape(-1)[0] += 1  # one bit pattern off: the cache is compared bit for bit
    result = rpa.check(case, (out, wrong), semantics="reference")
    assert result.verdict == "mismatch"
    with pytest.raises(rpa.Rejected):
        rpa.reference(case.replace(soft_cap=0.0))


def test_the_private_check_refuses_a_case_its_oracle_cannot_take():
    """rpa.check validates before it compares; rpa._rpa.v3_check, which it calls, checks the
    same precondition itself: a case strict validation rejects (k_scale inf: native accepts
    it) is a ValueError naming the rule for the reference oracle, never a comparison against a
    reference the definition does not give, and the literal oracle, whose precondition is
    native validation, still takes it."""
    case = rpa.Case.from_v3_call(*small_call(V3), dialect=V3)
    out, cache = rpa.kernel(case, schedule="literal", mode="native")
    bad = case.replace(k_scale=float("inf"), out=np.asarray(out), kv_cache_out=np.asarray(cache))
    assert rpa.validate(bad, mode="native").valid
    assert rpa.validate(bad, mode="strict").rule == "k_scale_nonfinite"
    arrays, params = bad._native()
    with pytest.raises(ValueError, match="reference oracle needs a case strict validation "
                                         "accepts; k_scale_nonfinite: "):
        rpa._rpa.v3_check(arrays, params, "kernel", "reference", "v6e")
    assert rpa.check(bad).verdict == "rejected"
    literal = rpa._rpa.v3_check(arrays, params, "kernel", "literal", "v6e")
    assert isinstance(literal["agree"], bool)


def test_gen_dialect():
    case = rpa.gen(seed=3, dialect=HD64)
    assert case.dialect == HD64 and case.spec.startswith("v3:")
    assert rpa.gen(spec=case.spec) == case
    assert rpa.validate(case, mode="strict").valid


@pytest.mark.parametrize("dialect", ["jax", V3, HD64])
def test_gen_production(dialect):
    """The production profile through the Python door: the same call as rpa gen --profile
    production draws for the seed, replayed from its prod: hex (which names the dialect), strict-valid,
    and the kernel agrees with the reference on it. Seed 0 is a small call of each dialect."""
    case = rpa.gen(seed=0, profile="production", dialect=dialect)
    assert case.spec.startswith("prod:") and case.dialect == dialect
    assert "production call" in case.description
    assert rpa.gen(spec=case.spec) == case
    assert rpa.validate(case, mode="strict").valid
    assert rpa.check(case, rpa.kernel(case) if dialect != "jax" else None).ok
    with pytest.raises(ValueError, match="head_dim does not go with profile production"):
        rpa.gen(seed=0, profile="production", head_dim=128)
    with pytest.raises(ValueError, match="prod: hex"):
        rpa.gen(spec=case.spec[:-2])


@pytest.mark.parametrize("dialect", [V3, HD64])
def test_check_states_its_power(dialect, tmp_path, rpa_cli):
    """A v3 check against the reference states its power as a jax one does: the least weight of
    a dropped key it is sure to catch (in the row it watches closest, and in every row) and
    whether an all-zero output fails (oracle/v3_compare.h), the figures rpa check --json gives,
    in the text as rpa check words them. They do not depend on the output checked."""
    case = rpa.gen(seed=5, dialect=dialect, size=40)
    out, cache = rpa.reference(case)
    result = rpa.check(case, (out, cache))
    assert result.ok and result.rejects_zero is True
    w, every = result.min_detectable_key_weight, result.key_weight_every_row
    assert isinstance(w, float) and 0 < w < 1 and w <= every
    assert "; power: catches a dropped key of weight >= " in str(result)
    assert str(result).endswith(", rejects an all-zero output")
    assert f"min_detectable_key_weight={w!r}" in repr(result)
    assert "rejects_zero=True" in repr(result)
    assert result.json["rejects_zero"] is True and result.json["min_detectable_key_weight"] == w
    # rpa check on the same case file: the same figures and the same words.
    path = str(tmp_path / "case.npz")
    case.replace(out=out, kv_cache_out=cache).save(path)
    p = rpa_cli("check", path, "--json")
    j = json.loads(p.stdout)
    assert p.returncode == 0 and (j["rejects_zero"], j["min_detectable_key_weight"],
                                  j["key_weight_every_row"]) == (True, w, every)
    power = str(result).split("; power: ", 1)[1]
    assert rpa_cli("check", path).stdout.rstrip("\n").endswith("; power: " + power)
    # An all-zero output: rejected, with the same power (it is the tolerance's, not the output's).
    zero = rpa.check(case, (np.zeros_like(out), cache))
    assert zero.verdict == "mismatch"
    assert (zero.rejects_zero, zero.min_detectable_key_weight, zero.key_weight_every_row) == (
        True, w, every)
    # Against the literal schedule: its own bound's power, as rpa check --oracle literal states
    # it (issue 47); not stated for a rejected case.
    literal = rpa.check(case, (out, cache), oracle="literal", target="v6e")
    assert literal.rejects_zero is True and 0 < literal.min_detectable_key_weight < 1
    literal_power = str(literal).split("; power: ", 1)[1]
    assert rpa_cli("check", path, "--oracle", "literal", "--target", "v6e").stdout.rstrip(
        "\n").endswith("; power: " + literal_power)
    rejected = rpa.check(case.replace(soft_cap=0.0), (out, cache))
    assert rejected.verdict == "rejected" and rejected.rejects_zero is None
    assert rejected.min_detectable_key_weight is None


@pytest.mark.parametrize("dialect", [V3, HD64])
def test_kernel_returns_out_and_the_updated_cache(dialect):
    case = rpa.gen(seed=5, dialect=dialect, size=40)
    out, cache = rpa.kernel(case, threads=1)
    assert out.shape == case.queries.shape and cache.shape == case.kv_cache.shape
    # The cache is the reference's bit for bit, the output within the kernel semantics.
    _, ref_cache = rpa.reference(case)
    assert cache.tobytes() == ref_cache.tobytes()
    assert rpa.check(case, (out, cache)).ok
    again, _ = rpa.kernel(case, threads=2)
    assert again.tobytes() == out.tobytes()
    # The literal v3 schedule: tpu-inference's program, its cache bit for bit the same.
    lit_out, lit_cache = rpa.kernel(case, schedule="literal", target="v6e")
    assert lit_cache.tobytes() == cache.tobytes()
    assert rpa.check(case, (lit_out, lit_cache)).ok
    assert rpa.check(case, (lit_out, lit_cache), oracle="literal", target="v6e").ok
    with pytest.raises(rpa.Rejected):
        rpa.kernel(case.replace(soft_cap=0.0))
