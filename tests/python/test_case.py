"""rpa.Case: its arrays and parameters by name, every dtype both ways, and the round trips
Case <-> .npz <-> CLI (DESIGN.md sections 7 and 15)."""
import json
import math

import ml_dtypes
import numpy as np
import pytest

import rpa
from rpa._case import ARRAYS, PARAMS


def small_case(q_dtype=np.float32, kv_dtype=None, **params):
    """One sequence of 3 queries over 5 tokens, 4 q heads over 2 kv heads (float8 tiles only
    from two kv heads on), head_dim 4, page size 4 (two pages), in the given dtypes."""
    kv_dtype = kv_dtype or q_dtype
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 4, 4)).astype(np.float32).astype(q_dtype)
    kv = rng.standard_normal((3, 4, 4, 4)).astype(np.float32).astype(kv_dtype)
    return rpa.Case.from_call(q, kv, np.array([5, 0], np.int32), np.array([[2, 0], [0, 0]], np.int32),
                              np.array([0, 3, 3], np.int32), np.array([1], np.int32), **params)


DTYPES = [(np.float32, np.float32), (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
          (np.float32, ml_dtypes.float8_e4m3fn), (ml_dtypes.bfloat16, ml_dtypes.float8_e5m2)]


@pytest.mark.parametrize("q_dtype,kv_dtype", DTYPES)
def test_every_kernel_dtype_both_ways(tmp_path, q_dtype, kv_dtype):
    case = small_case(q_dtype, kv_dtype, soft_cap=5.0)
    assert case.q.dtype == np.dtype(q_dtype) and case.kv_pages.dtype == np.dtype(kv_dtype)
    path = tmp_path / "c.npz"
    case.save(path)
    back = rpa.Case.load(path)
    assert back == case
    assert back.q.dtype == np.dtype(q_dtype) and back.kv_pages.dtype == np.dtype(kv_dtype)
    # Bits, not values: every bfloat16 / float8 pattern survives, NaN payloads included.
    assert back.kv_pages.tobytes() == case.kv_pages.tobytes()
    out = rpa.kernel(case)
    assert out.dtype == np.dtype(q_dtype) and out.shape == case.q.shape
    ref = rpa.reference(case)
    assert ref.dtype == np.dtype(q_dtype)
    assert rpa.check(case, out).verdict == "agree"


def test_every_bit_pattern_crosses_unchanged():
    # All 65536 bfloat16 patterns (and every float8 byte) go in as q / kv_pages and come back
    # through the case-file writer and reader with the same bits.
    bits16 = np.arange(65536, dtype=np.uint16).reshape(16384, 1, 4)
    for q_bits, kv_dtype in [(bits16, ml_dtypes.float8_e4m3fn), (bits16, ml_dtypes.float8_e5m2)]:
        q = q_bits.view(ml_dtypes.bfloat16)
        kv = np.arange(256, dtype=np.uint8).reshape(8, 4, 2, 4).view(kv_dtype)
        case = rpa.Case.from_call(q, kv, np.zeros(1, np.int32), np.zeros((1, 1), np.int32),
                                  np.zeros(2, np.int32), np.zeros(1, np.int32))
        back = rpa.Case.from_bytes(case.to_bytes())
        assert back.q.view(np.uint16).tobytes() == bits16.tobytes()
        assert back.kv_pages.view(np.uint8).tobytes() == kv.view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype", ["int64", "int16", "int8", "uint8", "uint16", "uint32",
                                   "uint64", "float16", "float64", "bool"])
def test_other_dtypes_are_read_and_judged_by_validation(dtype):
    # Not kernel dtypes: the case still crosses (as a case file may hold them) and validation
    # names the rule, as rpa validate does.
    case = small_case()
    case = case.replace(kv_lens=case.kv_lens.astype(dtype))
    back = rpa.Case.from_bytes(case.to_bytes())
    assert back.kv_lens.dtype == np.dtype(dtype)
    verdict = rpa.validate(case)
    assert not verdict.valid and verdict.rule == "index_dtype", verdict


def test_attributes_and_call_args_give_back_jax_arguments():
    case = small_case(sliding_window=3, soft_cap=2.5, mask_value=-1e30, k_scale=0.5,
                      v_scale=2.0, num_kv_pages_per_block=1, num_queries_per_block=8,
                      vmem_limit_bytes=1 << 20)
    args, kwargs = case.call_args()
    assert [a is getattr(case, n) for a, n in zip(args, ARRAYS)] == [True] * 6
    assert kwargs == {"sm_scale": 1.0, "sliding_window": 3, "soft_cap": 2.5, "mask_value": -1e30,
                      "k_scale": 0.5, "v_scale": 2.0, "num_kv_pages_per_block": 1,
                      "num_queries_per_block": 8, "vmem_limit_bytes": 1 << 20}
    assert rpa.Case.from_call(*args, **kwargs) == case
    # Absent parameters are None and stay out of the keyword arguments (JAX's defaults).
    plain = small_case()
    assert plain.soft_cap is None and plain.mask_value is None
    assert plain.call_args()[1] == {"sm_scale": 1.0}


def test_params_round_trip_through_the_file_including_edges(tmp_path):
    for params in [dict(soft_cap=0.0), dict(soft_cap=-0.0), dict(vmem_limit_bytes=0),
                   dict(vmem_limit_bytes=-1), dict(sm_scale=float("nan")),
                   dict(mask_value=float("-inf")), dict(sliding_window=2**62)]:
        case = small_case(**params)
        case.save(tmp_path / "p.npz")
        back = rpa.Case.load(tmp_path / "p.npz")
        assert back == case, params
        for name, value in params.items():
            got = getattr(back, name)
            assert (got == value or (math.isnan(got) and math.isnan(value))), (name, got)
            assert math.copysign(1, got) == math.copysign(1, value), (name, got)


def test_a_case_saved_in_python_checks_with_the_cli(tmp_path, rpa_cli):
    case = rpa.gen(seed=3, profile="mixed", size=60)
    out = rpa.kernel(case)
    path = tmp_path / "from_python.npz"
    case.replace(out=out).save(path)
    p = rpa_cli("check", path, "--json")
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    py = rpa.check(case, out)
    assert cli["verdict"] == py.verdict == "agree"
    assert cli["max_tolerance_used"] == py.share_of_tolerance
    assert cli["discrimination"] == py.discrimination
    # A wrong output: the CLI and Python agree on the mismatch and where it is.
    bad = out.copy()
    bad[0, 0, 0] = bad[0, 0, 0] + 1
    case.replace(out=bad).save(path)
    p = rpa_cli("check", path, "--json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["first"] == rpa.check(case, bad).json["first"]


def test_a_case_the_cli_writes_loads_in_python(tmp_path, rpa_cli):
    path = tmp_path / "from_cli.npz"
    p = rpa_cli("gen", "--seed", 5, "--profile", "prefill", "--size", 30, "-o", path)
    assert p.returncode == 0, p.stderr
    case = rpa.Case.load(path)
    assert case == rpa.gen(seed=5, profile="prefill", size=30)
    assert p.stdout.split("spec: ")[1].split()[0] == rpa.gen(seed=5, profile="prefill", size=30).spec
    run = tmp_path / "run.npz"
    p = rpa_cli("run", path, "--impl", "kernel", "-o", run)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(rpa.Case.load(run).out.view(np.uint8),
                                  rpa.kernel(case).view(np.uint8))
    # The bytes Python writes are the bytes the CLI writes.
    assert case.to_bytes() == path.read_bytes()


def test_gen_by_spec_repeats_the_case():
    case = rpa.gen(seed=11, profile="edge")
    assert rpa.gen(spec=case.spec) == case
    with pytest.raises(ValueError, match="spec takes the hex"):
        rpa.gen(spec=case.spec[:-2])
    with pytest.raises(ValueError, match="profile takes decode"):
        rpa.gen(seed=1, profile="huge")
    with pytest.raises(ValueError, match="one of seed and spec"):
        rpa.gen()


def test_repr_is_short_and_names_the_spec():
    case = rpa.gen(seed=3, profile="mixed", size=60)
    text = repr(case)
    assert text.startswith("Case(q=bfloat16[148, 16, 8], kv_pages=bfloat16[9, 23, 4, 8], num_seqs=3")
    assert f"spec='{case.spec[:48]}...({len(case.spec)} hex digits)'" in text and len(text) < 300


def test_params_listed_are_the_case_file_parameters():
    assert PARAMS == ("sm_scale", "sliding_window", "soft_cap", "mask_value", "k_scale", "v_scale",
                      "num_kv_pages_per_block", "num_queries_per_block", "vmem_limit_bytes")
