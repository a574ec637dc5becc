"""Round trip between tools/rpa_case.py and the C++ case reader/writer.

    /usr/bin/python3 tools/test_rpa_case.py --case-echo PATH/TO/case_echo

Each case is written with save_case, echoed through case_echo (read_case_file, then
write_case_file), loaded back with load_case and compared bit for bit. Corrupted files
must make case_echo exit 3 with exactly one line on stderr.
"""

import argparse
import io
import math
import os
import subprocess
import sys
import tempfile
import traceback
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpa_case  # noqa: E402  (after the path tweak above)

FLOAT_NAN_WITH_PAYLOAD = np.array([0x7FC01234], np.uint32).view(np.float32)[0]


def base_arrays(rng, q_bits=None, kv_bits=None, nan_padding=False):
    """A small valid-shaped batch: 2 sequences, 4 tokens, 4 q heads, 2 kv heads, D 8."""
    t, hq, hkv, d, pages, page_size = 4, 4, 2, 8, 3, 4
    q = rng.standard_normal((t, hq, d)).astype(np.float32)
    kv = rng.standard_normal((pages, page_size, 2 * hkv, d)).astype(np.float32)
    if nan_padding:
        q[-1] = np.nan
        kv[-1, 2:] = FLOAT_NAN_WITH_PAYLOAD
    if q_bits is not None:
        q = rng.integers(0, 2**16, q.shape, dtype=np.uint16)
        if nan_padding:
            q[-1] = 0x7FC1  # a bfloat16 NaN with a payload
    if kv_bits is not None:
        kv = rng.integers(0, 2**kv_bits, kv.shape, dtype=np.uint16 if kv_bits == 16 else np.uint8)
        if nan_padding:
            kv[-1, 2:] = 0x7F if kv_bits == 8 else 0xFFC3
    return dict(
        q=q,
        kv_pages=kv,
        kv_lens=np.array([3, 7], np.int32),
        page_indices=np.array([[0, 1], [2, 0]], np.int32),
        cu_q_lens=np.array([0, 1, 4], np.int32),
        num_seqs=np.array([2], np.int32),
    )


ALL_PARAMS = dict(sm_scale=0.125, sliding_window=5, soft_cap=30.0, mask_value=-1e30,
                  k_scale=0.5, v_scale=2.0, num_kv_pages_per_block=2,
                  num_queries_per_block=16, vmem_limit_bytes=64 << 20)


def cases():
    """(name, save_case kwargs) pairs covering every dtype and parameter combination."""
    rng = np.random.default_rng(1)
    yield "float32_no_params", base_arrays(rng)
    yield "float32_all_params", dict(base_arrays(rng), **ALL_PARAMS)
    yield "float32_soft_cap_negative_zero", dict(base_arrays(rng), soft_cap=-0.0,
                                                  sm_scale=-0.0)
    yield "float32_nan_params", dict(base_arrays(rng), soft_cap=float("nan"),
                                     mask_value=float("-inf"), k_scale=float("inf"))
    yield "float32_nan_padding_out_expected", dict(
        base_arrays(rng, nan_padding=True),
        out=np.full((4, 4, 8), np.nan, np.float32),
        expected=rng.standard_normal((4, 4, 8)).astype(np.float32))
    a = base_arrays(rng, q_bits=16, kv_bits=16, nan_padding=True)
    yield "bfloat16_q_kv", dict(a, q_dtype="bfloat16", kv_dtype="bfloat16",
                                out=rng.integers(0, 2**16, (4, 4, 8), dtype=np.uint16),
                                sm_scale=0.5, sliding_window=3)
    for fp8 in ("float8_e4m3fn", "float8_e5m2"):
        yield f"bfloat16_q_{fp8}_kv", dict(base_arrays(rng, q_bits=16, kv_bits=8,
                                                       nan_padding=True),
                                           q_dtype="bfloat16", kv_dtype=fp8, k_scale=0.25,
                                           v_scale=4.0)
        yield f"float32_q_{fp8}_kv", dict(base_arrays(rng, kv_bits=8), kv_dtype=fp8,
                                          expected=rng.standard_normal((4, 4, 8)).astype(
                                              np.float32))
    yield "float32_q_bfloat16_kv_compressed", dict(base_arrays(rng, kv_bits=16),
                                                   kv_dtype="bfloat16", compressed=True,
                                                   **ALL_PARAMS)
    int64_index = base_arrays(rng)
    int64_index["page_indices"] = int64_index["page_indices"].astype(np.int64)
    yield "int64_page_indices_kept", int64_index
    yield "explicit_float32_dtype_names", dict(base_arrays(rng), q_dtype="float32",
                                               kv_dtype="float32")
    if rpa_case.ml_dtypes is not None:
        md = rpa_case.ml_dtypes
        a = base_arrays(rng)
        a["q"] = a["q"].astype(md.bfloat16)
        for fp8 in (md.float8_e4m3fn, md.float8_e5m2):
            b = dict(a, kv_pages=a["kv_pages"].astype(fp8))
            yield f"ml_dtypes_arrays_{np.dtype(fp8).name}", dict(b, out=a["q"].copy())


def same_array(a, b):
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def check_round_trip(case_echo, tmp, name, kwargs):
    src = os.path.join(tmp, name + ".npz")
    dst = os.path.join(tmp, name + ".echo.npz")
    rpa_case.save_case(src, **kwargs)
    run = subprocess.run([case_echo, src, dst], capture_output=True, text=True)
    assert run.returncode == 0, f"case_echo exited {run.returncode}: {run.stderr.strip()}"
    before = rpa_case.load_case(src)
    after = rpa_case.load_case(dst)
    for key in rpa_case.REQUIRED_ARRAYS + rpa_case.OPTIONAL_ARRAYS:
        assert same_array(before[key], after[key]), f"{key} differs after the echo"
    # The C++ writer names only dtypes numpy lacks; float32 is implied.
    for key in rpa_case.DTYPE_MEMBERS:
        want = None if before[key] in (None, "float32") else before[key]
        assert after[key] == want, f"{key}: {before[key]!r} became {after[key]!r}"
    for key in rpa_case.FLOAT_PARAMS:
        b, a = before[key], after[key]
        assert rpa_case.same_float(b, a), f"{key}: {b!r} became {a!r}"
        if b is not None and b == 0.0:
            assert math.copysign(1.0, b) == math.copysign(1.0, a), f"{key}: sign of zero lost"
    for key in rpa_case.INT_PARAMS:
        assert before[key] == after[key] and type(after[key]) is type(before[key]), key
    # And what load_case reads is what save_case was given.
    for key in rpa_case.REQUIRED_ARRAYS:
        given = np.asarray(kwargs[key])
        assert np.asarray(before[key]).tobytes() == given.tobytes(), f"{key} not saved as given"
    for key, value in kwargs.items():
        if key in rpa_case.FLOAT_PARAMS:
            assert rpa_case.same_float(float(value), before[key]), f"{key} not saved as given"
        elif key in rpa_case.INT_PARAMS:
            assert before[key] == value, f"{key} not saved as given"


def corrupted_files(tmp):
    """(name, bytes, a part of the message) of files case_echo must refuse."""
    rng = np.random.default_rng(2)
    good = os.path.join(tmp, "good.npz")
    rpa_case.save_case(good, **base_arrays(rng))
    data = open(good, "rb").read()
    yield "truncated", data[: len(data) // 2], "not a zip archive"
    yield "not_a_zip", b"this is not a zip archive\n", "not a zip archive"
    flipped = bytearray(data)
    at = data.index(b"NUMPY") + 200  # inside q's data: only the CRC can tell
    flipped[at] ^= 0xFF
    yield "crc_mismatch", bytes(flipped), "member 'q.npy': CRC error"

    def npz(**arrays):
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    arrays = base_arrays(rng)
    yield ("void_bfloat16", npz(**dict(arrays, q=arrays["q"].view(np.uint16).view("V2"))),
           "x.view(np.uint16)")
    if rpa_case.ml_dtypes is not None:
        md = rpa_case.ml_dtypes
        yield ("ml_dtypes_bfloat16_saved_directly",
               npz(**dict(arrays, q=arrays["q"].astype(md.bfloat16))),
               "member 'q.npy': descr '<V2' is an opaque void type")
        yield ("ml_dtypes_float8_saved_directly",
               npz(**dict(arrays, kv_pages=arrays["kv_pages"].astype(md.float8_e5m2))),
               "x.view(np.uint8)")
    yield ("fortran_order", npz(**dict(arrays, kv_pages=np.asfortranarray(arrays["kv_pages"]))),
           "member 'kv_pages.npy': fortran_order True")
    yield ("big_endian", npz(**dict(arrays, q=arrays["q"].astype(">f4"))),
           "big-endian data is not supported")
    yield "unknown_member", npz(**dict(arrays, foo=np.zeros(1))), "unknown member 'foo.npy'"
    missing = dict(arrays)
    del missing["kv_lens"]
    yield "missing_member", npz(**missing), "missing required member 'kv_lens.npy'"
    yield ("q_dtype_mismatch", npz(**dict(arrays, q_dtype=np.array("bfloat16"))),
           "member 'q.npy': q_dtype is bfloat16")
    yield ("int_soft_cap", npz(**dict(arrays, soft_cap=np.int64(3))),
           "member 'soft_cap.npy': soft_cap must be a 0-d float64 or float32 array")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        with zipfile.ZipFile(good) as g:
            for info in g.infolist():
                body = g.read(info)
                if info.filename == "q.npy":
                    body = body[:-16]
                z.writestr(info.filename, body)
    yield "truncated_npy_data", buf.getvalue(), "member 'q.npy': truncated data"


def check_refused(case_echo, tmp, name, data, message):
    path = os.path.join(tmp, "bad_" + name + ".npz")
    with open(path, "wb") as f:
        f.write(data)
    run = subprocess.run([case_echo, path, os.path.join(tmp, "unused.npz")],
                         capture_output=True, text=True)
    assert run.returncode == 3, f"exit {run.returncode}, stderr {run.stderr!r}"
    assert run.stderr.endswith("\n") and run.stderr.count("\n") == 1, \
        f"stderr is not one line: {run.stderr!r}"
    assert run.stderr.startswith(path + ": "), f"stderr lacks the path: {run.stderr!r}"
    assert message in run.stderr, f"stderr lacks {message!r}: {run.stderr!r}"
    print(f"  {name}: {run.stderr.strip()[len(path) + 2:]}")


def check_save_case_refusals():
    rng = np.random.default_rng(3)
    arrays = base_arrays(rng, q_bits=16)
    for kwargs, error in (
            (dict(arrays), ValueError),                       # uint16 bits, no q_dtype
            (dict(arrays, q_dtype="float16"), ValueError),    # not a case dtype
            (dict(arrays, q_dtype="bfloat16", bogus=1), TypeError),
            (dict(arrays, q_dtype="bfloat16", sliding_window=2.5), TypeError),
            (dict(arrays, q_dtype="bfloat16", soft_cap="x"), TypeError),
            (dict(arrays, q_dtype="bfloat16", out=np.zeros((4, 4, 8), np.float32)),
             ValueError),
    ):
        try:
            rpa_case.save_case(io.BytesIO(), **kwargs)
        except error:
            continue
        raise AssertionError(f"save_case accepted {sorted(kwargs)}")


def check_zero_d_kept(tmp):
    """A 0-d num_seqs is a shape error JAX reports; saving must not make it (1,)."""
    arrays = dict(q=np.zeros((2, 1, 1), np.float32), kv_pages=np.zeros((1, 2, 2, 1), np.float32),
                  kv_lens=np.array([1], np.int32), page_indices=np.zeros((1, 1), np.int32),
                  cu_q_lens=np.array([0, 1], np.int32), num_seqs=np.array(1, np.int32))
    path = os.path.join(tmp, "zero_d.npz")
    rpa_case.save_case(path, **arrays)
    assert rpa_case.load_case(path)["num_seqs"].shape == (), "num_seqs became 1-d"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case-echo", required=True, help="path to the case_echo binary")
    args = parser.parse_args()
    passed = failed = 0

    def attempt(label, fn, *fn_args):
        nonlocal passed, failed
        try:
            fn(*fn_args)
            passed += 1
            print(f"ok    {label}")
        except Exception:  # report every failure, not only the first
            failed += 1
            print(f"FAIL  {label}")
            traceback.print_exc()

    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in cases():
            attempt(f"round trip {name}", check_round_trip, args.case_echo, tmp, name, kwargs)
        for name, data, message in corrupted_files(tmp):
            attempt(f"refused {name}", check_refused, args.case_echo, tmp, name, data, message)
        attempt("save_case refusals", check_save_case_refusals)
        attempt("0-d arrays keep their shape", check_zero_d_kept, tmp)
    print(f"rpa_case round trip: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
