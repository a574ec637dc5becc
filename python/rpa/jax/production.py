"""The production profile's calls for the real kernels in TPU interpret mode (docs/properties.md,
"The production profile"): interpret mode runs each grid step in Python (one 106-row prefill
call took 16 s there), so the cross-checks take the production calls of a seed's stream that
it runs in minutes, and print the reach table of the calls they ran."""
from __future__ import annotations

from typing import Any

import numpy as np

from rpa import _rpa


def interpret_calls(dialect: str, count: int, seed: int, *, max_seqs: int = 8,
                    max_bytes: int = 64 << 20, head_dim_multiple: int = 1,
                    tries: int = 5000) -> list[dict[str, Any]]:
    """The first `count` production recipes of the dialect from the seed's stream with at most
    max_seqs sequences and max_bytes of arrays (and a head_dim that is a multiple of
    head_dim_multiple: JAX's kernel traces 128's on a CPU); each a dict with its "spec"
    (rpa.gen(spec=...) makes the call) and "description". Fewer when `tries` recipes hold
    fewer."""
    rng = np.random.default_rng([seed, 33])
    found: list[dict[str, Any]] = []
    for _ in range(tries):
        if len(found) == count:
            break
        recipe = _rpa.production_recipe(int(rng.integers(0, 2**63)), dialect)
        if (recipe["num_seqs"] <= max_seqs and recipe["memory_bytes"] <= max_bytes
                and recipe["head_dim"] % head_dim_multiple == 0):
            found.append(recipe)
    return found


def print_reach(specs: list[str], indent: str = "  ") -> None:
    """The reach table of the calls these prod: specs name: per dialect, the calls, the
    longest kv_len, the most rows, the highest position, and each catalog item's count."""
    if not specs:
        print(f"{indent}production reach: no production calls ran")
        return
    text, never = _rpa.production_reach(specs, indent)
    print(f"{indent}production reach (each item: the calls that drew it; "
          f"{len(never)} catalog items not drawn by this sample):")
    print(text, end="")
