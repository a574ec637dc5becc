#!/usr/bin/env python3
"""Writes corpus/findings/: each input on which JAX's Pallas kernel leaves the definition,
with the Pallas kernel's own output as `expected`.

Each case is corpus/modes' base batch (tools/make_mode_corpus.py) with one change and both
block sizes set (the kernel takes them from a TPU table otherwise). `expected` is what the
Pallas kernel computes on it in TPU interpret mode (rpa.jax.pallas), so the
findings replay without JAX: tests/pallas_findings_test.cc checks that the literal
schedule reproduces `expected` within the schedule tolerance while the dense reference
(the definition) differs from it, and the jax ctest label recomputes `expected` with the
kernel itself. corpus/findings/expectations.tsv records each mode's verdict.

Run from the repository root with the virtualenv of scripts/python_venv.sh (JAX and rpa):
    build/venv/bin/python tools/make_findings.py
"""
import os
import sys

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # interpret mode needs no accelerator
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mode_corpus  # noqa: E402
from rpa.jax import pallas  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "findings")


def cases():
    """(name, case, params, jax verdict, strict verdict, what it shows) per finding."""
    b = make_mode_corpus.base()
    empty = make_mode_corpus.base(seqs=[(1, 5), (0, 0), (2, 2)])
    # Sequence 1's first page: a page holding data (sequence 0's second page), so that the
    # wrong block gives finite wrong values rather than the NaN of an unused page.
    empty["page_indices"][1, 0] = empty["page_indices"][0, 1]
    trailing = make_mode_corpus.base(seqs=[(2, 5), (2, 7), (0, 3)], hq=8, hkv=8)
    return [
        ("mask_value_small_pads", b,
         dict(mask_value=-1.0, num_kv_pages_per_block=4, num_queries_per_block=16),
         "valid", "mask_value_too_large",
         "finding 2: with mask_value -1.0 the Pallas kernel weights the zero-filled slots past "
         "kv_len of each sequence's last KV block"),
        ("empty_sequence_stale_block", empty,
         dict(num_kv_pages_per_block=4, num_queries_per_block=16),
         "valid", "stale_kv_block",
         "finding 8: sequence 2's rows are computed from the block prefetched for the empty "
         "sequence 1 (sequence 0's second page)"),
        ("trailing_empty_sequence_skips_rows", trailing,
         dict(num_kv_pages_per_block=1, num_queries_per_block=4),
         "valid", "rows_not_computed",
         "finding 9: the second heads block starts at the empty sequence 2 and writes heads "
         "4..7 of rows 0..3 from the first heads block's accumulator"),
    ]


def main():
    pallas.check_version()
    os.makedirs(OUT, exist_ok=True)
    rows = ["# name\tjax\tstrict\twhat it shows"]
    for name, case, params, jax_verdict, strict_verdict, note in cases():
        expected = pallas.run_pallas(case, params, params["num_kv_pages_per_block"],
                                     params["num_queries_per_block"])
        make_mode_corpus.save_case(os.path.join(OUT, name + ".npz"), case, params,
                                   expected=np.asarray(expected))
        rows.append("\t".join([name, jax_verdict, strict_verdict, note]))
    make_mode_corpus.write_expectations(OUT, rows)


if __name__ == "__main__":
    main()
