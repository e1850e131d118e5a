"""Factorization kinds: reconstructions, sign conventions, constraint errors, EighBackward
against finite differences of Eigh, and numba-cpu on every conformance case."""
import numpy as np
import pytest

from rlx_ref.interpret import InterpretError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.verify import verify
from rlx_ref.ops._linalg_decomp_math import TIE, separated, spd, with_spectrum
from rlx_ref.ops.linalg_decomp import QrAttrs, SvdAttrs, TriangularSolveAttrs
from rlx_ref.ops.single import run_single, single_op_graph

RNG = np.random.default_rng(11)


def run64(kind, attrs, *arrays):
    return run_single(kind, attrs, *arrays, float64=True)


def assert_pivots_positive(u):
    """In every column, the first entry within TIE of the largest magnitude is positive."""
    for col in u.T:
        mag = np.abs(col)
        first = np.argmax(mag >= (1 - TIE) * mag.max())
        assert col[first] > 0, col


# ── reconstructions and conventions (f64 oracle) ───────────────────────────

@pytest.mark.parametrize("n", [1, 3, 6])
def test_cholesky_reconstructs_and_reads_the_lower_triangle(n):
    a = spd(RNG, n)
    l = run64("Cholesky", None, a)
    np.testing.assert_allclose(l @ l.T, a, rtol=1e-12, atol=1e-12)
    assert np.array_equal(l, np.tril(l)) and (np.diag(l) > 0).all()
    junk = a + np.triu(RNG.standard_normal((n, n)), 1) * 50    # the upper half is not read
    np.testing.assert_array_equal(run64("Cholesky", None, junk), l)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("rhs", [(4,), (4, 3)])
def test_triangular_solve_solves_op_t_and_ignores_the_other_half(lower, transpose, rhs):
    a = RNG.standard_normal((4, 4)) + 4 * np.eye(4)
    b = RNG.standard_normal(rhs)
    x = run64("TriangularSolve", TriangularSolveAttrs(lower, transpose), a, b)
    t = np.tril(a) if lower else np.triu(a)
    op = t.T if transpose else t
    np.testing.assert_allclose(op @ x, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(op, b), rtol=1e-12, atol=1e-12)


def test_triangular_solve_zero_diagonal_is_ieee_not_an_error():
    x = run64("TriangularSolve", TriangularSolveAttrs(True, False),
              np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([1.0, 2.0]))
    assert x[0] == np.inf and x[1] == -np.inf


def test_det_and_logdet_agree_with_lu():
    a = RNG.standard_normal((5, 5))
    d = run64("Det", None, a)
    np.testing.assert_allclose(d, np.linalg.det(a), rtol=1e-12)
    np.testing.assert_allclose(run64("LogDet", None, a), np.log(abs(d)), rtol=1e-12)
    assert run64("Det", None, np.array([[1.0, 2.0], [2.0, 4.0]])) == 0
    assert run64("LogDet", None, np.array([[1.0, 2.0], [2.0, 4.0]])) == -np.inf
    assert run64("Det", None, np.zeros((0, 0))) == 1 and run64("LogDet", None,
                                                                np.zeros((0, 0))) == 0


@pytest.mark.parametrize("m, n", [(5, 3), (3, 5), (4, 4), (1, 3)])
def test_svd_reconstructs_with_pivot_positive_u(m, n):
    a = RNG.standard_normal((m, n))
    u, s, vt = (run64("Svd", SvdAttrs(p), a) for p in ("U", "S", "Vt"))
    k = min(m, n)
    assert u.shape == (m, k) and s.shape == (k,) and vt.shape == (k, n)
    np.testing.assert_allclose((u * s) @ vt, a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-12)
    np.testing.assert_allclose(vt @ vt.T, np.eye(k), atol=1e-12)
    assert (np.diff(s) <= 0).all() and (s >= 0).all()
    assert_pivots_positive(u)
    # the convention makes the factors a function of A: -A flips V only
    np.testing.assert_allclose(run64("Svd", SvdAttrs("U"), -a), u, atol=1e-12)
    np.testing.assert_allclose(run64("Svd", SvdAttrs("Vt"), -a), -vt, atol=1e-12)


@pytest.mark.parametrize("m, n", [(5, 3), (2, 4), (3, 3)])
def test_qr_reconstructs_with_nonnegative_diagonal(m, n):
    a = RNG.standard_normal((m, n))
    q, r = run64("Qr", QrAttrs("Q"), a), run64("Qr", QrAttrs("R"), a)
    k = min(m, n)
    assert q.shape == (m, k) and r.shape == (k, n)
    np.testing.assert_allclose(q @ r, a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(k), atol=1e-12)
    assert np.array_equal(r, np.triu(r)) and (np.diag(r) >= 0).all()
    # diag(R) >= 0 pins the factors: a column sign flip of A moves into R's row only
    flip = a.copy()
    flip[:, 0] *= -1
    np.testing.assert_allclose(run64("Qr", QrAttrs("Q"), flip)[:, 1:], q[:, 1:], atol=1e-12)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_eigh_packs_ascending_eigenpairs_with_fixed_signs(n):
    a = with_spectrum(RNG, separated(RNG, n, -3.0))
    packed = run64("Eigh", None, a)
    lam, u = packed[:n], packed[n:].reshape(n, n)
    assert (np.diff(lam) > 0).all()
    np.testing.assert_allclose(a @ u, u * lam, atol=1e-11)
    np.testing.assert_allclose(u.T @ u, np.eye(n), atol=1e-12)
    assert_pivots_positive(u)
    junk = a + np.triu(RNG.standard_normal((n, n)), 1) * 30
    np.testing.assert_array_equal(run64("Eigh", None, junk), packed)


def test_eigh_batch_is_eigh_per_matrix():
    mats = np.stack([with_spectrum(RNG, separated(RNG, 3)) for _ in range(3)])
    out = run64("EighBatch", None, mats)
    assert out.shape == (3, 12)
    for i in range(3):
        np.testing.assert_array_equal(out[i], run64("Eigh", None, mats[i]))


# ── EighBackward against finite differences of Eigh ───────────────────────

@pytest.mark.parametrize("n", [2, 4])
def test_eigh_backward_matches_finite_differences(n):
    a = with_spectrum(RNG, separated(RNG, n, -1.0))
    bar = RNG.standard_normal(n * n + n)

    def loss(x):
        return float(run64("Eigh", None, x) @ bar)

    abar = run64("EighBackward", None, run64("Eigh", None, a), bar)
    assert abar.shape == (n, n)
    np.testing.assert_allclose(abar, abar.T, atol=1e-14)
    for _ in range(3):
        e = RNG.standard_normal((n, n))
        e = e + e.T                           # Eigh reads a symmetric matrix: move along one
        h = 1e-6
        fd = (loss(a + h * e) - loss(a - h * e)) / (2 * h)
        np.testing.assert_allclose(np.sum(abar * e), fd, rtol=1e-6, atol=1e-7)


def test_eigh_batch_backward_is_per_slice_and_drops_repeated_pairs():
    fwd = np.stack([run64("Eigh", None, with_spectrum(RNG, separated(RNG, 3)))
                    for _ in range(2)])
    bar = RNG.standard_normal(fwd.shape)
    out = run64("EighBatchBackward", None, fwd, bar)
    for i in range(2):
        np.testing.assert_array_equal(out[i], run64("EighBackward", None, fwd[i], bar[i]))
    eye = np.array([2.0, 2.0, 1.0, 0.0, 0.0, 1.0])         # λ repeated: no coupling term
    got = run64("EighBackward", None, eye, np.array([1.0, 3.0, 0.0, 5.0, 7.0, 0.0]))
    np.testing.assert_array_equal(got, np.diag([1.0, 3.0]))


# ── constraint errors ─────────────────────────────────────────────────────

def _msgs(kind, attrs, shapes, out):
    shapes = [s if isinstance(s, Shape) else Shape(s, DType.F32) for s in shapes]
    g = single_op_graph(kind, attrs, shapes, out=Shape(out, DType.F32))
    return " | ".join(str(e) for e in verify(g))


@pytest.mark.parametrize("kind, attrs, shapes, out, msg", [
    ("Cholesky", None, [(2, 3)], (2, 3), r"\(C1\) Cholesky needs a square A"),
    ("Cholesky", None, [Shape((2, 2), DType.F16)], (2, 2), r"\(C2\) Cholesky needs A of dtype"),
    ("Det", None, [(3,)], (), r"\(C1\) Det needs A of rank 2"),
    ("TriangularSolve", TriangularSolveAttrs(True, False), [(3, 3), (2,)], (2,),
     r"\(C2\) TriangularSolve: A \[3, 3\] has n=3 but B \[2\] has 2 rows"),
    ("TriangularSolve", TriangularSolveAttrs(True, False),
     [(2, 2), Shape((2,), DType.F64)], (2,), r"\(C3\) TriangularSolve operands must share"),
    ("Svd", SvdAttrs("S"), [(2, 3, 4)], (2,), r"\(C1\) Svd needs A of rank 2"),
    ("Qr", QrAttrs("R"), [Shape((3, 2), DType.I32)], (2, 2), r"\(C2\) Qr needs A of dtype"),
    ("Eigh", None, [(2, 3)], (8,), r"\(C1\) Eigh needs square matrices"),
    ("EighBackward", None, [(5,), (5,)], (2, 2), r"\(C1\) EighBackward: the packed length 5"),
    ("EighBackward", None, [(6,), (2,)], (2, 2), r"\(C2\) EighBackward: the cotangent"),
    ("EighBatchBackward", None, [(6,), (6,)], (2, 2), r"\(C1\) EighBatchBackward needs"),
])
def test_verifier_cites_the_broken_constraint(kind, attrs, shapes, out, msg):
    import re

    assert re.search(msg, _msgs(kind, attrs, shapes, out)), _msgs(kind, attrs, shapes, out)


@pytest.mark.parametrize("kind, attrs, a, msg", [
    ("Cholesky", None, np.array([[1.0, 2.0], [2.0, 1.0]]), r"\(C3\) .*not positive definite"),
    ("Cholesky", None, np.array([[np.nan, 0.0], [0.0, 1.0]]), r"\(C3\) .*NaN or inf"),
    ("Svd", SvdAttrs("U"), np.array([[1.0, np.inf]]), r"\(C3\) Svd: A holds NaN or inf"),
    ("Qr", QrAttrs("Q"), np.array([[np.nan], [1.0]]), r"\(C3\) Qr: A holds NaN or inf"),
    ("Eigh", None, np.array([[1.0, 0.0], [np.nan, 1.0]]), r"\(C2\) Eigh: A holds NaN"),
])
def test_run_time_errors(kind, attrs, a, msg):
    with pytest.raises(InterpretError, match=msg):
        run64(kind, attrs, a)


# ── numba-cpu ─────────────────────────────────────────────────────────────

KINDS = ["Cholesky", "TriangularSolve", "Det", "LogDet", "Svd", "Qr", "Eigh", "EighBatch",
         "EighBackward", "EighBatchBackward"]


# numba-cpu runs every default conformance case of these kinds in `rlx-ref conformance`
# (CI's first step), so the cases are not run again here
def test_numba_cpu_runs_every_kind_natively():
    pytest.importorskip("numba")
    from rlx_ref.backends.registry import get_backend

    paths = get_backend("numba-cpu").paths()
    assert all(paths.get(k) == "native" for k in KINDS)


@pytest.mark.parametrize("kind, attrs, a, msg", [
    ("Cholesky", None, np.array([[1.0, 2.0], [2.0, 1.0]]), r"\(C3\) .*not positive definite"),
    ("Svd", SvdAttrs("S"), np.array([[1.0, np.nan]]), r"\(C3\) Svd: A holds NaN or inf"),
])
def test_numba_cpu_raises_the_oracles_errors(kind, attrs, a, msg):
    pytest.importorskip("numba")
    from rlx_ref.backends.registry import get_backend

    g = single_op_graph(kind, attrs, [a])
    with pytest.raises(Exception, match=msg):
        get_backend("numba-cpu").compile(g).run({"x0": a})
