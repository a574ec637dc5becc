"""Judges tpu-inference 0.32.0's own v3 kernel tests (tests/kernels/ragged_paged_attention_
kernel_v3{,_hd64}_test.py): on the inputs each parametrization uses, which wrong kernels would
its assertion pass?

Every test compares the kernel's output rows with its reference's by
``np.testing.assert_allclose(out, expected, atol=tol, rtol=tol)``, tol 0.15 for 32-bit KV and
0.2 for narrower KV, on data drawn U[0, 1) (v3-contract.md section 5). Each parametrization is
rebuilt here as its harness builds it (rpa.jax.v3_cases.scenarios), its expected output is
rpa's reference semantics (which agrees with tpu-inference's reference, ctest jax_v3), and
each "mutant" is the definition of a nearby wrong call, computed the same way: the answer a
kernel with that bug gives. A mutant the assertion passes is a bug the test cannot catch on
its inputs:

- zeros: every output 0;
- uniform weights: the softmax ignores q.K (sm_scale 1e-30: every logit ~0), each row the
  plain mean of its visible values;
- logits x2: sm_scale doubled;
- no causal mask / no window / no soft cap / no sinks / no k_scale / no v_scale / no q_scale:
  that part of the call dropped (where the test uses it).

    python -m rpa.jax.v3_test_judge [--quick]

prints one line per parametrization (the mutants it passes, and those within 4 ulps of the
definition on its inputs, which no test could catch there), then a count per mutant. Needs only numpy, ml_dtypes and rpa (no JAX).
"""
from __future__ import annotations

import argparse
import collections
import sys
from typing import Any, Callable, Optional

import numpy as np


def _mutants(case: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(name, the mutated case or None for zeros) for the parts of the call the case uses."""
    out: list[tuple[str, Callable[[], Any]]] = [
        ("zeros", lambda: None),
        ("uniform weights", lambda: case.replace(sm_scale=1e-30)),
        ("logits x2", lambda: case.replace(sm_scale=case.sm_scale * 2.0)),
    ]
    if case.dialect == "tpu_inference_v3" and case.use_causal_mask is not False:
        out.append(("no causal mask", lambda: case.replace(use_causal_mask=False)))
    for name, field in (("no window", "sliding_window"), ("no soft cap", "soft_cap"),
                        ("no sinks", "attention_sink"), ("no k_scale", "k_scale"),
                        ("no v_scale", "v_scale"), ("no q_scale", "q_scale")):
        if getattr(case, field) is not None:
            out.append((name, lambda field=field: case.replace(**{field: None})))
    return out


def judge(case: Any) -> tuple[list[str], list[str], list[str]]:
    """(mutants the test's assertion passes although they move the output, mutants it catches,
    mutants within 4 ulps of the output dtype of the definition on this case: not a bug these
    inputs can show, e.g. no causal mask on decode rows)."""
    import rpa  # pylint: disable=import-outside-toplevel
    kv_bits = np.dtype(case.kv_cache.dtype).itemsize * 8
    tol = 0.15 if kv_bits == 32 else 0.2
    rows = int(np.asarray(case.cu_q_lens)[int(np.asarray(case.distribution)[2])])
    want, _ = rpa.reference(case, semantics="reference")
    want = np.asarray(want)[:rows].astype(np.float32)
    # The definition as the mutants are computed (kernel semantics): a mutant within 4 ulps of
    # the output dtype of it has no effect these inputs can show.
    exact = np.asarray(rpa.reference(case, semantics="kernel")[0])[:rows].astype(np.float32)
    ulps = 4.0 * (2.0 ** -7 if np.asarray(case.queries).dtype != np.float32 else 2.0 ** -23)
    passed, caught, no_effect = [], [], []
    for name, make in _mutants(case):
        mutated = make()
        got = (np.zeros_like(want) if mutated is None else
               np.asarray(rpa.reference(mutated, semantics="kernel")[0])[:rows].astype(np.float32))
        if np.allclose(got, exact, rtol=ulps, atol=1e-6):
            no_effect.append(name)
        elif np.allclose(got, want, atol=tol, rtol=tol):
            passed.append(name)
        else:
            caught.append(name)
    return passed, caught, no_effect


def main(argv: Optional[list[str]] = None) -> int:
    from rpa.jax import v3_cases  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python -m rpa.jax.v3_test_judge",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smaller scenarios only")
    args = parser.parse_args(argv)
    passes: collections.Counter = collections.Counter()
    applies: collections.Counter = collections.Counter()
    tests = 0
    for dialect in v3_cases.DIALECTS:
        for name, build in v3_cases.scenarios(dialect, quick=args.quick):
            passed, caught, no_effect = judge(build())
            tests += 1
            for m in passed + caught:
                applies[m] += 1
            for m in passed:
                passes[m] += 1
            print(f"{dialect} {name}: passes {', '.join(passed) or 'none'}"
                  + (f" (no effect here: {', '.join(no_effect)})" if no_effect else ""),
                  flush=True)
    print(f"v3_test_judge: {tests} parametrizations; per mutant, of those where it moves the "
          "output, how many the test's assertion passes:")
    for m in sorted(applies, key=lambda k: (-passes[k], k)):
        print(f"  {m}: {passes[m]} of {applies[m]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
