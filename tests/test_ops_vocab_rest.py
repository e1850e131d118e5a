"""KvAppend, Histogram, FusedMatMulResidual, the KAN spline kinds and the Synth kinds:
oracles against independent numpy formulas, RLX's edge rules, constraint errors, payload
text round trips, finite-difference gradients of the backward kinds, and numba-cpu's
kernels against the oracle."""
import math

import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.builder import BuildError
from rlx_ref.interpret import InterpretError
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ops.opdef import OpError
from rlx_ref.ops.synth import codebook

RNG = np.random.default_rng(11)


def graph(op_kind, arrays, out_shape=None, /, **fields):
    g = Graph("t")
    ins = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
    g.set_outputs([g.op(op_kind, ins, shape=out_shape, **fields)])
    return g


def run(op_kind, arrays, /, **fields):
    g = graph(op_kind, arrays, **fields)
    return interpret(g, {f"x{i}": a for i, a in enumerate(arrays)})[0]


def run_numba(op_kind, arrays, /, **fields):
    from rlx_ref.runtime.session import Session

    g = graph(op_kind, arrays, **fields)
    exe = Session("numba-cpu").compile(g)
    return exe.run({f"x{i}": a for i, a in enumerate(arrays)})[0]


# ── KvAppend ──────────────────────────────────────────────────────────────

def test_kv_append_is_the_prefix_with_the_row_written():
    cache = RNG.standard_normal((2, 3, 6, 4))
    row = RNG.standard_normal((2, 3, 1, 4))
    out = run("KvAppend", [cache, row], axis=2, pos=4)
    assert out.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(out[:, :, :4], cache[:, :, :4])
    np.testing.assert_array_equal(out[:, :, 4:], row)


@pytest.mark.parametrize("cache,row,fields,cid", [
    ((2, 5, 3), (2, 1, 3), dict(axis=1, pos=5), "C4"),     # pos past the capacity
    ((2, 5, 3), (2, 2, 3), dict(axis=1, pos=1), "C5"),     # a two-step row
    ((2, 5, 3), (2, 1, 4), dict(axis=1, pos=1), "C5"),     # width mismatch
    ((2, 5, 3), (1, 3), dict(axis=1, pos=1), "C2"),        # squeezed row
    ((2, 5, 3), (2, 1, 3), dict(axis=3, pos=0), "C1"),
])
def test_kv_append_rejects_rlx_s_broken_rules(cache, row, fields, cid):
    with pytest.raises((OpError, BuildError), match=rf"\({cid}\)"):
        graph("KvAppend", [np.zeros(cache, np.float32), np.zeros(row, np.float32)], **fields)


def test_kv_append_gradient_routes_the_row_and_the_read_prefix():
    from rlx_ref.autodiff import SEED, grad

    cache, row = RNG.standard_normal((2, 5)), RNG.standard_normal((2, 1))
    g = graph("KvAppend", [cache, row], axis=1, pos=2)
    up = RNG.standard_normal((2, 3))
    dc, dr = interpret(grad(g, ["x0", "x1"]), {"x0": cache, "x1": row, SEED: up})
    np.testing.assert_array_equal(dc, np.concatenate([up[:, :2], np.zeros((2, 3))], 1))
    np.testing.assert_array_equal(dr, up[:, 2:])


# ── Histogram ─────────────────────────────────────────────────────────────

def test_histogram_matches_numpy_away_from_edges():
    x = RNG.uniform(-3, 3, 500).astype(np.float32)
    out = run("Histogram", [x], bins=9, min=-2.0, max=2.5)
    want, _ = np.histogram(x, bins=9, range=(-2.0, 2.5))
    np.testing.assert_array_equal(out, want.astype(np.float32))
    assert out.dtype == np.float32


def test_histogram_edges_are_rlx_s_f32_edges():
    # width = 0.1f: the f32 edge 3·width is not 0.3 exactly, and max lands in the last bin
    lo = np.float32(0) + np.float32(3) * (np.float32(1.0) / np.float32(10))
    one = np.float32(1.0)
    x = np.float32([np.nextafter(lo, np.float32(-1)), lo, one, np.nextafter(one, np.float32(2))])
    out = run("Histogram", [x], bins=10, min=0.0, max=1.0)
    assert out[2] == 1 and out[3] == 1 and out[9] == 1 and out.sum() == 3


@pytest.mark.parametrize("fields,cid", [(dict(bins=0, min=0.0, max=1.0), "C2"),
                                        (dict(bins=2, min=1.0, max=1.0), "C3"),
                                        (dict(bins=2, min=0.0, max=math.inf), "C3")])
def test_histogram_payload_rules(fields, cid):
    with pytest.raises((OpError, BuildError), match=rf"\({cid}\)"):
        graph("Histogram", [np.zeros(3, np.float32)], **fields)


def test_histogram_is_not_differentiable():
    from rlx_ref.autodiff import NON_DIFFERENTIABLE

    assert "Histogram" in NON_DIFFERENTIABLE


# ── FusedMatMulResidual ───────────────────────────────────────────────────

def test_fused_matmul_residual_is_matmul_plus_residual():
    a, b, r = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5)), \
        RNG.standard_normal((2, 3, 5))
    np.testing.assert_allclose(run("FusedMatMulResidual", [a, b, r]), a @ b + r, rtol=1e-12)


def test_fused_matmul_residual_wants_a_full_residual():
    with pytest.raises((OpError, BuildError), match=r"\(C3\)"):
        graph("FusedMatMulResidual", [np.zeros((2, 3)), np.zeros((3, 4)), np.zeros(4)])


# ── spline ────────────────────────────────────────────────────────────────

def _spline_np(x, coeff, nb, lo, hi):
    step = (hi - lo) / (nb - 1) if nb > 1 else 1.0
    c = lo + np.arange(nb) * step
    z = (x[..., None] - c) / step
    return np.einsum("...cg,cg->...c", np.exp(-z * z), coeff)


def test_spline_matches_the_rbf_formula():
    x, coeff = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 6))
    out = run("SplineActivation", [x, coeff], num_basis=6, grid_min=-2.0, grid_max=3.0)
    np.testing.assert_allclose(out, _spline_np(x, coeff, 6, -2.0, 3.0), rtol=1e-6)


def test_spline_backward_kinds_are_finite_differences():
    x, coeff, up = (RNG.standard_normal((3, 2)), RNG.standard_normal((2, 4)),
                    RNG.standard_normal((3, 2)))
    f = dict(num_basis=4, grid_min=-1.0, grid_max=2.0)
    h = 1e-6
    fd_x = (_spline_np(x + h, coeff, 4, -1.0, 2.0) - _spline_np(x - h, coeff, 4, -1.0, 2.0)) / (
        2 * h)
    np.testing.assert_allclose(run("SplineActivationBackwardX", [x, coeff, up], **f),
                               up * fd_x, rtol=1e-6, atol=1e-8)
    dc = np.zeros_like(coeff)
    for idx in np.ndindex(coeff.shape):
        e = np.zeros_like(coeff)
        e[idx] = 1.0
        dc[idx] = np.sum(up * _spline_np(x, e, 4, -1.0, 2.0))   # y is linear in coeff
    np.testing.assert_allclose(run("SplineActivationBackwardCoeff", [x, up], **f), dc,
                               rtol=1e-10)


def test_spline_rejects_a_zero_step_and_a_wrong_coeff():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises((OpError, BuildError), match=r"\(C2\)"):
        graph("SplineActivation", [x, np.zeros((3, 2), np.float32)], num_basis=2,
              grid_min=1.0, grid_max=1.0)
    with pytest.raises((OpError, BuildError), match=r"\(C4\)"):
        graph("SplineActivation", [x, np.zeros((2, 2), np.float32)], num_basis=2,
              grid_min=0.0, grid_max=1.0)


# ── Synth ─────────────────────────────────────────────────────────────────

def _synth_case(m=3, n=4, kb=3, ed=2, ne=5):
    x = RNG.standard_normal((m, kb * ed))
    idx = RNG.integers(0, ne, (n, kb)).astype(np.uint8)
    cb = RNG.standard_normal((ne, ed))
    w = cb[idx.astype(int)].reshape(n, kb * ed)           # Ŵ [n, k]
    return x, idx, cb, w


def test_synth_matmul_and_reconstruct_against_a_dense_weight():
    x, idx, cb, w = _synth_case()
    k = codebook(2, 5)
    np.testing.assert_allclose(run("SynthMatMul", [x, idx, cb], kind=k), x @ w.T,
                               rtol=1e-12)
    np.testing.assert_array_equal(run("SynthReconstruct", [idx, cb], kind=k), w)


def test_synth_backward_is_the_dense_gradient():
    x, idx, cb, w = _synth_case()
    up = RNG.standard_normal((3, 4))
    k = codebook(2, 5)
    dx = run("SynthMatMulBackward", [x, idx, cb, up], kind=k, wrt="Dx")
    np.testing.assert_allclose(dx, up @ w, rtol=1e-12)
    dcb = run("SynthMatMulBackward", [x, idx, cb, up], kind=k, wrt="Codebook")
    want = np.zeros_like(cb)
    blocks = (up.T @ x).reshape(4, 3, 2)
    for j, b in np.ndindex(idx.shape):
        want[idx[j, b]] += blocks[j, b]
    np.testing.assert_allclose(dcb, want, rtol=1e-12)


def test_synth_index_past_the_codebook_is_an_error():
    x, idx, cb, _ = _synth_case(ne=3)
    idx[1, 2] = 3
    with pytest.raises(InterpretError, match=r"\(C4\).*indices\[1, 2\] = 3"):
        run("SynthMatMul", [x, idx, cb], kind=codebook(2, 3))


def test_synth_shape_rules():
    x, idx, cb, _ = _synth_case()
    with pytest.raises((OpError, BuildError), match=r"\(C2\)"):      # k != kb·entry_dim
        graph("SynthMatMul", [x[:, :5], idx, cb], kind=codebook(2, 5))
    with pytest.raises((OpError, BuildError), match=r"\(C2\)"):      # f32 indices
        graph("SynthMatMul", [x, idx.astype(np.float32), cb], kind=codebook(2, 5))
    with pytest.raises((OpError, BuildError), match=r"\(C1\)"):
        graph("SynthMatMul", [x, idx, cb], kind=codebook(2, 300))


# ── text and kernels ──────────────────────────────────────────────────────

@pytest.mark.parametrize("op_kind,arrays,fields", [
    ("KvAppend", [np.zeros((1, 4, 2), np.float32), np.zeros((1, 1, 2), np.float32)],
     dict(axis=1, pos=2)),
    ("Histogram", [np.zeros(5, np.float32)], dict(bins=3, min=-0.5, max=0.1)),
    ("SplineActivationBackwardCoeff", [np.zeros((2, 3), np.float32)] * 2,
     dict(num_basis=4, grid_min=-0.3, grid_max=0.7)),
    ("SynthMatMulBackward", [np.zeros((2, 4), np.float32), np.zeros((3, 2), np.uint8),
                             np.zeros((5, 2), np.float32), np.zeros((2, 3), np.float32)],
     dict(kind=codebook(2, 5), wrt="Codebook")),
])
def test_payload_text_round_trips(op_kind, arrays, fields):
    text = print_graph(graph(op_kind, arrays, **fields))
    assert print_graph(parse(text)) == text


@pytest.mark.parametrize("op_kind,arrays,fields", [
    ("KvAppend", [np.arange(24, dtype=np.float16).reshape(2, 4, 3),
                  np.ones((2, 1, 3), np.float16)], dict(axis=1, pos=3)),
    ("Histogram", [RNG.standard_normal(300).astype(np.float32)], dict(bins=7, min=-1, max=1)),
    ("SplineActivation", [RNG.standard_normal((5, 3)).astype(np.float32),
                          RNG.standard_normal((3, 4)).astype(np.float32)],
     dict(num_basis=4, grid_min=-1.0, grid_max=1.0)),
    ("SynthReconstruct", [RNG.integers(0, 4, (3, 2)).astype(np.uint8),
                          RNG.standard_normal((4, 3))], dict(kind=codebook(3, 4))),
])
def test_numba_cpu_kernels_match_the_oracle(op_kind, arrays, fields):
    want = run(op_kind, arrays, **fields)
    got = run_numba(op_kind, arrays, **fields)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-6, atol=1e-7)
