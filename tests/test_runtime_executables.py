"""Executables: RLX's ExecutableCapabilities from every compiled graph (also as a dict),
clone (shared kernels, params of its own), typed I/O, set_active_extent, CompileCache
(FIFO, threads) and BucketedCompileCache (run_padded equals an unpadded run)."""
import threading

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.base import Executable
from rlx_ref.runtime.capabilities import FIELDS, ExecutableCapabilities
from rlx_ref.runtime.compile_cache import (BucketedCompileCache, CompileCache, pad_rows,
                                           slice_rows)
from rlx_ref.runtime.devices import is_available
from rlx_ref.runtime.session import Session, SessionError

from _device_backends import Counting

COUNTING = "_device_backends:Counting"

F = np.float32
DEVICES = [d for d in ("reference", "cpu", "opencl") if is_available(d)]


def mlp(rows, hidden: int = 4, out: int = 3):
    """``relu(x @ w + b)``: row-wise along axis 0, so padding rows changes no real row."""
    g = rlx_ref.Graph("mlp")
    x, w, b = g.input("x", [rows, hidden]), g.param("w", [hidden, out]), g.param("b", [out])
    g.set_outputs([g.relu(g.add(g.matmul(x, w), b))])
    return g


RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3)).astype(F)
B = RNG.standard_normal(3).astype(F)


def expect(x, w=W, b=B):
    return np.maximum(x @ w + b, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_capabilities_record_and_dict_form(device):
    caps = Session(device).compile(mlp(2)).capabilities()
    assert isinstance(caps, ExecutableCapabilities)
    assert caps.clone and caps.typed_io and not caps.active_extent and not caps.moe
    assert caps["typed_io"] is True and list(caps) == list(FIELDS) and len(dict(caps)) == 8
    assert caps == dict(caps) and caps.enabled_names()[:1] == ["clone"]
    with pytest.raises(KeyError, match="'speed' is not an executable capability"):
        caps["speed"]


def test_capability_defaults_are_rlx_none():
    assert Executable().capabilities() == ExecutableCapabilities.NONE
    assert ExecutableCapabilities.NONE.enabled_names() == []
    assert ExecutableCapabilities(gpu_handles=True).replace(typed_io=True).enabled_names() \
        == ["gpu_handles", "typed_io"]
    with pytest.raises(NotImplementedError, match="clone is not implemented for Executable"):
        Executable().clone()


@pytest.mark.parametrize("device", DEVICES)
def test_clone_has_params_of_its_own(device):
    exe = Session(device).compile(mlp(5))
    exe.set_param("w", W)
    exe.set_param("b", B)
    twin = exe.clone()
    x = RNG.standard_normal((5, 4)).astype(F)
    np.testing.assert_allclose(twin.run({"x": x})[0], expect(x), rtol=1e-5, atol=1e-6)
    twin.set_param("w", 2 * W)
    exe.set_param("b", -B)
    np.testing.assert_allclose(exe.run({"x": x})[0], expect(x, W, -B), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(twin.run({"x": x})[0], expect(x, 2 * W, B), rtol=1e-5,
                               atol=1e-6)
    assert twin.graph is exe.graph
    if hasattr(exe, "kernel_sources"):                       # the same compiled kernels
        assert twin.kernel_sources() == exe.kernel_sources()
    assert twin.capabilities() == exe.capabilities()


def test_clone_compiles_nothing_and_runs_beside_its_source():
    Counting.reset()
    exe = Session(COUNTING).compile(mlp(3))
    twins = [exe.clone() for _ in range(3)]
    assert Counting.compiles == 1
    if "cpu" in DEVICES:
        exe = Session("cpu").compile(mlp(64))
        twins = [exe.clone() for _ in range(3)]
    runners = [exe] + twins
    for i, r in enumerate(runners):
        r.set_param("w", W * (i + 1))
        r.set_param("b", B)
    x = RNG.standard_normal((64 if "cpu" in DEVICES else 3, 4)).astype(F)
    errors = []

    def work(i):
        try:
            for _ in range(20):
                got = runners[i].run({"x": x})[0]
                np.testing.assert_allclose(got, expect(x, W * (i + 1)), rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(runners))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("device", DEVICES)
def test_run_typed_in_both_forms(device):
    exe = Session(device).compile(mlp(2))
    exe.set_param("w", W)
    exe.set_param_typed("b", B.astype("<f4").tobytes(), "f32")
    x = RNG.standard_normal((2, 4)).astype(F)
    want = exe.run({"x": x})[0]
    for typed in ([("x", x.tobytes(), "f32")], {"x": (x.tobytes(), "F32", (2, 4))}):
        (data, dtype), = exe.run_typed(typed)
        assert dtype == "f32"
        np.testing.assert_array_equal(np.frombuffer(data, "<f4").reshape(2, 4 - 1), want)
    # f16 bytes widen exactly into an f32 input, as RLX's widen_bytes_to_f32
    h = x.astype(np.float16)
    (data, _), = exe.run_typed({"x": (h.tobytes(), "f16")})
    np.testing.assert_array_equal(np.frombuffer(data, "<f4").reshape(2, 3),
                                  exe.run({"x": h.astype(F)})[0])


def test_typed_io_errors_and_widening():
    exe = Session().compile(mlp(2))
    with pytest.raises(SessionError, match=r"run_typed\('x'\): dtype f64, but the input is "
                                           r"declared \[2, 4\] f32 \(typed bytes are"):
        exe.run_typed({"x": (np.zeros(8).tobytes(), "f64")})
    with pytest.raises(SessionError, match="31 bytes is not a whole number of f32"):
        exe.run_typed([("x", b"\0" * 31, "f32")])
    with pytest.raises(SessionError, match=r"8 elements do not fill shape \[3, 4\]"):
        exe.run_typed({"x": (np.zeros(8, F).tobytes(), "f32", (3, 4))})
    with pytest.raises(SessionError, match="unknown input 'y'; inputs of @mlp: x"):
        exe.run_typed({"y": (b"", "f32")})
    with pytest.raises(SessionError, match=r"expected \(data, dtype\)"):
        exe.run_typed({"x": b"\0" * 32})
    import ml_dtypes

    exe.set_param_typed("b", B.astype(ml_dtypes.bfloat16).tobytes(), "bf16")
    exe.set_param("w", W)
    got = exe.run({"x": np.ones((2, 4), F)})[0]
    np.testing.assert_allclose(got, expect(np.ones((2, 4), F), W,
                                           B.astype(ml_dtypes.bfloat16).astype(F)), rtol=1e-6)


def test_run_typed_infers_one_dynamic_dim():
    exe = Session().compile(mlp(rlx_ref.Dyn(0)))
    exe.set_param("w", W)
    exe.set_param("b", B)
    x = RNG.standard_normal((5, 4)).astype(F)
    (data, _), = exe.run_typed({"x": (x.tobytes(), "f32")})
    np.testing.assert_allclose(np.frombuffer(data, F).reshape(5, 3), expect(x), rtol=1e-6)
    with pytest.raises(SessionError, match="cannot tell the shape of 7 elements"):
        exe.run_typed({"x": (np.zeros(7, F).tobytes(), "f32")})


def test_set_active_extent_is_a_kept_hint():
    exe = Session().compile(mlp(8))
    assert exe.active_extent() is None
    exe.set_active_extent((3, 8))
    assert exe.active_extent() == (3, 8) and exe.clone().active_extent() is None
    exe.set_active_extent(None)
    assert exe.active_extent() is None
    with pytest.raises(SessionError, match=r"need 0 <= actual <= upper, got \(9, 8\)"):
        exe.set_active_extent((9, 8))


def test_compile_cache_is_fifo():
    cache = CompileCache("reference", 2)
    built = []

    def build(n):
        return lambda: built.append(n) or mlp(n)

    a = cache.get_or_compile(1, build(1))
    cache.get_or_compile(2, build(2))
    assert cache.get_or_compile(1, build(1)) is a and built == [1, 2]
    cache.get_or_compile(3, build(3))                  # evicts 1: the oldest, though hit
    assert cache.keys() == [2, 3] and 1 not in cache and cache.contains(2)
    cache.get_or_compile(1, build(1))
    assert cache.keys() == [3, 1] and built == [1, 2, 3, 1] and len(cache) == 2
    cache.clear()
    assert cache.is_empty()
    with pytest.raises(ValueError, match="capacity must be ≥ 1"):
        CompileCache("reference", 0)


def test_compile_cache_params_stay_with_their_entry():
    cache = CompileCache("reference", 4)
    exe = cache.get_or_compile("k", lambda: mlp(2))
    exe.set_param("w", W)
    exe.set_param("b", B)
    x = np.ones((2, 4), F)
    again = cache.get_or_compile("k", lambda: mlp(2))
    np.testing.assert_allclose(again.run({"x": x})[0], expect(x), rtol=1e-6)


def test_compile_cache_from_many_threads():
    Counting.reset()
    cache = CompileCache(COUNTING, 3)
    got, errors = [], []

    def work(i):
        try:
            got.append((i % 4, cache.get_or_compile(i % 4, lambda: mlp(i % 4 + 1))))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(cache) == 3
    # each key compiled once while it stayed cached: every asker got the same executable
    by_key = {}
    for k, exe in got:
        by_key.setdefault(k, set()).add(id(exe))
    assert Counting.compiles == sum(len(v) for v in by_key.values()) >= 4


def test_bucket_ladder_and_lookup():
    cache = BucketedCompileCache.power_of_two_ladder("reference", 8, 256)
    assert [(b.start, b.stop) for b in cache.buckets()] == [
        (1, 9), (9, 17), (17, 33), (33, 65), (65, 129), (129, 257)]
    assert cache.bucket_for(17) == 2 and cache.bucket_upper_for_key(17) == 32
    assert cache.bucket_for(0) is None and cache.bucket_for(257) is None
    built = []
    assert cache.get_or_compile(300, lambda u: built.append(u)) is None and built == []
    with pytest.raises(ValueError, match=r"buckets 0 \(1\.\.8\) and 1 \(4\.\.16\) overlap"):
        BucketedCompileCache("reference", [(1, 8), (4, 16)])
    with pytest.raises(ValueError, match="needs ≥1 bucket"):
        BucketedCompileCache("reference", [])
    with pytest.raises(ValueError, match=r"bucket 0 \(5\.\.5\) is empty"):
        BucketedCompileCache("reference", [(5, 5)])


@pytest.mark.parametrize("device", DEVICES)
def test_run_padded_equals_an_unpadded_run(device):
    cache = BucketedCompileCache(device, [range(1, 4), range(4, 16)])
    built = []

    def build(upper):
        built.append(upper)
        return mlp(upper), {"w": W, "b": B}

    for rows in (5, 9, 15, 2):
        x = RNG.standard_normal((rows, 4)).astype(F)
        cache.ensure_graph_with_params(rows, build)
        upper, (y,) = cache.run_padded(rows, rows, lambda u: mlp(u), {"x": x})
        plain = Session(device).compile(mlp(rows))
        plain.set_param("w", W)
        plain.set_param("b", B)
        assert y.shape == (rows, 3) and upper == (3 if rows < 4 else 15)
        np.testing.assert_allclose(y, plain.run({"x": x})[0], rtol=1e-5, atol=1e-6)
    assert built == [15, 3] and cache.compiled_count() == 2


def test_run_padded_sets_the_extent_and_slices_what_it_is_told():
    cache = BucketedCompileCache("reference", [range(1, 9)])
    g = rlx_ref.Graph("two")
    x = g.input("x", [8, 2])
    g.set_outputs([g.neg(x), g.sum(x, [0])])
    upper, exe = cache.get_or_compile(3, lambda u: g)
    seen, run = [], exe.run
    exe.run = lambda feeds: seen.append((exe.active_extent(), feeds["x"].shape)) or run(feeds)
    xs = np.arange(6, dtype=F).reshape(3, 2)
    _, (neg, total) = cache.run_padded(3, 3, None, {"x": xs}, slice_outputs=[True])
    assert seen == [((3, 8), (8, 2))] and exe.active_extent() is None
    np.testing.assert_array_equal(neg, -xs)
    np.testing.assert_array_equal(total, xs.sum(0))       # unsliced, padding rows are 0
    with pytest.raises(ValueError, match="actual rows 9 exceed upper bound 8"):
        cache.run_padded(3, 9, None, {"x": xs})


def test_pad_and_slice_rows():
    np.testing.assert_array_equal(pad_rows([1.0, 2.0, 3.0], 5), [1, 2, 3, 0, 0])
    np.testing.assert_array_equal(pad_rows(np.ones((2, 3)), 4)[2:], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="actual rows 3 exceed upper bound 2"):
        pad_rows(np.ones(3), 2)
    s = slice_rows(np.arange(10.0).reshape(5, 2), 3)
    assert s.shape == (3, 2) and s.base is None
    with pytest.raises(ValueError, match="actual rows 6 exceed upper 5"):
        slice_rows(np.ones(5), 6)


def test_run_typed_outputs_keep_their_declared_dtypes():
    import ml_dtypes

    g = rlx_ref.Graph("dt")
    x = g.input("x", [3])
    g.set_outputs([g.cast(x, "i32"), g.cast(x, "bf16"), g.cast(x, "f64")])
    exe = Session().compile(g)
    outs = exe.run_typed({"x": (np.array([1, -2, 3], "<f4").tobytes(), "f32")})
    assert [dt for _, dt in outs] == ["i32", "bf16", "f64"]
    assert np.frombuffer(outs[0][0], "<i4").tolist() == [1, -2, 3]
    assert np.frombuffer(outs[1][0], ml_dtypes.bfloat16).astype(F).tolist() == [1, -2, 3]
    assert np.frombuffer(outs[2][0], "<f8").tolist() == [1.0, -2.0, 3.0]
