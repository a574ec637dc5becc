"""Hypothesis strategies over ragged paged attention cases (DESIGN.md section 15).

Each strategy draws a byte string and decodes it with the fuzzers' decoder (ByteSource through
the generators' visit_case, in C++): the first bytes pick the batch mix and dtypes, then the
heads, head_dim, page size, sequences and their lengths, the page table, the data and the
parameters. A byte string that runs out reads the low end of every range, so when Hypothesis
shrinks the bytes (shorter, smaller) the case shrinks with them: fewer sequences, shorter
ones, fewer heads, float32, no soft cap. A failing example prints as a Case whose ``spec``
replays it with ``rpa gen --spec HEX -o case.npz``.

    from hypothesis import given
    import rpa

    @given(rpa.strategies.cases(profile="mixed"))
    def test_my_kernel(case):
        rpa.check(case, my_kernel(*case.call_args()[0], **case.call_args()[1])).raise_for_verdict()
"""
from __future__ import annotations

from typing import Optional

from hypothesis import strategies as st

from rpa import _rpa
from rpa._case import Case
from rpa._draw import DEFAULT_MAX_BYTES, bounds as _bounds, check_profile as _check_profile
from rpa._draw import UNREPRESENTABLE, decoded as _decoded

def cases(profile: Optional[str] = None, *, dialect: str = "jax", valid: bool = True,
          jax_accepts: bool = False, head_dim: Optional[int] = None, max_seqs: int = 8,
          max_kv_len: int = 256, max_head_dim: int = 128, max_page_size: int = 16,
          max_bytes: int = DEFAULT_MAX_BYTES) -> st.SearchStrategy[Case]:
    """Cases of the generators. profile: "decode", "prefill", "mixed", "long" or None (any
    mix). valid=True: only cases strict validation accepts (the spec model's verdict: a
    generated case that hits a rule where the Pallas kernel departs from the definition is
    left out), so every one has a defined output; valid=False: one named mutation each (see
    invalid_cases for the rule it breaks). head_dim fixes the head dimension (JAX's Pallas
    kernel runs on the CPU at multiples of 128 only); the max_* bounds narrow the generators'
    own (up to 48 sequences, kv_len 768, head_dim 256, page size 32) so that each case checks
    in milliseconds. jax_accepts=True: only cases JAX's own validators accept too, so that
    JAX's kernel runs them (strict mode defines some that JAX rejects or crashes on, e.g. an
    empty q or garbage in kv_lens padding).

    dialect "tpu_inference_v3" or "tpu_inference_v3_hd64": calls of tpu-inference's v3 kernel
    (kernel.py) or its hd64 kernel, in their own signature (``case.call_args()``), from the v3
    generator (profile "decode", "prefill", "mixed", "long", "edge", "long32k" or None; hd64's
    head_dim is 64; max_page_size does not apply; "long32k", kv_len 32768 to 65536, needs
    max_kv_len >= 32768). Every valid v3 case is strict-valid (and so accepted
    by tpu-inference's validators, native mode); jax_accepts is the jax dialect's alone;
    valid=False draws one named v3 mutation each (invalid_cases)."""
    if dialect != "jax" and jax_accepts:
        raise ValueError("jax_accepts asks JAX's validators: it goes with dialect jax alone "
                         "(every valid v3 case is one tpu-inference's validators accept)")
    bounds = _bounds(max_seqs, max_kv_len, max_head_dim, max_page_size)
    _check_profile(profile, head_dim, bounds, dialect)
    decoded = st.binary(min_size=max_bytes // 4, max_size=max_bytes).map(
        lambda data: _decoded(data, profile, head_dim, bounds, valid, [], dialect))
    if valid:
        decoded = decoded.filter(lambda d: d is not None and d[1] is None and
                                 (not jax_accepts or d[2] is None))
    else:
        decoded = decoded.filter(lambda d: d is not None)
    return decoded.map(lambda d: d[0])


def invalid_cases(rule: Optional[str] = None, *, dialect: str = "jax",
                  mutation: Optional[str] = None, mode: Optional[str] = None,
                  profile: Optional[str] = None,
                  head_dim: Optional[int] = None, max_seqs: int = 8, max_kv_len: int = 256,
                  max_head_dim: int = 128, max_page_size: int = 16,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> st.SearchStrategy[tuple[Case, str]]:
    """(case, rule): a valid case broken by one named mutation (DESIGN.md section 9), and the
    rule the mode ("strict" or "jax") must report for it, from the spec model (never from the
    validator). rule: only cases whose expected verdict is that rule, drawn from the
    mutations named after it (where there are any; rpa.rules() lists the rules and their
    mutations). mutation: draw only that mutation (e.g. "kv_pages_per_block_bad", which also
    breaks kv_len_overflows_int32). Cases the mutation leaves valid in the mode are left
    out.

    dialect "tpu_inference_v3" or "tpu_inference_v3_hd64": a valid v3 call broken by one named
    v3 mutation (casegen/v3_mutation.h; each is named after the rule it breaks), and the
    rule of mode "strict" or "native" (tpu-inference's own validators, static then dynamic;
    also spelled "jax"), from the v3 spec model. rule: the mutation of that name where there
    is one for the dialect, else every mutation, keeping the cases whose verdict is the rule;
    rpa.rules(dialect) lists the rules. Every strict rule is reachable but those no input
    reaches (rpa._rpa.v3_strict_unreachable) and keyword_not_in_dialect, whose calls (a
    keyword of the other dialect) no rpa.Case holds."""
    if mode is None:
        mode = "strict"
    if mode == "native":
        mode = "jax"
    if mode not in ("strict", "jax"):
        raise ValueError(f"mode takes strict, native or jax (got {mode!r})")
    bounds = _bounds(max_seqs, max_kv_len, max_head_dim, max_page_size)
    _check_profile(profile, head_dim, bounds, dialect)
    if dialect == "jax":
        table = {r[0]: r[4] for r in _rpa.rules()}
    else:
        names = set(_rpa.v3_mutation_names(dialect))
        table = {r[0]: [r[0]] if r[0] in names else [] for r in _rpa.v3_rules(dialect)}
    if rule is not None and rule not in table:
        raise ValueError(f"no rule named {rule} in dialect {dialect}")
    if dialect != "jax" and UNREPRESENTABLE in (rule, mutation):
        raise ValueError(f"{UNREPRESENTABLE}: a call with a keyword or array of the other v3 "
                         f"dialect is not an rpa.Case (Case.from_v3_call raises TypeError, as "
                         f"the kernel does)")
    if mutation is not None:
        mutations = [mutation]
        _decoded(b"", profile, head_dim, bounds, False, mutations, dialect)  # a known name?
    else:
        mutations = list(table[rule]) if rule is not None else []
    at = 1 if mode == "strict" else 2

    def expected(d) -> Optional[tuple[Case, str]]:
        if d is None or d[at] is None:
            return None
        if rule is not None and d[at][0] != rule:
            return None
        return d[0], d[at][0]

    return (st.binary(min_size=max_bytes // 4, max_size=max_bytes)
            .map(lambda data: expected(_decoded(data, profile, head_dim, bounds, False, mutations,
                                                dialect)))
            .filter(lambda x: x is not None))




def production_calls(dialect: str = "jax", *,
                     max_bytes: int = DEFAULT_MAX_BYTES) -> st.SearchStrategy[Case]:
    """Production calls (docs/properties.md, "The production profile"): what vLLM's TPU
    runner sends the kernel, 128-512 slots, token budgets to 8192, a real model's heads,
    max_model_len to 128K and the integer edges, each under 256 MiB of arrays; strict-valid.
    dialect: "jax", "tpu_inference_v3" or "tpu_inference_v3_hd64". A call takes seconds to
    build and to check: set max_examples low (a few to a few dozen). Shrinking lowers the
    bytes, and with them the model index, the slots, the budget and the lengths. A failing
    example's ``spec`` ("prod:...") replays it with ``rpa gen --spec``."""
    _rpa.production_decode(b"", dialect)  # a known dialect? (raises ValueError)

    def build(data: bytes) -> Case:
        arrays, params, spec, description, _strict, _jax = _rpa.production_decode(data, dialect)
        return Case._from_native((arrays, params), spec=spec, description=description)

    return st.binary(max_size=max_bytes).map(build)


__all__ = ["cases", "invalid_cases", "production_calls", "DEFAULT_MAX_BYTES"]
