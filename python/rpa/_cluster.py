"""rpa.campaign on a Ray cluster (issue 37; docs/cluster.md): ``rpa.campaign(...,
cluster="ray" | ADDRESS)`` and ``python -m rpa campaign --ray [ADDRESS]``.

The driver draws the calls as on one machine (rpa._campaign_calls._Planner: from the seed
alone) and sends each group of calls that share a compile key to the cluster as one Ray task,
with the bytes that redraw them, not their arrays. A worker process keeps the kernel it was
sent (by the campaign's token), and with it what the kernel compiled, for the tasks that
follow. Results stream back as tasks finish and are tallied by call number
(rpa._campaign_calls._Tally), so that every call counts once and the result does not depend on
which worker finished first. When the calls are done, each failure signature's first call is
shrunk on a worker, one task per signature.

Faults:
- a worker that dies (killed, out of memory, its node gone): Ray runs its task again on another
  worker (max_retries), and the driver sends it again past that, _RESUBMITS times more; a group
  that kills every worker it is sent to is split in halves, each tried twice, down to the call
  that does: that call is counted in CampaignResult.lost and is a finding of kind "crashed" (a
  kernel that segfaults on a call, say), and the others are run.
- a call that hangs: the watchdog makes it a finding of kind "hang" and the task returns the
  calls after it; the driver sends those again. The hung thread cannot be stopped, so the worker
  that holds it exits when its next task starts, and Ray runs that task on a fresh worker
  (until then the thread keeps what it holds; a hang that holds the GIL is not caught).
- Ctrl-C: the result holds what finished (the failures found, as drawn where they were not yet
  shrunk); the tasks in flight end with the driver's job.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import os
import socket
import sys
import time
import uuid
from typing import Any, Callable, Optional

from rpa._campaign_calls import (Finding, _Budget, _Call, _Outcome, _Ran, _Settings, _Tally,
                                 _groups, _run_calls, _shrink_first)

_RAY_RETRIES = 3  # Ray's own reruns of a task whose worker died
_RESUBMITS = 2  # the driver's, after those
_EXIT_HUNG = 75  # the status a worker holding a hung kernel call exits with


def _ray() -> Any:
    try:
        import ray  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError("a campaign on a cluster needs Ray in this Python (pip install ray)") \
            from e
    return ray


def connect(cluster: str) -> tuple[str, bool]:
    """Connects this process to the cluster (unless it is already): "ray" is the cluster at
    $RAY_ADDRESS, else a new one on this machine that lives as long as this process is
    connected (ray.init(address="local"): not a cluster an earlier `ray start` left behind);
    anything else is an address. Returns (what it is, in words; whether this call connected)."""
    ray = _ray()
    connected = False
    if not ray.is_initialized():
        address = cluster
        if cluster == "ray":
            address = os.environ.get("RAY_ADDRESS") or "local"
        if address != "local":
            _reachable(address)
        # The driver's JAX_PLATFORMS (where set) and rpa settings (RPA_FAILURE_DIR, ...) hold
        # on the workers too.
        env = {k: v for k, v in os.environ.items()
               if k == "JAX_PLATFORMS" or k.startswith("RPA_")}
        try:
            ray.init(address=address, runtime_env={"env_vars": env} if env else None,
                     logging_level="WARNING")
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ValueError(f"cannot connect to the Ray cluster {cluster}: {e}") from e
        connected = True
    resources = ray.cluster_resources()
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    where = ray.get_runtime_context().gcs_address
    return (f"ray {where} ({resources.get('CPU', 0):g} CPUs on {nodes} "
            f"node{'s' if nodes != 1 else ''})", connected)


def _reachable(address: str) -> None:
    """A ValueError at once where nothing listens at a HOST:PORT address (ray.init itself
    retries for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        if address != "auto":
            raise ValueError(f"a Ray address is HOST:PORT or ray://HOST:PORT (got {address!r})")
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as e:
        raise ValueError(f"cannot connect to the Ray cluster {address}: {e.strerror or e}") from e


def task_options(resources: Optional[dict[str, float]]) -> tuple[dict[str, Any], dict[str, float]]:
    """Ray's options for each task from what the user asks a task to hold ({"TPU": 1}), and
    that ask as {resource: amount}, CPU 1 unless given."""
    ask = {"CPU": 1.0, **{k: float(v) for k, v in (resources or {}).items()}}
    for name, amount in ask.items():
        if not amount >= 0:
            raise ValueError(f"worker_resources: {name} takes an amount >= 0 (got {amount!r})")
    rest = {k: v for k, v in ask.items() if k not in ("CPU", "GPU") and v > 0}
    options: dict[str, Any] = {"num_cpus": ask["CPU"], "max_retries": _RAY_RETRIES}
    if ask.get("GPU"):
        options["num_gpus"] = ask["GPU"]
    if rest:
        options["resources"] = rest
    return options, ask


def slots(ask: dict[str, float], total: dict[str, float]) -> int:
    """How many tasks that each hold ask the cluster's total holds at once (at least 1), or a
    ValueError naming what the cluster does not have."""
    n: Optional[int] = None
    for name, amount in ask.items():
        if amount <= 0:
            continue
        have = float(total.get(name, 0))
        if have < amount:
            raise ValueError(f"worker_resources: each task asks {name} {amount:g}; the cluster "
                             f"has {have:g}")
        n = int(have // amount) if n is None else min(n, int(have // amount))
    return max(1, n or 1)


# -- on the workers ------------------------------------------------------------------------------

_KERNELS: dict[str, tuple[Any, Any]] = {}  # campaign token -> (drawer, runner)
_hung = False  # this process holds a kernel call that did not return


def _worker(token: str, box: list[Any], settings: _Settings) -> tuple[Any, Any]:
    if _hung:
        # A hung call's thread cannot be stopped: leave, and Ray runs this task on a fresh
        # worker (the task has not started here, so nothing is lost or counted twice).
        os._exit(_EXIT_HUNG)  # pylint: disable=protected-access
    if token not in _KERNELS:
        while len(_KERNELS) >= 4:  # the oldest campaigns' kernels go
            _KERNELS.pop(next(iter(_KERNELS)))
        try:
            kernel = _ray().get(box[0])
        except Exception as e:  # pylint: disable=broad-except
            lines = str(e).strip().splitlines()  # Ray's errors carry a traceback: one line
            raise RuntimeError(f"the kernel does not load on worker {os.uname().nodename}:"
                               f"{os.getpid()}: {type(e).__name__}: "
                               f"{lines[0] if lines else ''}") from e
        _KERNELS[token] = (settings.drawer(), settings.runner(kernel))
    return _KERNELS[token]


def _note_hang(runner: Any) -> None:
    global _hung  # pylint: disable=global-statement
    _hung = _hung or bool(runner.hung)


def calls_task(token: str, box: list[Any], settings: _Settings, calls: list[_Call]) -> _Ran:
    """A group of calls on a worker (rpa._campaign_calls._run_calls)."""
    drawer, runner = _worker(token, box, settings)
    try:
        return _run_calls(runner, drawer, calls)
    finally:
        _note_hang(runner)


def shrink_task(token: str, box: list[Any], settings: _Settings, call: _Call,
                out: _Outcome) -> list[Finding]:
    """One failure shrunk on a worker (rpa._campaign_calls._shrink_first)."""
    drawer, runner = _worker(token, box, settings)
    try:
        return _shrink_first(call, out, drawer, runner, settings.shrink_calls)
    finally:
        _note_hang(runner)


# -- the driver ----------------------------------------------------------------------------------

def run(kernel: Callable[..., Any], settings: _Settings, budget: _Budget, tally: _Tally,
        cluster: str, resources: Optional[dict[str, float]], progress: bool) -> None:
    """The campaign's calls as Ray tasks, tallied into tally as they finish (module docstring)."""
    ray = _ray()
    options, ask = task_options(resources)
    result = tally.result
    result.cluster, connected = connect(cluster)
    try:
        capacity = slots(ask, ray.cluster_resources())
        _drive(ray, kernel, settings, budget, tally, options, capacity, progress)
    finally:
        if connected:
            ray.shutdown()


def _drive(ray: Any, kernel: Callable[..., Any], settings: _Settings, budget: _Budget,
           tally: _Tally, options: dict[str, Any], capacity: int, progress: bool) -> None:
    result = tally.result
    run_calls = ray.remote(calls_task).options(**options)
    # A part of a group that killed every worker it ran on: tried twice, not 4 x 3 times.
    run_part = ray.remote(calls_task).options(**{**options, "max_retries": 1})
    run_shrink = ray.remote(shrink_task).options(**options)
    token = uuid.uuid4().hex
    box = [ray.put(kernel)]  # in a list: the tasks fetch it once per worker, not per task
    pending: dict[Any, tuple[str, Any]] = {}  # task -> ("calls", group) or ("shrink", signature)
    sent: dict[int, int] = {}  # a group's first call -> times the driver sent it
    parts: set[int] = set()  # first calls of the parts of groups being split
    queue: list[list[_Call]] = []
    shrinking: set[str] = set()
    drawing = True
    last = time.monotonic()

    def send(group: list[_Call], part: bool = False) -> None:
        sent[group[0].index] = sent.get(group[0].index, 0) + 1
        if part:
            parts.add(group[0].index)
        ref = (run_part if part else run_calls).remote(token, box, settings,
                                                       [c.bare() for c in group])
        pending[ref] = ("calls", group)

    try:
        while True:
            # Keep every slot busy and one more task queued behind each.
            while drawing and len(pending) < 2 * capacity:
                if queue and budget.out_of_time(budget.planner.planned > 0):
                    queue.clear()  # seconds= is up: what is drawn and not sent is not run
                if not queue:
                    drawn = budget.next_batch()
                    if drawn is None:
                        drawing = False
                        result.stopped = budget.planner.exhausted_line() or result.stopped
                        break
                    queue.extend(_groups(drawn))
                send(queue.pop(0))
            if not drawing and not queue and not any(w == "calls" for w, _ in pending.values()):
                # The calls are done: shrink each failure's first call, on the workers.
                for signature, call, out in tally.unshrunk():
                    if out.kind == "hang":  # not shrunk: its call cannot be taken back
                        tally.shrunk(signature, _shrink_first(call, out, None, None, 0))
                    elif signature not in shrinking:
                        shrinking.add(signature)
                        pending[run_shrink.remote(token, box, settings, call, out)] = (
                            "shrink", signature)
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                what, item = pending.pop(ref)
                try:
                    got = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    # The harness failed in the task (the kernel did not load there, say): not
                    # the kernel's finding. One line, from the task's own exception.
                    cause = getattr(e, "cause", None) or e
                    raise RuntimeError(f"a task failed on the cluster: {cause}") from e
                except ray.exceptions.RayError as e:
                    # The worker died each time Ray ran the task (or its node went away).
                    if what != "calls":
                        continue  # a shrink that kills its worker: the finding stays as drawn
                    first = item[0].index
                    if first not in parts and sent[first] <= _RESUBMITS:
                        result.resubmitted += 1
                        send(item)
                    elif len(item) > 1:
                        # Every try died: split the group, so that the calls that do not
                        # crash are run and the one that does is found.
                        result.resubmitted += 2
                        half = len(item) // 2
                        send(item[:half], part=True)
                        send(item[half:], part=True)
                    else:
                        result.lost += 1
                        result.stopped = (f"{result.lost} calls lost: their worker died each "
                                          f"time they ran ({type(e).__name__})")
                        tries = 2 if first in parts else sent[first] * (1 + _RAY_RETRIES)
                        tally.crashed(item, budget.planner.drawer,
                                      f"the worker died each time it ran this call, {tries} "
                                      f"times ({type(e).__name__}): it crashes the kernel's "
                                      f"process")
                    continue
                if what == "calls":
                    tally.add(got)
                    if got.unrun:  # the kernel hung on a call: the rest go out again
                        result.resubmitted += 1
                        send(got.unrun)
                else:
                    tally.shrunk(item, got)
            now = time.monotonic()
            if progress and now - last >= 10:
                last = now
                print(budget.progress(tally, f"; {len(result.worker_ids)} workers, "
                                      f"{len(pending)} tasks in flight"), file=sys.stderr)
    except KeyboardInterrupt:
        # The tasks in flight are left to end with the job (a driver that connected itself
        # disconnects, and Ray stops the job's workers). ray.cancel is not called: in Ray 2.60 a
        # forced cancel that races a task's reply aborts the driver (task_manager.cc: "Tried to
        # complete task that was not pending"), which would lose the report.
        result.stopped = f"interrupted (Ctrl-C) after {result.calls} calls"


# -- the shipped kernels' cross-checks (python -m rpa.jax.cross_check --pallas N --ray) -----------

def _chunk_task(fn: Callable[[list[Any]], Any], chunk: list[Any]) -> tuple[Any, str]:
    """fn(chunk) on a worker, with what it prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        value = fn(chunk)
    return value, out.getvalue()


def map_in_order(cluster: str, fn: Callable[[list[Any]], Any], items: list[Any], chunk: int,
                 on_result: Callable[[Any, str], None]) -> str:
    """fn over items on the cluster, `chunk` items to a Ray task: fn(a chunk) returns a value
    (a tally of its items) and prints lines; on_result(value, printed) is called in the items'
    order, each chunk as soon as every chunk before it is in, so that the output reads as a run
    on one machine does. fn must be importable on the workers (a module-level function). A
    worker that dies: Ray runs its task again, and the driver past that (_RESUBMITS times);
    then RuntimeError. Returns what the cluster is, in words."""
    ray = _ray()
    where, connected = connect(cluster)
    try:
        run = ray.remote(_chunk_task).options(max_retries=_RAY_RETRIES)
        chunks = [items[k:k + chunk] for k in range(0, len(items), max(1, chunk))]
        # Two chunks in flight per slot: the rest wait here, not in the object store.
        window = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: dict[Any, int] = {}
        sent = dict.fromkeys(range(len(chunks)), 0)
        done: dict[int, tuple[Any, str]] = {}
        next_k = to_send = 0

        def send(k: int) -> None:
            sent[k] += 1
            pending[run.remote(fn, chunks[k])] = k

        while to_send < len(chunks) and len(pending) < window:
            send(to_send)
            to_send += 1
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                k = pending.pop(ref)
                try:
                    done[k] = ray.get(ref)
                except ray.exceptions.RayTaskError:
                    raise
                except ray.exceptions.RayError as e:
                    if sent[k] > _RESUBMITS:
                        raise RuntimeError(f"chunk {k} of {len(chunks)}: its worker died each of "
                                           f"{sent[k] * (1 + _RAY_RETRIES)} times "
                                           f"({type(e).__name__})") from e
                    send(k)
                    continue
                if to_send < len(chunks):
                    send(to_send)
                    to_send += 1
            while next_k in done:
                on_result(*done.pop(next_k))
                next_k += 1
    finally:
        if connected:
            ray.shutdown()
    return where


def add_tallies(into: Any, other: Any, rows: Optional[dict[str, Callable[[list, list], None]]]
                = None) -> None:
    """other's counts into into (two instances of one tally dataclass): numbers add,
    Counters add, lists extend, nested dataclasses and dicts of Counters add key by key; the
    fields named in rows are dicts of rows, each row combined by rows[field](mine, theirs)."""
    for field in dataclasses.fields(into):
        a, b = getattr(into, field.name), getattr(other, field.name)
        if rows and field.name in rows:
            for key, row in b.items():
                if key in a:
                    rows[field.name](a[key], row)
                else:
                    a[key] = list(row)
        elif isinstance(a, collections.Counter):
            a.update(b)
        elif isinstance(a, dict):
            for key, counter in b.items():
                a.setdefault(key, collections.Counter()).update(counter)
        elif isinstance(a, list):
            a.extend(b)
        elif dataclasses.is_dataclass(a):
            add_tallies(a, b)
        elif isinstance(a, (int, float)):
            setattr(into, field.name, a + b)
        else:
            raise TypeError(f"add_tallies: {type(into).__name__}.{field.name} is a "
                            f"{type(a).__name__}")


def row_combiner(ops: str) -> Callable[[list, list], None]:
    """A row's columns combined by ops, one letter each: "+" adds, "m" keeps the larger."""
    def combine(mine: list, theirs: list) -> None:
        for k, op in enumerate(ops):
            mine[k] = mine[k] + theirs[k] if op == "+" else max(mine[k], theirs[k])
    return combine
