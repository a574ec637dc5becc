"""rpa.jax.mutants (issue 46, item 5): which tokens it mutates, that each mutant is one token
away from the source and still parses, and the report it writes. The campaigns on the mutants
themselves run in interpret mode (minutes a mutant): docs/python.md has the measured score."""
import ast

import pytest

from rpa.jax import mutants as mu

TOY = '''
import jax

def ragged_paged_attention_kernel(x, y):
    if x < y:
        return x + 1
    return -y

def static_validate_inputs(x):
    assert x >= 0
'''


def test_only_the_kernels_own_tokens_are_mutated():
    found = [m.name() for m in mu.mutants(TOY, "jax")]
    # x < y, x + 1 (operator and literal); the unary minus and the validator are left alone.
    assert found == ["L5:9 < -> <=", "L6:17 + -> -", "L6:19 1 -> 2"], found
    for m in mu.mutants(TOY, "jax"):
        ast.parse(m.source)
        differ = [a for a, b in zip(TOY.splitlines(), m.source.splitlines()) if a != b]
        assert len(differ) == 1


def test_spread_takes_the_limit_evenly_and_the_same_each_time():
    items = list(range(10))
    assert mu.spread(items, 5) == [0, 2, 4, 6, 8]
    assert mu.spread(items, None) == items and mu.spread(items, 20) == items


def test_the_shipped_jax_kernel_has_mutants_that_parse():
    pytest.importorskip("jax")
    import inspect  # pylint: disable=import-outside-toplevel
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as shipped
    source = inspect.getsource(shipped)
    found = mu.mutants(source, "jax")
    assert len(found) > 100
    for m in mu.spread(found, 20):
        ast.parse(m.source)
    validators = [s for s in mu._spans(source, ("static_validate_inputs",))]  # pylint: disable=protected-access
    assert validators and not any(a <= m.line <= b for m in found for a, b in validators)


def test_the_report_counts_each_status():
    rows = [{"mutant": "L1:0 < -> <=", "line": 1, "status": "equivalent"},
            {"mutant": "L2:0 + -> -", "line": 2, "status": "non-equivalent",
             "before": {"killed": False, "first_call": None},
             "after": {"killed": True, "first_call": 3}}]
    md = mu.markdown({"dialect": "jax", "mutants": 2, "equivalent": 1, "probes": 8,
                      "unpatchable": 0, "non_equivalent": 1, "calls": 24, "seed": 1,
                      "killed_before": 0, "killed_after": 1, "rows": rows})
    assert "of 1 non-equivalent, killed within 24 calls at seed 1: 0 before" in md
    assert "| `L2:0 + -> -` | non-equivalent | survived | 3 |" in md


def test_a_mutant_that_hangs_is_stopped_in_seconds_and_is_not_equivalent():
    """L427:37 (JAX's kernel.py, 1 -> 2) waits on a DMA semaphore nothing signals on one of the
    probe calls: the equivalence probe waited forever before JAX's runs had the watchdog
    (rpa.jax.pallas.Watchdog), which now stops it once the wait has sat STALL_S."""
    pytest.importorskip("jax")
    import inspect  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as shipped
    from rpa.jax.kernel_file import KernelFile  # pylint: disable=import-outside-toplevel
    from rpa.jax.pallas import PallasError  # pylint: disable=import-outside-toplevel
    source = inspect.getsource(shipped)
    [m] = [m for m in mu.mutants(source, "jax") if (m.line, m.col) == (427, 37)]
    kernel = KernelFile("mutant.py", "jax", source=m.source, timeout_s=600)
    hung = []
    for call in mu.probe_calls("jax", 6, None):
        args, kwargs = call.call_args()
        start = time.monotonic()
        try:
            kernel(*args, **kwargs)
        except PallasError as e:
            assert e.stage == "timeout" and "no copy left to signal it" in str(e), e
            assert time.monotonic() - start < 60
            hung.append(call)
    assert hung, "no probe call hangs L427:37 any more"
    assert mu._outcome(kernel, hung[0]) == ("raised", "PallasError")  # pylint: disable=protected-access


def test_the_probes_go_past_the_cover_when_asked_for_more():
    """JAX's cover of seed 12345 has 7 calls; --probes 16 took those 7 alone before."""
    calls = mu.probe_calls("jax", 16, None)
    assert len(calls) == 16
    assert len({repr(c.call_args()[1]) + str(c.q.shape) for c in calls}) > 7


def test_the_report_says_which_campaign_did_not_run():
    rows = [{"mutant": "L2:0 + -> -", "line": 2, "status": "non-equivalent",
             "after": {"killed": True, "first_call": 3}}]
    s = mu._summary("jax", 24, 1, 8, None, rows, 0.0)  # pylint: disable=protected-access
    assert s["killed_before"] is None and s["killed_after"] == 1
    md = mu.markdown(s)
    assert "not run before (strict, plain draws), 1 after" in md
    assert "| `L2:0 + -> -` | non-equivalent |  | 3 |" in md


def test_resume_keeps_a_runs_rows_of_the_same_settings_only(tmp_path):
    """--resume: a whole file's score over several sittings, each run going on from the rows
    of the report it is given; a report of other settings is refused, not mixed in."""
    rows = [{"mutant": "L2:0 + -> -", "line": 2, "status": "non-equivalent",
             "after": {"killed": True, "first_call": 3}}]
    mu._write(str(tmp_path), mu._summary("jax", 24, 1, 8, None, rows, 0.0))  # pylint: disable=protected-access
    assert mu._resumed(str(tmp_path), "jax", 24, 1, 8) == rows  # pylint: disable=protected-access
    assert mu._resumed(str(tmp_path / "none"), "jax", 24, 1, 8) == []  # pylint: disable=protected-access
    with pytest.raises(ValueError, match="is a run of dialect jax, 24 calls, seed 1, 8 probes, "
                       "not jax, 24, 2, 8"):
        mu._resumed(str(tmp_path), "jax", 24, 2, 8)  # pylint: disable=protected-access
    with pytest.raises(SystemExit) as e:
        mu.main(["--resume"])
    assert e.value.code == 2


def test_equivalence_compares_the_defined_rows_only():
    """Rows past the call's sequences are padding: a mutant that writes only there (JAX's
    L494:71, one row past a sequence's store) is equivalent, one that changes a defined row or
    raises is not."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import rpa  # pylint: disable=import-outside-toplevel
    case = rpa.gen(seed=1, dialect="tpu_inference_v3", profile="mixed")  # 6 rows of 7
    rows = int(np.asarray(case.cu_q_lens)[int(np.asarray(case.distribution)[2])])
    assert 0 < rows < case.queries.shape[0], (rows, case.queries.shape)

    def right(*args, **kwargs):
        return rpa.kernel(rpa.Case.from_v3_call(*args, dialect="tpu_inference_v3", **kwargs))

    def padding(*args, **kwargs):
        out, cache = right(*args, **kwargs)
        out = np.array(out)
        out[rows:] = 7
        return out, cache

    def defined(*args, **kwargs):
        out, cache = padding(*args, **kwargs)
        out[rows - 1] = 7
        return out, cache

    want = mu._outcome(right, case)  # pylint: disable=protected-access
    assert mu._same(mu._outcome(padding, case)[1], want[1])  # pylint: disable=protected-access
    assert not mu._same(mu._outcome(defined, case)[1], want[1])  # pylint: disable=protected-access
    assert mu._outcome(lambda *a, **k: 1 // 0, case) == ("raised", "ZeroDivisionError")  # pylint: disable=protected-access
