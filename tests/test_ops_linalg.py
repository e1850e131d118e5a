"""Linear algebra ops against naive loops, np.einsum and A @ x == b; verifier and run errors."""
import itertools

import numpy as np
import pytest

from rlx_ref.interpret import InterpretError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.linalg import DotGeneralAttrs
from rlx_ref.ops.single import verify_single, run_single, single_op_graph

RNG = np.random.default_rng(7)


def f32(*dims):
    return RNG.standard_normal(dims).astype(np.float32)


def errors(kind, attrs, inputs, out):
    """Verifier messages of a one-op graph whose declared output is ``out``."""
    return " | ".join(verify_single(kind, attrs, inputs, out))


# ── MatMul ────────────────────────────────────────────────────────────────

def naive_matmul(a, b):
    """Triple loop over (batch, m, n, k) with explicit batch broadcasting, in float64."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).astype(np.float64)
    b = np.broadcast_to(b, batch + b.shape[-2:]).astype(np.float64)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = np.zeros(batch + (m, n))
    for idx in np.ndindex(*batch):
        for i, j in itertools.product(range(m), range(n)):
            out[idx + (i, j)] = sum(a[idx + (i, p)] * b[idx + (p, j)] for p in range(k))
    return out


@pytest.mark.parametrize("sa,sb", [
    ((2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 1)),
    ((1, 5), (5, 1)), ((2, 0), (0, 3)), ((4, 1, 3, 2), (1, 5, 2, 2)),
])
def test_matmul_matches_naive_loops(sa, sb):
    a, b = f32(*sa), f32(*sb)
    out = run_single("MatMul", None, a, b)
    ref = naive_matmul(a, b)
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    out64 = run_single("MatMul", None, a, b, float64=True)
    np.testing.assert_allclose(out64, ref, rtol=1e-12, atol=1e-12)


def test_matmul_int_wraps_and_f16_rounds_once():
    a = np.array([[2**30, 2**30]], np.int32)
    b = np.array([[2], [2]], np.int32)
    assert run_single("MatMul", None, a, b).tolist() == [[0]]      # 2^32 wraps to 0
    # 4096 products of 1·1: an f16 accumulator would stall at 2048 (2048 + 1 rounds back).
    a16, b16 = np.ones((1, 4096), np.float16), np.ones((4096, 1), np.float16)
    out = run_single("MatMul", None, a16, b16)
    assert out.dtype == np.float16 and out[0, 0] == 4096


def test_matmul_verifier_errors():
    f = DType.F32
    assert "(C1) matmul requires rank >= 2, got 1 and 2" in errors(
        "MatMul", None, [Shape([3], f), Shape([3, 4], f)], Shape([4], f))
    assert "(C2) matmul K mismatch" in errors(
        "MatMul", None, [Shape([2, 3], f), Shape([4, 5], f)], Shape([2, 5], f))
    assert "(C3) matmul batch dims do not broadcast" in errors(
        "MatMul", None, [Shape([2, 2, 3], f), Shape([3, 3, 5], f)], Shape([2, 2, 5], f))
    assert "(C4) MatMul operands must share one dtype, got f32 and f64" in errors(
        "MatMul", None, [Shape([2, 3], f), Shape([3, 5], DType.F64)], Shape([2, 5], f))
    assert "shape mismatch" in errors(
        "MatMul", None, [Shape([2, 3], f), Shape([3, 5], f)], Shape([2, 3], f))


# ── DotGeneral ────────────────────────────────────────────────────────────

# (lhs shape, rhs shape, attrs, einsum spec)
DOT_CASES = [
    ((3, 4), (4, 5), DotGeneralAttrs((1,), (0,), (), ()), "ik,kj->ij"),
    ((2, 3, 4), (2, 4, 5), DotGeneralAttrs((2,), (1,), (0,), (0,)), "bik,bkj->bij"),
    ((4, 2, 3), (3, 5, 2), DotGeneralAttrs((2,), (0,), (1,), (2,)), "kbi,ijb->bkj"),
    ((2, 3, 5, 7), (3, 7, 2, 4), DotGeneralAttrs((3,), (1,), (0, 1), (2, 0)),
     "abik,bkaj->abij"),
    ((2, 3, 4), (3, 4, 5), DotGeneralAttrs((1, 2), (0, 1), (), ()), "ijk,jkl->il"),
    ((2, 3, 4), (4, 3, 5), DotGeneralAttrs((1, 2), (1, 0), (), ()), "ijk,kjl->il"),
    ((3,), (2,), DotGeneralAttrs((), (), (), ()), "i,j->ij"),
    ((6,), (6,), DotGeneralAttrs((0,), (0,), (), ()), "i,i->"),
    ((2, 3), (2, 3), DotGeneralAttrs((), (), (0, 1), (0, 1)), "ij,ij->ij"),
    ((2, 0), (0, 3), DotGeneralAttrs((1,), (0,), (), ()), "ik,kj->ij"),
]


@pytest.mark.parametrize("sl,sr,attrs,spec", DOT_CASES)
def test_dot_general_matches_einsum(sl, sr, attrs, spec):
    lhs, rhs = f32(*sl), f32(*sr)
    ref = np.einsum(spec, lhs.astype(np.float64), rhs.astype(np.float64))
    g = single_op_graph("DotGeneral", attrs, [lhs, rhs])
    assert g.nodes[-1].shape.dims == ref.shape          # the true XLA shape is inferred
    out = run_single("DotGeneral", attrs, lhs, rhs)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_single("DotGeneral", attrs, lhs, rhs, float64=True), ref,
                               rtol=1e-12, atol=1e-12)


def test_dot_general_verifier_errors():
    f = DType.F32
    s23, s34 = Shape([2, 3], f), Shape([3, 4], f)
    dg = DotGeneralAttrs
    assert "(C1) lhs axis 2 is out of range for rank 2" in errors(
        "DotGeneral", dg((2,), (0,), (), ()), [s23, s34], Shape([2, 4], f))
    assert "(C1) rhs axis 0 is listed more than once" in errors(
        "DotGeneral", dg((1,), (0,), (0,), (0,)), [s23, s34], Shape([2, 4], f))
    assert "(C2) lhs_contracting [1] and rhs_contracting [] must pair up" in errors(
        "DotGeneral", dg((1,), (), (), ()), [s23, s34], Shape([2, 4], f))
    assert "(C2) contracting axes differ in size: lhs axis 0 is 2, rhs axis 0 is 3" in errors(
        "DotGeneral", dg((0,), (0,), (), ()), [s23, s34], Shape([3, 4], f))
    assert "(C3) batch axes differ in size" in errors(
        "DotGeneral", dg((1,), (0,), (0,), (1,)), [s23, s34], Shape([2], f))
    # RLX's own rule would demand the lhs shape; rlx_ref rejects it as the wrong shape.
    assert "shape mismatch" in errors("DotGeneral", dg((1,), (0,), (), ()), [s23, s34], s23)


# ── DenseSolve, BatchedDenseSolve ─────────────────────────────────────────

def well_conditioned(n, dtype=np.float64):
    m = RNG.standard_normal((n, n))
    return (m + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("bshape", [(4,), (4, 3), (4, 1), (4, 0)])
def test_dense_solve_satisfies_a_x_equals_b(bshape):
    a, b = well_conditioned(4, np.float32), f32(*bshape)
    x = run_single("DenseSolve", None, a, b)
    assert x.shape == b.shape and x.dtype == np.float32
    np.testing.assert_allclose(a.astype(np.float64) @ x, b, rtol=1e-4, atol=1e-4)
    x64 = run_single("DenseSolve", None, a, b, float64=True)
    np.testing.assert_allclose(a.astype(np.float64) @ x64, b, rtol=1e-12, atol=1e-12)


def test_dense_solve_needs_pivoting_and_handles_f16():
    a = np.array([[0, 2], [3, 0]], np.float32)      # zero in the (0, 0) pivot position
    np.testing.assert_array_equal(run_single("DenseSolve", None, a, np.float32([4, 9])),
                                  [3, 2])
    a16 = np.array([[2, 0], [0, 4]], np.float16)
    x = run_single("DenseSolve", None, a16, np.array([1, 1], np.float16))
    assert x.dtype == np.float16 and x.tolist() == [0.5, 0.25]


def test_dense_solve_singular_is_a_run_time_error():
    a = np.array([[1, 2], [2, 4]], np.float32)
    with pytest.raises(InterpretError, match=r"DenseSolve: A \(2x2\) is singular"):
        run_single("DenseSolve", None, a, np.ones(2, np.float32))


def test_batched_dense_solve_solves_each_slice():
    # B == N on purpose: a [B, N] b must be read as B vectors, not one N x N matrix.
    a = np.stack([well_conditioned(3, np.float32) for _ in range(3)])
    for b in (f32(3, 3), f32(3, 3, 2), f32(3, 3, 0)):
        x = run_single("BatchedDenseSolve", None, a, b)
        assert x.shape == b.shape
        for i in range(3):
            lhs = a[i].astype(np.float64) @ x[i]
            np.testing.assert_allclose(lhs, b[i], rtol=1e-4, atol=1e-4)


def test_batched_dense_solve_names_the_singular_slice():
    a = np.stack([np.eye(2), np.ones((2, 2))]).astype(np.float32)
    with pytest.raises(InterpretError, match=r"A\[1\] \(2x2\) is singular"):
        run_single("BatchedDenseSolve", None, a, np.ones((2, 2), np.float32))


def test_solve_verifier_errors():
    f = DType.F32
    assert "(C1) DenseSolve needs a square A, got [2, 3]" in errors(
        "DenseSolve", None, [Shape([2, 3], f), Shape([2], f)], Shape([2], f))
    assert "(C2) DenseSolve: A [3, 3] has N=3 but b [2, 1] has 2 rows" in errors(
        "DenseSolve", None, [Shape([3, 3], f), Shape([2, 1], f)], Shape([2, 1], f))
    assert "(C3) DenseSolve needs A and b of one float dtype, got i32 and i32" in errors(
        "DenseSolve", None, [Shape([2, 2], DType.I32), Shape([2], DType.I32)],
        Shape([2], DType.I32))
    assert "(C1) BatchedDenseSolve needs A of rank 3" in errors(
        "BatchedDenseSolve", None, [Shape([3, 3], f), Shape([3, 3], f)], Shape([3, 3], f))
    assert "(C2) BatchedDenseSolve batch sizes differ" in errors(
        "BatchedDenseSolve", None, [Shape([2, 3, 3], f), Shape([4, 3], f)], Shape([4, 3], f))
    assert "(C2) BatchedDenseSolve needs b of shape [B, N] or [B, N, K]" in errors(
        "BatchedDenseSolve", None, [Shape([2, 3, 3], f), Shape([2, 3, 1, 1], f)],
        Shape([2, 3, 1, 1], f))
    assert "shape mismatch" in errors(
        "DenseSolve", None, [Shape([3, 3], f), Shape([3], f)], Shape([3, 1], f))
