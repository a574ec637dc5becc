"""rpa.campaign against kernels in this process: a correct kernel reports nothing, a kernel
with a planted slip is found and shrunk to a small call that `rpa check` replays, a kernel that
raises or hangs is a finding of its own kind, and the report files are written."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import rpa

V3 = ("tpu_inference_v3", "tpu_inference_v3_hd64")
# The campaign as issue 36 ran it (strict calls, plain draws, 4 data seeds a call): what the
# tests of shrinking, replay, hangs and compile grouping below are about. rpa's tiled kernel is
# right on strict calls only; the defaults (mode="both", cover=512) are tested at the end.
PLAIN = {"mode": "strict", "cover": 0}


def tiled(*args, **kwargs):
    """rpa's own tiled kernel in JAX's signature: agrees with the definition."""
    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))


def row_two_off(*args, **kwargs):
    """A slip: the third output row scaled by 1.01."""
    out = np.array(tiled(*args, **kwargs))
    if out.shape[0] > 2:
        out[2] *= 1.01
    return out


def v3_tiled(dialect):
    def kernel(*args, **kwargs):
        return rpa.kernel(rpa.Case.from_v3_call(*args, dialect=dialect, **kwargs))
    return kernel


def test_a_correct_kernel_reports_nothing(tmp_path):
    result = rpa.campaign(tiled, **PLAIN, calls=60, seed=1, report=str(tmp_path))
    assert result.ok and result.calls == 60 and result.passed == 60, result.summary()
    assert 0 < result.max_share_of_tolerance <= 1
    # Four calls per drawn call share its compile key.
    assert result.compile_keys <= 60 // 4 + 1, result.compile_keys
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["calls"] == 60 and summary["findings"] == []
    assert 'failures="0"' in (tmp_path / "junit.xml").read_text()
    assert "Nothing found" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("dialect", V3)
def test_a_correct_v3_kernel_reports_nothing_in_both_modes(dialect):
    assert rpa.campaign(v3_tiled(dialect), **PLAIN, dialect=dialect, calls=40, seed=2).ok
    if dialect == "tpu_inference_v3":
        def literal(*args, **kwargs):
            case = rpa.Case.from_v3_call(*args, dialect=dialect, **kwargs)
            return rpa.kernel(case, schedule="literal", mode="native")
        result = rpa.campaign(literal, dialect=dialect, calls=40, seed=2, mode="native")
        assert result.ok, result.summary()


def test_a_slip_is_found_shrunk_and_replayed(tmp_path):
    result = rpa.campaign(row_two_off, **PLAIN, calls=40, seed=1, report=str(tmp_path))
    assert len(result.findings) == 1, result.summary()
    f = result.findings[0]
    assert f.kind == "mismatch" and f.failing_calls >= 2 and f.first_call <= 20
    # Shrunk: the slip needs a third row; one sequence of three tokens, one head.
    assert f.case.q.shape[:2] == (3, 1), f.size()
    assert int(f.case.num_seqs[0]) == 1, f.size()
    assert f.shrink_steps >= 1 and f.shrink_calls <= 150
    assert f.case_file == str(tmp_path / "finding-1.npz") and f.replay == f"rpa check {f.case_file}"
    # The case file holds the kernel's output; rpa check on it gives the same verdict.
    replayed = rpa.Case.load(f.case_file)
    assert replayed.out is not None and rpa.check(replayed).verdict == "mismatch"
    assert rpa.check(replayed, tiled(*replayed.call_args()[0], **replayed.call_args()[1])).ok
    cli = subprocess.run([os.path.join(os.path.dirname(sys.executable), "rpa"), "check",
                          f.case_file], capture_output=True, text=True, check=False)
    assert cli.returncode == 1 and "MISMATCH" in cli.stdout, cli.stdout + cli.stderr
    junit = (tmp_path / "junit.xml").read_text()
    assert 'failures="1"' in junit and "finding-1 mismatch" in junit
    assert "finding-1" in (tmp_path / "report.html").read_text()


def test_a_v3_slip_in_the_cache_update_is_found():
    def stale_cache(*args, **kwargs):
        out, cache = v3_tiled("tpu_inference_v3")(*args, **kwargs)
        return out, np.asarray(args[3])  # the cache as given: the update never written
    result = rpa.campaign(stale_cache, **PLAIN, dialect="tpu_inference_v3", calls=30, seed=3)
    assert [f.kind for f in result.findings] == ["mismatch"], result.summary()
    f = result.findings[0]
    assert "cache" in f.detail and int(f.case.distribution[2]) == 1, (f.detail, f.size())


def test_a_kernel_that_raises_is_a_finding_of_its_own_kind():
    def raises_on_two_sequences(*args, **kwargs):
        if int(args[5][0]) >= 2:
            raise RuntimeError("two sequences are not supported")
        return tiled(*args, **kwargs)
    result = rpa.campaign(raises_on_two_sequences, **PLAIN, calls=40, seed=4)
    assert [f.kind for f in result.findings] == ["raised"], result.summary()
    f = result.findings[0]
    assert f.detail == "RuntimeError: two sequences are not supported"
    assert int(f.case.num_seqs[0]) == 2, f.size()


def test_a_kernel_that_hangs_is_a_finding_and_stops_the_campaign():
    def hangs(*args, **kwargs):
        time.sleep(30)
    started = time.monotonic()
    result = rpa.campaign(hangs, **PLAIN, calls=10, seed=5, timeout_s=0.5)
    assert time.monotonic() - started < 20
    assert [f.kind for f in result.findings] == ["hang"] and result.calls == 1
    assert result.stopped and "did not return in 0.5 s" in result.stopped


def test_seconds_bound_the_run_and_one_call_runs_at_least():
    started = time.monotonic()
    result = rpa.campaign(tiled, **PLAIN, seconds=2, seed=6)
    assert result.ok and result.calls > 0 and time.monotonic() - started < 10
    assert rpa.campaign(tiled, **PLAIN, seconds=1e-9, seed=6).calls == 1


def test_a_kernel_that_writes_its_inputs_cannot_hide_a_slip():
    def zeroes_the_cache_in_place(*args, **kwargs):
        # The slip: the cache it was given zeroed before the attention reads it. Were that
        # array the call's own, the check would judge the output on the zeroed cache and agree.
        args[3][...] = 0
        return v3_tiled("tpu_inference_v3")(*args, **kwargs)
    result = rpa.campaign(zeroes_the_cache_in_place, **PLAIN, dialect="tpu_inference_v3", calls=8,
                          seed=3)
    assert [f.kind for f in result.findings] == ["mismatch"], result.summary()


def test_native_mode_on_every_generation():
    def literal(target):
        def kernel(*args, **kwargs):
            case = rpa.Case.from_v3_call(*args, **kwargs)
            return rpa.kernel(case, schedule="literal", mode="native", target=target)
        return kernel
    for target in ("v5e", "v6e", "7x"):
        result = rpa.campaign(literal(target), dialect="tpu_inference_v3", calls=12, seed=7,
                              mode="native", target=target)
        assert result.ok, (target, result.summary())
    with pytest.raises(ValueError, match="target takes"):
        rpa.campaign(tiled, calls=1, target="v7x")


def test_bad_campaign_arguments_fail_before_a_call():
    with pytest.raises(ValueError, match="one of calls and seconds"):
        rpa.campaign(tiled)
    with pytest.raises(ValueError, match="mode takes"):
        rpa.campaign(tiled, calls=1, mode="lenient")
    with pytest.raises(ValueError, match="dialect takes"):
        rpa.campaign(tiled, **PLAIN, calls=1, dialect="v4")
    with pytest.raises(ValueError, match="profile takes"):
        rpa.campaign(tiled, **PLAIN, calls=1, profile="huge")
    with pytest.raises(ValueError, match="must be callable"):
        rpa.campaign("not a kernel", calls=1)


def test_the_command_line_runs_a_callable_and_replays_a_finding(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    run = subprocess.run([sys.executable, "-m", "rpa", "campaign", "--kernel",
                          "test_campaign:row_two_off", "--calls", "20", "--seed", "1",
                          "--mode", "strict", "--cover", "0",
                          "--report", str(tmp_path)], capture_output=True, text=True, env=env,
                         check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "finding 1: mismatch" in run.stdout and "replay: rpa check" in run.stdout
    again = subprocess.run([sys.executable, "-m", "rpa", "campaign", "--kernel",
                            "test_campaign:row_two_off", "--case", str(tmp_path / "finding-1.npz")],
                           capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 1 and ": mismatch:" in again.stdout, again.stdout + again.stderr
    fine = subprocess.run([sys.executable, "-m", "rpa", "campaign", "--kernel",
                           "test_campaign:tiled", "--case", str(tmp_path / "finding-1.npz")],
                          capture_output=True, text=True, env=env, check=False)
    assert fine.returncode == 0 and ": agree:" in fine.stdout, fine.stdout + fine.stderr
    bad = subprocess.run([sys.executable, "-m", "rpa", "campaign", "--kernel", "no_such_module:f",
                          "--calls", "1"], capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 2 and "cannot import no_such_module" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_failure_before_a_hang_in_its_group_is_shrunk_first():
    """One machine shrinks a new failure at once: a later call of the same shape that hangs
    must not leave it as drawn (shrinking tries smaller calls only, which never hang here)."""
    first = []

    def off_then_hangs(*args, **kwargs):
        size = np.asarray(args[0]).size
        if first and size >= first[0]:
            time.sleep(3600)  # the campaign's second call: the first one's shape
        first.append(size) if not first else None
        out = np.array(rpa.kernel(rpa.Case.from_call(*args, **kwargs)))
        return out * 1.5 + 1.0

    result = rpa.campaign(off_then_hangs, **PLAIN, calls=8, seed=1, timeout_s=1.0)
    assert [f.kind for f in result.findings] == ["mismatch", "hang"], result.summary()
    assert result.findings[0].shrink_steps > 0, result.summary()
    assert result.stopped and result.calls == 2


# -- calls led by the program's paths (issue 46) -------------------------------------------

def test_path_features_name_the_programs_branches():
    case = rpa.gen(seed=3, dialect="tpu_inference_v3")
    f = rpa.path_features(case)
    assert f["dtype.q.bfloat16"] == 1 and f["decode.runs"] == 1, f  # seed 3: a bfloat16 decode
    assert all(isinstance(v, int) and v >= 1 for v in f.values())
    # Another generation's program: kernel.py holds bfloat16 positions in int16 from v6 on.
    v5, v7 = rpa.path_features(case, target="v5e"), rpa.path_features(case, target="7x")
    assert "decode.positions.int16" in f and "decode.positions.int16" in v7, (f, v7)
    assert "decode.positions.int32" in v5 and "decode.positions.int16" not in v5, v5
    with pytest.raises(ValueError, match="unknown target"):
        rpa.path_features(case, target="v9")


def test_the_walk_counts_the_page_copies_a_call_costs():
    """JAX's descriptor unrolls one DMA per page of a KV block (traced once) and each fetch
    starts them all: cost.* entries, which are not features."""
    case = rpa._campaign_calls._with_jax_blocks(rpa.gen(seed=2, profile="decode", head_dim=128))  # pylint: disable=protected-access
    f = rpa.path_features(case)  # seed 2: a decode JAX's validators accept
    per_block = int(case.num_kv_pages_per_block)
    assert f["cost.traced_page_copies"] == per_block, f
    fetches, rest = divmod(f["cost.run_page_copies"], per_block)
    assert rest == 0 and fetches >= 1, f
    campaign = rpa._campaign_calls  # pylint: disable=protected-access
    planner = campaign._Planner(campaign._Settings(  # pylint: disable=protected-access
        "jax", "both", None, 128, (4, 64, 128, 16), 120.0, None, 0, True).drawer(), 1, 1024, 1)
    features, cost = planner.path_features(case, "strict")
    assert not any(name.startswith("cost.") for name in features)
    assert cost == campaign.interpret_seconds(f) > campaign.INTERPRET_COST_S[0]


def _literal_kernel(dialect, target=None):
    """rpa's literal schedule in the dialect's signature: right in both modes (strict calls are
    those where it computes the definition)."""
    def kernel(*args, **kwargs):
        if dialect == "jax":
            return rpa.kernel(rpa.Case.from_call(*args, **kwargs), schedule="literal", mode="jax",
                              target=target)
        case = rpa.Case.from_v3_call(*args, dialect=dialect, **kwargs)
        return rpa.kernel(case, schedule="literal", mode="native", target=target)
    return kernel


@pytest.mark.parametrize("target", ("v5e", "v6e", "7x"))
@pytest.mark.parametrize("dialect", ("jax",) + V3)
def test_the_cover_reaches_every_reachable_feature_in_24_calls(dialect, target, tmp_path):
    result = rpa.campaign(_literal_kernel(dialect, target), dialect=dialect, calls=24, seed=1,
                          mode="both", cover=512, target=target, report=str(tmp_path))
    unreached = sorted(f for f, c in result.reach.items() if c is None)
    assert not unreached, (result.summary(), unreached)
    assert result.reached() == len(result.reach) > 30
    assert all(1 <= c <= 24 for c in result.reach.values())
    # Both verdicts: strict and native calls among the 24.
    assert {"mode.strict", "mode.native"} <= set(result.reach)
    # The integer edges in short calls (kernel.py: int16 positions from v6 on with bfloat16 q).
    if dialect == "tpu_inference_v3":
        edges = {f.split(".", 1)[1] for f in result.reach if ".positions." in f}
        assert "positions.int32.at" in edges, sorted(edges)
        if target != "v5e":
            assert {"positions.int16.at", "positions.int16.wraps"} <= edges, sorted(edges)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["reach"]["reached"] == summary["reach"]["reachable"] == len(result.reach)
    assert "Path features" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("dialect", ("jax",) + V3)
def test_a_correct_kernel_reports_nothing_with_the_defaults(dialect):
    """The defaults: the cover of 512 candidates' path features, strict and native calls. A
    call the literal schedule cannot run here is unjudged, never a finding."""
    result = rpa.campaign(_literal_kernel(dialect), dialect=dialect, calls=24, seed=2)
    assert result.mode == "both" and result.reach, result.summary()
    assert result.ok, result.summary()
    assert result.passed + result.unjudged == result.calls == 24


@pytest.mark.parametrize("dialect", V3)
def test_the_long_tier_sends_kv_len_past_int16(dialect):
    """profile "long32k" (issue 46's long tier): calls of kv_len 32768 to 65536 whose positions
    pass int16's range, which no call of the default bounds walks; the campaign's max_kv_len
    default steps aside for it, an explicit bound below 32768 is an error."""
    sent = []

    def kernel(*args, **kwargs):
        case = rpa.Case.from_v3_call(*args, dialect=dialect, **kwargs)
        sent.append(int(np.max(np.asarray(case.kv_lens)[:int(np.asarray(case.distribution)[2])])))
        return _literal_kernel(dialect)(*args, **kwargs)

    result = rpa.campaign(kernel, dialect=dialect, calls=3, seed=1, profile="long32k", cover=16)
    assert result.ok and result.calls == 3, result.summary()
    assert len(sent) == 3 and all(32768 <= n <= 65536 for n in sent), sent
    assert any(f.endswith("positions.past_int16") for f in result.reach), sorted(result.reach)
    short = rpa.campaign(_literal_kernel(dialect), dialect=dialect, calls=1, seed=1, cover=64)
    assert not any(f.endswith("positions.past_int16") for f in short.reach)
    with pytest.raises(ValueError, match="max_kv_len takes 32768 or more with profile long32k"):
        rpa.campaign(kernel, dialect=dialect, calls=1, profile="long32k", max_kv_len=64)
    with pytest.raises(ValueError, match="profile long32k takes the v3 dialects"):
        rpa.campaign(kernel, dialect="jax", calls=1, profile="long32k")
    case = rpa.gen(seed=3, dialect=dialect, profile="long32k")
    assert case.spec == "" and int(np.max(np.asarray(case.kv_lens))) >= 32768


def test_the_campaign_draws_no_call_whose_rows_all_agree_by_construction():
    """Flat data (q and KV one value everywhere) and v_scale 0 make every output row the same:
    a kernel that computes a row from the wrong sequence or block agrees on them. A JAX mutant
    storing no row past a sequence's first q block (kernel.py L512) agreed on the only cover
    call of seed 1 that walked a sequence into a later q block, a flat one; the campaign draws
    neither now (the strategies still do)."""
    campaign = rpa._campaign_calls  # pylint: disable=protected-access
    drawer = campaign._Settings("jax", "both", None, 128, (4, 64, 128, 16), 120.0, None, 0,
                                True).drawer()
    assert drawer.bounds.flat_data is False
    rng = np.random.default_rng(3)
    drawn = flat_elsewhere = 0
    for _ in range(400):
        data = rng.bytes(512)
        for mode, valid in (("strict", True), ("native", False)):
            case = drawer.case(data, valid, None, mode)
            if case is not None:
                drawn += 1
                assert "data all-equal" not in case.description, case.description
                assert case.v_scale != 0.0, case.description
        d = rpa._draw.decoded(data, None, 128, rpa._draw.bounds(4, 64, 128, 16), True, [])  # pylint: disable=protected-access
        flat_elsewhere += d is not None and "data all-equal" in d[0].description
    assert drawn > 100 and flat_elsewhere > 10, (drawn, flat_elsewhere)


def test_max_findings_stops_sending_calls_at_the_first_failure():
    """max_findings=1 (rpa.jax.mutants' campaigns): no call after the first failure, which is
    still found at the same call and reported; the stop is said."""
    def off(*args, **kwargs):
        out, cache = _literal_kernel("tpu_inference_v3")(*args, **kwargs)
        return np.array(out) * 2 + 1, cache

    whole = rpa.campaign(off, dialect="tpu_inference_v3", calls=12, seed=1, shrink_calls=0)
    first = rpa.campaign(off, dialect="tpu_inference_v3", calls=12, seed=1, shrink_calls=0,
                         max_findings=1)
    assert whole.calls == 12 and not whole.ok
    assert len(first.findings) == 1 and first.calls < whole.calls, first.summary()
    assert first.findings[0].first_call == min(f.first_call for f in whole.findings)
    assert first.stopped and "max_findings=1" in first.stopped, first.stopped
    with pytest.raises(ValueError, match="max_findings takes a positive number"):
        rpa.campaign(off, dialect="tpu_inference_v3", calls=1, max_findings=0)


def test_plain_draws_reach_less_than_the_cover():
    kernel = _literal_kernel("tpu_inference_v3")
    led = rpa.campaign(kernel, dialect="tpu_inference_v3", calls=24, seed=1, mode="both",
                       cover=512)
    plain = rpa.campaign(kernel, dialect="tpu_inference_v3", calls=24, seed=1, mode="both",
                         cover=0)
    assert plain.reach and len(led.reach) >= len(plain.reach)
    # Plain draws' own features are all reached by their own calls; the cover's pool reaches
    # more of the program than 24 plain calls do.
    assert plain.reached() == len(plain.reach) < led.reached(), (plain.summary(), led.summary())


def test_a_both_mode_finding_replays_in_its_own_mode(tmp_path):
    def off(*args, **kwargs):
        out, cache = _literal_kernel("tpu_inference_v3")(*args, **kwargs)
        out = np.array(out)
        out[0] = out[0] * 2 + 1
        return out, cache
    result = rpa.campaign(off, dialect="tpu_inference_v3", calls=12, seed=1, mode="both",
                          cover=512, shrink_calls=20, report=str(tmp_path))
    assert not result.ok
    for f in result.findings:
        assert f.mode in ("strict", "native")
        if f.kind == "mismatch" and f.mode == "native":
            assert "--oracle literal" in f.replay
    with pytest.raises(ValueError, match="cover takes"):
        rpa.campaign(off, dialect="tpu_inference_v3", calls=1, cover=-1)


def test_a_jax_call_the_walk_cannot_take_is_not_walked():
    """JAX's validators let a num_seqs of another dtype through (the num_seqs_dtype mutation);
    the path-feature walk read past cu_q_lens on one (SIGSEGV in the cover of seed 12345)."""
    case = rpa.gen(seed=1, profile="decode")
    for num_seqs in (np.array([2**40], dtype=np.int64), np.array([7.5], dtype=np.float32),
                     np.array([-1], dtype=np.int32), np.array([99], dtype=np.int32)):
        f = rpa.path_features(case.replace(num_seqs=num_seqs))
        assert list(f) in (["stops.not_walked"],) or all(k.startswith("rejected.") for k in f), f
    planner = rpa._campaign_calls._Planner(  # pylint: disable=protected-access
        rpa._campaign_calls._Settings("jax", "both", None, 128, (4, 64, 128, 16), 120.0, None, 0,
                                True).drawer(), 12345, 1024, 1, 512, None)
    assert len(planner.batch(6)) == 6 and planner.reachable


def test_a_kernel_that_returns_where_the_literal_schedule_cannot_compute_is_unjudged():
    """kernel.py in interpret mode returns from a native call with a float64 cache, which the
    literal schedule does not compute: the campaign with the defaults raised ValueError there
    (seed 1, once the cover sent its cheapest calls first)."""
    settings = rpa._campaign_calls._Settings(  # pylint: disable=protected-access
        "tpu_inference_v3", "both", None, None, (4, 64, 128, 16), 120.0, None, 0, True)
    planner = rpa._campaign_calls._Planner(settings.drawer(), 1, 1024, 1, 512, None)  # pylint: disable=protected-access
    calls = [c for c in planner.batch(64)
             if c.mode == "native" and np.asarray(c.case.kv_cache).dtype == np.float64]
    assert calls, "seed 1's cover has no native call with a float64 cache"

    def returns(*args, **kwargs):
        case = rpa.Case.from_v3_call(*args, dialect="tpu_inference_v3", **kwargs)
        return np.zeros_like(case.queries), np.asarray(case.kv_cache)

    out = settings.runner(returns).run(calls[0].case, "native")
    assert out.kind == "unjudged" and "float64" in out.detail, (out.kind, out.detail)


def test_the_cover_leaves_out_calls_dearer_than_the_timeout_and_sends_the_cheap_first():
    """Seed 1's candidates for kernel.py include native calls with KV blocks near 2**31 tokens,
    whose fetch loop kernel.py unrolls per page (millions of DMAs traced: over 10 minutes in
    interpret mode before this planner left them out), and calls whose walk stops in the run,
    which may hang until a watchdog stops them."""
    campaign = rpa._campaign_calls  # pylint: disable=protected-access
    assert campaign.interpret_seconds({"stops.too_large_to_walk": 1}) == float("inf")
    assert campaign.interpret_seconds({"stops.run": 1}) == campaign.STOPPED_CALL_S
    small = campaign.interpret_seconds({"cost.traced_page_copies": 24,
                                        "cost.run_page_copies": 96})
    large = campaign.interpret_seconds({"cost.traced_page_copies": 1536,
                                        "cost.run_page_copies": 6144})
    assert small < campaign.CHEAP_CALL_S < large < 120.0  # measured: 3.5 s and 60.3 s
    settings = campaign._Settings("tpu_inference_v3", "both", None, None, (4, 64, 128, 16),
                                  120.0, None, 0, True)
    planner = campaign._Planner(settings.drawer(), 1, 1024, 1, 512, None, 120.0)
    cover = [c for _, c in planner.queue]  # (size key, call without its arrays)
    assert all(c.case is None for c in cover)  # 512 long-tier candidates would hold tens of GB
    assert planner.too_dear >= 1 and cover
    assert all(c.cost <= 120.0 for c in cover)
    assert not any("stops.too_large_to_walk" in c.features for c in cover)
    assert "stops.too_large_to_walk" not in planner.reachable
    # Round one, the cheap calls; round two only for what no cheap call walks.
    dear = [k for k, c in enumerate(cover) if c.cost > campaign.CHEAP_CALL_S]
    assert dear == list(range(len(cover) - len(dear), len(cover))), [c.cost for c in cover]
    for k in dear:
        cheap_reach = set().union(*(c.features for c in cover if c.cost <= campaign.CHEAP_CALL_S))
        assert cover[k].features - cheap_reach
    # Sent cheapest first.
    sent = planner.batch(len(cover))
    assert [c.cost for c in sent] == sorted(c.cost for c in sent)
    assert all(c.case is not None for c in sent)  # drawn again from their bytes
    # The result says how many it left out.
    result = rpa.campaign(_literal_kernel("tpu_inference_v3"), dialect="tpu_inference_v3",
                          calls=2, seed=1, cover=512)
    assert result.too_dear >= 1
    assert f"{result.too_dear} drawn calls left out" in result.summary()
    assert result.to_json()["too_dear"] == result.too_dear
