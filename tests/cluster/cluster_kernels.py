"""Kernels the cluster tests send to the workers (importable there: the test's cluster starts
its workers with this folder on PYTHONPATH)."""
import json
import os
import time
import zlib

import numpy as np

import rpa


def slow(*args, **kwargs):
    """rpa's tiled kernel, 50 ms a call: long enough for both workers to take tasks."""
    time.sleep(0.05)
    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))


def slip(*args, **kwargs):
    """Row 2 of the output 1% off: a mismatch on every call of three tokens or more."""
    time.sleep(0.02)
    out = np.array(rpa.kernel(rpa.Case.from_call(*args, **kwargs)))
    if out.shape[0] > 2:
        out[2] *= 1.01
    return out


def marks_pid(*args, **kwargs):
    """As slow, with 200 ms a call, writing this process's pid into $RPA_PID_DIR first: the
    test kills a worker it sees there, in the middle of a call."""
    folder = os.environ.get("RPA_PID_DIR")
    if folder:
        with open(os.path.join(folder, str(os.getpid())), "w", encoding="utf-8"):
            pass
    time.sleep(0.2)
    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))


def hangs_sometimes(*args, **kwargs):
    """Never returns on about one call in 16 (chosen by a hash of q, so the same calls hang on
    every run), else rpa's tiled kernel."""
    if zlib.crc32(np.ascontiguousarray(args[0]).tobytes()) % 16 == 0:
        time.sleep(3600)
    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))


def records_resources(*args, **kwargs):
    """As slow, writing what Ray gave the task into $RPA_PID_DIR/<pid>.json."""
    import ray  # pylint: disable=import-outside-toplevel
    held = ray.get_runtime_context().get_assigned_resources()
    with open(os.path.join(os.environ["RPA_PID_DIR"], f"{os.getpid()}.json"), "w",
              encoding="utf-8") as f:
        json.dump(held, f)
    return slow(*args, **kwargs)


def kills_its_worker(*args, **kwargs):
    """Ends its worker process on about one call in 16 (by a hash of q, as hangs_sometimes),
    as a segfault would; else rpa's tiled kernel."""
    if zlib.crc32(np.ascontiguousarray(args[0]).tobytes()) % 16 == 0:
        os._exit(1)  # pylint: disable=protected-access
    return rpa.kernel(rpa.Case.from_call(*args, **kwargs))


def v3_literal(*args, **kwargs):
    """tpu-inference v3's literal schedule (rpa's model of kernel.py) as a v3 kernel: what a
    native-mode campaign judges against, so it agrees on every call."""
    case = rpa.Case.from_v3_call(*args, dialect="tpu_inference_v3", **kwargs)
    return rpa.kernel(case, schedule="literal", mode="native")
