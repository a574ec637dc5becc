"""Bad arrays, parameters and files raise ValueError with one line naming what is wrong; a
malformed input never crashes the interpreter (a crash fails this whole file)."""
import ml_dtypes
import numpy as np
import pytest

import rpa


def base():
    return rpa.gen(seed=3, profile="mixed", size=60)


@pytest.mark.parametrize("make,message", [
    (lambda c: c.replace(q=np.asarray(c.q)[:, ::2]), r"^q: the array is not C-contiguous \(shape \(148, 8, 8\)\)"),
    (lambda c: c.replace(kv_pages=np.asfortranarray(c.kv_pages)), "^kv_pages: the array is not C-contiguous"),
    (lambda c: c.replace(q=c.q.astype(np.complex64)), "^q: dtype complex64 is not one rpa reads"),
    (lambda c: c.replace(kv_lens=np.array(["a", "b"])), "^kv_lens: dtype str32 is not one rpa reads"),
    (lambda c: c.replace(kv_lens=np.array([1, None], dtype=object)), "^kv_lens: dtype object is not one rpa reads"),
    (lambda c: c.replace(kv_lens=c.kv_lens.astype(">i4")), "^kv_lens: the array's memory cannot be read as int32"),
    (lambda c: c.replace(soft_cap="big"), "^soft_cap: expected a float or None, got 'big'"),
    (lambda c: c.replace(vmem_limit_bytes=2.5), "^vmem_limit_bytes: expected an int or None, got 2.5"),
    (lambda c: c.replace(vmem_limit_bytes=2**70), "^vmem_limit_bytes: 1180591620717411303424 does not fit in int64"),
    (lambda c: c.replace(sm_scale=None), "^sm_scale: expected a float, got None"),
])
def test_bad_arrays_and_parameters_raise_value_error(make, message):
    case = make(base())
    for call in (rpa.validate, rpa.kernel, rpa.reference, rpa.check, lambda c: c.to_bytes()):
        with pytest.raises(ValueError, match=message):
            call(case)


def test_not_an_array_at_all():
    with pytest.raises(ValueError, match="^q: expected an array"):
        rpa.Case.from_call(object(), *base().call_args()[0][1:])


def test_shapes_and_ranks_are_verdicts_not_exceptions():
    case = base()
    for change, rule in [(dict(q=np.zeros((3, 4), np.float32)), "q_rank"),
                         (dict(kv_pages=np.zeros((2, 3, 4, 5, 6), np.float32)), "kv_pages_rank"),
                         (dict(num_seqs=np.array(1, np.int32)), "num_seqs_shape"),
                         (dict(q=np.zeros((0, 0, 0), np.float32)), "q_heads_zero")]:
        verdict = rpa.validate(case.replace(**change))
        assert verdict.rule is not None and not verdict.valid, change
        if change.get("q") is not None and rule == "q_rank":
            assert verdict.rule == "q_rank"
        with pytest.raises(rpa.Rejected):
            rpa.kernel(case.replace(**change))


def test_lists_jax_arrays_and_dlpack_producers_are_read():
    import jax.numpy as jnp

    case = base()
    args, kwargs = case.call_args()
    as_jax = rpa.Case.from_call(*[jnp.asarray(a) for a in args], **kwargs)
    assert as_jax == case
    # A CPU JAX array is read in place: the case's array is a view of JAX's buffer.
    kv = jnp.asarray(case.kv_pages)
    assert rpa.Case.from_call(args[0], kv, *args[2:]).kv_pages.__array_interface__["data"][0] == \
        kv.unsafe_buffer_pointer()
    np.testing.assert_array_equal(rpa.kernel(as_jax).view(np.uint16), rpa.kernel(case).view(np.uint16))

    class DLPackOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    lens = rpa.Case.from_call(*args[:2], DLPackOnly(case.kv_lens), *args[3:])
    assert lens.kv_lens.tolist() == case.kv_lens.tolist()
    listed = rpa.Case.from_call(*args[:2], case.kv_lens.tolist(), *args[3:])
    assert listed.kv_lens.dtype == np.int64  # numpy's default: validation says so
    assert rpa.validate(listed).rule == "index_dtype"


def test_unreadable_files_and_bytes(tmp_path):
    missing = tmp_path / "missing.npz"
    with pytest.raises(ValueError, match=f"^{missing}: "):
        rpa.Case.load(missing)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match=f"^{junk}: "):
        rpa.Case.load(junk)
    data = base().to_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(ValueError):
            rpa.Case.from_bytes(data[:cut])
    with pytest.raises(ValueError, match="more than"):
        rpa.Case.from_bytes(data, max_bytes=100)
    # An ml_dtypes array saved with numpy directly is refused with the way to save it.
    raw = tmp_path / "raw.npz"
    case = base()
    np.savez(raw, **{n: getattr(case, n) for n in ("q", "kv_pages", "kv_lens", "page_indices",
                                                    "cu_q_lens", "num_seqs")})
    with pytest.raises(ValueError, match="q.npy"):
        rpa.Case.load(raw)


def test_writing_refuses_what_no_file_can_hold(tmp_path):
    case = base()
    with pytest.raises(ValueError, match="out"):
        case.replace(out=np.zeros(case.q.shape, np.float32)).save(tmp_path / "x.npz")
    bf16_lens = case.replace(kv_lens=case.kv_lens.astype(ml_dtypes.bfloat16))
    with pytest.raises(ValueError):
        bf16_lens.to_bytes()
    with pytest.raises(ValueError):
        case.save(tmp_path / "no" / "such" / "dir" / "x.npz")
