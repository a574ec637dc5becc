"""The calls of a campaign (rpa.campaign, rpa._campaign): drawing them (the path-led planner and
plain draws), running them through the kernel with the watchdog, judging and shrinking the
failures, and tallying the results by call number. rpa._campaign runs them here; rpa._cluster
runs the same functions as Ray tasks on a cluster's workers. Neither of those imports the other's
internals: both import this module.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import threading
import time
from typing import Any, Callable, Iterator, Optional

import numpy as np

from rpa import _api
from rpa._case import Case
from rpa._draw import bounds as draw_bounds, decoded

KINDS = ("mismatch", "biased", "raised", "hang", "crashed")  # crashed: on a cluster only
MODES = ("strict", "native", "both")
TARGETS = ("v5e", "v6e", "7x")
TPU_VERSIONS = {"v5e": 5, "v6e": 6, "7x": 7}  # python -m rpa campaign --tpu-version
LONG_TIER = "long32k"  # the v3 dialects' profile of kv_len 32768 to 65536 (docs/python.md)


@dataclasses.dataclass
class Finding:
    """One way the kernel fails: its kind ("mismatch", "biased", "raised", "hang", or on a
    cluster "crashed": the calls killed every worker they ran on), the line
    that says what failed, the shrunk call (with the kernel's output where it returned one) and
    the call as first drawn, how shrinking went, which call first showed it and how many did,
    and, once a report is written, the case file and the command that replays it."""

    kind: str
    detail: str
    case: Case
    original: Case
    data: bytes
    shrink_steps: int = 0
    shrink_calls: int = 0
    data_seed: Optional[int] = None  # the data seed the bytes' call was drawn with, if not its own
    first_call: int = 0  # the campaign call (1-based) that first failed this way
    failing_calls: int = 1  # the campaign's calls that failed this way
    case_file: Optional[str] = None
    replay: Optional[str] = None
    mode: str = "strict"  # how the call was judged: "strict" or "native"

    def size(self) -> str:
        """What the shrunk call holds, in a few words."""
        return describe_size(self.case)

    def original_size(self) -> str:
        """What the call as first drawn held."""
        return describe_size(self.original)


@dataclasses.dataclass
class CampaignResult:
    """What a campaign ran and found. ``ok`` is True when nothing was found."""

    kernel: str
    dialect: str
    mode: str
    profile: Optional[str]
    seed: int
    calls: int = 0
    passed: int = 0
    compile_keys: int = 0
    shrink_calls: int = 0
    seconds: float = 0.0
    max_share_of_tolerance: float = 0.0
    unjudged: int = 0  # calls the oracle could not judge here (out of memory)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    stopped: Optional[str] = None  # why the campaign stopped early (a hang, Ctrl-C)
    target: Optional[str] = None  # the literal schedule's TPU generation (native mode)
    report: Optional[str] = None
    cluster: Optional[str] = None  # the Ray cluster the calls ran on, None: here
    worker_ids: set[str] = dataclasses.field(default_factory=set)  # host:pid that ran calls
    resubmitted: int = 0  # groups of calls sent again (their worker died, or hung on a call)
    duplicates: int = 0  # results of a call that came again (counted once)
    lost: int = 0  # calls whose worker died every time they were sent
    # Each call as (its number, a hash of its bytes and data seed, its verdict), in order.
    call_log: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)
    # Every path feature the campaign's candidates reached under its bounds -> the first call
    # (1-based) that walked it, None where no call run did.
    reach: dict[str, Optional[int]] = dataclasses.field(default_factory=dict)
    # Drawn calls not sent: estimated dearer in interpret mode than the timeout
    # (interpret_seconds).
    too_dear: int = 0

    def reached(self) -> int:
        """How many of the reachable features some call walked."""
        return sum(1 for v in self.reach.values() if v is not None)

    @property
    def ok(self) -> bool:
        return not self.findings

    def __bool__(self) -> bool:
        return self.ok

    def summary(self) -> str:
        """One line, as the command line prints it at the end."""
        found = ", ".join(f"{f.kind} ({f.size()})" for f in self.findings) or "nothing"
        where = (f" on {len(self.worker_ids)} workers of {self.cluster}" if self.cluster else "")
        reach = (f", {self.reached()} of {len(self.reach)} path features reached"
                 if self.reach else "")
        line = (f"rpa campaign: {self.kernel} ({self.dialect}, {self.mode}): {self.calls} calls in "
                f"{self.seconds:.1f} s{where}, {self.compile_keys} compile keys{reach}, "
                f"found {found}")
        if self.too_dear:
            line += (f"; {self.too_dear} drawn calls left out as dearer than the timeout in "
                     f"interpret mode")
        if self.stopped:
            line += f"; stopped: {self.stopped}"
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "dialect": self.dialect, "mode": self.mode,
            "profile": self.profile, "seed": self.seed, "seconds": round(self.seconds, 3),
            "calls": self.calls, "passed": self.passed, "compile_keys": self.compile_keys,
            "shrink_calls": self.shrink_calls,
            "max_share_of_tolerance": self.max_share_of_tolerance, "unjudged": self.unjudged,
            "stopped": self.stopped, "cluster": self.cluster, "workers": len(self.worker_ids),
            "resubmitted": self.resubmitted, "duplicates": self.duplicates, "lost": self.lost,
            "too_dear": self.too_dear,
            "verdicts": {v: sum(1 for _, _, w in self.call_log if w == v)
                         for v in sorted({w for _, _, w in self.call_log})},
            "findings": [{
                "kind": f.kind, "detail": f.detail, "size": f.size(),
                "original_size": f.original_size(), "description": f.case.description,
                "shrink_steps": f.shrink_steps, "shrink_calls": f.shrink_calls,
                "first_call": f.first_call, "failing_calls": f.failing_calls,
                "case_file": f.case_file, "replay": f.replay, "bytes": f.data.hex(),
                "data_seed": f.data_seed, "mode": f.mode,
            } for f in self.findings],
            "reach": {"reachable": len(self.reach), "reached": self.reached(),
                      "first_call": dict(sorted(self.reach.items()))},
        }


class CampaignInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped rpa.campaign. ``result`` holds what finished (the calls run, the failures
    found, as drawn where they were not yet shrunk), and its report is written."""

    def __init__(self, result: "CampaignResult"):
        super().__init__(result.stopped)
        self.result = result


class _Hang(Exception):
    pass


@dataclasses.dataclass
class _Outcome:
    kind: Optional[str]  # None: agreed
    detail: str
    case: Case  # with the output where the kernel returned one
    share: Optional[float] = None


def describe_size(case: Case) -> str:
    """"2 seqs, 5 tokens, 4/1 heads, D 8, 3 pages of 2, 1 param": what shrinking lowers."""
    if case.is_v3:
        seqs = int(np.asarray(case.distribution).reshape(-1)[2])
        cu = np.asarray(case.cu_q_lens).reshape(-1)
        tokens = int(cu[seqs]) if seqs < cu.size else case.queries.shape[0]
        hq, d = case.queries.shape[1], case.queries.shape[2]
        hkv = case.keys.shape[1]
        pages, page = case.kv_cache.shape[0], case.kv_cache.shape[1]
    else:
        seqs = int(np.asarray(case.num_seqs).reshape(-1)[0])
        cu = np.asarray(case.cu_q_lens).reshape(-1)
        tokens = int(cu[min(seqs, cu.size - 1)])
        hq, d = case.q.shape[1], case.q.shape[2]
        hkv = case.kv_pages.shape[2] // 2
        pages, page = case.kv_pages.shape[0], case.kv_pages.shape[1]
    return (f"{seqs} seqs, {tokens} tokens, {hq}/{hkv} heads, D {d}, {pages} pages of {page}, "
            f"{_params_set(case)} params")


_DEFAULTS = {"sm_scale": 1.0, "use_causal_mask": True, "update_kv_cache": True,
             "skip_kv_mask": False}
_RUN_PARAMS = ("num_kv_pages_per_block", "num_queries_per_block", "vmem_limit_bytes",
               "d_block_sizes", "p_block_sizes", "m_block_sizes")


def _params_set(case: Case) -> int:
    _, kwargs = case.call_args()
    return sum(1 for k, v in kwargs.items()
               if k not in _RUN_PARAMS and v is not None and _DEFAULTS.get(k, object()) != v)


def _size_key(case: Case) -> tuple[int, int]:
    args, _ = case.call_args()
    elements = sum(int(np.asarray(a).size) for a in args if a is not None)
    return elements, _params_set(case)


def compile_key(case: Case) -> tuple[Any, ...]:
    """What a jitted kernel compiles for: the arrays' shapes and dtypes and the keywords."""
    args, kwargs = case.call_args()
    return (tuple(None if a is None else (tuple(np.shape(a)), str(np.asarray(a).dtype))
                  for a in args),
            tuple(sorted((k, repr(v)) for k, v in kwargs.items())))


# What a call costs in TPU interpret mode, from its walk's "cost." entries
# (schedule/path_features.h): seconds per call, per page copy traced, per compute body traced
# and per page copy run. Measured with tpu-inference's kernel.py on a 2-core AMD EPYC
# (docs/python.md, "What a call costs"): 3.5 to 7 s for the cover's calls of at most 60 traced
# page copies; one call with 24, 384 and 1536 traced (96, 1536, 6144 run) took 3.5, 12.9 and
# 60.3 s.
INTERPRET_COST_S = (4.0, 0.02, 0.02, 0.005)
# A call whose walk stops in the run (it raises or hangs) may hang in interpret mode until
# the kernel's watchdog stops it (rpa.jax.pallas.Watchdog: 3 s stalled; measured 11.2 s in all
# for one such kernel.py call); another kernel may take its whole timeout.
STOPPED_CALL_S = 20.0
# The cover's first round takes the calls estimated at most this dear.
CHEAP_CALL_S = 15.0


def interpret_seconds(walked: dict[str, int]) -> float:
    """A call's estimated interpret-mode seconds (trace, compile and run) from its path
    features' cost entries."""
    if "stops.too_large_to_walk" in walked:  # blocks near 2**31: a static loop of millions
        return float("inf")
    if "stops.run" in walked or "stops.hang" in walked:
        return STOPPED_CALL_S
    base, traced, bodies, run = INTERPRET_COST_S
    return (base + traced * walked.get("cost.traced_page_copies", 0) +
            bodies * walked.get("cost.traced_compute_bodies", 0) +
            run * walked.get("cost.run_page_copies", 0))


def _with_jax_blocks(case: Case) -> Case:
    # JAX's kernel takes both block sizes off a TPU (its defaults come from a TPU table): set
    # get_tuned_block_sizes's untuned default where the call names neither, so that the
    # kernel and the literal schedule run the same blocks.
    if case.is_v3 or (case.num_kv_pages_per_block is not None and
                      case.num_queries_per_block is not None):
        return case
    pps = np.asarray(case.page_indices).shape[-1]
    return case.replace(num_kv_pages_per_block=min(pps, 128),
                        num_queries_per_block=min(case.q.shape[0], 32))


class _Drawer:
    """Calls from bytes, as the mode draws them."""

    def __init__(self, dialect: str, mode: str, profile: Optional[str], head_dim: Optional[int],
                 bounds: Any):
        self.dialect, self.mode, self.profile, self.head_dim = dialect, mode, profile, head_dim
        self.bounds = bounds

    def case(self, data: bytes, valid: bool, data_seed: Optional[int] = None,
             mode: Optional[str] = None, zeros: bool = False) -> Optional[Case]:
        """The call the bytes draw in `mode` (default: the drawer's, which "both" leaves to
        each call), or None where the mode does not draw it. zeros: a v3 call's q, K, V and
        cache left zero (rpa._draw.decoded): for its shapes and path features alone."""
        mode = mode or self.mode
        assert mode in ("strict", "native"), mode
        d = decoded(data, self.profile, self.head_dim, self.bounds, valid, [], self.dialect,
                    data_seed, zeros)
        if d is None:
            return None
        case, strict, native = d
        # v_scale 0 (a jax call may draw it) makes every output row 0 by construction: the
        # check cannot tell a kernel that drops or misplaces rows from a right one (a JAX
        # mutant that stored no row past a sequence's first q block agreed on such a cover
        # call, as on one of flat data). Such a call spends a kernel call on nothing.
        if case.v_scale == 0.0:
            return None
        if mode == "strict":
            # Valid draws are strict-valid by construction (the spec model's verdict);
            # a jax call must be one JAX's validators accept too.
            if strict is not None or (self.dialect == "jax" and native is not None):
                return None
        elif native is not None:
            return None
        if self.dialect == "jax" and (case.num_kv_pages_per_block is None or
                                      case.num_queries_per_block is None):
            case = _with_jax_blocks(case)
            # The blocks set may break a rule (a block past the VMEM budget): ask again.
            if not _api.validate(case, mode="jax").valid:
                return None
            if mode == "strict" and not _api.validate(case).valid:
                return None
        return case


class _Runner:
    """Calls the kernel and judges its result."""

    def __init__(self, kernel: Callable[..., Any], dialect: str, mode: str, timeout_s: float,
                 target: Optional[str]):
        self.kernel, self.dialect, self.mode = kernel, dialect, mode
        self.timeout_s, self.target = timeout_s, target
        self.hung = False
        self.hung_case: Optional[Case] = None

    def _call(self, case: Case) -> Any:
        args, kwargs = case.call_args()
        # Copies: a kernel that writes its inputs in place (a donated buffer) must not change
        # the case its output is checked against.
        args = tuple(None if a is None else np.array(a, copy=True) for a in args)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = self.kernel(*args, **kwargs)
            except BaseException as e:  # pylint: disable=broad-except
                box["error"] = e

        worker = threading.Thread(target=run, name="rpa-campaign-kernel", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            self.hung = True
            self.hung_case = case
            raise _Hang(f"the kernel did not return in {self.timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _stops_too(self, case: Case, mode: str) -> Optional[str]:
        """Native mode: where the library's program itself cannot trace, raises or hangs (the
        literal schedule stops), a kernel that stops is doing what it ships to do ("stops");
        where the literal schedule cannot run here (a cache dtype it does not compute, blocks
        too large to allocate), a kernel that stops cannot be judged ("unjudged"). None: the
        literal schedule returns, so stopping is a finding."""
        if mode != "native":
            return None
        try:
            _api.kernel(case, schedule="literal", mode="jax" if self.dialect == "jax" else "native",
                        target=self.target)
        except _api.KernelDoesNotReturn:
            return "stops"
        except (ValueError, MemoryError):  # an hd64 call without block sizes, a float64 cache,
            return "unjudged"              # a schedule too large to run here
        return None

    def run(self, case: Case, mode: Optional[str] = None) -> _Outcome:
        """The kernel on the call, judged as `mode` says (default: the runner's)."""
        mode = mode or self.mode
        assert mode in ("strict", "native"), mode
        try:
            result = self._call(case)
        except _Hang as e:
            why = self._stops_too(case, mode)
            if why == "stops":
                return _Outcome(None, f"hangs, as the literal schedule does ({e})", case)
            if why == "unjudged":
                return _Outcome("unjudged", f"hangs where the literal schedule cannot run ({e})",
                                case)
            return _Outcome("hang", str(e), case)
        except Exception as e:  # pylint: disable=broad-except
            text = str(e).strip().splitlines()
            line = f"{type(e).__name__}: {text[-1] if text else ''}"
            why = self._stops_too(case, mode)
            if why == "stops":
                return _Outcome(None, f"stops, as the literal schedule does ({line})", case)
            if why == "unjudged":
                return _Outcome("unjudged", f"stops where the literal schedule cannot run ({line})",
                                case)
            # A kernel with a watchdog of its own (rpa.jax.kernel_file's, in interpret mode)
            # raises with stage "timeout" and can take the next call.
            return _Outcome("hang" if getattr(e, "stage", None) == "timeout" else "raised", line,
                            case)
        if result is None:
            return _Outcome("raised", "TypeError: the kernel returned None", case)
        try:
            if self.dialect == "jax":
                out = result[0] if isinstance(result, (tuple, list)) else result
                checked = case.replace(out=np.asarray(out))
                if mode == "strict":
                    r = _api.check(checked)
                else:
                    r = _api.check(checked, oracle="literal", mode="jax", target=self.target)
            else:
                if not isinstance(result, (tuple, list)) or len(result) != 2:
                    return _Outcome("raised", "TypeError: a v3 kernel returns (out, kv_cache), "
                                    f"got {type(result).__name__}", case)
                checked = case.replace(out=np.asarray(result[0]),
                                       kv_cache_out=np.asarray(result[1]))
                if mode == "strict":
                    r = _api.check(checked)
                else:
                    r = _api.check(checked, oracle="literal", mode="native", target=self.target)
        except MemoryError:
            # The oracle cannot run this call here (a literal schedule of blocks near 2^31):
            # neither a pass nor a finding.
            return _Outcome("unjudged", "the oracle ran out of memory", case)
        except ValueError as e:  # an output of another shape or dtype than the call's
            # A call the literal schedule does not take (a fetch block of no tokens, a float64
            # cache: the kernel may return from it, as kernel.py does in interpret mode).
            if "does not model" in str(e) or "literal v3 schedule computes" in str(e):
                return _Outcome("unjudged", f"the literal schedule cannot judge it: {e}", case)
            if "out" not in str(e) and "kv_cache" not in str(e):
                raise  # the harness's own error, not the kernel's
            return _Outcome("raised", f"the kernel's output: {e}", case)
        if r.verdict == "agree":
            return _Outcome(None, "", checked, r.share_of_tolerance)
        if r.verdict == "rejected":  # the drawer keeps only calls the mode accepts
            raise RuntimeError(f"rpa campaign: a drawn call was rejected: {r.detail}")
        return _Outcome(r.verdict, str(r).splitlines()[0], checked, r.share_of_tolerance)


def _byte_candidates(b: bytes) -> Iterator[bytes]:
    n = len(b)
    for k in (0, n // 8, n // 4, n // 2, 3 * n // 4):
        if k < n:
            yield b[:k]
    for size in (64, 16, 4, 1):
        for i in range(0, n, size):
            yield b[:i] + b[i + size:]
    for size in (16, 4, 1):
        for i in range(0, n, size):
            if any(b[i:i + size]):
                yield b[:i] + bytes(min(size, n - i)) + b[i + size:]
    for i in range(n):
        if b[i] > 1:
            yield b[:i] + bytes([b[i] // 2]) + b[i + 1:]
        if b[i]:
            yield b[:i] + bytes([b[i] - 1]) + b[i + 1:]


def _bare(case: Case) -> Case:
    """The call without the outputs a check added."""
    if case.is_v3:
        return case.replace(out=None, kv_cache_out=None, expected=None, expected_kv_cache=None)
    return case.replace(out=None, expected=None)


def _read_prefix(data: bytes, valid: bool, seed: Optional[int], case: Case,
                 drawer: _Drawer, mode: Optional[str] = None) -> bytes:
    """The shortest prefix of data that decodes to the same call (the decoder reads bytes
    in order; past the last it reads, none matter)."""
    case = _bare(case)
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        same = drawer.case(data[:mid], valid, seed, mode)
        if same is not None and same == case:
            hi = mid
        else:
            lo = mid + 1
    return data[:hi]


def _shrink(data: bytes, valid: bool, seed: Optional[int], first: _Outcome, drawer: _Drawer,
            runner: _Runner, budget: int, deadline: Optional[float] = None,
            mode: Optional[str] = None) -> tuple[bytes, _Outcome, int, int]:
    """The smallest call found that fails as `first` did: (bytes, outcome, steps, calls).
    Each round decodes every candidate edit of the current bytes (cheap: no kernel call),
    keeps those that decode to a smaller call the mode draws, and runs the kernel on them
    smallest first until one fails the same way; no smaller call fails, the budget is spent
    or the deadline (time.monotonic()) has passed: done."""
    best, best_out = _read_prefix(data, valid, seed, first.case, drawer, mode), first
    best_key = _size_key(first.case)
    steps = calls = 0
    while calls < budget:
        smaller: dict[tuple[int, int], list[tuple[bytes, Case]]] = {}
        distinct: set[int] = set()
        for candidate in _byte_candidates(best):
            case = drawer.case(candidate, valid, seed, mode)
            if case is None:
                continue
            key = _size_key(case)
            if key < best_key and len(smaller.setdefault(key, [])) < 8:
                fingerprint = _fingerprint(case)
                if fingerprint not in distinct:
                    distinct.add(fingerprint)
                    smaller[key].append((candidate, case))
        found = False
        for key in sorted(smaller):
            for candidate, case in smaller[key]:
                if calls >= budget or (deadline is not None and time.monotonic() >= deadline):
                    return best, best_out, steps, calls
                calls += 1
                out = runner.run(case, mode)
                if runner.hung:
                    return best, best_out, steps, calls
                if out.kind == first.kind and _signature(out) == _signature(first):
                    best = _read_prefix(candidate, valid, seed, case, drawer, mode)
                    best_out, best_key = out, key
                    steps += 1
                    found = True
                    break
            if found or calls >= budget:
                break
        if not found:
            break
    return best, best_out, steps, calls


def _fingerprint(case: Case) -> int:
    args, kwargs = case.call_args()
    return hash((tuple(None if a is None else (np.asarray(a).dtype.str, np.shape(a),
                                                np.asarray(a).tobytes()) for a in args),
                 repr(sorted(kwargs.items()))))


def _signature(out: _Outcome) -> str:
    """What makes two failures one finding: the kind; for a raise, the exception's type (a
    PallasError: its stage and the inner error's type too)."""
    if out.kind != "raised":
        return str(out.kind)
    parts = [p.strip() for p in out.detail.split(":")]
    return "raised " + ":".join(parts[:3] if parts[0] == "PallasError" else parts[:1])


def _kernel_name(kernel: Any) -> str:
    name = getattr(kernel, "rpa_name", None)
    if name:
        return str(name)
    module = getattr(kernel, "__module__", None) or "?"
    return f"{module}:{getattr(kernel, '__qualname__', type(kernel).__name__)}"


@dataclasses.dataclass
class _Call:
    """One drawn call: its place in the campaign (0-based, in the order the calls are drawn
    and sorted), and the bytes and data seed that redraw it. ``case`` is the drawn call (left
    out of what goes to a cluster's workers, which redraw it)."""

    index: int
    data: bytes
    valid: bool
    data_seed: Optional[int]
    case: Optional[Case] = None
    mode: str = "strict"  # how the call is drawn and judged: "strict" or "native"
    features: frozenset[str] = frozenset()  # its path features (rpa.path_features)
    cost: float = 0.0  # what it costs in TPU interpret mode (interpret_seconds), estimated

    def ident(self) -> str:
        """A short name of the call: its bytes, data seed and mode, hashed."""
        seed = b"" if self.data_seed is None else self.data_seed.to_bytes(8, "little")
        return hashlib.sha256(self.data + b"/" + seed + b"/" + self.mode.encode()).hexdigest()[:12]

    def bare(self) -> "_Call":
        return dataclasses.replace(self, case=None)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """What draws and judges the calls, without the kernel: a cluster's workers get this and
    build their drawer and runner from it."""

    dialect: str
    mode: str
    profile: Optional[str]
    head_dim: Optional[int]
    limits: tuple[int, int, int, int]  # max_seqs, max_kv_len, max_head_dim, max_page_size
    timeout_s: float
    target: Optional[str]
    shrink_calls: int
    integer_edges: bool = False  # v3: windows and page tables at the int16/int32 edges

    def drawer(self) -> _Drawer:
        # No flat data (q and KV one value everywhere): every row of such a call is the same,
        # and a kernel that computes a row from the wrong sequence or block agrees on it.
        return _Drawer(self.dialect, self.mode, self.profile, self.head_dim,
                       draw_bounds(*self.limits, integer_edges=self.integer_edges,
                                   flat_data=False))

    def runner(self, kernel: Callable[..., Any]) -> _Runner:
        # A kernel with a watchdog of its own (rpa.jax.kernel_file's, started after compiling)
        # gets time to compile first, so that its recoverable timeout comes before ours.
        own = getattr(kernel, "timeout_s", None)
        return _Runner(kernel, self.dialect, self.mode,
                       self.timeout_s if own is None else max(self.timeout_s, float(own) + 600.0),
                       self.target)


class _Planner:
    """The campaign's calls, batch after batch, from its seed alone: the same seed gives the
    same calls in the same order, however many workers run them. First the calls that cover the
    path features of `cover` candidates (greedy: most new features first, the cheaper of equals,
    the calls estimated under CHEAP_CALL_S before the dearer; sent cheapest first),
    then plain draws, each run with calls_per_shape data seeds; each batch of plain draws is
    sorted by compile key. Calls are numbered on from the last."""

    def __init__(self, drawer: _Drawer, seed: int, max_bytes: int, calls_per_shape: int,
                 cover: int = 0, target: Optional[str] = None, max_cost: float = float("inf")):
        self.drawer, self.max_bytes, self.calls_per_shape = drawer, max_bytes, calls_per_shape
        # A call estimated dearer than this (interpret_seconds; the campaign's timeout) is not
        # sent: a correct kernel would not return in time, a hang finding of no bug.
        self.max_cost = max_cost
        self.too_dear = 0  # drawn calls left out for that
        self.rng = np.random.default_rng(int(seed))
        self.planned = 0
        self.exhausted = False
        self.target = target
        self.modes = ("strict", "native") if drawer.mode == "both" else (drawer.mode,)
        self.drawn = 0  # plain draws so far, for the mode they take in turn
        self.features: dict[int, frozenset[str]] = {}  # call number -> its path features
        self.reachable: set[str] = set()
        # The cover's calls (size key, call without its arrays), in the order chosen.
        self.queue: list[tuple[tuple[int, int], _Call]] = self._cover(cover) if cover > 0 else []

    def exhausted_line(self) -> Optional[str]:
        """Why the campaign stopped drawing, when it ran out of calls that fit (else None)."""
        if not self.exhausted:
            return None
        return f"no further call of the {self.drawer.dialect} dialect fits the bounds"

    def path_features(self, case: Case, mode: str) -> tuple[frozenset[str], float]:
        """A call's path features on the campaign's target and the mode that judges it, and
        what it costs in interpret mode (interpret_seconds)."""
        walked = _api.path_features(case, self.target)
        features = frozenset(f for f in walked if not f.startswith("cost.")) | {f"mode.{mode}"}
        return features, interpret_seconds(walked)

    def _affordable(self, call: _Call) -> Optional[_Call]:
        """The drawn call with its path features and cost, or None (counted in too_dear) where
        it is estimated dearer than max_cost."""
        assert call.case is not None
        call.features, call.cost = self.path_features(call.case, call.mode)
        if call.cost > self.max_cost:
            self.too_dear += 1
            return None
        return call

    def _draw(self) -> tuple[bytes, bool, str]:
        """The next candidate's bytes, whether it is drawn valid, and its mode. Native mode:
        half of the calls broken by one named mutation its validators let through; strict mode
        draws valid calls only."""
        rng = self.rng
        data = rng.bytes(int(rng.integers(self.max_bytes // 4, self.max_bytes + 1)))
        mode = self.modes[self.drawn % len(self.modes)]
        self.drawn += 1
        return data, mode == "strict" or bool(rng.integers(2)), mode

    def _cover(self, candidates: int) -> list[tuple[tuple[int, int], _Call]]:
        """Greedy cover of the candidates' path features: the calls in the order chosen."""
        pool: list[tuple[tuple[int, int], _Call]] = []
        for _ in range(candidates):
            data, valid, mode = self._draw()
            # No data: the walk and the size key need none; a chosen call is drawn again.
            case = self.drawer.case(data, valid, None, mode, zeros=True)
            if case is None:
                continue
            call = self._affordable(_Call(0, data, valid, None, case, mode))
            if call is None:
                continue
            self.reachable |= call.features
            # The pool keeps bytes, features and cost, not the arrays: 512 long-tier calls
            # would hold tens of GB. A chosen call is drawn again when it is sent.
            pool.append((_size_key(case), dataclasses.replace(call, case=None)))
        covered: set[str] = set()
        chosen: list[tuple[tuple[int, int], _Call]] = []
        # Two rounds: the calls of at most CHEAP_CALL_S first, then the dearer ones for the
        # features no cheap call walks; in each, most new features first, then the cheaper.
        for cap in (CHEAP_CALL_S, float("inf")):
            while True:
                left = [i for i in range(len(pool)) if pool[i][1].cost <= cap]
                if not left:
                    break
                k = max(left, key=lambda i: (len(pool[i][1].features - covered),
                                             -pool[i][1].cost, [-x for x in pool[i][0]]))
                if not pool[k][1].features - covered:
                    break
                covered |= pool[k][1].features
                chosen.append(pool.pop(k))
        return chosen

    def batch(self, n: int) -> list[_Call]:
        if self.queue:
            # The cover's calls, as many as fit, in the order chosen, sent cheapest first.
            taken, self.queue = self.queue[:n], self.queue[n:]
            taken.sort(key=lambda t: (t[1].cost, t[0]))
            out = [dataclasses.replace(c, case=self.drawer.case(c.data, c.valid, None, c.mode))
                   for _, c in taken]
            return self._number(out)
        drawer, rng = self.drawer, self.rng
        out: list[_Call] = []
        tries = 0
        while len(out) < n and tries < 100 * n:
            tries += 1
            data, valid, mode = self._draw()
            case = drawer.case(data, valid, None, mode)
            if case is None:
                continue
            call = self._affordable(_Call(0, data, valid, None, case, mode))
            if call is None:
                continue
            out.append(call)
            # The same call with other data: the same compile key and path.
            for _ in range(self.calls_per_shape - 1):
                if len(out) >= n:
                    break
                seed_ = int(rng.integers(2**32))
                again = drawer.case(data, valid, seed_, mode)
                if again is not None:
                    out.append(_Call(0, data, valid, seed_, again, mode, out[-1].features,
                                     out[-1].cost))
        if not out:
            if not self.planned:
                raise ValueError(f"no call of the {drawer.dialect} dialect fits these bounds and "
                                 f"profile in {tries} draws")
            self.exhausted = True
        out.sort(key=lambda c: repr(compile_key(c.case)))
        return self._number(out)

    def _number(self, out: list[_Call]) -> list[_Call]:
        for c in out:
            c.index = self.planned
            self.planned += 1
            self.features[c.index] = c.features
            self.reachable |= c.features
        return out

    def reach(self, ran: set[int]) -> dict[str, Optional[int]]:
        """Every reachable feature -> the first call (1-based) among those run that walked it."""
        first: dict[str, Optional[int]] = {f: None for f in self.reachable}
        for i in sorted(ran):
            for f in self.features.get(i, ()):
                if first.get(f) is None:
                    first[f] = i + 1
        return first


def _groups(calls: list[_Call]) -> list[list[_Call]]:
    """A sorted batch cut where the compile key changes: each group compiles once."""
    groups: list[list[_Call]] = []
    last = None
    for c in calls:
        key = repr(compile_key(c.case))
        if key != last:
            groups.append([])
            last = key
        groups[-1].append(c)
    return groups


@dataclasses.dataclass
class _Ran:
    """What running a group of calls gave: each call's verdict ("agree", "unjudged" or a
    finding kind), and per failure signature the first call that failed that way (with its
    outcome: what shrinking starts from) and each failing call's signature."""

    verdicts: dict[int, str] = dataclasses.field(default_factory=dict)
    idents: dict[int, str] = dataclasses.field(default_factory=dict)
    signatures: dict[int, str] = dataclasses.field(default_factory=dict)  # the failing calls'
    share: float = 0.0
    keys: set[str] = dataclasses.field(default_factory=set)
    first: dict[str, tuple[_Call, _Outcome]] = dataclasses.field(default_factory=dict)
    unrun: list[_Call] = dataclasses.field(default_factory=list)  # the calls not run
    interrupted: bool = False  # Ctrl-C came while they ran
    worker: str = ""  # host:pid of the process that ran them


def _run_calls(runner: _Runner, drawer: _Drawer, calls: list[_Call],
               stop: Optional[Callable[[int], bool]] = None,
               known: Optional[set[str]] = None) -> _Ran:
    """Runs the calls in order (redrawing those that come without their case) until they are
    done, stop(calls run so far) says so, the kernel hangs, a call fails in a way not in known
    (given known: one machine shrinks it before the next call, which might hang), or Ctrl-C
    (interrupted); the calls left are in unrun."""
    ran = _Ran(worker=f"{platform.node()}:{os.getpid()}")
    k = 0
    try:
        for k, call in enumerate(calls):
            if stop is not None and stop(k):
                ran.unrun = calls[k:]
                break
            case = call.case if call.case is not None else drawer.case(call.data, call.valid,
                                                                        call.data_seed, call.mode)
            if case is None:
                raise RuntimeError(f"rpa campaign: call {call.index} does not redraw here "
                                   f"(another rpa version on this worker?)")
            ran.keys.add(repr(compile_key(case)))
            out = runner.run(case, call.mode)
            ran.idents[call.index] = call.ident()
            ran.verdicts[call.index] = out.kind or "agree"
            new = False
            if out.kind is None:
                if out.share is not None:
                    ran.share = max(ran.share, out.share)
            elif out.kind != "unjudged":
                signature = _signature(out)
                ran.signatures[call.index] = signature
                new = signature not in ran.first and known is not None and signature not in known
                ran.first.setdefault(signature, (call.bare(), out))
            if runner.hung or new:
                ran.unrun = calls[k + 1:]
                break
    except KeyboardInterrupt:
        ran.interrupted = True
        ran.unrun = [c for c in calls[k:] if c.index not in ran.verdicts]
    return ran


def _shrink_first(call: _Call, out: _Outcome, drawer: Optional[_Drawer],
                  runner: Optional[_Runner], budget: int,
                  deadline: Optional[float] = None) -> list[Finding]:
    """The finding a call's failure makes, shrunk (a hang is not: its call cannot be taken
    back), and, when a call tried while shrinking hung, a hang finding of its own."""
    if out.kind == "hang":  # needs no drawer or runner
        return [Finding(out.kind, out.detail, out.case, out.case, call.data,
                        first_call=call.index + 1, data_seed=call.data_seed, mode=call.mode)]
    assert drawer is not None and runner is not None
    small_data, small, steps, spent = _shrink(call.data, call.valid, call.data_seed, out,
                                              drawer, runner, budget, deadline, call.mode)
    found = [Finding(small.kind, small.detail, small.case, out.case, small_data, steps, spent,
                     first_call=call.index + 1, data_seed=call.data_seed, mode=call.mode)]
    hung = runner.hung_case
    if runner.hung and hung is not None:
        found.append(Finding("hang", f"the kernel did not return in {runner.timeout_s:g} s",
                             hung, hung, b"", first_call=call.index + 1))
    return found


class _Tally:
    """The campaign's result as groups of calls come in, in any order: each call counted once,
    and per failure signature the call with the lowest number kept (the one shrunk), so that
    the result does not depend on which worker finished first."""

    def __init__(self, result: CampaignResult):
        self.result = result
        self.verdicts: dict[int, str] = {}
        self.idents: dict[int, str] = {}
        self.keys: set[str] = set()
        self.first: dict[str, tuple[_Call, _Outcome]] = {}
        self.counts: dict[str, int] = {}
        self.findings: dict[str, Finding] = {}  # signature -> shrunk finding

    def add(self, ran: _Ran) -> None:
        r = self.result
        for i, verdict in ran.verdicts.items():
            if i in self.verdicts:  # a call whose result came twice: counted once
                r.duplicates += 1
                continue
            self.verdicts[i] = verdict
            self.idents[i] = ran.idents[i]
            r.calls += 1
            r.passed += verdict == "agree"
            r.unjudged += verdict == "unjudged"
            signature = ran.signatures.get(i)
            if signature is not None:
                self.counts[signature] = self.counts.get(signature, 0) + 1
        r.max_share_of_tolerance = max(r.max_share_of_tolerance, ran.share)
        self.keys |= ran.keys
        r.compile_keys = len(self.keys)
        if ran.worker:
            r.worker_ids.add(ran.worker)
        for signature, (call, out) in ran.first.items():
            known = self.first.get(signature)
            if known is None or call.index < known[0].index:
                self.first[signature] = (call, out)

    def crashed(self, group: list[_Call], drawer: _Drawer, detail: str) -> None:
        """A call (group: that call) that killed every worker it ran on (a cluster): one
        finding of kind "crashed" for all such calls, on the first (not shrunk)."""
        self.counts["crashed"] = self.counts.get("crashed", 0) + 1
        known = self.findings.get("crashed")
        if known is not None and known.first_call <= group[0].index + 1:
            return
        call = group[0]
        case = call.case or drawer.case(call.data, call.valid, call.data_seed, call.mode)
        if case is not None:
            self.findings["crashed"] = Finding("crashed", detail, case, case, call.data,
                                               first_call=call.index + 1,
                                               data_seed=call.data_seed, mode=call.mode)

    def unshrunk(self) -> list[tuple[str, _Call, _Outcome]]:
        return [(s, c, o) for s, (c, o) in sorted(self.first.items(), key=lambda x: x[1][0].index)
                if s not in self.findings]

    def shrunk(self, signature: str, found: list[Finding]) -> None:
        self.result.shrink_calls += found[0].shrink_calls
        self.findings[signature] = found[0]
        for extra in found[1:]:  # a hang while shrinking
            self.findings.setdefault(extra.kind, extra)

    def finish(self) -> None:
        """The findings in the order their calls came (shrunk ones, and the rest as found)."""
        for signature, call, out in self.unshrunk():
            self.findings[signature] = Finding(out.kind or "", out.detail, out.case, out.case,
                                               call.data, first_call=call.index + 1,
                                               data_seed=call.data_seed, mode=call.mode)
        for signature, f in self.findings.items():
            f.failing_calls = max(1, self.counts.get(signature, 1))
        r = self.result
        r.findings = sorted(self.findings.values(), key=lambda f: f.first_call)
        r.call_log = [(i, self.idents[i], self.verdicts[i]) for i in sorted(self.verdicts)]


class _Budget:
    """How many calls are left to draw, or until when: the next batch, or None when done."""

    def __init__(self, calls: Optional[int], deadline: Optional[float], planner: _Planner,
                 batch: int, max_findings: Optional[int] = None,
                 tally: Optional["_Tally"] = None):
        self.calls, self.deadline, self.planner, self.size = calls, deadline, planner, batch
        self.max_findings, self.tally = max_findings, tally
        self.start = time.monotonic()

    def found_enough(self) -> bool:
        """max_findings different failures found: the campaign stops sending calls."""
        return (self.max_findings is not None and self.tally is not None and
                len(self.tally.first) >= self.max_findings)

    def out_of_time(self, ran_any: bool = True) -> bool:
        # At least one call runs, however short the time; none after max_findings failures.
        if self.found_enough():
            return True
        return self.deadline is not None and ran_any and time.monotonic() >= self.deadline

    def next_batch(self) -> Optional[list[_Call]]:
        if self.planner.exhausted or self.out_of_time(self.planner.planned > 0):
            return None
        n = self.size if self.calls is None else min(self.size, self.calls - self.planner.planned)
        if n <= 0:
            return None
        drawn = self.planner.batch(n)
        return drawn or None

    def progress(self, tally: "_Tally", extra: str = "") -> str:
        """The progress line: calls done (of how many), compile keys, failure kinds found."""
        asked = f"/{self.calls}" if self.calls is not None else ""
        r = tally.result
        return (f"rpa campaign: {r.calls}{asked} calls, {r.compile_keys} compile keys, "
                f"{len(tally.first)} findings, {time.monotonic() - self.start:.0f} s{extra}")
