"""rpa.jax.v3_pallas, the harness that runs tpu-inference's v3 kernels in TPU interpret mode
(ctest jax_v3.harness, in the virtualenv of scripts/python_v3_venv.sh)."""
import inspect
import os
import time

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import rpa  # noqa: E402
from rpa.jax import tpu_inference, v3_cases, v3_pallas  # noqa: E402
from rpa.jax.pallas import PallasError, PatchError  # noqa: E402

DIALECTS = ("tpu_inference_v3", "tpu_inference_v3_hd64")


def small_case(dialect, seed=5):
    return v3_cases.reference_case(np.random.default_rng(seed), dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_patch_matches_its_file_exactly_once(dialect):
    source = inspect.getsource(tpu_inference.kernel_module(dialect))
    which = "v3" if dialect == "tpu_inference_v3" else "hd64"
    applied = 0
    for files, what, old, _new in v3_pallas.PATCHES:
        found = len(v3_pallas._pattern(old).findall(source))  # pylint: disable=protected-access
        assert found == (1 if files in ("both", which) else found), what
        applied += files in ("both", which)
    assert applied == 7
    patched = v3_pallas.patch_source(source, dialect)
    assert "bitcast(jnp.uint32).at[" not in patched
    # No DMA indexes the reshaped cache by a page times page_size any more (the waits keep
    # their reshaped descriptor: a wait only reads its semaphore and size).
    assert "page_indices_ref[page_idx] * page_size" not in patched
    assert "page_indices_ref[page_indices_offset + i] * page_size" not in patched


def test_a_patch_that_does_not_match_once_fails_loudly():
    source = inspect.getsource(tpu_inference.kernel_module("tpu_inference_v3"))
    _, _, old, _ = v3_pallas.PATCHES[0]
    spot = v3_pallas._pattern(old).search(source).group(0)  # pylint: disable=protected-access
    with pytest.raises(PatchError, match="fetch DMA.*found it 2 times"):
        v3_pallas.patch_source(source + "\n# " + spot.replace("\n", " "), "tpu_inference_v3")
    with pytest.raises(PatchError, match="found it 0 times"):
        v3_pallas.patch_source(source.replace(spot, ""), "tpu_inference_v3")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_runs_and_agrees_with_the_kernel_semantics(dialect):
    case = small_case(dialect)
    out, cache = v3_pallas.run_v3_pallas(case, tpu_version=6)
    assert out.shape == case.queries.shape and cache.shape == case.kv_cache.shape
    result = rpa.check(case.replace(out=out, kv_cache_out=cache))
    assert result.verdict == "agree", result.detail
    # The fused update changed the cache, and only through the new tokens' slots.
    assert not np.array_equal(cache.view(np.uint8), case.kv_cache.view(np.uint8))


def test_each_generation_gets_its_own_module():
    modules = {v: v3_pallas.patched_module("tpu_inference_v3", v) for v in (5, 6, 7)}
    assert {v: m.get_tpu_version() for v, m in modules.items()} == {5: 5, 6: 6, 7: 7}
    with pytest.raises(ValueError, match="tpu_version=3"):
        v3_pallas.patched_module("tpu_inference_v3", 3)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_negative_used_page_index_is_refused(dialect):
    case = small_case(dialect)
    pages = case.page_indices.copy()
    pages[0] = -1  # sequence 0's first page: interpret mode would read the last page
    with pytest.raises(PallasError, match="input: ValueError: sequence 0 uses page slot 0 = -1"):
        v3_pallas.run_v3_pallas(case.replace(page_indices=pages), tpu_version=6)


def test_the_watchdog_turns_a_stalled_run_into_an_error_and_the_next_run_works():
    case = small_case("tpu_inference_v3", seed=9)
    v3_pallas.run_v3_pallas(case, tpu_version=6)  # compiled, so the run alone is timed
    with pytest.raises(PallasError, match="^timeout: .*no progress in 0.01 s"):
        v3_pallas.run_v3_pallas(case, tpu_version=6, timeout_s=0.01, name="stalled")
    out, _ = v3_pallas.run_v3_pallas(case, tpu_version=6)
    assert np.isfinite(out.astype(np.float32)).any()


def test_a_compute_block_past_the_kv_buffer_reads_nothing_it_uses():
    """v5/v6's default mixed blocks need not tile: 19 tokens on pages of 1 give bkv_sz 19 and
    bkv_csz 9, so the last compute block reaches 8 rows past the KV buffer (unchecked on a
    TPU, masked by the kernel). The harness's strided load must neither raise there nor shift
    the rows it reads (dynamic_slice's clamping did: NaN rows); found by jax_v3.pallas."""
    rng = np.random.default_rng(3)
    t, hq, hkv, d = 25, 4, 4, 8
    q = rng.standard_normal((t, hq, d), dtype=np.float32)
    k = rng.standard_normal((t, hkv, d), dtype=np.float32)
    v = rng.standard_normal((t, hkv, d), dtype=np.float32)
    cache = rng.standard_normal(v3_cases.cache_shape("tpu_inference_v3", 20, 1, hkv, d,
                                                     np.dtype(np.float32)), dtype=np.float32)
    case = rpa.Case.from_v3_call(q, k, v, cache, np.array([19], np.int32),
                                 np.arange(19, dtype=np.int32), np.array([0, 8], np.int32),
                                 np.array([0, 0, 1], np.int32), None,
                                 dialect="tpu_inference_v3")
    module = v3_pallas.patched_module("tpu_inference_v3", 5)
    blocks = module.get_default_block_sizes(np.float32, np.float32, hq, hkv, d, 1, t, 1, 19)
    assert (blocks["bkv_sz"], blocks["bkv_csz"]) == (19, 9)
    out, cache_out = v3_pallas.run_v3_pallas(case, tpu_version=5)
    assert np.isfinite(out[:8]).all()
    result = rpa.check(case.replace(out=out, kv_cache_out=cache_out))
    assert result.verdict == "agree", result.detail


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_literal_schedule_checks_a_kernel_run_and_catches_a_changed_one(dialect):
    case = v3_pallas.with_block_sizes(small_case(dialect, seed=9), 7)
    if dialect == "tpu_inference_v3_hd64":  # the tuned table's blocks, now named in the case
        assert case.num_kv_pages_per_block and case.num_queries_per_block
    out, cache = v3_pallas.run_v3_pallas(case, tpu_version=7)
    ran = case.replace(out=out, kv_cache_out=cache)
    result = rpa.check(ran, oracle="literal", mode="native", target="7x")
    assert result.verdict == "agree", result.detail
    # The literal schedule's own run is the kernel's, row for row (every row: past the
    # sequences both hold what the aliased q array holds).
    lit_out, lit_cache = rpa.kernel(case, schedule="literal", mode="native", target="7x")
    assert lit_cache.tobytes() == cache.tobytes()
    assert np.allclose(lit_out.astype(np.float32), out.astype(np.float32), rtol=0.02, atol=1e-3,
                       equal_nan=True)
    # A slip the schedule tolerance must see: row 0 negated and moved by 1 (with bfloat16
    # accumulators it allows ~0.012 (M + |o|) per KV compute step: oracle/v3_compare.h).
    bad = out.copy()
    bad[0] = (-out[0].astype(np.float32) - 1.0).astype(out.dtype)
    assert rpa.check(case.replace(out=bad, kv_cache_out=cache), oracle="literal",
                     mode="native", target="7x").verdict == "mismatch"


def test_the_literal_schedule_says_where_the_kernel_cannot_trace():
    case = small_case("tpu_inference_v3").replace(d_block_sizes=None)
    with pytest.raises(rpa.KernelDoesNotReturn) as e:
        rpa.kernel(case, schedule="literal", mode="native", target="v4")
    assert e.value.kind == "trace" and "Unsupported tpu_version=4" in e.value.why


def test_head_dim_zero_passes_the_validators_and_cannot_trace():
    """Finding 27 (the long tier's campaign at seed 1 found it as a 'raised' finding on the
    shipped kernel.py): its validators accept head_dim 0, its kernel raises at trace; native
    mode now says so (a crash rule)."""
    case = rpa.Case.load(os.path.join(os.path.dirname(__file__), "..", "..", "corpus", "modes",
                                      "v3_head_dim_zero.npz"))
    with pytest.raises(PallasError, match="^trace: ZeroDivisionError"):
        v3_pallas.run_v3_pallas(case, tpu_version=6)
    verdict = rpa.validate(case, mode="native")
    assert not verdict.valid and verdict.rule == "head_dim_zero"
    assert "ZeroDivisionError at trace" in verdict.message
    # The campaign's native draws leave it out (the mode rejects it); the literal schedule
    # stops on it too (tests/v3_program_test.cc, V3Program.HeadDimZeroCannotTrace).


def test_the_test_judge_sees_what_the_package_tests_cannot_fail_on():
    from rpa.jax import v3_test_judge  # pylint: disable=import-outside-toplevel
    built = dict(v3_cases.scenarios("tpu_inference_v3", quick=True))
    # soft_cap 50 over U[0, 1) data: the logits stay far below the cap, so dropping it (or
    # doubling them) passes atol = rtol = 0.15; zeros and uniform weights do not.
    passed, caught, _ = v3_test_judge.judge(built["logit_soft_capping[50.0]"]())
    assert "no soft cap" in passed + caught and "logits x2" in passed
    assert "zeros" in caught and "uniform weights" in caught
    # a window of 128 over sequences whose rows see fewer keys: no effect to show
    passed, caught, no_effect = v3_test_judge.judge(built["sliding_window[128]"]())
    assert "no window" in passed + no_effect and "zeros" in caught


def test_a_wait_nothing_can_signal_is_a_hang_in_seconds_not_the_whole_timeout():
    """kernel.py waits on a semaphore no copy will signal where rpa's walk of the program stops
    in the run (a cover call of the campaign's seed 1): the watchdog calls it a hang once the
    wait has sat STALL_S with no copy pending, not after timeout_s (120 s before)."""
    from rpa import _campaign_calls, _draw  # pylint: disable=import-outside-toplevel
    settings = _campaign_calls._Settings("tpu_inference_v3", "both", None, None, (4, 64, 128, 16),  # pylint: disable=protected-access
                                         120.0, None, 0, True)
    planner = _campaign_calls._Planner(settings.drawer(), 1, _draw.DEFAULT_MAX_BYTES, 4, 512, None)  # pylint: disable=protected-access
    stops = [c for c in planner.batch(len(planner.queue)) if "stops.run" in c.features]
    assert stops, "seed 1's cover has no call whose walk stops in the run"
    start = time.monotonic()
    with pytest.raises(PallasError, match="^timeout: .*no copy left to signal it"):
        v3_pallas.run_v3_pallas(stops[0].case, tpu_version=6, timeout_s=600, name="stalled")
    assert time.monotonic() - start < 120
    out, _ = v3_pallas.run_v3_pallas(small_case("tpu_inference_v3", seed=9), tpu_version=6)
    assert np.isfinite(out.astype(np.float32)).any()


def _reach(cases, heads: bool = False) -> set:
    """What a set of calls exercises (v3_cross_check.features and the TPU generation; with
    heads, the q and KV head counts too), counting only the calls tpu-inference's validators
    accept, which run."""
    from rpa.jax import v3_cross_check  # pylint: disable=import-outside-toplevel
    found = set()
    for case, version in cases:
        if tpu_inference.validate(case) is not None:
            continue
        found |= {(case.dialect, f) for f in v3_cross_check.features(case)}
        found.add((case.dialect, f"v{version}"))
        if heads:
            found.add((case.dialect, "heads", np.asarray(case.queries).shape[1],
                       np.asarray(case.keys).shape[1]))
    return found


def test_the_ci_budget_of_the_generated_calls_reaches_what_the_full_one_does():
    """ctest's budget "ci" (tests/CMakeLists.txt) runs jax_v3.pallas_b with 16 calls of seed 2
    instead of 48: with pallas_a's 48 of seed 1 they exercise every feature and TPU generation
    the 96 calls of the budget "full" do, the features rpa.jax.v3_cross_check prints for a run
    (seed 2's first 12 would miss kernel.py's head_dim 32)."""
    from rpa.jax.v3_cross_check import pallas_items  # pylint: disable=import-outside-toplevel
    first = [(case, version) for case, _, version in pallas_items(48, 1)]
    second = [(case, version) for case, _, version in pallas_items(48, 2)]
    assert _reach(first + second[:16]) == _reach(first + second)
    assert _reach(first + second[:12]) != _reach(first + second)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_cover_scenarios_reach_what_the_quick_ones_do(dialect):
    """--scenarios cover (the budget "ci" of jax_v3.scenarios and jax_v3.pallas_scenarios) keeps
    every feature, head count, head_dim and dtype of --scenarios quick in at most 2/3 of the calls,
    and every window and soft cap of the package's tests."""
    quick = dict(v3_cases.scenarios(dialect, quick=True))
    cover = dict(v3_cases.scenarios(dialect, cover=True))
    assert set(cover) < set(quick) and len(cover) <= len(quick) * 2 // 3
    assert _reach(((build(), 6) for build in cover.values()), heads=True) == \
        _reach(((build(), 6) for build in quick.values()), heads=True)
    def first_values(names):  # each test's first parameter: its window or soft cap
        return {(n.split("[")[0], n.split("[")[1].split(",")[0]) for n in names
                if not n.startswith("complex[")}
    assert first_values(cover) == first_values(quick)
