"""Normalization kinds against the textbook formulas and per-row loops."""
import math

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import op_from_json, parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops.normalization import AxisNormAttrs, EpsAttrs, GroupNormAttrs
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, single_op_graph

RNG = np.random.default_rng(7)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def f64(x):
    return np.asarray(x, np.float64)


def row_stats(values):
    """Mean and biased variance of a list of floats, written out."""
    n = len(values)
    mean = sum(values) / n
    return mean, sum((v - mean) ** 2 for v in values) / n


def loop_norm(x, axis, eps, gamma, beta, rms=False):
    """Normalize every 1-D fibre of ``x`` along ``axis`` with Python arithmetic."""
    x = f64(x)
    moved = np.moveaxis(x, axis, -1)
    out = np.empty_like(moved)
    g, b = f64(gamma).reshape(-1), f64(beta).reshape(-1)
    for idx in np.ndindex(moved.shape[:-1]):
        row = [float(v) for v in moved[idx]]
        if rms:
            denom = math.sqrt(sum(v * v for v in row) / len(row) + eps)
            out[idx] = [v / denom * g[i] + b[i] for i, v in enumerate(row)]
        else:
            mean, var = row_stats(row)
            denom = math.sqrt(var + eps)
            out[idx] = [(v - mean) / denom * g[i] + b[i] for i, v in enumerate(row)]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("kind", ["LayerNorm", "RmsNorm"])
@pytest.mark.parametrize("shape, axis", [((3, 7), -1), ((2, 3, 5), 2), ((2, 3, 5), 1),
                                         ((4, 2, 3), 0), ((6,), 0)])
def test_axis_norms_match_row_loop(kind, shape, axis):
    x = rnd(*shape) * 3 + 1
    c = shape[axis]
    gamma, beta = rnd(c), rnd(c)
    a = AxisNormAttrs(axis, 1e-3)
    want = loop_norm(x, axis, a.eps, gamma, beta, rms=kind == "RmsNorm")
    np.testing.assert_allclose(run_single(kind, a, x, gamma, beta, float64=True), want,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(run_single(kind, a, x, gamma, beta), want, rtol=2e-5, atol=2e-5)


def test_layer_norm_matches_numpy_formula_and_eps_is_inside_sqrt():
    x = rnd(4, 6)
    g, b = rnd(6), rnd(6)
    a = AxisNormAttrs(-1, 0.25)
    xd = f64(x)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + a.eps) * g + b
    np.testing.assert_allclose(run_single("LayerNorm", a, x, g, b, float64=True), want,
                               rtol=1e-12)
    # (0, 2): mean 1, var 1, eps 3 -> (x - 1)/sqrt(1 + 3) = ±1/2 (eps outside would give ±1/4)
    one, zero = np.ones(2, np.float32), np.zeros(2, np.float32)
    out = run_single("LayerNorm", AxisNormAttrs(-1, 3.0), np.float32([[0, 2]]), one, zero)
    np.testing.assert_array_equal(out, [[-0.5, 0.5]])
    rms = run_single("RmsNorm", AxisNormAttrs(-1, 3.0), np.float32([[1, 1]]), one, zero)
    np.testing.assert_array_equal(rms, [[0.5, 0.5]])     # 1/sqrt(1 + 3); no mean subtraction


def test_rms_norm_adds_beta_and_uses_plain_gamma():
    x, g, b = rnd(3, 4), rnd(4), rnd(4)
    got = run_single("RmsNorm", AxisNormAttrs(-1, 1e-6), x, g, b, float64=True)
    xd = f64(x)
    np.testing.assert_allclose(got, xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6) * g
                               + b, rtol=1e-6)


def test_half_precision_is_computed_in_f32_and_rounded_once():
    x, g, b = (t.astype(np.float16) for t in (rnd(3, 16), rnd(16), rnd(16)))
    a = AxisNormAttrs(-1, 1e-5)
    got = run_single("LayerNorm", a, x, g, b)
    assert got.dtype == np.float16
    ref = run_single("LayerNorm", a, *(t.astype(np.float32) for t in (x, g, b)))
    np.testing.assert_array_equal(got, ref.astype(np.float16))


def loop_group_norm(x, groups, eps, gamma, beta):
    x = f64(x)
    n, c = x.shape[:2]
    cpg = c // groups
    out = np.empty_like(x)
    for i in range(n):
        for grp in range(groups):
            chans = range(grp * cpg, (grp + 1) * cpg)       # contiguous channel block
            vals = [float(v) for ch in chans for v in x[i, ch].reshape(-1)]
            mean, var = row_stats(vals)
            for ch in chans:
                out[i, ch] = (x[i, ch] - mean) / math.sqrt(var + eps) * gamma[ch] + beta[ch]
    return out


@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 2), 3), ((1, 4, 5), 2), ((2, 4, 2, 2), 1),
                                           ((1, 3, 4), 3)])
def test_group_norm_matches_group_loop(shape, groups):
    x, g, b = rnd(*shape), rnd(shape[1]), rnd(shape[1])
    a = GroupNormAttrs(groups, 1e-4)
    np.testing.assert_allclose(run_single("GroupNorm", a, x, g, b, float64=True),
                               loop_group_norm(x, groups, a.eps, f64(g), f64(b)), rtol=1e-11,
                               atol=1e-12)


def test_group_norm_special_cases():
    x, g, b = rnd(2, 4, 3), rnd(4), rnd(4)
    # one group = LayerNorm over everything but the batch, then per-channel affine
    one = run_single("GroupNorm", GroupNormAttrs(1, 1e-5), x, np.ones(4, np.float32),
                     np.zeros(4, np.float32), float64=True)
    flat = loop_norm(x.reshape(2, 12), -1, 1e-5, np.ones(12), np.zeros(12)).reshape(x.shape)
    np.testing.assert_allclose(one, flat, rtol=1e-11, atol=1e-12)
    # groups = C is instance norm
    inst = run_single("GroupNorm", GroupNormAttrs(4, 1e-5), x, g, b, float64=True)
    np.testing.assert_allclose(inst, loop_norm(x, -1, 1e-5, np.ones(3), np.zeros(3)) *
                               f64(g)[:, None] + f64(b)[:, None], rtol=1e-11, atol=1e-12)


def test_layer_norm2d_is_layer_norm_over_channels():
    x, g, b = rnd(2, 5, 3, 4), rnd(5), rnd(5)
    got = run_single("LayerNorm2d", EpsAttrs(1e-6), x, g, b, float64=True)
    ln = run_single("LayerNorm", AxisNormAttrs(-1, 1e-6), np.moveaxis(x, 1, -1).copy(), g, b,
                    float64=True)
    np.testing.assert_allclose(got, np.moveaxis(ln, -1, 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, loop_norm(x, 1, EpsAttrs(1e-6).eps, g, b), rtol=1e-11,
                               atol=1e-12)


def test_batch_norm_inference_uses_the_last_axis():
    x = rnd(2, 3, 4)
    g, b, m, v = rnd(4), rnd(4), rnd(4), np.abs(rnd(4)) + 0.1
    a = EpsAttrs(1e-3)
    want = f64(g) * (f64(x) - f64(m)) / np.sqrt(f64(v) + a.eps) + f64(b)
    np.testing.assert_allclose(run_single("BatchNormInference", a, x, g, b, m, v, float64=True),
                               want, rtol=1e-12)


def test_hand_samples_and_edge_values():
    for kind in ("LayerNorm", "RmsNorm", "GroupNorm", "LayerNorm2d", "BatchNormInference"):
        hand = [s for s in get(kind).samples(RNG) if "hand" in s.tags]
        assert hand and all(s.expect is not None for s in hand)
    x = np.float32([[1, np.nan, 2], [np.inf, 0, 1], [4, 4, 4]])
    out = run_single("LayerNorm", AxisNormAttrs(-1, 1e-5), x, np.ones(3, np.float32),
                     np.full(3, 0.5, np.float32))
    assert np.isnan(out[:2]).all()
    np.testing.assert_array_equal(out[2], [0.5, 0.5, 0.5])     # constant row -> beta


def _msgs(kind, attrs, shapes, out=None):
    shapes = [s if isinstance(s, Shape) else Shape(s, DType.F32) for s in shapes]
    g = single_op_graph(kind, attrs, shapes, out=out or shapes[0])
    return " | ".join(str(e) for e in verify(g))


@pytest.mark.parametrize("kind, attrs, shapes, msg", [
    ("LayerNorm", AxisNormAttrs(-1, 1e-5), [(2, 4), (5,), (4,)],
     "(C3) LayerNorm gamma width (5) does not match the normalised axis (4)"),
    ("RmsNorm", AxisNormAttrs(-1, 1e-5), [(2, 4), (4,), (2, 3)],
     "(C3) RmsNorm beta must be rank-1 [C] (or collapse to it): got rank 2 with 6 elements, "
     "expected 4"),
    ("LayerNorm", AxisNormAttrs(2, 1e-5), [(2, 4), (4,), (4,)],
     "(C2) axis 2 is out of range for rank 2"),
    ("LayerNorm", AxisNormAttrs(0, 1e-5), [(2, 4), (4,), (4,)],
     "(C3) LayerNorm gamma width (4) does not match the normalised axis (2)"),
    ("LayerNorm", AxisNormAttrs(-1, 1e-5), [Shape((2, 4), DType.I32), (4,), (4,)],
     "(C1) LayerNorm operand `x` must be a float tensor"),
    ("GroupNorm", GroupNormAttrs(3, 1e-5), [(1, 4, 2), (4,), (4,)],
     "(C4) GroupNorm num_groups (3) must divide the channel count C (4) and lie in 1..4"),
    # C = 0: every count divides it, but the oracle would hold one statistic per group
    ("GroupNorm", GroupNormAttrs(2**31, 1e-5), [(1, 0, 2), (0,), (0,)],
     "(C4) GroupNorm num_groups (2147483648) must divide the channel count C (0) and lie "
     "in 1..1"),
    ("GroupNorm", GroupNormAttrs(0, 1e-5), [(1, 4, 2), (4,), (4,)],
     "(C4) GroupNorm num_groups must be positive"),
    ("GroupNorm", GroupNormAttrs(1, 1e-5), [(4,), (4,), (4,)], "(C2) GroupNorm needs x"),
    ("LayerNorm2d", EpsAttrs(1e-5), [(1, 4, 2, 2), (2,), (4,)],
     "(C3) LayerNorm2d gamma width (2) does not match the normalised axis (4)"),
    ("BatchNormInference", EpsAttrs(1e-5), [(2, 3), (3,), (3,), (3,), (2,)],
     "(C3) BatchNormInference running_var width (2)"),
])
def test_verifier_errors(kind, attrs, shapes, msg):
    assert msg in _msgs(kind, attrs, shapes)


def test_batch_norm_declared_shape_is_checked():
    shapes = [Shape((2, 3), DType.F32)] + [Shape((3,), DType.F32)] * 4
    assert "shape mismatch" in _msgs("BatchNormInference", EpsAttrs(1e-5), shapes,
                                     out=Shape((3, 2), DType.F32))


# serde_json prints f32 with ryu: positional for 1e-6 <= |v| < 1e13, so 1e-5 is "0.00001"
@pytest.mark.parametrize("text, kind", [
    ('{"RmsNorm":{"axis":-1,"eps":1e-7}}', "RmsNorm"),
    ('{"LayerNorm":{"axis":-1,"eps":0.00001}}', "LayerNorm"),
    ('{"RmsNorm":{"axis":-1,"eps":0.000001}}', "RmsNorm"),
    ('{"GroupNorm":{"num_groups":32,"eps":0.00001}}', "GroupNorm"),
    ('{"LayerNorm2d":{"eps":0.000001}}', "LayerNorm2d"),
    ('{"BatchNormInference":{"eps":0.001}}', "BatchNormInference"),
])
def test_payload_text_is_serde_exact(text, kind):
    import json

    op = op_from_json(json.loads(text))
    assert op.kind == kind
    assert str(op) == text


def test_graph_round_trip():
    g = single_op_graph("GroupNorm", GroupNormAttrs(2, 1e-5), [rnd(1, 4, 3), rnd(4), rnd(4)])
    assert parse(print_graph(g)) == g


def test_dynamic_feature_dims_are_checked_at_run_time():
    from rlx_ref.interpret import InterpretError, Interpreter
    from rlx_ref.ir.shape import Dyn

    g = single_op_graph("LayerNorm", AxisNormAttrs(-1, 1e-5),
                        [Shape((2, Dyn(0)), DType.F32), Shape((1,), DType.F32),
                         Shape((Dyn(0),), DType.F32)])
    assert verify(g) == []
    with pytest.raises(InterpretError, match=r"\(C3\) a per-feature vector has 1 elements"):
        Interpreter(g).run({"x0": rnd(2, 4), "x1": rnd(1), "x2": rnd(4)})
    g = single_op_graph("GroupNorm", GroupNormAttrs(3, 1e-5),
                        [Shape((1, Dyn(0), 2), DType.F32)] + [Shape((Dyn(0),), DType.F32)] * 2)
    assert verify(g) == []
    with pytest.raises(InterpretError,
                       match=r"\(C4\) GroupNorm num_groups \(3\) must divide the channel "
                             r"count C \(4\)"):
        Interpreter(g).run({"x0": rnd(1, 4, 2), "x1": rnd(4), "x2": rnd(4)})
