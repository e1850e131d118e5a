"""numba-cpu conv/matmul paths: the strided BLAS view, how products are split among
threads, the depthwise and late-layer Conv paths, and Pool's row runs, against numpy or
the oracle (float64, so both are nearly exact)."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.ops.opdef import get

pytest.importorskip("numba")
from rlx_ref.backends.numba_cpu import lower_linalg  # noqa: E402
from rlx_ref.backends.numba_cpu._gemm_src import GEMM_HEAD  # noqa: E402
from rlx_ref.backends.numba_cpu.kernels import compile_kernel  # noqa: E402
from rlx_ref.backends.registry import get_backend  # noqa: E402

NB = get_backend("numba-cpu")
RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 3])           # 1: the GEMV branch
def test_gemm_view_writes_only_its_block_of_strided_views(dt, rows):
    fn = compile_kernel("gemm_view", GEMM_HEAD).fn
    a, b = RNG.standard_normal((4, 70)).astype(dt), RNG.standard_normal((80, 90)).astype(dt)
    out = np.full((6, 100), 7.0, dt)
    fn(a[:rows, 5:65], b[5:65, 3:83], out[2:2 + rows, 10:90], np.array([1, 0], dt))
    want = a[:rows, 5:65] @ b[5:65, 3:83]
    np.testing.assert_allclose(out[2:2 + rows, 10:90], want, rtol=1e-5 if dt == np.float32
                               else 1e-12, atol=1e-4 if dt == np.float32 else 1e-12)
    out[2:2 + rows, 10:90] = 7.0
    assert (out == 7.0).all()                       # nothing outside the block written


def test_gemm_view_with_empty_k_writes_zeros():
    fn = compile_kernel("gemm_view", GEMM_HEAD).fn
    out = np.ones((3, 4))
    fn(np.zeros((3, 0)), np.zeros((0, 4)), out, np.array([1.0, 0.0]))
    assert not out.any()


def test_products_split_by_columns_when_rows_are_few(monkeypatch):
    monkeypatch.setattr(lower_linalg, "numba_threads", lambda: 2)
    assert lower_linalg._blocks(1, 128, 2304) == (128, 1152)    # columns: pack rhs once
    assert lower_linalg._blocks(1, 1, 50257) == (1, 25136)      # decode: halves of rhs
    assert lower_linalg._blocks(1, 1024, 512) == (512, 512)     # tall: rows
    assert lower_linalg._blocks(1, 128, 40) == (64, 40)         # narrow: rows
    assert lower_linalg._blocks(12, 128, 64) == (128, 64)       # a matrix per thread


@pytest.mark.parametrize("m, n", [(1, 8001), (96, 700)])   # >= linalg.blas_par_min
def test_column_blocks_match_numpy(monkeypatch, m, n):
    monkeypatch.setattr(lower_linalg, "numba_threads", lambda: 2)
    g = rlx_ref.Graph("mm")
    a, b = g.input("a", [m, 300], "f64"), g.input("b", [300, n], "f64")
    g.set_outputs([g.op("MatMul", [a, b])])
    feeds = {"a": RNG.standard_normal((m, 300)), "b": RNG.standard_normal((300, n))}
    exe = NB.compile(g)
    np.testing.assert_allclose(exe.run(feeds)[0], feeds["a"] @ feeds["b"], rtol=1e-12,
                               atol=1e-10)
    assert exe.variants_run() == ["numba-cpu:matmul.blas.par"]


def _conv_check(x_shape, w_shape, variant, **attrs):
    g = rlx_ref.Graph("conv")
    x, w = g.input("x", list(x_shape), "f64"), g.input("w", list(w_shape), "f64")
    g.set_outputs([g.op("Conv", [x, w], get("Conv").make_attrs(**attrs))])
    feeds = {"x": RNG.standard_normal(x_shape), "w": RNG.standard_normal(w_shape)}
    exe = NB.compile(g)
    np.testing.assert_allclose(exe.run(feeds)[0], rlx_ref.interpret(g, feeds)[0],
                               rtol=1e-12, atol=1e-12)
    assert any(v.startswith(f"numba-cpu:{variant}") for v in exe.variants_run())


@pytest.mark.parametrize("stride, padding, dilation", [
    ((1, 1), (2, 2), (1, 1)), ((2, 2), (1, 2), (1, 1)), ((2, 1), (3, 0), (2, 2)),
    ((3, 3), (0, 0), (1, 1))])
def test_depthwise_conv_with_a_channel_multiplier(stride, padding, dilation):
    _conv_check((2, 6, 13, 11), (12, 1, 5, 3), "conv.depthwise", kernel_size=(5, 3),
                stride=stride, padding=padding, dilation=dilation, groups=6)


def test_late_layer_conv_with_fewer_positions_than_filters_takes_the_gemm_path():
    _conv_check((1, 16, 5, 5), (40, 16, 3, 3), "conv.gemm", kernel_size=(3, 3),
                padding=(1, 1))


@pytest.mark.parametrize("kind", ["Max", "Min", "Mean", "Sum"])
def test_pool_rows_with_stride_padding_and_nan(kind):
    g = rlx_ref.Graph("pool")
    x = g.input("x", [2, 3, 11, 12], "f64")
    g.set_outputs([g.op("Pool", [x], get("Pool").make_attrs(
        kind=kind, kernel_size=(3, 4), stride=(2, 3), padding=(1, 2)))])
    xv = RNG.standard_normal((2, 3, 11, 12))
    xv[0, 1, 4, 5] = np.nan
    got, want = NB.compile(g).run({"x": xv})[0], rlx_ref.interpret(g, {"x": xv})[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert np.isnan(got).any()
