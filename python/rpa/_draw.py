"""The generators' byte decoder as the Hypothesis strategies (rpa.strategies) and the campaign
against a kernel (rpa.campaign) read it: a byte string through ByteSource and the generators'
visit (C++, casegen/generate.h), most significant byte first, so that lowering or deleting
bytes draws a smaller case. Needs no hypothesis."""
from __future__ import annotations

from typing import Optional

from rpa import _rpa
from rpa._case import DIALECTS, Case

# The v3 rule of calls no rpa.Case holds: a keyword or array of the other v3 dialect (the
# kernel raises TypeError on the call, as Case.from_v3_call does). The decoder's draws of it
# are left out.
UNREPRESENTABLE = "keyword_not_in_dialect"

# How many bytes a case may read. Past them every choice takes the low end of its range.
DEFAULT_MAX_BYTES = 1024


def bounds(max_seqs: int, max_kv_len: int, max_head_dim: int, max_page_size: int,
           integer_edges: bool = False, flat_data: bool = True):
    """integer_edges (v3 dialects): windows and page tables at the int16 and int32 edges of
    kernel.py's positions, in calls as short as the others (issue 46). flat_data (jax): q and
    KV may be one value everywhere (the campaign draws without: every row agrees then)."""
    b = _rpa.DecodeBounds()
    b.max_seqs, b.max_kv_len = max_seqs, max_kv_len
    b.max_head_dim, b.max_page_size = max_head_dim, max_page_size
    b.integer_edges = integer_edges
    b.flat_data = flat_data
    return b


def decoded(data: bytes, profile: Optional[str], head_dim: Optional[int], bounds, valid: bool,
             mutations: list[str], dialect: str = "jax", data_seed: Optional[int] = None,
             zeros: bool = False):
    """(case, strict verdict, native verdict) or None (none of the mutations applied).
    data_seed: the same call with its arrays' data drawn from this seed. zeros (v3 dialects):
    q, keys, values and the cache all zeros, for a call whose shapes and path alone are asked
    (the campaign's candidates; a jax call is drawn with its data)."""
    if dialect == "jax":
        native = _rpa.decode(data, profile or "", head_dim, bounds, valid, mutations, data_seed)
    else:
        native = _rpa.v3_decode(data, dialect, profile or "", head_dim, bounds, valid, mutations,
                                data_seed, zeros)
    if native is None:
        return None
    arrays, params, spec, description, strict, jax = native
    if dialect != "jax" and strict is not None and strict[0] == UNREPRESENTABLE:
        return None
    case = Case._from_native((arrays, params), spec=spec, description=description)
    return case, strict, jax


def check_profile(profile: Optional[str], head_dim: Optional[int], bounds,
                  dialect: str = "jax") -> None:
    """Raises ValueError for a dialect, profile or head_dim the decoder does not take (at a
    strategy's definition, not on its first draw)."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect takes {', '.join(DIALECTS)} (got {dialect!r})")
    decoded(b"", profile, head_dim, bounds, True, [], dialect)
