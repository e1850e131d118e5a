"""OpenCL lowering of the reduction and normalization families: every conformance case of
their kinds, plus the paths the cases do not reach (segmented long rows, full column
blocks and their tails, strided axis sets, the GPU-style work-group kernels, integer
wrap-around for every integer dtype) and lowering-time errors that name the node."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case

pytest.importorskip("pyopencl")
CL = get_backend("opencl")
if not CL.availability()[0]:
    pytest.skip(f"no OpenCL device: {CL.availability()[1]}", allow_module_level=True)

from rlx_ref.backends.opencl import _reduce_c

KINDS = ("Reduce", "Softmax", "Cumsum", "CumProd", "CumMax", "ArgMax", "ArgMin", "TopK",
         "LayerNorm", "RmsNorm", "GroupNorm", "LayerNorm2d", "BatchNormInference")


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case_passes(kind):
    ledger = load_ledger()
    cases = filter_cases(build_cases(kinds=[kind]), kind, None, None)
    assert cases
    assert CL.paths()[kind] == "native"
    bad = [(c.id, c.dtype, c.tags, r.status, r.message)
           for c in cases for r in [run_case(CL, c, ledger)] if r.status not in ("ok", "xfail")]
    assert not bad, bad[:3]


@pytest.fixture(params=["cpu", "gpu"])
def style(request, monkeypatch):
    """Render the CPU kernels (runs per work-item) or the GPU ones (work-group trees)."""
    monkeypatch.setattr(_reduce_c, "gpu_style", lambda device: request.param == "gpu")
    return request.param


def _graph(build, arrays):
    g = rlx_ref.Graph("t")
    ins = [g.input(f"x{i}", list(a.shape), rlx_ref.DType.of(a)) for i, a in enumerate(arrays)]
    g.set_outputs([build(g, *ins)])
    return g, {f"x{i}": a for i, a in enumerate(arrays)}


def _check(build, *arrays, exact=False):
    g, feeds = _graph(build, arrays)
    (got,) = CL.compile(g).run(feeds)
    (want,) = rlx_ref.interpret(g, feeds)
    assert got.shape == want.shape and got.dtype == want.dtype
    if exact or want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    ok = np.isfinite(want64)
    np.testing.assert_array_equal(got64[~ok], want64[~ok])     # NaN and ±inf where due
    scale = max(1.0, float(np.max(np.abs(want64[ok]), initial=0.0)))
    tol = {np.float16: 4e-3, BF16.type: 3e-2, np.float64: 1e-12}.get(want.dtype.type, 2e-5)
    assert np.max(np.abs(got64[ok] - want64[ok]), initial=0.0) <= tol * scale


RNG = np.random.default_rng(11)


def _r(*shape, dt=np.float32, nan=0.0):
    x = RNG.standard_normal(shape)
    if nan:
        x[RNG.random(shape) < nan] = np.nan
    return x.astype(dt)


def _ints(dt, *shape):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


S = rlx_ref.Shape
BF16 = rlx_ref.DType.BF16.np
PATHS = [
    ("sum rows", lambda g, x: g.reduce(x, "Sum", [1]), [_r(5, 1001)]),
    ("max rows nan", lambda g, x: g.reduce(x, "Max", [1]), [_r(5, 301, nan=0.2)]),
    ("min segmented", lambda g, x: g.reduce(x, "Min", [0]), [_r(200_003, nan=0.01)]),
    ("mean segmented f16", lambda g, x: g.reduce(x, "Mean", [1]), [_r(2, 99_999, dt=np.float16)]),
    ("sum cols", lambda g, x: g.reduce(x, "Sum", [0]), [_r(37, 200)]),
    ("max cols f64", lambda g, x: g.reduce(x, "Max", [1], True), [_r(3, 17, 100, dt=np.float64)]),
    ("prod cols i16", lambda g, x: g.reduce(x, "Prod", [1]), [_ints(np.int16, 2, 9, 70)]),
    ("mean strided", lambda g, x: g.reduce(x, "Mean", [0, 2]), [_r(7, 5, 9)]),
    ("min strided u8", lambda g, x: g.reduce(x, "Min", [1, 3]), [_ints(np.uint8, 3, 4, 5, 6)]),
    ("softmax rows", lambda g, x: g.softmax(x, -1), [_r(6, 777)]),
    ("softmax rows bf16", lambda g, x: g.softmax(x, -1), [_r(3, 100).astype(BF16)]),
    ("softmax cols nan", lambda g, x: g.softmax(x, 1), [_r(2, 9, 100, nan=0.01)]),
    ("softmax cols f16", lambda g, x: g.softmax(x, 0), [_r(9, 70, dt=np.float16)]),
    ("cumsum rows excl", lambda g, x: g.cumsum(x, axis=1, exclusive=True), [_r(3, 1000)]),
    ("cumsum segmented", lambda g, x: g.cumsum(x, axis=0, exclusive=False), [_r(200_003)]),
    ("cumprod segmented i32", lambda g, x: g.cum_prod(x, axis=1, exclusive=True),
     [_ints(np.int32, 2, 150_001)]),
    ("cummax cols nan", lambda g, x: g.cum_max(x, axis=0, exclusive=True), [_r(40, 130, nan=0.1)]),
    ("cumsum cols f64", lambda g, x: g.cumsum(x, axis=1, exclusive=False),
     [_r(2, 30, 70, dt=np.float64)]),
    ("argmax rows ties", lambda g, x: g.arg_max(x, axis=1, keep_dim=False),
     [np.round(_r(5, 1000, nan=0.05))]),
    ("argmin cols", lambda g, x: g.arg_min(x, axis=0, keep_dim=True), [_r(1000, 5)]),
    ("argmax i32", lambda g, x: g.arg_max(x, axis=2, keep_dim=False),
     [_ints(np.int32, 3, 4, 600)]),
    ("topk private", lambda g, x: g.top_k(x, k=5, shape=S([4, 5], "f32")),
     [np.round(_r(4, 600, nan=0.02) * 3)]),
    ("topk scratch i64", lambda g, x: g.top_k(x, k=100, shape=S([4, 100], "i64")),
     [np.round(_r(4, 600) * 3)]),
    ("layernorm rows", lambda g, x, a, b: g.layer_norm(x, a, b, axis=-1, eps=1e-5),
     [_r(5, 1003), _r(1003), _r(1003)]),
    ("rmsnorm f16", lambda g, x, a, b: g.rms_norm(x, a, b, axis=-1, eps=1e-5),
     [_r(5, 100, dt=np.float16), _r(100, dt=np.float16), _r(100, dt=np.float16)]),
    ("layernorm cols", lambda g, x, a, b: g.layer_norm(x, a, b, axis=1, eps=1e-5),
     [_r(3, 50, 101), _r(50), _r(50)]),
    ("groupnorm", lambda g, x, a, b: g.group_norm(x, a, b, num_groups=4, eps=1e-5),
     [_r(2, 8, 5, 7), _r(8), _r(8)]),
    ("layernorm2d blocks", lambda g, x, a, b: g.layer_norm2d(x, a, b, eps=1e-5),
     [_r(2, 8, 9, 11), _r(8), _r(8)]),
    ("batchnorm", lambda g, x, a, b, m, v: g.batch_norm_inference(x, a, b, m, v, eps=1e-5),
     [_r(9, 11), _r(11), _r(11), _r(11), np.abs(_r(11)) + 0.5]),
]


@pytest.mark.parametrize("name,build,arrays", PATHS, ids=[p[0] for p in PATHS])
def test_kernel_paths(style, name, build, arrays):
    _check(build, *arrays, exact=name.startswith(("arg", "topk")))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64])
def test_integer_folds_and_scans_wrap_like_numpy(dt):
    x = _ints(dt, 3, 70)
    g = rlx_ref.Graph("w")
    xi = g.input("x", [3, 70], rlx_ref.DType.of(x))
    outs = [g.reduce(xi, op, [1]) for op in ("Sum", "Prod", "Max", "Min")]
    outs += [g.cumsum(xi, axis=1, exclusive=False), g.cum_prod(xi, axis=0, exclusive=True),
             g.cum_max(xi, axis=1, exclusive=True)]
    g.set_outputs(outs)
    got, want = CL.compile(g).run({"x": x}), rlx_ref.interpret(g, {"x": x})
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_scratch_buffers_outlive_binding():
    """Segment partials and TopK candidates are plan-owned: later runs still see them."""
    g, feeds = _graph(lambda g, x: g.reduce(x, "Sum", [0]), [_r(300_001)])
    exe = CL.compile(g)
    first = exe.run(feeds)[0]
    import gc

    gc.collect()
    np.testing.assert_array_equal(exe.run(feeds)[0], first)


def test_lowering_errors_name_the_node():
    from rlx_ref.backends.opencl.lower_reduce import lower_topk

    g = rlx_ref.Graph("e")
    x = g.input("x", [2, 3])
    node = g.nodes[g.top_k(x, k=2, shape=S([2, 2], "f32"))]
    object.__setattr__(node.attrs, "k", 4)
    with pytest.raises(ValueError, match=r"k=4 exceeds the last axis size 3 \(at %1\)"):
        lower_topk(node, [g.nodes[x].shape], None)


F64 = np.float64
NARROW_PATHS = [     # every kernel with 64-bit vector lanes, rendered 4 wide
    ("sum rows f64", lambda g, x: g.reduce(x, "Sum", [1]), [_r(5, 1001, dt=F64)]),
    ("prod rows f64", lambda g, x: g.reduce(x, "Prod", [1]), [1 + _r(4, 77, dt=F64) / 50]),
    ("max cols f64", lambda g, x: g.reduce(x, "Max", [1]), [_r(3, 17, 100, dt=F64, nan=0.1)]),
    ("sum rows i32", lambda g, x: g.reduce(x, "Sum", [1]), [_ints(np.int32, 3, 203)]),
    ("prod cols i16", lambda g, x: g.reduce(x, "Prod", [1]), [_ints(np.int16, 2, 9, 70)]),
    ("softmax rows f64", lambda g, x: g.softmax(x, -1), [_r(6, 777, dt=F64)]),
    ("softmax cols f64", lambda g, x: g.softmax(x, 1), [_r(2, 9, 100, dt=F64, nan=0.01)]),
    ("cumsum cols f32", lambda g, x: g.cumsum(x, axis=0, exclusive=False), [_r(40, 130)]),
    ("cumsum cols i32", lambda g, x: g.cumsum(x, axis=0, exclusive=True),
     [_ints(np.int32, 30, 70)]),
    ("cummax cols f64", lambda g, x: g.cum_max(x, axis=0, exclusive=False),
     [_r(40, 130, dt=F64, nan=0.1)]),
    ("argmax rows f64", lambda g, x: g.arg_max(x, axis=1, keep_dim=False),
     [np.round(_r(5, 1000, dt=F64, nan=0.05))]),
    ("argmin rows i32", lambda g, x: g.arg_min(x, axis=1, keep_dim=False),
     [_ints(np.int32, 3, 600)]),
    ("layernorm rows f64", lambda g, x, a, b: g.layer_norm(x, a, b, axis=-1, eps=1e-5),
     [_r(5, 1003, dt=F64), _r(1003, dt=F64), _r(1003, dt=F64)]),
    ("layernorm cols f64", lambda g, x, a, b: g.layer_norm(x, a, b, axis=1, eps=1e-5),
     [_r(3, 50, 101, dt=F64), _r(50, dt=F64), _r(50, dt=F64)]),
]


@pytest.mark.parametrize("name,build,arrays", NARROW_PATHS, ids=[p[0] for p in NARROW_PATHS])
def test_avx2_class_vectors_compute_the_same(monkeypatch, name, build, arrays):
    """An AVX2-class CPU (no 512-bit vectors) gets 4-wide 64-bit lanes; same answers."""
    import dataclasses
    import re

    info, ctx, queue = CL._device()
    if not info.fp64 and any(a.dtype == F64 for a in arrays):
        pytest.skip("no fp64 on this device")
    monkeypatch.setattr(CL, "_dev", (dataclasses.replace(info, vector_bytes=32), ctx, queue))
    _check(build, *arrays, exact=name.startswith("arg"))
    g, _ = _graph(build, arrays)
    srcs = "\n".join(CL.compile(g).kernel_sources().values())
    assert not re.search(r"\b(?:double|long|ulong)(?:8|16)\b", srcs)
    assert re.search(r"\b(?:double|long|ulong)4\b", srcs)
