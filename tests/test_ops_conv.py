"""Conv family: references against literal nested loops, im2col + matmul, the adjoint identity,
and the verifier's payload checks."""
import itertools

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ir.verify import verify
from rlx_ref.ops.conv import ConvAttrs, ConvTransposeAttrs, Im2ColAttrs, PoolAttrs
from rlx_ref.ops.single import run_single, single_op_graph

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape)


def out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def naive_conv(x, w, stride, pad, dil, groups):
    """The textbook 7-nested loop (n, co, ho, wo, c, i, j)."""
    n_, c_in, h, wd = x.shape
    c_out, c_g, kh, kw = w.shape
    ho, wo = out_size(h, kh, stride[0], pad[0], dil[0]), out_size(wd, kw, stride[1], pad[1],
                                                                  dil[1])
    out = np.zeros((n_, c_out, ho, wo))
    co_g = c_out // groups
    for n in range(n_):
        for co in range(c_out):
            g = co // co_g
            for y in range(ho):
                for z in range(wo):
                    acc = 0.0
                    for c in range(c_g):
                        for i in range(kh):
                            for j in range(kw):
                                r = y * stride[0] + i * dil[0] - pad[0]
                                q = z * stride[1] + j * dil[1] - pad[1]
                                if 0 <= r < h and 0 <= q < wd:
                                    acc += x[n, g * c_g + c, r, q] * w[co, c, i, j]
                    out[n, co, y, z] = acc
    return out


def naive_conv_transpose(x, w, stride, pad, dil, out_pad, groups):
    """Scatter every input element times every tap onto the output, drop what falls outside."""
    n_, c_in, h, wd = x.shape
    _, co_g, kh, kw = w.shape
    ho = (h - 1) * stride[0] + out_pad[0] + dil[0] * (kh - 1) - 2 * pad[0] + 1
    wo = (wd - 1) * stride[1] + out_pad[1] + dil[1] * (kw - 1) - 2 * pad[1] + 1
    out = np.zeros((n_, co_g * groups, ho, wo))
    ci_g = c_in // groups
    for n, ci, y, z, o, i, j in itertools.product(range(n_), range(c_in), range(h), range(wd),
                                                 range(co_g), range(kh), range(kw)):
        r = y * stride[0] + i * dil[0] - pad[0]
        q = z * stride[1] + j * dil[1] - pad[1]
        if 0 <= r < ho and 0 <= q < wo:
            out[n, (ci // ci_g) * co_g + o, r, q] += x[n, ci, y, z] * w[ci, o, i, j]
    return out


CONV_CASES = [
    # x shape, (C_out, kh, kw), stride, padding, dilation, groups
    ((1, 1, 4, 4), (1, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 5, 6), (4, 3, 2), (2, 1), (1, 0), (1, 1), 1),
    ((1, 4, 7, 5), (6, 3, 3), (2, 3), (2, 1), (2, 1), 2),
    ((1, 3, 5, 5), (3, 2, 2), (1, 1), (1, 1), (1, 2), 3),
    ((2, 2, 3, 7), (3, 1, 3), (1, 2), (0, 1), (1, 3), 1),
]


@pytest.mark.parametrize("xs, wk, stride, pad, dil, groups", CONV_CASES)
def test_conv_matches_nested_loops(xs, wk, stride, pad, dil, groups):
    x = rand(*xs)
    w = rand(wk[0], xs[1] // groups, wk[1], wk[2])
    a = ConvAttrs(wk[1:], stride, pad, dil, groups)
    got = run_single("Conv", a, x, w)
    np.testing.assert_allclose(got, naive_conv(x, w, stride, pad, dil, groups), atol=1e-12)


@pytest.mark.parametrize("xs, wk, stride, pad, dil, groups", [c for c in CONV_CASES
                                                                 if c[-1] == 1])
def test_conv_is_im2col_times_weight(xs, wk, stride, pad, dil, groups):
    x = rand(*xs)
    w = rand(wk[0], xs[1], wk[1], wk[2])
    cols = run_single("Im2Col", Im2ColAttrs(wk[1:], stride, pad, dil), x)
    n, ho = xs[0], out_size(xs[2], wk[1], stride[0], pad[0], dil[0])
    wo = out_size(xs[3], wk[2], stride[1], pad[1], dil[1])
    via_matmul = (cols @ w.reshape(wk[0], -1).T).reshape(n, ho, wo, wk[0]).transpose(0, 3, 1, 2)
    conv = run_single("Conv", ConvAttrs(wk[1:], stride, pad, dil), x, w)
    np.testing.assert_allclose(conv, via_matmul, atol=1e-12)


def test_rank3_conv_is_rank4_with_unit_height():
    x, w = rand(2, 3, 9), rand(4, 3, 3)
    a = ConvAttrs((1, 3), (1, 2), (0, 1), (1, 2))
    got = run_single("Conv", a, x, w)
    want = run_single("Conv", a, x[:, :, None], w[:, :, None])[:, :, 0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, naive_conv(x[:, :, None], w[:, :, None], (1, 2), (0, 1),
                                               (1, 2), 1)[:, :, 0], atol=1e-12)


CONVT_CASES = [
    # x shape, (C_out/g, kh, kw), stride, padding, dilation, output_padding, groups
    ((1, 1, 2, 2), (1, 3, 3), (1, 1), (0, 0), (1, 1), (0, 0), 1),
    ((2, 2, 3, 4), (3, 4, 4), (2, 2), (1, 1), (1, 1), (1, 0), 1),
    ((1, 4, 3, 3), (2, 3, 2), (3, 2), (1, 0), (2, 1), (2, 1), 2),
    ((1, 3, 2, 5), (1, 2, 3), (1, 2), (0, 1), (1, 2), (0, 1), 3),
]


@pytest.mark.parametrize("xs, wk, stride, pad, dil, out_pad, groups", CONVT_CASES)
def test_conv_transpose_matches_scatter_loop(xs, wk, stride, pad, dil, out_pad, groups):
    x, w = rand(*xs), rand(xs[1], *wk)
    a = ConvTransposeAttrs(wk[1:], stride, pad, dil, out_pad, groups)
    got = run_single("ConvTranspose2d", a, x, w)
    np.testing.assert_allclose(got, naive_conv_transpose(x, w, stride, pad, dil, out_pad,
                                                         groups), atol=1e-12)


@pytest.mark.parametrize("xs, wk, stride, pad, dil, groups", CONV_CASES)
def test_conv_transpose_is_the_adjoint_of_conv(xs, wk, stride, pad, dil, groups):
    """<conv(x), y> == <x, convT(y)> with the same weight array and geometry."""
    x = rand(*xs)
    w = rand(wk[0], xs[1] // groups, wk[1], wk[2])
    y_conv = run_single("Conv", ConvAttrs(wk[1:], stride, pad, dil, groups), x, w)
    y = rand(*y_conv.shape)
    # output_padding recovers the input rows the floor in the conv shape dropped
    op = tuple((n + 2 * p - d * (k - 1) - 1) % s for n, k, s, p, d in
               zip(xs[2:], wk[1:], stride, pad, dil))
    a = ConvTransposeAttrs(wk[1:], stride, pad, dil, op, groups)
    xt = run_single("ConvTranspose2d", a, y, w)
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.vdot(y_conv, y), np.vdot(x, xt), rtol=1e-12)


def naive_pool(x, kind, kernel, stride, pad):
    lead, sp = x.shape[:2], x.shape[2:]
    outs = [(n + 2 * p - k) // s + 1 for n, k, s, p in zip(sp, kernel, stride, pad)]
    out = np.zeros(lead + tuple(outs))
    for idx in itertools.product(*(range(v) for v in lead + tuple(outs))):
        vals = []
        for offs in itertools.product(*(range(k) for k in kernel)):
            pos = [o * s + t - p for o, s, t, p in zip(idx[2:], stride, offs, pad)]
            if all(0 <= q < n for q, n in zip(pos, sp)):
                vals.append(x[idx[:2] + tuple(pos)])
        out[idx] = {"Max": lambda v: max(v, default=-np.inf),
                    "Min": lambda v: min(v, default=np.inf),
                    "Sum": sum, "Prod": lambda v: np.prod(v) if v else 1.0,
                    "Mean": lambda v: sum(v) / np.prod(kernel)}[kind](vals)
    return out


@pytest.mark.parametrize("kind", ["Max", "Mean", "Sum", "Min", "Prod"])
@pytest.mark.parametrize("xs, kernel, stride, pad", [
    ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0)),
    ((2, 1, 5, 7), (3, 2), (2, 3), (1, 1)),
    ((1, 1, 4, 4), (3, 3), (1, 1), (2, 2)),      # corner windows are all padding
    ((1, 2, 3, 4, 5), (2, 3, 2), (1, 2, 2), (1, 1, 0)),
])
def test_pool_matches_nested_loops(kind, xs, kernel, stride, pad):
    x = rand(*xs)
    got = run_single("Pool", PoolAttrs(kind, kernel, stride, pad), x)
    np.testing.assert_allclose(got, naive_pool(x, kind, kernel, stride, pad), atol=1e-12)


def test_pool_mean_counts_padding_and_max_never_picks_it():
    x = -np.ones((1, 1, 2, 2), np.float32)
    mean = run_single("Pool", PoolAttrs("Mean", (2, 2), (1, 1), (1, 1)), x)
    np.testing.assert_array_equal(mean[0, 0], [[-0.25, -0.5, -0.25], [-0.5, -1, -0.5],
                                               [-0.25, -0.5, -0.25]])
    mx = run_single("Pool", PoolAttrs("Max", (2, 2), (1, 1), (1, 1)), x)
    np.testing.assert_array_equal(mx, -np.ones((1, 1, 3, 3)))


def test_pool_max_propagates_nan():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    got = run_single("Pool", PoolAttrs("Max", (2, 2), (2, 2)), x)
    assert np.isnan(got[0, 0, 0, 0]) and not np.isnan(got[0, 0, 1]).any()


def test_im2col_element_order():
    x = rand(2, 3, 4, 5)
    k, s, p, d = (2, 3), (1, 2), (1, 1), (2, 1)
    cols = run_single("Im2Col", Im2ColAttrs(k, s, p, d), x)
    ho, wo = out_size(4, 2, 1, 1, 2), out_size(5, 3, 2, 1, 1)
    assert cols.shape == (2 * ho * wo, 3 * 2 * 3)
    for n, y, z, c, i, j in itertools.product(range(2), range(ho), range(wo), range(3),
                                              range(2), range(3)):
        r, q = y * s[0] + i * d[0] - p[0], z * s[1] + j * d[1] - p[1]
        v = x[n, c, r, q] if 0 <= r < 4 and 0 <= q < 5 else 0.0
        assert cols[(n * ho + y) * wo + z, (c * 2 + i) * 3 + j] == v


def test_f16_accumulates_in_f32():
    x = np.full((1, 1, 1, 64), 0.1, np.float16)
    w = np.ones((1, 1, 1, 64), np.float16)
    got = run_single("Conv", ConvAttrs((1, 64)), x, w)
    assert got.dtype == np.float16
    assert got[0, 0, 0, 0] == np.float16(np.float32(np.float16(0.1)) * 64)


def test_dynamic_batch_shapes():
    x = Shape([Dyn(0), 2, 5, 5], DType.F32)
    w = Shape([3, 2, 3, 3], DType.F32)
    g = single_op_graph("Conv", ConvAttrs((3, 3)), [x, w])
    assert g.nodes[-1].shape.dims == (Dyn(0), 3, 3, 3)
    g = single_op_graph("Im2Col", Im2ColAttrs((3, 3)), [x])
    assert g.nodes[-1].shape.dims == (Dyn(2), 18)
    g = single_op_graph("Pool", PoolAttrs("Max", (2, 2), (2, 2)), [x])
    assert g.nodes[-1].shape.dims == (Dyn(0), 2, 2, 2)


F = DType.F32


def errors(kind, attrs, shapes, out):
    g = single_op_graph(kind, attrs, [Shape(s, d) for s, d in shapes], out=Shape(*out))
    return [str(e) for e in verify(g)]


@pytest.mark.parametrize("kind, attrs, shapes, out, msg", [
    ("Conv", ConvAttrs((3, 3)), [((1, 4, 5, 5), F), ((2, 3, 3, 3), F)], ((1, 2, 3, 3), F),
     "(C3) conv2d weight C_in/g=3 * groups=1 != input C=4"),
    ("Conv", ConvAttrs((3, 3), groups=2), [((1, 4, 5, 5), F), ((3, 2, 3, 3), F)],
     ((1, 3, 3, 3), F), "(C3) groups=2 does not divide C_out=3"),
    ("Conv", ConvAttrs((3, 2)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), F)], ((1, 2, 3, 4), F),
     "does not match the weight's spatial dims"),
    ("Conv", ConvAttrs((3, 3)), [((2, 5, 5), F), ((2, 2, 3, 3), F)], ((1, 2, 3, 3), F),
     "(C1) Conv weight must have the input's rank 3"),
    ("Conv", ConvAttrs((3, 3)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), DType.F16)],
     ((1, 2, 3, 3), F), "(C4) Conv operands must share one dtype"),
    ("Conv", ConvAttrs((3, 3)), [((1, 2, 5, 5), DType.I32), ((2, 2, 3, 3), DType.I32)],
     ((1, 2, 3, 3), DType.I32), "(C4) Conv is defined on float tensors"),
    ("Conv", ConvAttrs((5, 5)), [((1, 2, 3, 3), F), ((2, 2, 5, 5), F)], ((1, 2, 1, 1), F),
     "(C5) the dilated kernel spans 5 along H"),
    ("Conv", ConvAttrs((3, 3), (0, 1)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), F)],
     ((1, 2, 3, 3), F), "(C2) stride entries must be >= 1"),
    ("Conv", ConvAttrs((3, 3), (1, 1, 1)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), F)],
     ((1, 2, 3, 3), F), "(C2) stride has 3 entries, expected at most 2"),
    ("Conv", ConvAttrs((3,)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), F)], ((1, 2, 3, 3), F),
     "(C2) kernel_size has 1 entries, expected 2"),
    ("Conv", ConvAttrs((3, 3), padding=(1, 0)), [((1, 2, 5), F), ((2, 2, 3), F)],
     ((1, 2, 3), F), "(C2) a rank-3 input [N, C, L] is read as [N, C, 1, L]"),
    ("Conv", ConvAttrs((3, 3)), [((1, 2, 5, 5), F), ((2, 2, 3, 3), F)], ((1, 2, 5, 5), F),
     "shape mismatch: declared [1, 2, 5, 5] f32, inferred [1, 2, 3, 3] f32"),
    ("ConvTranspose2d", ConvTransposeAttrs((2, 2), (2, 2), output_padding=(2, 0)),
     [((1, 2, 3, 3), F), ((2, 1, 2, 2), F)], ((1, 1, 8, 6), F),
     "(C2) output_padding 2 along H must be smaller than stride 2 or dilation 1"),
    ("ConvTranspose2d", ConvTransposeAttrs((2, 2)), [((1, 2, 3, 3), F), ((3, 1, 2, 2), F)],
     ((1, 1, 4, 4), F), "(C3) conv_transpose2d weight C_in=3 != input C=2"),
    ("ConvTranspose2d", ConvTransposeAttrs((1, 1), padding=(1, 1)),
     [((1, 2, 1, 1), F), ((2, 1, 1, 1), F)], ((1, 1, 1, 1), F),
     "(C5) ConvTranspose2d output along H would be -1"),
    ("Pool", PoolAttrs("Max", (2, 2)), [((1, 2, 3, 3, 3), F)], ((1, 2, 2, 2), F),
     "(C1) a 2-D pool needs a rank-4 input (NCHW), got rank 5"),
    ("Pool", PoolAttrs("Mean", (4, 4)), [((1, 1, 3, 3), F)], ((1, 1, 1, 1), F),
     "(C5) pool window 4 with stride 1 and padding 0 leaves no output"),
    ("Pool", PoolAttrs("Max", (2, 2), (0, 1)), [((1, 1, 3, 3), F)], ((1, 1, 2, 2), F),
     "(C2) stride entries must be >= 1"),
    ("Pool", PoolAttrs("Max", (2, 2)), [((1, 1, 3, 3), F)], ((1, 1, 3, 3), F),
     "shape mismatch: declared [1, 1, 3, 3] f32, inferred [1, 1, 2, 2] f32"),
    ("Im2Col", Im2ColAttrs((2, 2)), [((2, 3, 3), F)], ((4, 12), F),
     "(C1) Im2Col input must be NCHW (rank 4), got rank 3"),
])
def test_verifier_rejects(kind, attrs, shapes, out, msg):
    errs = errors(kind, attrs, shapes, out)
    assert any(msg in e for e in errs), errs
    assert all(e.startswith("at %") for e in errs)


def test_wrong_arity_is_reported():
    g = single_op_graph("Conv", ConvAttrs((1, 1)), [Shape([1, 1, 2, 2], F)],
                        out=Shape([1, 1, 2, 2], F))
    assert any("Conv expects 2 inputs, got 1" in str(e) for e in verify(g))
