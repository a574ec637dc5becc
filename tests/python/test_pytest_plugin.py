"""rpa's pytest plugin (the pytest11 entry point rpa.pytest_plugin): its options, the rpa_check
and rpa_campaign fixtures and the corpus parametrization, run in a pytester sandbox on the
ten-line test files docs/python.md shows for each dialect."""
import os

import pytest

import rpa
from rpa import pytest_plugin

pytest_plugins = ["pytester"]

JAX_FILE = '''
import numpy as np, pytest, rpa

def my_kernel(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, **params):
    return rpa.kernel(rpa.Case.from_call(q, kv_pages, kv_lens, page_indices, cu_q_lens,
                                         num_seqs, **params),
                      schedule="literal", mode="jax")  # your kernel here

def test_campaign(rpa_campaign):
    rpa_campaign(my_kernel, dialect="jax")

def test_corpus(rpa_corpus_case, rpa_check):
    args, kwargs = rpa_corpus_case.call_args()
    rpa_check(rpa_corpus_case, my_kernel(*args, **kwargs))
'''

V3_FILE = '''
import numpy as np, pytest, rpa

def my_kernel(*args, **kwargs):  # ragged_paged_attention's signature: (out, kv_cache)
    out, cache = rpa.kernel(rpa.Case.from_v3_call(*args, **kwargs),
                            schedule="literal", mode="native")  # your kernel here
    return SLIP(out), cache

def test_campaign(rpa_campaign):
    rpa_campaign(my_kernel, dialect="tpu_inference_v3")

@pytest.mark.rpa_corpus(dialect="tpu_inference_v3")
def test_corpus(rpa_corpus_case, rpa_check):
    args, kwargs = rpa_corpus_case.call_args()
    rpa_check(rpa_corpus_case, my_kernel(*args, **kwargs))
'''


def test_the_plugin_is_installed_as_an_entry_point():
    from importlib.metadata import entry_points  # pylint: disable=import-outside-toplevel
    names = {e.name: e.value for e in entry_points(group="pytest11")}
    assert names.get("rpa") == "rpa.pytest_plugin"


def test_a_jax_suite_passes_with_the_options(pytester):
    pytester.makepyfile(test_jax=JAX_FILE)
    result = pytester.runpytest_inprocess("-q", "--rpa-calls", "12", "--rpa-seed", "3",
                                          "--rpa-profile", "decode")
    n = len(pytest_plugin.corpus_cases("jax"))
    assert n >= 3
    result.assert_outcomes(passed=1 + n)


@pytest.mark.parametrize("slip, outcome", [("", "passed"), ("0 * ", "failed")])
def test_a_v3_suite_finds_a_slip_with_the_replay_command(pytester, slip, outcome):
    pytester.makepyfile(test_v3=V3_FILE.replace("SLIP(out)", f"{slip}out"))
    result = pytester.runpytest_inprocess("-q", "--rpa-calls", "8", "-k", "campaign")
    n = len(pytest_plugin.corpus_cases("tpu_inference_v3"))
    result.assert_outcomes(**{outcome: 1}, deselected=n)
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*found mismatch*", "*finding 1: mismatch*",
                                     "*replay: rpa check *finding-1.npz*"])


def test_the_v3_corpus_cases_run_and_a_mismatch_names_the_replay(pytester):
    cases = pytest_plugin.corpus_cases("tpu_inference_v3")
    n = len(cases)
    assert n >= 1
    # The kernel here is the literal schedule, kernel.py as shipped: strict accepts finding
    # 28's case and kernel.py turns rows of it NaN, so the corpus catches it there.
    shipped_wrong = [c for c in cases if os.path.basename(c) == "v3_bfloat16_max_logit_nan.npz"]
    assert len(shipped_wrong) == 1, cases
    pytester.makepyfile(test_v3=V3_FILE.replace("SLIP(out)", "out"))
    result = pytester.runpytest_inprocess("-q", "-k", "corpus")
    result.assert_outcomes(passed=n - 1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED*v3_bfloat16_max_logit_nan*"])
    pytester.makepyfile(test_v3=V3_FILE.replace("SLIP(out)", "out + 1"))
    result = pytester.runpytest_inprocess("-q", "-k", "corpus")
    result.assert_outcomes(failed=n)
    result.stdout.fnmatch_lines(["*mismatch*", "*replay: rpa check *case-*.npz*"])


def test_rpa_campaign_takes_seconds_instead_of_calls(pytester):
    pytester.makepyfile(test_seconds=JAX_FILE.replace('dialect="jax")', 'dialect="jax", seconds=1)'))
    pytester.runpytest_inprocess("-q", "-k", "campaign").assert_outcomes(passed=1, deselected=len(
        pytest_plugin.corpus_cases("jax")))


def test_the_corpus_cases_are_ones_strict_mode_accepts():
    for dialect in rpa._case.DIALECTS:  # pylint: disable=protected-access
        for path in pytest_plugin.corpus_cases(dialect):
            case = rpa.Case.load(path)
            assert case.dialect == dialect and rpa.validate(case).valid, path
    with pytest.raises(ValueError, match="dialect takes"):
        pytest_plugin.corpus_cases("v4")
