"""numba-cpu's NCDHW and AxialRope2d kernels: every conformance case, the 16-bit shadows
the suite does not sample, and bit-exact 16-bit Interpolate3d copies."""
import ml_dtypes
import numpy as np
import pytest

from rlx_ref.backends.registry import get_backend
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.attention_axial import AxialRope2dAttrs
from rlx_ref.ops.backward_conv3d import Conv3dBackwardAttrs
from rlx_ref.ops.conv3d import Conv3dAttrs, ConvTranspose3dAttrs, Interpolate3dAttrs
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")
NB = get_backend("numba-cpu")
RNG = np.random.default_rng(2)
KINDS = ["Conv3d", "ConvTranspose3d", "Conv3dBackwardInput", "Conv3dBackwardWeight",
         "MaxPool3dBackward", "Interpolate3d", "AxialRope2d"]


# numba-cpu runs every default conformance case of these kinds in `rlx-ref conformance`
# (CI's first step), so the cases are not run again here
def test_every_kind_runs_natively():
    paths = NB.paths()
    assert all(paths.get(k) == "native" for k in KINDS)


def _both(kind, attrs, *xs, out=None):
    g = single_op_graph(kind, attrs, xs, out)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    return interpret(g, feeds)[0], NB.compile(g).run(feeds)[0]


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_sixteen_bit_kinds_compute_in_f32(dt):
    x = RNG.standard_normal((1, 2, 3, 4, 3)).astype(dt)
    w = RNG.standard_normal((2, 2, 2, 2, 2)).astype(dt)
    cases = [("Conv3d", Conv3dAttrs((1, 2, 1), (1, 0, 1)), (x, w), None),
             ("ConvTranspose3d", ConvTranspose3dAttrs((2, 1, 1)), (x, w), None),
             ("Conv3dBackwardInput", Conv3dBackwardAttrs((2, 2, 2)),
              (RNG.standard_normal((1, 2, 2, 3, 2)).astype(dt), w),
              Shape((1, 2, 3, 4, 3), DType.of(x))),
             ("AxialRope2d", AxialRope2dAttrs(2, 2, 4, 2),
              (RNG.standard_normal((2, 4, 8)).astype(dt),), None)]
    for kind, a, xs, out in cases:
        want, got = _both(kind, a, *xs, out=out)
        assert got.dtype == want.dtype
        tol = 1e-2 if dt is np.float16 else 6e-2
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=tol, atol=tol, err_msg=kind)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16])
def test_interpolate3d_copies_sixteen_bit_values_exactly(dt):
    x = RNG.standard_normal((2, 1, 3, 2, 5)).astype(dt)
    want, got = _both("Interpolate3d", Interpolate3dAttrs((4, 5, 2)), x)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("cols_bytes", [1, 1 << 12])
def test_unfold_and_fold_kinds_split_depth_into_blocks(monkeypatch, cols_bytes):
    from rlx_ref.backends.numba_cpu import lower_conv3d

    monkeypatch.setattr(lower_conv3d, "COLS_BYTES", cols_bytes)   # one or a few planes
    x = RNG.standard_normal((2, 4, 5, 4, 3))
    w = RNG.standard_normal((6, 2, 2, 3, 2))
    a = Conv3dAttrs((1, 1, 2), (1, 1, 0), (2, 1, 1), 2)
    want, got = _both("Conv3d", a, x, w)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    dy = RNG.standard_normal(want.shape)
    b = Conv3dBackwardAttrs((2, 3, 2), a.stride, a.padding, a.dilation, 2)
    want, got = _both("Conv3dBackwardWeight", b, x, dy, out=Shape(w.shape, DType.F64))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    want, got = _both("Conv3dBackwardInput", b, dy, w, out=Shape(x.shape, DType.F64))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    t = ConvTranspose3dAttrs((2, 1, 2), (1, 0, 1), (1, 2, 1), (1, 0, 1), 2)
    xt, wt = RNG.standard_normal((2, 4, 3, 2, 4)), RNG.standard_normal((4, 3, 2, 2, 3))
    want, got = _both("ConvTranspose3d", t, xt, wt)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
