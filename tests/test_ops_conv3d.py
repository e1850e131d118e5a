"""NCDHW kinds: Conv3d, ConvTranspose3d, Interpolate3d and the 3-D backward kinds against
PyTorch (forward and autograd; skipped without torch), literal loops and the verifier."""
import itertools

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.backward_conv3d import Conv3dBackwardAttrs, MaxPool3dBackwardAttrs
from rlx_ref.ops.conv3d import Conv3dAttrs, ConvTranspose3dAttrs, Interpolate3dAttrs
from rlx_ref.ops.single import run_single, verify_single

RNG = np.random.default_rng(11)
GEOMS = [  # x dims, w dims, stride, padding, dilation, groups
    ((1, 2, 3, 4, 3), (3, 2, 2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
    ((2, 2, 5, 4, 5), (2, 2, 3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 1, 2), 1),
    ((1, 4, 4, 3, 4), (4, 2, 2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1), 2),
]


def rand(*shape):
    return RNG.standard_normal(shape)


def torch_or_skip():
    return pytest.importorskip("torch")


def naive_conv3d(x, w, s, p, d, groups):
    """The literal loop over (n, co, output position, c, tap)."""
    n_, _, *sp = x.shape
    c_out, c_g, *k = w.shape
    outs = [(a + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for a, kk, ss, pp, dd in
            zip(sp, k, s, p, d)]
    out = np.zeros((n_, c_out) + tuple(outs))
    co_g = c_out // groups
    for n, co, *o in itertools.product(range(n_), range(c_out), *map(range, outs)):
        g = co // co_g
        for c, *t in itertools.product(range(c_g), *map(range, k)):
            pos = [oo * ss + tt * dd - pp for oo, ss, tt, dd, pp in zip(o, s, t, d, p)]
            if all(0 <= q < a for q, a in zip(pos, sp)):
                out[(n, co, *o)] += x[(n, g * c_g + c, *pos)] * w[(co, c, *t)]
    return out


@pytest.mark.parametrize("geom", GEOMS)
def test_conv3d_matches_literal_loops(geom):
    xd, wd, s, p, d, g = geom
    x, w = rand(*xd), rand(*wd)
    got = run_single("Conv3d", Conv3dAttrs(s, p, d, g), x, w)
    np.testing.assert_allclose(got, naive_conv3d(x, w, s, p, d, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("geom", GEOMS)
def test_conv3d_and_transpose_match_torch(geom):
    torch = torch_or_skip()
    F = torch.nn.functional
    xd, wd, s, p, d, g = geom
    x, w = rand(*xd), rand(*wd)
    got = run_single("Conv3d", Conv3dAttrs(s, p, d, g), x, w)
    want = F.conv3d(torch.tensor(x), torch.tensor(w), stride=s, padding=p, dilation=d,
                    groups=g).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # the transposed conv of an output-shaped tensor with the same weight (C_out first)
    y = rand(*got.shape)
    op = tuple(0 if ss == 1 else 1 for ss in s)   # output_padding < stride where allowed
    got_t = run_single("ConvTranspose3d", ConvTranspose3dAttrs(s, p, d, op, g), y, w)
    want_t = F.conv_transpose3d(torch.tensor(y), torch.tensor(w), stride=s, padding=p,
                                output_padding=op, dilation=d, groups=g).numpy()
    np.testing.assert_allclose(got_t, want_t, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("geom", GEOMS)
def test_conv3d_backward_kinds_match_torch_autograd(geom):
    torch = torch_or_skip()
    xd, wd, s, p, d, g = geom
    xt = torch.tensor(rand(*xd), requires_grad=True)
    wt = torch.tensor(rand(*wd), requires_grad=True)
    y = torch.nn.functional.conv3d(xt, wt, stride=s, padding=p, dilation=d, groups=g)
    dy = torch.tensor(rand(*y.shape))
    y.backward(dy)
    a = Conv3dBackwardAttrs(wd[2:], s, p, d, g)
    x, w, dyn = xt.detach().numpy(), wt.detach().numpy(), dy.numpy()
    dx = run_single("Conv3dBackwardInput", a, dyn, w, out=Shape(xd, DType.F64))
    dw = run_single("Conv3dBackwardWeight", a, x, dyn, out=Shape(wd, DType.F64))
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_conv3d_backward_adjoint_identity():
    """<Conv3d(x, w), dy> == <x, dX(dy, w)> == <w, dW(x, dy)>, without torch."""
    xd, wd, s, p, d, g = GEOMS[1]
    x, w = rand(*xd), rand(*wd)
    y = run_single("Conv3d", Conv3dAttrs(s, p, d, g), x, w)
    dy = rand(*y.shape)
    a = Conv3dBackwardAttrs(wd[2:], s, p, d, g)
    dx = run_single("Conv3dBackwardInput", a, dy, w, out=Shape(xd, DType.F64))
    dw = run_single("Conv3dBackwardWeight", a, x, dy, out=Shape(wd, DType.F64))
    lhs = float((y * dy).sum())
    assert np.isclose(lhs, float((x * dx).sum()), rtol=1e-10)
    assert np.isclose(lhs, float((w * dw).sum()), rtol=1e-10)


@pytest.mark.parametrize("k,s,p", [((2, 2, 2), (2, 2, 2), (0, 0, 0)),
                                   ((3, 2, 2), (1, 2, 1), (1, 1, 0))])
def test_maxpool3d_backward_matches_torch(k, s, p):
    torch = torch_or_skip()
    xt = torch.tensor(rand(2, 2, 4, 5, 4), requires_grad=True)   # distinct values: no ties
    y = torch.nn.functional.max_pool3d(xt, k, s, p)
    dy = torch.tensor(rand(*y.shape))
    y.backward(dy)
    got = run_single("MaxPool3dBackward", MaxPool3dBackwardAttrs(k, s, p),
                     xt.detach().numpy(), dy.numpy())
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [(4, 6, 3), (1, 2, 7), (3, 3, 3), (5, 1, 2)])
def test_interpolate3d_matches_torch_nearest(size):
    torch = torch_or_skip()
    x = rand(2, 2, 3, 4, 5)
    got = run_single("Interpolate3d", Interpolate3dAttrs(size), x)
    want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode="nearest")
    np.testing.assert_array_equal(got, want.numpy())


def test_interpolate3d_index_rule_by_hand():
    x = np.arange(3, dtype=np.float32).reshape(1, 1, 1, 1, 3)
    got = run_single("Interpolate3d", Interpolate3dAttrs((1, 1, 7)), x)
    # src = min(floor(o·3/7), 2) for o = 0..6: 0 0 0 1 1 2 2
    np.testing.assert_array_equal(got.reshape(-1), [0, 0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize("kind,attrs,shapes,out,needle", [
    ("Conv3d", Conv3dAttrs(), [(1, 2, 3, 3), (1, 2, 1, 1)], None, "(C1)"),
    ("Conv3d", Conv3dAttrs(groups=2), [(1, 3, 2, 2, 2), (2, 1, 1, 1, 1)], None, "(C3)"),
    ("Conv3d", Conv3dAttrs(), [(1, 1, 2, 2, 2), (1, 1, 3, 1, 1)], None, "(C5)"),
    ("Conv3d", Conv3dAttrs(stride=(1, 0, 1)), [(1, 1, 2, 2, 2), (1, 1, 1, 1, 1)], None,
     "(C2)"),
    ("ConvTranspose3d", ConvTranspose3dAttrs(output_padding=(0, 1, 0)),
     [(1, 1, 2, 2, 2), (1, 1, 1, 1, 1)], None, "(C2)"),
    ("Interpolate3d", Interpolate3dAttrs((2, 2)), [(1, 1, 2, 2, 2)], None, "(C2)"),
    ("Interpolate3d", Interpolate3dAttrs((2, 2, 2)), [(1, 1, 2, 2)], None, "(C1)"),
    ("Conv3dBackwardInput", Conv3dBackwardAttrs((2, 2, 2)),
     [(1, 1, 1, 1, 1), (1, 1, 2, 2, 2)], (1, 1, 3, 3, 3), "(C2)"),
    ("Conv3dBackwardWeight", Conv3dBackwardAttrs((1, 1, 1)),
     [(1, 1, 2, 2, 2), (1, 1, 2, 2, 2)], (1, 1, 2, 2, 2), "(C1)"),
    ("MaxPool3dBackward", MaxPool3dBackwardAttrs((2, 2)), [(1, 1, 2, 2, 2), (1, 1, 1, 1, 1)],
     None, "(C1)"),
])
def test_verifier_rejects_bad_geometry(kind, attrs, shapes, out, needle):
    shapes = [Shape(s, DType.F32) for s in shapes]
    msgs = verify_single(kind, attrs, shapes, Shape(out, DType.F32) if out else
                         Shape((1,), DType.F32))
    assert any(needle in m for m in msgs), msgs


def _vjp(kind, attrs, xs, dy):
    """Reverse-mode cotangents of every operand of a one-op graph for cotangent dy."""
    from rlx_ref import Graph
    from rlx_ref.autodiff import SEED, grad
    from rlx_ref.interpret import interpret

    g = Graph("f")
    ids = [g.input(f"x{i}", list(x.shape)) for i, x in enumerate(xs)]
    g.set_outputs([g.op(kind, ids, attrs)])
    gg = grad(g, [f"x{i}" for i in range(len(xs))])
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    return interpret(gg, {**feeds, SEED: dy}, float64=True)


def test_vjp_rules_match_torch_autograd():
    torch = torch_or_skip()
    F = torch.nn.functional
    x, w = rand(1, 2, 3, 4, 3), rand(4, 1, 2, 2, 2)
    cases = [
        ("Conv3d", Conv3dAttrs((1, 2, 1), (1, 0, 1), (1, 1, 2), 2), (x, w),
         lambda a, b: F.conv3d(a, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2),
                               groups=2)),
        ("ConvTranspose3d", ConvTranspose3dAttrs((2, 1, 1), (0, 1, 0), (1, 1, 1), (1, 0, 0)),
         (rand(1, 4, 2, 3, 2), rand(4, 2, 2, 3, 2)),
         lambda a, b: F.conv_transpose3d(a, b, stride=(2, 1, 1), padding=(0, 1, 0),
                                         output_padding=(1, 0, 0))),
        ("Interpolate3d", Interpolate3dAttrs((5, 2, 7)), (rand(2, 1, 3, 4, 3),),
         lambda a: F.interpolate(a, size=(5, 2, 7), mode="nearest")),
    ]
    for kind, a, xs, tf in cases:
        ts = [torch.tensor(v, requires_grad=True) for v in xs]
        y = tf(*ts)
        dy = rand(*y.shape)
        y.backward(torch.tensor(dy))
        got = _vjp(kind, a, xs, dy)
        for g_, t in zip(got, ts):
            np.testing.assert_allclose(g_, t.grad.numpy(), rtol=1e-10, atol=1e-10,
                                       err_msg=kind)
