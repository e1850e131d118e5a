"""OpenCL lowering of linalg, attention and conv: every conformance case of those kinds, on
the packed product path as well as the direct one, with the GPU kernels run on the CPU
device, plus tails, k blocks, chunked convs and attention tiles that tiny cases miss."""
import dataclasses

import numpy as np
import pytest

import rlx_ref
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case
from rlx_ref.ops.opdef import get

pytest.importorskip("pyopencl")
from rlx_ref.backends.registry import get_backend

OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

from rlx_ref.backends.opencl.executable import OpenCLExecutable
from rlx_ref.passes import compile_pipeline

KINDS = ["MatMul", "DotGeneral", "Attention", "Rope", "Conv", "ConvTranspose2d", "Pool",
         "Im2Col"]
PACKED = [(k, gpu) for k in ("MatMul", "DotGeneral", "Conv", "ConvTranspose2d")
          for gpu in (False, True)] + [("Attention", True)]
RNG = np.random.default_rng(11)


class _As:
    """The OpenCL backend, compiling for the same device described as a CPU or a GPU (the
    kernel shapes follow ``DeviceInfo.is_cpu``; PoCL runs the GPU ones too)."""

    def __init__(self, gpu: bool):
        self.info, self.context, self.queue = OCL._device()
        self.info = dataclasses.replace(self.info, is_cpu=not gpu)
        self.name = OCL.name

    def __getattr__(self, key):
        return getattr(OCL, key)

    def compile(self, graph, options=None):
        lowered, _ = compile_pipeline(graph, OCL, options)
        return OpenCLExecutable(lowered, self.info, self.context, self.queue, options)


CPU, GPU = _As(gpu=False), _As(gpu=True)


def _all_cases_pass(backend, kind):
    ledger = load_ledger()
    for case in filter_cases(build_cases(kinds=[kind]), kind, None, None):
        res = run_case(backend, case, ledger)
        assert res.status == "ok", (case.id, case.tags, res.message)


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case(kind):
    _all_cases_pass(OCL, kind)


@pytest.mark.parametrize("kind, gpu", PACKED)
def test_every_case_on_the_packed_path(kind, gpu, monkeypatch):
    monkeypatch.setenv("RLX_REF_THRESHOLDS", "opencl:linalg.direct_macs=0")
    _all_cases_pass(GPU if gpu else CPU, kind)


def _graph(op, shapes, dtype="f32", **attrs):
    g = rlx_ref.Graph(op.lower())
    ins = [g.input(f"x{i}", list(s), dtype) for i, s in enumerate(shapes)]
    g.set_outputs([g.op(op, ins, get(op).make_attrs(**attrs) if attrs else None)])
    return g


def _feeds(shapes, dtype):
    out = {}
    for i, s in enumerate(shapes):
        x = RNG.standard_normal(s)
        out[f"x{i}"] = (np.round(x * 4) if np.dtype(dtype).kind == "i" else x).astype(dtype)
    return out


def _check(backend, build, shapes, dt, rtol):
    """``build(dtype)``'s graph on ``backend`` against the oracle in f64 (ints: exact)."""
    feeds = _feeds(shapes, NP[dt])
    got = backend.compile(build(dt)).run(feeds)
    wide = "f64" if NP[dt] in (np.float16, np.float32) else dt
    want = rlx_ref.interpret(build(wide), {k: v.astype(NP[wide]) for k, v in feeds.items()})
    for x, y in zip(got, want):
        assert x.shape == y.shape
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol,
                                   atol=rtol * np.abs(y.astype(np.float64)).max())
    return got


TOL = {"f32": 2e-5, "f64": 1e-12, "f16": 4e-3, "bf16": 3e-2, "i32": 0, "i64": 0}
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32,
      "i64": np.int64}


@pytest.mark.parametrize("backend", [CPU, GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "i32", "i64"])
def test_matmul_tails_k_blocks_and_broadcast(backend, dt):
    # M, N, K off every tile size; K > the CPU's k block; a broadcast batch on both sides
    shapes = [(2, 1, 37, 300), (3, 300, 41)]
    _check(backend, lambda d: _graph("MatMul", shapes, d), shapes, dt, TOL[dt])


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "i32"])
def test_matmul_with_few_rows_reads_operands_in_place(dt, rows):
    # the skinny kernel: whole column runs and a ragged last run, broadcast batches
    shapes = [(3, 1, rows, 300), (2, 300, 77)]
    _check(CPU, lambda d: _graph("MatMul", shapes, d), shapes, dt, TOL[dt])


@pytest.mark.parametrize("backend", [CPU, GPU], ids=["cpu", "gpu"])
def test_dot_general_permuted_axes_packed(backend):
    shapes = [(3, 20, 5, 17), (17, 3, 9, 5)]
    _check(backend, lambda d: _graph("DotGeneral", shapes, d, lhs_contracting=(3, 2),
                                     rhs_contracting=(0, 3), lhs_batch=(0,), rhs_batch=(1,)),
           shapes, "f32", TOL["f32"])


def test_matmul_wraps_integers_like_the_oracle():
    a = np.full((40, 70), 2 ** 20, np.int32)
    b = np.full((70, 30), 2 ** 13, np.int32)
    got = OCL.compile(_graph("MatMul", [a.shape, b.shape], "i32")).run({"x0": a, "x1": b})
    np.testing.assert_array_equal(got[0], np.matmul(a, b))


@pytest.mark.parametrize("backend", [CPU, GPU], ids=["cpu", "gpu"])
def test_conv_in_several_image_chunks(backend, monkeypatch):
    monkeypatch.setenv("RLX_REF_THRESHOLDS", "opencl:conv.chunk_bytes=1")   # an image a launch
    shapes = [(3, 4, 9, 11), (6, 2, 3, 2)]
    _check(backend, lambda d: _graph("Conv", shapes, d, kernel_size=(3, 2), stride=(2, 1),
                                     padding=(1, 1), dilation=(1, 2), groups=2),
           shapes, "f32", TOL["f32"])
    shapes = [(3, 4, 5, 6), (4, 3, 3, 3)]
    _check(backend, lambda d: _graph("ConvTranspose2d", shapes, d, kernel_size=(3, 3),
                                     stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                     groups=2),
           shapes, "f32", TOL["f32"])


@pytest.mark.parametrize("backend", [CPU, GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("mask", ["Causal", ("SlidingWindow", 5), "None"])
def test_attention_row_tiles_and_gqa(backend, mask):
    # S_q = 19 leaves a partial tile of rows; 6 query heads read 2 K/V heads
    shapes = [(2, 19, 6, 16), (2, 23, 2, 16), (2, 23, 2, 8)]
    _check(backend, lambda d: _graph("Attention", shapes, d, num_heads=6, head_dim=16,
                                     v_head_dim=8, mask_kind=mask), shapes, "f32", 1e-5)


def test_attention_bias_in_another_float_dtype():
    q = RNG.standard_normal((1, 2, 5, 4)).astype(np.float32)
    bias = RNG.standard_normal((1, 2, 5, 5)).astype(np.float16)
    g = rlx_ref.Graph("ab")
    ins = [g.input(f"x{i}", list(q.shape), "f32") for i in range(3)]
    ins.append(g.input("x3", list(bias.shape), "f16"))
    g.set_outputs([g.op("Attention", ins, get("Attention").make_attrs(
        num_heads=2, head_dim=4, mask_kind="Bias", attn_logit_softcap=2.5))])
    feeds = {"x0": q, "x1": q[:, :, ::-1].copy(), "x2": q * 2, "x3": bias}
    got = OCL.compile(g).run(feeds)[0]
    np.testing.assert_allclose(got, rlx_ref.interpret(g, feeds)[0], rtol=2e-5, atol=2e-6)


def test_pool_3d_and_im2col_keep_every_bit():
    x = RNG.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    g = _graph("Pool", [x.shape], kind="Max", kernel_size=(2, 3, 2), stride=(2, 1, 3),
               padding=(1, 1, 0))
    np.testing.assert_array_equal(OCL.compile(g).run({"x0": x})[0],
                                  rlx_ref.interpret(g, {"x0": x})[0])
    h = RNG.standard_normal((2, 3, 6, 5)).astype(np.float16)
    g = _graph("Im2Col", [h.shape], "f16", kernel_size=(3, 2), stride=(1, 2), padding=(1, 1),
               dilation=(2, 1))
    np.testing.assert_array_equal(OCL.compile(g).run({"x0": h})[0],
                                  rlx_ref.interpret(g, {"x0": h})[0])


def test_products_are_declared_native():
    paths = OCL.paths()
    for kind in KINDS:
        assert paths[kind] == "native", kind
    assert paths["DenseSolve"] == "host"


def test_attention_hidden_keys_still_poison_with_non_finite_values():
    # keys a causal row never sees get weight 0, and 0·inf is NaN in the reference too
    q, k = (RNG.standard_normal((1, 20, 8)).astype(np.float32) for _ in range(2))
    v = RNG.standard_normal((1, 20, 8)).astype(np.float32)
    v[0, 15, 3], v[0, 17, 5] = np.inf, np.nan
    g = _graph("Attention", [q.shape] * 3, num_heads=2, head_dim=4, mask_kind="Causal")
    feeds = {"x0": q, "x1": k, "x2": v}
    got, want = OCL.compile(g).run(feeds)[0], rlx_ref.interpret(g, feeds)[0]
    assert np.isnan(want[0, 0, 3]) and np.isnan(want[0, 0, 5])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, equal_nan=True)
