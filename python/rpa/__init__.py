"""rpa: a property-based oracle for ragged paged attention kernels.

The library the ``rpa`` CLI is built on, in Python (DESIGN.md section 15): validation in JAX's
and strict mode, the dense reference in two semantics, the TPU-tiled kernel, the oracle that
judges an output, case files, the generators, and Hypothesis strategies (rpa.strategies,
needs hypothesis). rpa.jax (needs jax==0.10.2) runs JAX's own Pallas kernel on the CPU.

    import rpa
    case = rpa.gen(seed=7, profile="mixed")
    rpa.check(case, my_kernel(case)).raise_for_verdict()

    result = rpa.campaign(my_kernel, dialect="tpu_inference_v3", calls=200, seed=1)
    assert result.ok, result.summary()  # generated calls through your kernel, failures shrunk
"""
from __future__ import annotations

import importlib
from typing import Any

from rpa._api import (Bias, CheckFailed, CheckResult, Failure, KernelDoesNotReturn, Mismatch,
                      Plan, Rejected, Verdict, check, gen, kernel, path_features, plan,
                      reference, rules, validate, workload)
from rpa._campaign import CampaignInterrupted, CampaignResult, Finding, campaign
from rpa._case import Case

__version__ = "0.21.0"

__all__ = ["Case", "validate", "reference", "kernel", "plan", "check", "gen", "workload", "rules",
           "path_features",
           "Plan",
           "Verdict", "Failure", "CheckResult", "Mismatch", "Bias", "Rejected",
           "KernelDoesNotReturn", "CheckFailed", "campaign", "CampaignResult",
           "CampaignInterrupted", "Finding",
           "strategies", "__version__"]


def __getattr__(name: str) -> Any:
    # rpa.strategies imports hypothesis, rpa.jax imports jax: only when asked for.
    if name in ("strategies", "jax"):
        return importlib.import_module(f"rpa.{name}")
    raise AttributeError(f"module 'rpa' has no attribute {name!r}")
