"""rpa's pytest plugin (a ``pytest11`` entry point: installed with the package, on for every
pytest run; ``-p no:rpa`` turns it off). For a kernel's own test suite (docs/python.md,
"In your pytest suite"):

- options ``--rpa-calls N`` (default 50), ``--rpa-seed S`` (default 0), ``--rpa-profile P``
  (default: any mix), ``--rpa-corpus DIR`` (default: the corpus shipped in the package);
- fixture ``rpa_check``: ``rpa_check(case, out)`` checks an output as rpa.check does (a v3
  case takes ``(out, kv_cache)``) and, on a mismatch, fails the test with what ``rpa check``
  prints and the command that replays the saved case;
- fixture ``rpa_campaign``: ``rpa_campaign(kernel, dialect=...)`` runs rpa.campaign with the
  options' calls, seed and profile and fails the test with each finding, shrunk, and its replay
  command (report files under the test's tmp_path);
- parametrization over the corpus: a test that takes the ``rpa_corpus_case`` fixture runs once
  per corpus case of a dialect that strict validation accepts (for jax: JAX's validators too);
  ``@pytest.mark.rpa_corpus(dialect="tpu_inference_v3")`` picks the dialect (default "jax").
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

import pytest

import rpa
from rpa._case import DIALECTS


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("rpa", "rpa: ragged paged attention oracle")
    group.addoption("--rpa-calls", type=int, default=50,
                    help="calls an rpa_campaign runs (default 50)")
    group.addoption("--rpa-seed", type=int, default=0, help="rpa_campaign's seed (default 0)")
    group.addoption("--rpa-profile", default=None,
                    help="rpa_campaign's batch mix: decode, prefill, mixed, long, edge, "
                    "long32k (v3: kv_len 32768 to 65536)")
    group.addoption("--rpa-corpus", default=None,
                    help="folder of case files rpa_corpus_case runs over (default: the "
                    "package's own corpus)")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "rpa_corpus(dialect): the dialect whose corpus cases "
                            "rpa_corpus_case runs over (default jax)")


def corpus_folders(root: Optional[str] = None) -> list[str]:
    """The folders of case files: root, else the corpus installed with the package."""
    if root:
        return [root]
    here = os.path.join(os.path.dirname(rpa.__file__), "corpus")
    return [os.path.join(here, d) for d in sorted(os.listdir(here))] if os.path.isdir(here) else []


def corpus_cases(dialect: str = "jax", root: Optional[str] = None) -> list[str]:
    """The corpus case files of the dialect that strict validation accepts (jax: and JAX's
    validators), sorted: each has a defined output."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect takes {', '.join(DIALECTS)} (got {dialect!r})")
    found = []
    for folder in corpus_folders(root):
        for dirpath, _dirs, files in os.walk(folder):
            for name in sorted(files):
                if not name.endswith(".npz"):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    case = rpa.Case.load(path)
                except ValueError:
                    continue
                if case.dialect != dialect or not rpa.validate(case).valid:
                    continue
                if dialect == "jax" and not rpa.validate(case, mode="jax").valid:
                    continue
                found.append(path)
    return sorted(found)


def pytest_generate_tests(metafunc: Any) -> None:
    if "rpa_corpus_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("rpa_corpus")
    dialect = "jax"
    if marker is not None:
        dialect = marker.kwargs.get("dialect", marker.args[0] if marker.args else "jax")
    paths = corpus_cases(dialect, metafunc.config.getoption("--rpa-corpus"))
    if not paths:
        raise pytest.UsageError(f"rpa_corpus_case: no {dialect} case in the corpus "
                                f"({', '.join(corpus_folders(metafunc.config.getoption('--rpa-corpus'))) or 'none installed'})")
    metafunc.parametrize("rpa_corpus_case", [rpa.Case.load(p) for p in paths],
                         ids=[os.path.splitext(os.path.basename(p))[0] for p in paths])


@pytest.fixture
def rpa_check(tmp_path: Any) -> Callable[..., rpa.CheckResult]:
    """``rpa_check(case, out, **check_options)``: the CheckResult of an output that agrees;
    a test failure with the replay command otherwise (the case is saved under tmp_path)."""

    def check(case: rpa.Case, out: Any = None, **options: Any) -> rpa.CheckResult:
        result = rpa.check(case, out, **options)
        try:
            return result.raise_for_verdict(save_dir=str(tmp_path))
        except rpa.CheckFailed as e:
            pytest.fail(str(e), pytrace=False)
        except rpa.Rejected as e:
            pytest.fail(f"rpa: the case is rejected: {e}", pytrace=False)
        return result  # not reached

    return check


@pytest.fixture
def rpa_campaign(request: Any, tmp_path: Any) -> Callable[..., rpa.CampaignResult]:
    """``rpa_campaign(kernel, dialect=..., **campaign_options)``: the CampaignResult when
    nothing is found; a test failure listing each finding and its replay otherwise."""
    config = request.config

    def run(kernel: Callable[..., Any], **options: Any) -> rpa.CampaignResult:
        if options.get("seconds") is None:
            options.setdefault("calls", config.getoption("--rpa-calls"))
        options.setdefault("seed", config.getoption("--rpa-seed"))
        options.setdefault("profile", config.getoption("--rpa-profile"))
        options.setdefault("report", str(tmp_path / "rpa-campaign"))
        result = rpa.campaign(kernel, **options)
        if not result.ok:
            lines = [result.summary()]
            for n, f in enumerate(result.findings, 1):
                lines += [f"finding {n}: {f.kind}: {f.detail}",
                          f"  shrunk to {f.size()}", f"  replay: {f.replay}"]
            pytest.fail("\n".join(lines), pytrace=False)
        return result

    return run
