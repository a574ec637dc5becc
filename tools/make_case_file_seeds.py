#!/usr/bin/env python3
"""Writes corpus/fuzz/fuzz_case_file/ and corpus/fuzz/fuzz_npy/: the seed corpora of the
two case-file fuzz targets.

fuzz_case_file hands its bytes to rpa::read_case_bytes, which must either refuse them with
one line or load a case whose written form reads back to the same case (DESIGN.md sections
7 and 10). Its seeds are small archives that reach each part of that reader: valid cases
of both dialects in every dtype and layout numpy writes, broken zips, broken .npy members
and well-formed members that break the case file's own rules. fuzz_npy hands its bytes to
rpa::parse_npy, the parser the reader runs on every member; its seeds are bare .npy files:
every dtype, every version, the header-length field at each boundary, the file cut in
every field, shapes against their data. Each seed records whether it must be loaded or
refused (and with which words); --check runs the C++ code on every seed (in process,
through the rpa package: rpa.Case.load, then writes what it loaded and reads that back;
rpa._rpa.parse_npy for the bare files) and prints seed -> verdict, failing on any seed
that does not get the verdict recorded here.

The bytes are deterministic: zip member times are fixed (2000-01-01 00:00), so running the
script twice writes identical files (deflated members depend on zlib's output, which is
stable for a given zlib).

Run from anywhere with the rpa package (scripts/python_venv.sh build/venv):
    build/venv/bin/python tools/make_case_file_seeds.py [--check] [--out DIR] [--committed DIR]
"""
import argparse
import io
import os
import struct
import sys
import time
import zipfile
import zlib

import ml_dtypes
import numpy as np

import rpa
from rpa import _rpa

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(ROOT, "corpus", "fuzz")

# A fixed member time (what numpy would write at 2000-01-01 00:00 local time) keeps the
# bytes reproducible; as a DOS date/time pair it is date 0x2821, time 0.
DATE_TIME = (2000, 1, 1, 0, 0, 0)
DOS_DATE = ((DATE_TIME[0] - 1980) << 9) | (DATE_TIME[1] << 5) | DATE_TIME[2]
DOS_TIME = 0
NPY_MAGIC = b"\x93NUMPY"
FLT_MAX = float(np.finfo(np.float32).max)
MiB = 1 << 20

# ---------------------------------------------------------------------------------------
# .npy members


def npy(a, version=None):
    """An .npy member exactly as np.save writes it (version 1.0 unless asked)."""
    f = io.BytesIO()
    np.lib.format.write_array(f, np.asanyarray(a), version=version, allow_pickle=False)
    return f.getvalue()


def header(descr, shape, fortran=False):
    """The header dict literal numpy writes, as text."""
    return "{'descr': %r, 'fortran_order': %r, 'shape': %r, }" % (descr, fortran, tuple(shape))


def npy_raw(text, data=b"", version=(1, 0), magic=NPY_MAGIC, pad=True, header_len=None):
    """An .npy member built by hand: any header text (str or bytes), any data, any version.

    pad: pad the header with spaces and '\\n' so the data starts at a multiple of 64, as
    numpy does. header_len: the length field to write instead of the true one.
    """
    h = text.encode("utf-8") if isinstance(text, str) else text
    len_width = 2 if version[0] == 1 else 4
    if pad:
        h += b" " * (-(len(magic) + 2 + len_width + len(h) + 1) % 64) + b"\n"
    length = len(h) if header_len is None else header_len
    return magic + bytes(version) + length.to_bytes(len_width, "little") + h + data


# ---------------------------------------------------------------------------------------
# Zip archives


class _Unseekable(io.RawIOBase):
    """A write-only stream zipfile cannot seek: it then writes data descriptors, as
    np.savez does when handed a pipe or a socket."""

    def __init__(self):
        super().__init__()
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def savez(members, method=zipfile.ZIP_STORED, zip64=True, streamed=False):
    """An archive laid out as np.savez / np.savez_compressed lay it out: zipfile, one
    member per (name, bytes) in order, a zip64 extra field in every local header
    (force_zip64, as numpy passes), mode 0600, and a fixed time instead of now."""
    target = _Unseekable() if streamed else io.BytesIO()
    with zipfile.ZipFile(target, "w", compression=method, allowZip64=True) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=DATE_TIME)
            info.compress_type = method
            info.create_system = 3
            info.external_attr = 0o600 << 16
            with zf.open(info, "w", force_zip64=zip64) as f:
                f.write(data)
    return bytes(target.buf) if streamed else target.getvalue()


def deflate(data, level=6):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def raw_zip(entries, comment=b"", count=None, zip64_end=False, zip64_locator_offset=None):
    """A zip archive written field by field, for what zipfile will not write.

    Each entry is a dict: name (str or bytes), data (the uncompressed bytes), and optional
    method (0 stored, 8 deflated, or any number), payload (the bytes stored, default data
    or its deflate stream), crc, usize, csize (declared in both headers), flags,
    local_name (a different name in the local header), local_extra, central_extra,
    external_attr. count: the member count the end record declares. zip64_end: add a
    zip64 end record and locator and put 0xFFFF.. in the end record, as a zip64 writer
    does; zip64_locator_offset overrides where the locator says that record is.
    """
    body = bytearray()
    central = bytearray()
    for e in entries:
        name = e["name"].encode() if isinstance(e["name"], str) else e["name"]
        local_name = e.get("local_name", name)
        local_name = local_name.encode() if isinstance(local_name, str) else local_name
        data = e.get("data", b"")
        method = e.get("method", 0)
        payload = e.get("payload", data if method == 0 else deflate(data))
        crc = e.get("crc", zlib.crc32(data))
        usize = e.get("usize", len(data))
        csize = e.get("csize", len(payload))
        flags = e.get("flags", 0)
        lextra = e.get("local_extra", b"")
        cextra = e.get("central_extra", b"")
        offset = len(body)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, DOS_TIME, DOS_DATE,
                            crc, csize, usize, len(local_name), len(lextra))
        body += local_name + lextra + payload
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x0314, 20, flags, method,
                               DOS_TIME, DOS_DATE, crc, csize, usize, len(name), len(cextra),
                               0, 0, 0, e.get("external_attr", 0o600 << 16), offset)
        central += name + cextra
    n = len(entries) if count is None else count
    cd_offset = len(body)
    out = body + central
    if zip64_end:
        record = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x032D, 45, 0, 0, n, n, len(central),
                           cd_offset)
        at = record if zip64_locator_offset is None else zip64_locator_offset
        out += struct.pack("<IIQI", 0x07064B50, 0, at, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF,
                           0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_offset,
                           len(comment))
    return bytes(out + comment)


def members_of(archive):
    """[(name, bytes)] of an archive, in order."""
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def layout(archive):
    """{name: (local header offset, data offset, stored size)} and the central directory
    offset of an archive zipfile can read."""
    spans = {}
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        for i in z.infolist():
            nlen, xlen = struct.unpack_from("<HH", archive, i.header_offset + 26)
            spans[i.filename] = (i.header_offset, i.header_offset + 30 + nlen + xlen,
                                 i.compress_size)
        cd = z.start_dir
    return spans, cd


def patched(archive, at, new):
    return archive[:at] + new + archive[at + len(new):]


# ---------------------------------------------------------------------------------------
# Cases

# Exactly representable test values and their float8 encodings.
F8_BITS = {
    "float8_e4m3fn": {0.0: 0x00, 1.0: 0x38, -1.0: 0xB8, 0.5: 0x30, -0.5: 0xB0, 0.25: 0x28,
                      2.0: 0x40, "nan": 0x7F},
    "float8_e5m2": {0.0: 0x00, 1.0: 0x3C, -1.0: 0xBC, 0.5: 0x38, -0.5: 0xB8, 0.25: 0x34,
                    2.0: 0x40, "nan": 0x7E},
}


def bits(x, dtype):
    """x (float32 values) in a case file's storage for the logical dtype."""
    x = np.asarray(x, np.float32)
    if dtype == "float32":
        return x
    if dtype == "bfloat16":
        u = x.view(np.uint32).astype(np.uint64)
        # round to nearest even, NaN kept quiet
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    table = F8_BITS[dtype]
    return np.vectorize(lambda v: table["nan" if np.isnan(v) else float(v)],
                        otypes=[np.uint8])(x)


def base_arrays(q_dtype="float32", kv_dtype="float32"):
    """A tiny valid batch: one sequence, q_len 2, kv_len 2, in one page of 2 tokens; the
    second page is never read and holds NaN. head_dim 2; one kv head (two for float8 KV,
    whose combined heads must fill a tile)."""
    hkv = 2 if kv_dtype.startswith("float8") else 1
    hq = hkv
    q = np.array([0.5, -1.0, 0.25, 2.0] * hq, np.float32).reshape(2, hq, 2)
    kv = np.full((2, 2, 2 * hkv, 2), np.nan, np.float32)
    kv[0] = np.array([1.0, -0.5, 0.5, 2.0, -1.0, 0.25, 0.0, 1.0] * hkv).reshape(2, 2 * hkv, 2)
    return dict(q=q, kv=kv, q_bits=bits(q, q_dtype), kv_bits=bits(kv, kv_dtype),
                kv_lens=np.array([2], np.int32), page_indices=np.array([[0]], np.int32),
                cu_q_lens=np.array([0, 2], np.int32), num_seqs=np.array([1], np.int32))


def reference_out(b, q_dtype, sm_scale=1.0):
    """The attention output of base_arrays (causal, no cap or scales) in float64, in q's
    storage dtype: an `out` / `expected` a checker would accept (float8 V rounds p, which
    this ignores; the reader does not look)."""
    q, kv = b["q"].astype(np.float64), b["kv"].astype(np.float64)
    hq = q.shape[1]
    o = np.zeros_like(q)
    for h in range(hq):
        k, v = kv[0, :, 2 * h], kv[0, :, 2 * h + 1]
        s = q[:, h] @ k.T * sm_scale
        s += np.where(np.arange(2)[None, :] > np.arange(2)[:, None], -0.7 * FLT_MAX, 0.0)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        o[:, h] = (p / p.sum(axis=1, keepdims=True)) @ v
    return bits(o.astype(np.float32), q_dtype)


ALL_PARAMS = dict(sm_scale=0.125, sliding_window=4, soft_cap=30.0, mask_value=-1e30,
                  k_scale=0.5, v_scale=2.0, num_kv_pages_per_block=1,
                  num_queries_per_block=8, vmem_limit_bytes=64 * MiB)


def logical(stored, dtype):
    """bits() as an array of the logical dtype (ml_dtypes for bfloat16 and float8)."""
    return stored if dtype == "float32" else stored.view(getattr(ml_dtypes, dtype))


def case(q_dtype="float32", kv_dtype="float32", out=False, expected=False, **params):
    """[(member name, bytes)] of a case as rpa.Case writes it (the C++ writer, whose .npy
    members are numpy's), in the member order np.savez gives keyword arguments: the arrays,
    q_dtype / kv_dtype, the parameters given (in the order given; no sm_scale unless given),
    out, expected."""
    b = base_arrays(q_dtype, kv_dtype)
    extra = {}
    if out or expected:
        o = logical(reference_out(b, q_dtype, params.get("sm_scale", 1.0)), q_dtype)
        if out:
            extra["out"] = o
        if expected:
            extra["expected"] = o
    c = rpa.Case(q=logical(b["q_bits"], q_dtype), kv_pages=logical(b["kv_bits"], kv_dtype),
                 kv_lens=b["kv_lens"], page_indices=b["page_indices"],
                 cu_q_lens=b["cu_q_lens"], num_seqs=b["num_seqs"], **extra, **params)
    order = ["q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs", "q_dtype",
             "kv_dtype", *params, "out", "expected"]
    members = {name: data for name, data in members_of(c.to_bytes())}
    return [(n + ".npy", members[n + ".npy"]) for n in order if n + ".npy" in members]


def replace(members, name, data):
    """members with member `name` (stem or file name) replaced, or added if absent."""
    name = name if name.endswith(".npy") else name + ".npy"
    out = [(n, data if n == name else d) for n, d in members]
    if name not in dict(members):
        out.append((name, data))
    return out


def drop(members, name):
    return [(n, d) for n, d in members if n != name + ".npy"]


def entries(members, **overrides):
    """raw_zip entries for members, stored; overrides[stem] updates that member's dict."""
    out = []
    for n, d in members:
        e = dict(name=n, data=d)
        stem = n[:-4].decode("latin-1") if isinstance(n, bytes) else n[:-4]
        e.update(overrides.get(stem, {}))
        out.append(e)
    return out


# ---------------------------------------------------------------------------------------
# The seeds: (name, bytes, expectation). An expectation is "load", or the words the
# reader's one error line must contain.

LOAD = "load"


def valid_seeds():
    f32 = case()
    yield "valid_f32_savez", savez(f32), LOAD
    yield "valid_f32_all_params_savez", savez(case(**ALL_PARAMS)), LOAD
    yield "valid_f32_all_params_compressed", savez(case(**ALL_PARAMS), zipfile.ZIP_DEFLATED), LOAD
    yield "valid_f32_out_expected_savez", savez(case(out=True, expected=True)), LOAD
    yield "valid_bf16_savez", savez(case("bfloat16", "bfloat16")), LOAD
    yield ("valid_bf16_out_expected_compressed",
           savez(case("bfloat16", "bfloat16", out=True, expected=True, sm_scale=0.5),
                 zipfile.ZIP_DEFLATED), LOAD)
    yield "valid_f32_kv_e4m3_savez", savez(case("float32", "float8_e4m3fn")), LOAD
    yield "valid_f32_kv_e5m2_compressed", savez(case("float32", "float8_e5m2"),
                                                zipfile.ZIP_DEFLATED), LOAD
    yield ("valid_bf16_kv_e4m3_all_params_compressed",
           savez(case("bfloat16", "float8_e4m3fn", **ALL_PARAMS), zipfile.ZIP_DEFLATED), LOAD)
    yield ("valid_bf16_kv_e5m2_out_savez",
           savez(case("bfloat16", "float8_e5m2", out=True, k_scale=1.0, v_scale=1.0)), LOAD)
    # zipfile without force_zip64: what most other zip writers produce.
    yield "valid_plain_zip_stored", savez(f32, zip64=False), LOAD
    yield "valid_plain_zip_deflated", savez(f32, zipfile.ZIP_DEFLATED, zip64=False), LOAD
    # np.savez to a pipe: sizes and CRC follow each member in a (zip64) data descriptor.
    yield "valid_savez_streamed_data_descriptor", savez(f32, streamed=True), LOAD
    yield ("valid_compressed_streamed_data_descriptor",
           savez(f32, zipfile.ZIP_DEFLATED, streamed=True), LOAD)
    # Member order is free: reversed, and the dtype members and parameters first.
    yield "valid_members_reversed", savez(case("bfloat16", "float8_e5m2", **ALL_PARAMS)[::-1]), LOAD
    m = case("bfloat16", "bfloat16", out=True, sm_scale=2.0, soft_cap=5.0)
    first = [x for x in m if x[0] in ("q_dtype.npy", "kv_dtype.npy", "out.npy", "soft_cap.npy")]
    yield "valid_members_dtype_first", savez(first + [x for x in m if x not in first]), LOAD
    yield "valid_raw_zip_stored", raw_zip(entries(f32)), LOAD
    yield "valid_zip64_end_records", raw_zip(entries(f32), zip64_end=True), LOAD
    yield "valid_end_record_comment", raw_zip(entries(f32), comment=b"rpa seed comment"), LOAD
    # Parameter values the writer must carry bit for bit: NaN, -0.0, infinities, extremes.
    yield ("valid_param_edge_values",
           savez(case(sm_scale=-0.0, soft_cap=float("inf"), mask_value=float("nan"),
                      k_scale=float("-inf"), v_scale=5e-324, sliding_window=-(2**63),
                      num_kv_pages_per_block=2**63 - 1, num_queries_per_block=0,
                      vmem_limit_bytes=-1)), LOAD)
    # Parameters in narrower types than the writer's float64 / int64.
    m = case()
    for stem, v in (("sm_scale", np.float32(0.125)), ("soft_cap", np.float32(-0.0)),
                    ("mask_value", np.float32(-0.7 * FLT_MAX)),
                    ("sliding_window", np.int8(-3)), ("num_kv_pages_per_block", np.uint8(255)),
                    ("num_queries_per_block", np.int16(16)),
                    ("vmem_limit_bytes", np.uint64(2**63 - 1))):
        m = replace(m, stem, npy(v))
    yield "valid_params_narrow_types", savez(m), LOAD
    # A q_dtype of float32 is redundant (the writer leaves it out) but allowed.
    yield ("valid_q_dtype_float32_named",
           savez(replace(case(), "q_dtype", npy(np.array("float32")))), LOAD)
    # q_dtype stored wider than its text ('<U16', NUL padded), as np.array(..., 'U16') is.
    yield ("valid_q_dtype_wide_unicode",
           savez(replace(case("bfloat16", "bfloat16"), "q_dtype",
                         npy(np.array("bfloat16", "U16")))), LOAD)
    # The reader leaves ranks and index dtypes to validation: these load, then fail it.
    yield ("valid_read_num_seqs_0d",
           savez(replace(case(), "num_seqs", npy(np.array(1, np.int32)))), LOAD)
    yield ("valid_read_q_0d",
           savez(replace(case(), "q", npy(np.array(0.5, np.float32)))), LOAD)
    yield ("valid_read_index_arrays_float",
           savez(replace(case(), "kv_lens", npy(np.array([2.0], np.float32)))), LOAD)
    yield ("valid_read_index_arrays_bool_uint64",
           savez(replace(replace(case(), "num_seqs", npy(np.array([True]))),
                         "cu_q_lens", npy(np.array([0, 2], np.uint64)))), LOAD)
    yield ("valid_read_zero_size_q",
           savez(replace(case(), "q", npy(np.zeros((0, 1, 2), np.float32)))), LOAD)
    yield ("valid_read_q_float64",
           savez(replace(case(), "q", npy(base_arrays()["q"].astype(np.float64)))), LOAD)
    yield ("valid_read_q_float16",
           savez(replace(case(), "q", npy(base_arrays()["q"].astype(np.float16)))), LOAD)


def zip_seeds():
    f32 = case()
    stored = savez(f32)
    spans, cd = layout(stored)
    q_local, q_data, q_size = spans["q.npy"]
    yield "zip_empty_file", b"", "not a zip archive: empty"
    yield "zip_not_a_zip_text", b"this is not a zip archive, just text\n", "not a zip archive"
    yield "zip_not_a_zip_bare_npy", dict(f32)["q.npy"], "not a zip archive"
    yield "zip_local_magic_only", b"PK\x03\x04", "not a zip archive"
    yield "zip_truncated_in_local_header", stored[:20], "not a zip archive"
    yield "zip_truncated_in_member_data", stored[:q_data + q_size // 2], "not a zip archive"
    yield "zip_truncated_in_central_directory", stored[:cd + 30], "not a zip archive"
    yield "zip_truncated_in_end_record", stored[:-10], "not a zip archive"
    yield "zip_truncated_before_end_record", stored[:-22], "not a zip archive"
    # The last member's data cut short, directory and end record intact behind it.
    last, last_data = f32[-1]
    yield ("zip_member_data_short_directory_intact",
           raw_zip(entries(f32, **{last[:-4]: dict(payload=last_data[:-8],
                                                   csize=len(last_data))})), None)
    yield "zip_end_record_only", raw_zip([]), "missing required member 'q.npy'"
    # One bit of q's data flipped, CRC left as it was: only the CRC check can catch it.
    yield ("zip_bad_crc_stored",
           patched(stored, q_data + q_size - 1, bytes([stored[q_data + q_size - 1] ^ 0x01])),
           "member 'q.npy'")
    yield ("zip_bad_crc_declared_deflated",
           raw_zip(entries(f32, q=dict(method=8, crc=0x12345678))), "member 'q.npy'")
    # BFINAL=1, BTYPE=11: a reserved block type, so inflate fails at once.
    yield ("zip_bad_deflate_stream",
           raw_zip(entries(f32, kv_pages=dict(method=8, payload=b"\x07" + b"\x00" * 40))),
           "member 'kv_pages.npy'")
    yield ("zip_deflate_stream_cut_short",
           raw_zip(entries(f32, q=dict(method=8, payload=deflate(dict(f32)["q.npy"])[:-6]))),
           "member 'q.npy'")
    yield ("zip_duplicate_member_names",
           raw_zip(entries(f32 + [("q.npy", dict(f32)["q.npy"])])), "duplicate member 'q.npy'")
    yield ("zip_directory_entry",
           raw_zip(entries([("arrays/", b"")] + f32)), "unknown member 'arrays/'")
    yield ("zip_member_in_directory",
           raw_zip(entries([("arrays/q.npy", dict(f32)["q.npy"])] + f32[1:])),
           "unknown member 'arrays/q.npy'")
    # General purpose flag bit 0: traditional PKWARE encryption, no password to give.
    yield "zip_encrypted_flag", raw_zip(entries(f32, q=dict(flags=1))), "member 'q.npy'"
    yield ("zip_strong_encryption_flag",
           raw_zip(entries(f32, num_seqs=dict(flags=0x41))), "member 'num_seqs.npy'")
    yield "zip_unknown_method", raw_zip(entries(f32, q=dict(method=99))), "inconsistent"
    yield ("zip_lzma_member", savez(f32, zipfile.ZIP_LZMA, zip64=False), None)
    yield ("zip_bzip2_member", savez(f32, zipfile.ZIP_BZIP2, zip64=False), None)
    # Declared sizes larger than the data: past a 64 MiB cap, and under it.
    yield ("zip_declares_4gib_member",
           raw_zip(entries(f32, q=dict(usize=0xFFFFFFF0))), "q.npy")
    yield ("zip_deflated_declares_4gib",
           raw_zip(entries(f32, kv_lens=dict(method=8, usize=0xFFFFFFF0))), "kv_lens.npy")
    z64 = dict(usize=0xFFFFFFFF, csize=0xFFFFFFFF,
               local_extra=struct.pack("<HHQQ", 1, 16, 1 << 62, q_size),
               central_extra=struct.pack("<HHQQ", 1, 16, 1 << 62, q_size))
    yield "zip64_extra_declares_2_62_bytes", raw_zip(entries(f32, q=z64)), "more than the"
    yield ("zip_members_declare_12gib_in_all",
           raw_zip(entries(f32, **{m: dict(method=8, usize=0xFFFFFFF0)
                                  for m in ("q", "kv_pages", "kv_lens")})), "more than the")
    # Each member under fuzz_case_file's cap, the three together over it.
    yield ("zip_members_declare_over_cap_in_all",
           raw_zip(entries(f32, **{m: dict(method=8, usize=600 << 10)
                                  for m in ("q", "kv_pages", "kv_lens")})), "declare")
    # Under fuzz_case_file's cap (1032 bytes per input byte): allocated, then found short.
    yield ("zip_declares_1mib_holds_less",
           raw_zip(entries(f32, kv_lens=dict(method=8, usize=MiB))), "holds")
    yield ("zip_declared_size_smaller_than_data",
           raw_zip(entries(f32, q=dict(method=8, usize=q_size - 8))), "q.npy")
    yield ("zip_stored_size_mismatch",
           raw_zip(entries(f32, q=dict(csize=q_size - 8))), "q.npy")
    # Highly compressible: 6 MiB of zeros deflated to ~6 KB, then not an .npy at all.
    bomb = bytes(6 * MiB)
    yield ("zip_bomb_deflated_zeros",
           raw_zip(entries(f32 + [("out.npy", bomb)],
                           out=dict(method=8, payload=deflate(bomb, 9)))),
           "member 'out.npy': not an .npy array")
    yield ("zip64_end_record_bad_locator",
           raw_zip(entries(f32), zip64_end=True, zip64_locator_offset=1 << 40),
           "not a zip archive")
    yield "zip_trailing_garbage", stored + b"\x00garbage after the end record", "not a zip archive"
    yield "zip_leading_garbage", b"#!/bin/sh\nexit 0\n" + stored, None
    yield "zip_end_record_count_mismatch", raw_zip(entries(f32), count=3), "not a zip archive"
    yield ("zip_local_name_mismatch",
           raw_zip(entries(f32, q=dict(local_name="p.npy"))), "not a zip archive")
    yield ("zip_central_offset_wrong",
           patched(stored, len(stored) - 6, struct.pack("<I", cd - 1)), "not a zip archive")
    # numpy's zip64 local extra field with a size that disagrees with the central directory.
    extra = struct.unpack_from("<HH", stored, q_local + 30 + len("q.npy"))
    assert extra[0] == 1, "zipfile wrote no zip64 extra field"
    at = q_local + 30 + len("q.npy") + 4
    yield "zip64_local_extra_size_mismatch", patched(stored, at, struct.pack("<Q", 1 << 33)), None
    yield ("zip_non_utf8_member_name",
           raw_zip(entries([("q\xff.npy".encode("latin-1"), dict(f32)["q.npy"])] + f32[1:])),
           "unknown member")
    # The UTF-8 flag (bit 11) on a name that is not UTF-8.
    yield ("zip_utf8_flag_invalid_name",
           raw_zip(entries([(b"q\xff.npy", dict(f32)["q.npy"])] + f32[1:],
                           **{"q\xff": dict(flags=0x800)})), None)
    # A newline in a name must not break the one-line error.
    yield ("zip_member_name_with_newline",
           savez(f32 + [("q\n.npy", dict(f32)["q.npy"])]), "unknown member 'q\\x0a.npy'")


def npy_seeds():
    f32 = case()
    q = base_arrays()["q"]
    qd = q.tobytes()

    def with_q(data, members=f32):
        return savez(replace(members, "q", data))

    def q_raw(text, data=qd, **kw):
        return with_q(npy_raw(text, data, **kw))

    qh = header("<f4", (2, 1, 2))
    yield "npy_control_hand_written_header", q_raw(qh), LOAD
    yield "npy_bad_magic", q_raw(qh, magic=b"\x93NUMPX"), "bad magic"
    yield "npy_empty_member", with_q(b""), "bad magic"
    yield "npy_magic_only", with_q(NPY_MAGIC), "truncated .npy header"
    yield "npy_cut_in_length_field", with_q(NPY_MAGIC + b"\x01\x00\x40"), "truncated .npy header"
    yield "npy_version_4_0", q_raw(qh, version=(4, 0)), "unsupported .npy format version 4.0"
    yield "npy_version_1_1", q_raw(qh, version=(1, 1)), "unsupported .npy format version 1.1"
    yield "npy_version_0_0", q_raw(qh, version=(0, 0)), "unsupported .npy format version 0.0"
    yield "npy_version_2_0", with_q(npy(q, version=(2, 0))), LOAD
    yield "npy_version_3_0", with_q(npy(q, version=(3, 0))), LOAD
    yield "npy_header_not_dict", q_raw("[('descr', '<f4')]"), "malformed .npy header"
    yield "npy_header_empty_dict", q_raw("{}"), "missing key 'descr'"
    yield ("npy_header_missing_shape", q_raw("{'descr': '<f4', 'fortran_order': False, }"),
           "missing key 'shape'")
    yield ("npy_header_missing_fortran_order", q_raw("{'descr': '<f4', 'shape': (2, 1, 2)}"),
           "missing key 'fortran_order'")
    yield ("npy_header_extra_key",
           q_raw(qh[:-1] + "'align': False, }"), "unexpected key 'align'")
    yield ("npy_header_duplicate_key",
           q_raw(qh[:-1] + "'shape': (2, 1, 2), }"), "duplicate key 'shape'")
    yield ("npy_header_double_quotes_no_trailing_comma",
           q_raw('{"shape": (2, 1, 2), "fortran_order": False, "descr": "<f4"}'), LOAD)
    yield "npy_header_unpadded", q_raw(qh, pad=False), LOAD
    yield "npy_header_text_after_dict", q_raw(qh + " x"), "unexpected text after the dict"
    yield "npy_header_unterminated", q_raw("{'descr': '<f4", pad=False), "unterminated string"
    yield "npy_header_escape_in_string", q_raw(qh.replace("'<f4'", "'<f\\x34'")), "backslash"
    yield ("npy_header_non_ascii",
           q_raw(qh.replace("'<f4'", "'<f4\u00e9'").encode("utf-8")), "non-printable")
    yield ("npy_header_non_ascii_v3",
           q_raw(qh.replace("'<f4'", "'<f4\u00e9'"), version=(3, 0)), "non-printable")
    yield ("npy_header_len_past_end", q_raw(qh, data=b"", header_len=0xFFFF),
           "truncated .npy header: declares 65535")
    yield ("npy_header_len_past_end_v2", q_raw(qh, data=b"", version=(2, 0),
                                               header_len=0xFFFFFFFF),
           "truncated .npy header: declares 4294967295")
    yield ("npy_fortran_order_true",
           q_raw(header("<f4", (2, 1, 2), fortran=True)), "fortran_order True")
    yield ("npy_fortran_order_not_bool",
           q_raw(qh.replace("False", "0")), "fortran_order must be True or False")
    yield ("npy_descr_big_endian",
           q_raw(header(">f4", (2, 1, 2)), q.astype(">f4").tobytes()), "big-endian")
    yield ("npy_descr_big_endian_one_byte_ok",
           savez(replace(case("float32", "float8_e4m3fn"), "kv_pages",
                         npy_raw(header(">u1", (2, 2, 4, 2)),
                                 base_arrays("float32", "float8_e4m3fn")["kv_bits"].tobytes()))),
           LOAD)
    yield "npy_descr_native_order", q_raw(header("=f4", (2, 1, 2))), LOAD
    yield "npy_descr_unknown_complex", q_raw(header("<c8", (2, 1)), qd), "unsupported descr '<c8'"
    yield "npy_descr_unknown_f16", q_raw(header("<f16", (1,)), qd[:16]), "unsupported descr"
    yield "npy_descr_structured_list", q_raw("{'descr': [('a', '<f4')], 'fortran_order': "
                                             "False, 'shape': (4,), }"), "structured"
    yield "npy_descr_bytes_string", q_raw(header("|S4", (4,))), "unsupported descr '|S4'"
    yield "npy_descr_object", q_raw(header("|O", (1,)), bytes(8)), "unsupported descr '|O'"
    # ml_dtypes arrays handed to np.save: bfloat16 as '<V2', float8 as '|V1' / '<f1'.
    bf = base_arrays("bfloat16")["q_bits"].tobytes()
    yield ("npy_ml_dtypes_bfloat16_v2", savez(replace(drop(case("bfloat16"), "q_dtype"), "q",
                                                      npy_raw(header("<V2", (2, 1, 2)), bf))),
           "x.view(np.uint16)")
    f8 = base_arrays("float32", "float8_e4m3fn")
    f8m = drop(case("float32", "float8_e4m3fn"), "kv_dtype")
    yield ("npy_ml_dtypes_float8_v1",
           savez(replace(f8m, "kv_pages", npy_raw(header("|V1", (2, 2, 4, 2)),
                                                  f8["kv_bits"].tobytes()))),
           "x.view(np.uint8)")
    yield ("npy_ml_dtypes_float8_e5m2_f1",
           savez(replace(f8m, "kv_pages", npy_raw(header("<f1", (2, 2, 4, 2)),
                                                  f8["kv_bits"].tobytes()))),
           "x.view(np.uint8)")
    yield "npy_descr_void_v4", q_raw(header("|V4", (2, 1, 2))), "opaque void type"
    yield ("npy_descr_unicode_for_q",
           with_q(npy(np.array([["a", "b"], ["c", "d"]]).reshape(2, 1, 2))), "must hold numbers")
    yield "npy_descr_unicode_zero_width", q_raw(header("<U0", ())), "unsupported descr '<U0'"
    yield ("npy_descr_unicode_width_overflows", q_raw(header("<U4611686018427387904", ())),
           "unsupported descr")
    yield "npy_shape_negative_dim", q_raw(header("<f4", (2, -1, 2))), "negative dimension"
    yield "npy_shape_negative_zero_dim", q_raw(header("<f4", (2, 0, 2)).replace("0", "-0"), b""), LOAD
    yield ("npy_shape_product_overflows_int64",
           q_raw(header("<f4", (2**32, 2**31, 2))), "overflows int64")
    yield ("npy_shape_overflow_behind_zero_dim",
           q_raw(header("<f4", (0, 2**62, 2**62)), b""), "overflows int64")
    yield ("npy_shape_dim_past_int64", q_raw(header("<f4", (2**63, 1, 2))),
           "not a non-negative int in int64 range")
    yield "npy_shape_huge_little_data", q_raw(header("<f4", (2**40, 1, 2))), "truncated data"
    yield "npy_shape_float_dim", q_raw(header("<f4", (2, 1, 2)).replace("(2,", "(2.0,")), "'2.0'"
    yield "npy_shape_int_not_tuple", q_raw(header("<f4", (4,)).replace("(4,)", "(4)")), "not a tuple"
    yield ("npy_shape_not_tuple", q_raw(qh.replace("(2, 1, 2)", "[2, 1, 2]")),
           "shape must be a tuple")
    yield ("npy_shape_rank_65", q_raw(header("<f4", (1,) * 65), qd[:4]),
           "more than 64 dimensions")
    yield "npy_data_short", q_raw(qh, qd[:-1]), "truncated data"
    yield "npy_data_long", q_raw(qh, qd + b"\x00"), "trailing bytes"
    yield "npy_data_missing", q_raw(qh, b""), "truncated data"
    yield ("npy_descr_long_quoted_cut_short", q_raw(header("<f4" + "4" * 60, (2, 1, 2))),
           "unsupported descr '<f4" + "4" * 37 + "...'")
    yield ("npy_header_value_without_comma", q_raw(qh.replace("'<f4', ", "'<f4' ")),
           "expected ',' or '}' at offset")


def case_seeds():
    f32 = case()
    bf = case("bfloat16", "bfloat16")
    yield "case_missing_required_q", savez(drop(f32, "q")), "missing required member 'q.npy'"
    yield ("case_missing_required_num_seqs", savez(drop(f32, "num_seqs")),
           "missing required member 'num_seqs.npy'")
    yield "case_empty_npz", savez([]), "missing required member"
    yield ("case_unknown_member_name", savez(f32 + [("attention_mask.npy", npy(np.ones(2)))]),
           "unknown member 'attention_mask.npy'")
    yield ("case_member_without_npy_suffix", savez([(n[:-4] if n == "q.npy" else n, d)
                                                    for n, d in f32]), "unknown member 'q'")
    yield ("case_member_named_dot_npy", savez(f32 + [(".npy", npy(np.ones(1)))]),
           "unknown member '.npy'")
    yield ("case_member_arr_0_from_positional_savez", savez(f32 + [("arr_0.npy", npy(1.0))]),
           "unknown member 'arr_0.npy'")
    yield ("case_member_name_upper_case", savez(replace(drop(f32, "q"), "Q", dict(f32)["q.npy"])),
           "unknown member 'Q.npy'")
    yield ("case_q_dtype_unknown", savez(replace(bf, "q_dtype", npy(np.array("float16")))),
           "unknown dtype 'float16'")
    yield ("case_q_dtype_empty_string", savez(replace(bf, "q_dtype", npy(np.array("")))),
           "unknown dtype ''")
    yield ("case_q_dtype_non_ascii", savez(replace(bf, "q_dtype", npy(np.array("bfloat16\u00e9")))),
           "unknown dtype 'bfloat16\\xe9'")
    yield ("case_kv_dtype_int8_name", savez(replace(bf, "kv_dtype", npy(np.array("int8")))),
           "unknown dtype 'int8'")
    yield ("case_q_dtype_not_unicode", savez(replace(bf, "q_dtype", npy(np.int64(1)))),
           "must be a 0-d unicode string")
    yield ("case_q_dtype_1d_unicode", savez(replace(bf, "q_dtype", npy(np.array(["bfloat16"])))),
           "must be a 0-d unicode string")
    yield ("case_q_dtype_bfloat16_but_float32_data",
           savez(replace(case(), "q_dtype", npy(np.array("bfloat16")))), "its uint16 bits")
    yield ("case_kv_dtype_float8_but_uint16_data",
           savez(replace(bf, "kv_dtype", npy(np.array("float8_e5m2")))), "its uint8 bits")
    yield ("case_q_dtype_float32_but_uint16_data",
           savez(replace(bf, "q_dtype", npy(np.array("float32")))), "so it must hold float32")
    yield ("case_out_float32_with_bf16_q",
           savez(bf + [("out.npy", npy(np.zeros((2, 1, 2), np.float32)))]),
           "member 'out.npy': q_dtype is bfloat16")
    yield ("case_expected_unicode", savez(f32 + [("expected.npy", npy(np.array("oops")))]),
           "member 'expected.npy': must hold numbers")
    yield ("case_sm_scale_int64", savez(f32 + [("sm_scale.npy", npy(np.int64(1)))]),
           "sm_scale must be a 0-d float64 or float32 array")
    yield ("case_sm_scale_float16", savez(f32 + [("sm_scale.npy", npy(np.float16(1)))]),
           "sm_scale must be a 0-d float64 or float32 array")
    yield ("case_sm_scale_1d", savez(f32 + [("sm_scale.npy", npy(np.array([0.5])))]),
           "sm_scale must be a 0-d float64 or float32 array")
    yield ("case_soft_cap_unicode", savez(f32 + [("soft_cap.npy", npy(np.array("30")))]),
           "soft_cap must be a 0-d float64 or float32 array")
    yield ("case_num_kv_pages_per_block_float64",
           savez(f32 + [("num_kv_pages_per_block.npy", npy(np.float64(8)))]),
           "num_kv_pages_per_block must be a 0-d integer array")
    yield ("case_sliding_window_bool",
           savez(f32 + [("sliding_window.npy", npy(np.bool_(True)))]),
           "sliding_window must be a 0-d integer array")
    yield ("case_vmem_limit_1d", savez(f32 + [("vmem_limit_bytes.npy", npy(np.array([1 << 20])))]),
           "vmem_limit_bytes must be a 0-d integer array")
    yield ("case_vmem_limit_uint64_past_int64",
           savez(f32 + [("vmem_limit_bytes.npy", npy(np.uint64(2**63)))]),
           "9223372036854775808 does not fit in int64")
    yield ("case_num_queries_per_block_uint64_max",
           savez(f32 + [("num_queries_per_block.npy", npy(np.uint64(2**64 - 1)))]),
           "does not fit in int64")


def v3_members(dialect="tpu_inference_v3"):
    """[(member name, bytes)] of a tiny v3 case: two tokens of one sequence, one KV head of
    head_dim 2, float32 in a packed cache of one page of 4 tokens. The reader checks names,
    dtypes and kinds, not shapes (validation judges those), so nothing larger is needed."""
    f32 = np.float32
    arrays = dict(dialect=np.array(dialect),
                  queries=np.arange(4, dtype=f32).reshape(2, 1, 2),
                  keys=np.full((2, 1, 2), 0.5, f32), values=np.full((2, 1, 2), -1.0, f32),
                  kv_cache=np.zeros((1, 4, 2, 1, 2), f32), kv_lens=np.array([2], np.int32),
                  page_indices=np.array([0], np.int32), cu_q_lens=np.array([0, 2], np.int32),
                  distribution=np.array([0, 0, 1], np.int32))
    return [(name + ".npy", npy(a)) for name, a in arrays.items()]


def v3_seeds():
    v3 = v3_members()
    hd64 = v3_members("tpu_inference_v3_hd64")
    out = npy(np.zeros((2, 1, 2), np.float32))
    cache = npy(np.zeros((1, 4, 2, 1, 2), np.float32))
    text = npy(np.array("oops"))
    yield ("v3_valid_every_option",
           savez(v3 + [("out.npy", out), ("expected.npy", out), ("kv_cache_out.npy", cache),
                       ("expected_kv_cache.npy", cache), ("sm_scale.npy", npy(0.5)),
                       ("soft_cap.npy", npy(30.0)), ("mask_value.npy", npy(-1e30)),
                       ("q_scale.npy", npy(np.float32(1.0))), ("k_scale.npy", npy(0.5)),
                       ("v_scale.npy", npy(2.0)), ("sliding_window.npy", npy(np.int64(8))),
                       ("chunk_prefill_size.npy", npy(np.int64(16))),
                       ("vmem_limit_bytes.npy", npy(np.int64(64 * MiB))),
                       ("use_causal_mask.npy", npy(np.int64(1))),
                       ("update_kv_cache.npy", npy(np.int64(0))),
                       ("skip_kv_mask.npy", npy(np.uint8(1))),
                       ("d_block_sizes.npy", npy(np.array([1, 2, 1, 2], np.int64))),
                       ("p_block_sizes.npy", npy(np.array([1, 2, 1, 2], np.int32))),
                       ("m_block_sizes.npy", npy(np.array([1, 2, 1, 2], np.uint64))),
                       ("out_dtype.npy", npy(np.array("bfloat16")))]), LOAD)
    yield ("v3_hd64_valid_sink_and_blocks",
           savez(hd64 + [("attention_sink.npy", npy(np.zeros(1, np.float32))),
                         ("num_kv_pages_per_block.npy", npy(np.int64(1))),
                         ("num_queries_per_block.npy", npy(np.int64(2)))],
                 zipfile.ZIP_DEFLATED), LOAD)
    yield ("v3_missing_required_distribution", savez(drop(v3, "distribution")),
           "missing required member 'distribution.npy' (dialect tpu_inference_v3)")
    yield "v3_dialect_not_unicode", savez(replace(v3, "dialect", npy(np.int64(3)))), \
        "must be a 0-d unicode string (np.array('tpu_inference_v3'))"
    yield ("v3_dialect_unknown", savez(replace(v3, "dialect", npy(np.array("tpu_inference_v4")))),
           "unknown dialect 'tpu_inference_v4'")
    yield ("v3_member_of_hd64_only", savez(v3 + [("attention_sink.npy",
                                                  npy(np.zeros(1, np.float32)))]),
           "member 'attention_sink.npy' is the tpu_inference_v3_hd64 dialect's, not the "
           "tpu_inference_v3 dialect's")
    yield ("v3_member_of_jax_and_hd64", savez(v3 + [("num_kv_pages_per_block.npy",
                                                     npy(np.int64(1)))]),
           "is the jax and tpu_inference_v3_hd64 dialects', not the tpu_inference_v3")
    yield ("v3_jax_member_q", savez(v3 + [("q.npy", out)]),
           "member 'q.npy' is the jax dialect's, not the tpu_inference_v3 dialect's")
    yield ("v3_queries_unicode", savez(replace(v3, "queries", text)),
           "member 'queries.npy': must hold numbers")
    yield ("v3_attention_sink_unicode", savez(hd64 + [("attention_sink.npy", text)]),
           "member 'attention_sink.npy': must hold numbers")
    for stem in ("out", "expected", "kv_cache_out", "expected_kv_cache"):
        yield (f"v3_{stem}_unicode", savez(v3 + [(stem + ".npy", text)]),
               f"member '{stem}.npy': must hold numbers")
    yield ("v3_use_causal_mask_2", savez(v3 + [("use_causal_mask.npy", npy(np.int64(2)))]),
           "use_causal_mask must be 0 or 1, holds 2")
    yield ("v3_out_dtype_not_unicode", savez(v3 + [("out_dtype.npy", npy(np.int64(1)))]),
           "must be a 0-d unicode string (np.array('float32'))")
    yield ("v3_out_dtype_unknown", savez(v3 + [("out_dtype.npy", npy(np.array("float99")))]),
           "member 'out_dtype.npy': unknown dtype 'float99'")
    yield ("v3_block_sizes_shape_3",
           savez(v3 + [("d_block_sizes.npy", npy(np.array([1, 2, 1], np.int64)))]),
           "d_block_sizes must be an integer array of shape (4,)")
    yield ("v3_block_sizes_uint64_past_int64",
           savez(v3 + [("m_block_sizes.npy", npy(np.array([1, 2, 2**63, 2], np.uint64)))]),
           "member 'm_block_sizes.npy': 9223372036854775808 does not fit in int64")


def rendering_seeds():
    """Names and strings that a message must render as Python's ascii() does."""
    f32 = case()
    bf = case("bfloat16", "bfloat16")
    yield ("render_member_name_backslash", savez(f32 + [("a\\b.npy", npy(1.0))]),
           "unknown member 'a\\\\b.npy'")
    yield ("render_dtype_bmp_code_point",
           savez(replace(bf, "q_dtype", npy(np.array("bfloat16\u20ac")))),
           "unknown dtype 'bfloat16\\u20ac'")
    yield ("render_dtype_astral_code_point",
           savez(replace(bf, "q_dtype", npy(np.array("bfloat16\U0001f600")))),
           "unknown dtype 'bfloat16\\U0001f600'")


# ---------------------------------------------------------------------------------------
# fuzz_npy's seeds: bare .npy files, straight into the parser (rpa::parse_npy)


def bare_npy_seeds():
    """Every dtype numpy writes, versions 1.0 / 2.0 / 3.0, the header-length field at each
    boundary (the header running exactly to the end, one byte short of it, one byte past
    it, past it by the prefix's length; the widest lengths each version can declare), the
    file cut inside every field, and shapes whose byte count equals, exceeds or overflows
    the data."""
    f4 = np.array([1.5, -2.0, 0.25], np.float32)
    for t in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1"):
        a = np.arange(6).astype(t).reshape(2, 3)
        yield f"dtype_{t}_2x3", npy(a), LOAD
    yield "dtype_f8_0d", npy(np.float64(-0.0)), LOAD
    yield "dtype_i8_0d_min", npy(np.int64(-2**63)), LOAD
    yield "dtype_u8_0d_max", npy(np.uint64(2**64 - 1)), LOAD
    yield "dtype_unicode_0d", npy(np.array("float8_e4m3fn")), LOAD
    yield "dtype_unicode_0d_astral", npy(np.array("\U0001f600x")), LOAD
    yield "dtype_unicode_1d", npy(np.array(["bfloat16", "f"])), LOAD
    yield "dtype_bool_big_endian_descr", npy_raw(header(">b1", (2,)), b"\x01\x00"), LOAD
    yield "dtype_f4_native_order", npy_raw(header("=f4", (3,)), f4.tobytes()), LOAD
    yield "dtype_f4_no_order_sign", npy_raw(header("f4", (3,)), f4.tobytes()), "unsupported descr"
    yield "dtype_f4_big_endian", npy_raw(header(">f4", (3,)), f4.tobytes()), "big-endian"
    yield "dtype_unicode_big_endian", npy_raw(header(">U2", ()), bytes(8)), "big-endian"
    yield "dtype_complex", npy(np.array([1j], np.complex64)), "unsupported descr '<c8'"
    yield "dtype_bytes", npy(np.array([b"ab"])), "unsupported descr '|S2'"
    yield "dtype_void_bfloat16", npy(np.zeros(3, ml_dtypes.bfloat16)), "x.view(np.uint16)"
    yield "dtype_float8_e4m3fn", npy(np.zeros(3, ml_dtypes.float8_e4m3fn)), "x.view(np.uint8)"
    yield "dtype_float8_e5m2", npy(np.zeros(3, ml_dtypes.float8_e5m2)), "x.view(np.uint8)"
    yield "dtype_void_4", npy_raw(header("|V4", (1,)), bytes(4)), "opaque void type, which"
    yield ("dtype_structured", npy(np.zeros(1, [("a", "<f4")])),
           "structured dtypes are not supported")
    yield "dtype_object_pickle_refused", npy_raw(header("|O", (1,)), bytes(8)), "unsupported descr"
    yield "dtype_fortran_order", npy(np.asfortranarray(np.zeros((2, 3), np.float32))), \
        "fortran_order True"

    for major in (1, 2, 3):
        yield f"version_{major}_0_f4", npy(f4, version=(major, 0)), LOAD
    yield "version_3_0_unicode", npy(np.array("bfloat16"), version=(3, 0)), LOAD
    yield "version_0_0", npy_raw(header("<f4", (3,)), f4.tobytes(), version=(0, 0)), \
        "unsupported .npy format version 0.0"
    yield "version_1_1", npy_raw(header("<f4", (3,)), f4.tobytes(), version=(1, 1)), \
        "unsupported .npy format version 1.1"
    yield "version_4_0", npy_raw(header("<f4", (3,)), f4.tobytes(), version=(4, 0)), \
        "unsupported .npy format version 4.0"

    # The header-length field at its boundaries; text is the padded header of an array with
    # no elements, so a file holding nothing past its header is whole.
    for major, width in ((1, 2), (2, 4)):
        v = f"v{major}"
        text = npy_raw(header("<f4", (0,)), version=(major, 0))[8 + width:]
        n = len(text)

        def raw(length, body=text, data=b""):
            return NPY_MAGIC + bytes((major, 0)) + length.to_bytes(width, "little") + body + data

        yield f"header_len_{v}_exactly_to_the_end", raw(n), LOAD
        yield (f"header_len_{v}_exactly_to_the_end_data_wanted",
               npy_raw(header("<f4", (3,)), version=(major, 0)),
               "truncated data: header says 12 bytes, member has 0")
        yield (f"header_len_{v}_one_byte_past_the_end", raw(n + 1),
               f"truncated .npy header: declares {n + 1} bytes, {n} follow")
        yield (f"header_len_{v}_past_by_the_prefix", raw(n + 8 + width),
               f"truncated .npy header: declares {n + 8 + width} bytes, {n} follow")
        yield (f"header_len_{v}_one_byte_short", raw(n - 1),
               "trailing bytes: header says 0 bytes of data, member has 1")
        yield f"header_len_{v}_zero", raw(0), "expected '{' at the end"
        yield f"header_len_{v}_zero_nothing_after", raw(0, b""), "expected '{' at the end"
        yield (f"header_len_{v}_cuts_the_dict", raw(20),
               "malformed .npy header")
        most = 2 ** (8 * width) - 1
        yield (f"header_len_{v}_widest", raw(most, b"{"),
               f"truncated .npy header: declares {most} bytes, 1 follow")
    # numpy writes version 2.0 only once a header outgrows version 1.0's 65535 bytes: the
    # largest version 1.0 header and the smallest version 2.0 one that needs the width.
    for major, hlen in ((1, 0xFFFF), (2, 0x10000)):
        body = header("<f4", (1,)).encode()
        body += b" " * (hlen - len(body) - 1) + b"\n"
        width = 2 if major == 1 else 4
        yield (f"header_len_v{major}_{hlen}_whole",
               NPY_MAGIC + bytes((major, 0)) + hlen.to_bytes(width, "little") + body +
               f4[:1].tobytes(), LOAD)
    yield ("header_len_v3_past_int32", NPY_MAGIC + b"\x03\x00\x00\x00\x00\x80{",
           "truncated .npy header: declares 2147483648 bytes, 1 follow")

    # The file cut inside each field.
    whole = npy(f4)
    for name, keep in (("empty", 0), ("in_magic", 3), ("after_magic", 6),
                       ("in_version", 7), ("after_version", 8), ("in_length", 9),
                       ("after_length", 10), ("in_header", 40),
                       ("before_newline", 127), ("after_header", 128), ("in_data", 133)):
        want = {0: "bad magic", 3: "bad magic", 6: "truncated .npy header",
                7: "truncated .npy header", 8: "truncated .npy header",
                9: "truncated .npy header",
                10: "truncated .npy header: declares 118 bytes, 0 follow",
                40: "truncated .npy header: declares 118 bytes, 30 follow",
                127: "truncated .npy header: declares 118 bytes, 117 follow",
                128: "truncated data: header says 12 bytes, member has 0",
                133: "truncated data: header says 12 bytes, member has 5"}[keep]
        yield f"cut_{name}_{keep}", whole[:keep], want
    yield ("cut_v2_in_length", npy(f4, version=(2, 0))[:11], "truncated .npy header")

    # Shapes against the data: the byte count equals, exceeds or overflows it.
    def shaped(descr, shape, data=b""):
        return npy_raw(header(descr, shape), data)

    yield "shape_bytes_equal_data", shaped("<f4", (3,), f4.tobytes()), LOAD
    yield "shape_bytes_one_more_than_data", shaped("<f4", (4,), f4.tobytes()), \
        "truncated data: header says 16 bytes, member has 12"
    yield "shape_bytes_one_less_than_data", shaped("<f4", (2,), f4.tobytes()), \
        "trailing bytes: header says 8 bytes of data, member has 12"
    yield "shape_zero_dim_no_data", shaped("<f8", (0, 2**40)), LOAD
    yield "shape_zero_dim_with_data", shaped("<f8", (2**40, 0), bytes(8)), \
        "trailing bytes: header says 0 bytes of data, member has 8"
    yield "shape_bytes_int64_max", shaped("|u1", (2**63 - 1,)), \
        "truncated data: header says 9223372036854775807 bytes, member has 0"
    yield "shape_bytes_2_pow_63", shaped("|u1", (2**62, 2)), "overflows int64 bytes"
    yield "shape_f4_bytes_just_fit", shaped("<f4", (2**61 - 1,)), \
        "truncated data: header says 9223372036854775804 bytes"
    yield "shape_f4_bytes_overflow", shaped("<f4", (2**61,)), "overflows int64 bytes"
    yield "shape_overflow_behind_zero", shaped("<f4", (0, 2**62, 2**62)), "overflows int64 bytes"
    yield "shape_product_wraps_to_zero", shaped("|u1", (2**32, 2**32)), "overflows int64 bytes"
    yield "shape_unicode_width_just_fits", shaped("<U2305843009213693951", ()), \
        "truncated data: header says 9223372036854775804 bytes"
    yield "shape_unicode_width_overflows", shaped("<U2305843009213693952", ()), "unsupported descr"
    yield "shape_rank_64", shaped("|u1", (1,) * 64, b"\x07"), LOAD
    yield "shape_rank_65", shaped("|u1", (1,) * 65, b"\x07"), "more than 64 dimensions"
    yield "shape_dim_int64_max_text", shaped("|u1", (2**63 - 1, 0)), LOAD
    yield "shape_dim_past_int64", shaped("|u1", (2**63,)), "not a non-negative int in int64 range"
    yield "shape_negative_zero", npy_raw(header("<f4", (0,)).replace("(0,)", "(-0,)")), LOAD
    yield "shape_negative", npy_raw(header("<f4", (1,)).replace("(1,)", "(-1,)")), "negative dimension"
    yield "shape_int_not_tuple", npy_raw(header("<f4", (3,)).replace("(3,)", "(3)"), f4.tobytes()), \
        "is an int, not a tuple"

    # Header syntax.
    h = header("<f4", (3,))
    d = f4.tobytes()
    yield "syntax_double_quotes_any_order", npy_raw(
        '{"shape": (3,), "fortran_order": False, "descr": "<f4"}', d), LOAD
    yield "syntax_python_whitespace", npy_raw(
        "{\n\t'descr':'<f4',\r\n'fortran_order':False,\f'shape':( 3 , ),}", d), LOAD
    yield "syntax_unpadded", npy_raw(h, d, pad=False), LOAD
    yield "syntax_empty_dict", npy_raw("{}", d), "missing key 'descr'"
    yield "syntax_extra_key", npy_raw(h[:-1] + "'align': False}", d), "unexpected key 'align'"
    yield "syntax_duplicate_key", npy_raw(h[:-1] + "'descr': '<f4'}", d), "duplicate key 'descr'"
    yield "syntax_text_after_dict", npy_raw(h + "}", d), "unexpected text after the dict"
    yield "syntax_unterminated_string", npy_raw("{'descr': '<f4", d, pad=False), "unterminated string"
    yield "syntax_escape", npy_raw(h.replace("<f4", "<f\\x34"), d), "backslash"
    yield "syntax_non_ascii_v3", npy_raw(h.replace("<f4", "<f4\u00e9"), d, version=(3, 0)), \
        "non-printable"
    yield "syntax_long_descr", npy_raw(header("<" + "x" * 80, (3,)), d), "...'"
    yield "syntax_missing_comma", npy_raw(h.replace("'<f4', ", "'<f4' "), d), \
        "expected ',' or '}' at offset"
    yield "syntax_bool_lower_case", npy_raw(h.replace("False", "false"), d), \
        "fortran_order must be True or False"


def seeds():
    out = []
    for group in (valid_seeds, zip_seeds, npy_seeds, case_seeds, v3_seeds, rendering_seeds):
        out.extend(group())
    return out


# ---------------------------------------------------------------------------------------
# Checking


def read_back(path):
    """(verdict, detail, case): 'loaded' with whether the written form is a fixed point
    (rpa.Case.load, then what it loaded written and read back: the written bytes must not
    change), or 'error' with the reader's line (the path prefix removed). A crash or a hang
    in the reader takes this process with it (ctest reports it)."""
    try:
        case = rpa.Case.load(path)
    except ValueError as e:
        lines = str(e).splitlines()
        line = lines[0] if lines else ""
        if line.startswith(path + ": "):
            line = line[len(path) + 2:]
        return ("error" if len(lines) == 1 else "MULTILINE"), line, None
    try:
        a = case.to_bytes()
    except ValueError as e:
        return "WRITE", f"what was loaded cannot be written: {e}", None
    try:
        b = rpa.Case.from_bytes(a).to_bytes()
    except ValueError as e:
        return "ROUNDTRIP", f"written form does not read back: {e}", None
    same = a == b
    return (("loaded" if same else "ROUNDTRIP"),
            ("" if same else "written form changes on reread"), case)


def print_rows(rows):
    """seed -> verdict, one line each, the names in one column."""
    width = max(len(r[0]) for r in rows)
    for name, verdict, detail, flag in rows:
        print(f"{name:<{width}}  {verdict:<7} {detail}{flag}")


def check(paths_and_expectations):
    problems = 0
    rows = []
    for name, path, want in paths_and_expectations:
        verdict, detail, case = read_back(path)
        if verdict == "loaded":
            strict = rpa.validate(case, mode="strict")
            detail = "strict: " + ("valid" if strict.valid else strict.rule)
        ok = verdict in ("loaded", "error")
        if ok and want == LOAD:
            ok = verdict == "loaded"
        elif ok and want is not None:
            ok = verdict == "error" and want in detail
        problems += not ok
        rows.append((name, verdict, detail, "" if ok else f"  <-- expected {want!r}"))
    print_rows(rows)
    return problems


def check_npy(paths_and_expectations):
    """fuzz_npy's seeds through the C++ parser alone (rpa._rpa.parse_npy): seed -> the
    array it describes, or the parser's line."""
    problems = 0
    rows = []
    for name, path, want in paths_and_expectations:
        with open(path, "rb") as f:
            data = f.read()
        try:
            verdict, detail = "loaded", _rpa.parse_npy(data)
        except ValueError as e:
            verdict, detail = "error", str(e)
            if "\n" in detail:
                verdict = "MULTILINE"
        ok = (verdict == "loaded") if want == LOAD else (verdict == "error" and want in detail)
        problems += not ok
        rows.append((name, verdict, detail, "" if ok else f"  <-- expected {want!r}"))
    print_rows(rows)
    return problems


# Each target's seeds: (target, file suffix, the seeds, their check).
TARGETS = (("fuzz_case_file", ".npz", seeds, check),
           ("fuzz_npy", ".npy", lambda: list(bare_npy_seeds()), check_npy))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="run the C++ reader on every seed and print seed -> verdict (with "
                    "the strict validation verdict of each case it loads)")
    ap.add_argument("--out", default=OUT,
                    help="where TARGET/ folders are written (default corpus/fuzz)")
    ap.add_argument("--committed", default=None,
                    help="with --out elsewhere: every seed written must equal the file of the "
                         "same name under this folder's TARGET/ (the committed corpus is "
                         "current)")
    args = ap.parse_args()
    start = time.monotonic()
    problems = 0
    for target, suffix, make, check_target in TARGETS:
        all_seeds = make()
        names = [n for n, _, _ in all_seeds]
        assert len(set(names)) == len(names), f"{target}: seed names repeat"
        out = os.path.join(args.out, target)
        os.makedirs(out, exist_ok=True)
        written = []
        for name, data, want in all_seeds:
            path = os.path.join(out, name + suffix)
            with open(path, "wb") as f:
                f.write(data)
            written.append((name, path, want))
        sizes = sorted(len(d) for _, d, _ in all_seeds)
        stale = sorted(set(os.listdir(out)) - {n + suffix for n, _, _ in all_seeds})
        print(f"{target}: wrote {len(all_seeds)} seeds to {os.path.relpath(out)} in "
              f"{time.monotonic() - start:.1f} s (largest {sizes[-1]} bytes, median "
              f"{sizes[len(sizes) // 2]})")
        if stale:
            print(f"{target}: not written by this script (left alone): " + ", ".join(stale))
        if args.committed:
            for name, path, _ in written:
                other = os.path.join(args.committed, target, name + suffix)
                with open(path, "rb") as f:
                    mine = f.read()
                if not os.path.exists(other) or open(other, "rb").read() != mine:
                    problems += 1
                    print(f"FAIL {target}/{name}: missing or stale in {args.committed}; run "
                          "tools/make_case_file_seeds.py")
        if args.check:
            failed = check_target(written)
            problems += failed
            print(f"{target}: {len(written) - failed} of {len(written)} seeds got the expected "
                  f"verdict ({time.monotonic() - start:.1f} s in all)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
