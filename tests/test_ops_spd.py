"""SPD-manifold kinds: every backward kind against central finite differences of its
forward kind, the forward kinds against scipy's matrix functions and the manifold's own
identities (Exp∘Log, transport isometry, Karcher stationarity), and the verifier rules."""
import numpy as np
import pytest
import scipy.linalg as sla

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops import _spd_math as sm
from rlx_ref.ops._spd_samples import spd, tangent, with_spectrum
from rlx_ref.ops.spd import KarcherAttrs, MatFnAttrs, SpdEpsAttrs
from rlx_ref.ops.single import run_single, verify_single

RNG = np.random.default_rng(11)
H = 1e-6


def sym_dir(*shape):
    """A random symmetric direction (a stack when shape has three dims)."""
    return sm.sym(RNG.standard_normal(shape))


def fd(loss, x, e):
    """Central difference of ``loss`` at ``x`` along ``e``."""
    return (loss(x + H * e) - loss(x - H * e)) / (2 * H)


def close(a, b, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ── backward kinds vs finite differences of their forwards ─────────────────

SPECTRAL_CASES = {
    "random": lambda: spd(RNG, 4),
    "identity": lambda: 2.0 * np.eye(3),
    "repeated": lambda: with_spectrum(RNG, [1.5, 1.5, 4.0]),
    "floor-straddled": lambda: with_spectrum(RNG, [0.05, 0.5, 2.0, 3.0]),
}


@pytest.mark.parametrize("case", SPECTRAL_CASES)
@pytest.mark.parametrize("kind,eps", [("ReEig", 1.0), ("LogEig", 0.1), ("LogEig", 1e-3)])
def test_spectral_backward_matches_finite_differences(kind, eps, case):
    x = SPECTRAL_CASES[case]()
    n = len(x)
    attrs = SpdEpsAttrs(eps)
    g = RNG.standard_normal((n, n))

    def loss(xx):
        return float(np.sum(g * run_single(kind, attrs, xx)[:n * n].reshape(n, n)))
    packed = run_single(kind, attrs, x)
    lam, u = packed[n * n:n * n + n], packed[n * n + n:]
    dx = run_single(f"{kind}Backward", attrs, lam, u, g.reshape(-1))
    assert np.array_equal(dx, dx.T)
    if kind == "LogEig" and np.any(lam < eps):
        # RLX's f' = 1/max(λ, ε) is not log∘max's derivative (0) below the floor: the
        # oracle keeps RLX's formula, so it exceeds the true gradient by exactly that term
        v = u.reshape(n, n)
        c = v @ sm.sym(g) @ v.T
        extra = v.T @ np.diag(np.where(lam < eps, np.diag(c) / eps, 0.0)) @ v
        dx = dx - extra
    for _ in range(3):
        e = sym_dir(n, n)
        close(np.sum(dx * e), fd(loss, x, e))


def test_batch_norm_backwards_match_finite_differences():
    x, mean, gb = spd(RNG, 3, 2), spd(RNG, 3), spd(RNG, 3)
    g = RNG.standard_normal((2, 3, 3))
    attrs = SpdEpsAttrs(1e-5)

    def loss(xx, gg):
        return float(np.sum(g * run_single("SpdBatchNorm", attrs, xx, mean, gg)))
    dx = run_single("SpdBatchNormBackwardX", attrs, mean, gb, g)
    dg = run_single("SpdBatchNormBackwardG", attrs, x, mean, gb, g)
    e = sym_dir(2, 3, 3)
    close(np.sum(dx * e), fd(lambda xx: loss(xx, gb), x, e))
    e = sym_dir(3, 3)
    close(np.sum(dg * e), fd(lambda gg: loss(x, gg), gb, e))


MAP_ARGS = {"SpdLogMap": lambda n: spd(RNG, n), "SpdExpMap": lambda n: tangent(RNG, n)}


@pytest.mark.parametrize("kind", MAP_ARGS)
@pytest.mark.parametrize("base", ["random", "identity"])
def test_map_backwards_match_finite_differences(kind, base):
    p = spd(RNG, 3) if base == "random" else np.eye(3)
    a = MAP_ARGS[kind](3)
    g = RNG.standard_normal((3, 3))
    grads = run_single(f"{kind}Backward", None, p, a, g)
    assert grads.shape == (2, 3, 3)
    loss = [lambda pp: float(np.sum(g * run_single(kind, None, pp, a))),
            lambda aa: float(np.sum(g * run_single(kind, None, p, aa)))]
    for i, at in enumerate((p, a)):
        e = sym_dir(3, 3)
        close(np.sum(grads[i] * e), fd(loss[i], at, e))


@pytest.mark.parametrize("same", [False, True])
def test_transport_backward_matches_finite_differences(same):
    p = spd(RNG, 3)
    q = p.copy() if same else spd(RNG, 3)
    v, g = tangent(RNG, 3), RNG.standard_normal((3, 3))
    ops = [p, q, v]
    grads = run_single("SpdParallelTransportBackward", None, p, q, v, g)
    for i in range(3):
        def loss(z, i=i):
            args = list(ops)
            args[i] = z
            return float(np.sum(g * run_single("SpdParallelTransport", None, *args)))
        e = sym_dir(3, 3)
        close(np.sum(grads[i] * e), fd(loss, ops[i], e))


@pytest.mark.parametrize("fn", ["Logm", "Expm", "Sqrtm", "Invsqrtm"])
def test_matrix_fn_backward_matches_finite_differences(fn):
    x = np.stack([spd(RNG, 3), with_spectrum(RNG, [2.0, 2.0, 5.0])])
    if fn == "Expm":
        x = x / 4.0
    g = RNG.standard_normal((2, 3, 3))
    attrs = MatFnAttrs(fn)
    dx = run_single("SpdMatrixFnBatchBackward", attrs, x, g)
    e = sym_dir(2, 3, 3)
    close(np.sum(dx * e), fd(lambda xx: float(np.sum(g * run_single(
        "SpdMatrixFnBatch", attrs, xx))), x, e))


# ── forward kinds vs independent references and identities ─────────────────

@pytest.mark.parametrize("fn,ref", [("Logm", sla.logm), ("Expm", sla.expm),
                                    ("Sqrtm", sla.sqrtm),
                                    ("Invsqrtm", lambda a: np.linalg.inv(sla.sqrtm(a)))])
def test_matrix_fn_matches_scipy(fn, ref):
    x = spd(RNG, 4, 3) / 2
    y = run_single("SpdMatrixFnBatch", MatFnAttrs(fn), x)
    close(y, np.stack([np.real(ref(a)) for a in x]), rtol=1e-9, atol=1e-10)


def test_reeig_packs_y_eigenvalues_and_sign_fixed_eigenvectors():
    x = with_spectrum(RNG, [0.05, 0.5, 2.0, 3.0])
    out = run_single("ReEig", SpdEpsAttrs(1.0), x)
    y, lam, u = out[:16].reshape(4, 4), out[16:20], out[20:].reshape(4, 4)
    close(lam, [0.05, 0.5, 2.0, 3.0], rtol=1e-12)
    close(u @ u.T, np.eye(4), atol=1e-12)
    close(u.T @ np.diag(lam) @ u, x, atol=1e-12)
    close(y, u.T @ np.diag(np.maximum(lam, 1.0)) @ u, atol=1e-12)
    mag = np.abs(u)
    pivot = np.argmax(mag >= (1 - 1e-3) * mag.max(axis=1, keepdims=True), axis=1)
    assert np.all(u[np.arange(4), pivot] > 0)
    close(np.linalg.eigvalsh(y), [1.0, 1.0, 2.0, 3.0], rtol=1e-12)


def test_only_the_lower_triangle_is_read():
    x = spd(RNG, 3)
    asym = x.copy()
    asym[0, 2] += 5.0
    for kind, attrs in [("LogEig", SpdEpsAttrs(1e-4)), ("ReEig", SpdEpsAttrs(1.0))]:
        assert np.array_equal(run_single(kind, attrs, asym), run_single(kind, attrs, x))


def test_log_and_exp_maps_are_inverse():
    p, x = spd(RNG, 4), spd(RNG, 4)
    v = run_single("SpdLogMap", None, p, x)
    close(v, v.T, atol=1e-12)
    close(run_single("SpdExpMap", None, p, v), x, rtol=1e-10, atol=1e-10)


def test_transport_is_an_isometry_and_identity_at_the_same_point():
    p, q, v = spd(RNG, 3), spd(RNG, 3), tangent(RNG, 3)
    w = run_single("SpdParallelTransport", None, p, q, v)

    def inner(base, a):
        bi = np.linalg.inv(base)
        return np.trace(bi @ a @ bi @ a)
    close(inner(q, w), inner(p, v), rtol=1e-10)
    close(run_single("SpdParallelTransport", None, p, p, v), v, atol=1e-12)


def test_karcher_mean_is_stationary_and_honours_iters():
    x = spd(RNG, 3, 3)
    m = run_single("SpdKarcherMean", KarcherAttrs(50, 1e-12), x)
    w = sm.matrix_fn(m, sm.invsqrt_f)
    grad = sum(sm.matrix_fn(w @ c @ w, sm.log_f) for c in x)
    close(grad, np.zeros((3, 3)), atol=1e-10)
    assert np.array_equal(run_single("SpdKarcherMean", KarcherAttrs(0, 1.0), x),
                          x[0] / 3 + x[1] / 3 + x[2] / 3)
    one = run_single("SpdKarcherMean", KarcherAttrs(1, 0.0), x)
    m0 = x.mean(0)
    r, ri = sm.matrix_fn(m0, sm.sqrt_f), sm.matrix_fn(m0, sm.invsqrt_f)
    s = sum(sm.matrix_fn(ri @ c @ ri, sm.log_f) for c in x) / 3
    close(one, r @ sm.matrix_fn(s, np.exp) @ r, rtol=1e-12)


def test_weighted_karcher_mean_matches_the_weighted_geometric_mean_when_commuting():
    pair = np.stack([np.diag([1.0, 4.0]), np.diag([4.0, 1.0])])
    m = run_single("SpdKarcherMeanWeighted", KarcherAttrs(20, 1e-12), pair,
                   np.array([3.0, 1.0]))
    close(m, np.diag([4.0 ** 0.25, 4.0 ** 0.75]), rtol=1e-12)
    x = spd(RNG, 3, 3)
    uniform = run_single("SpdKarcherMean", KarcherAttrs(20, 1e-10), x)
    close(run_single("SpdKarcherMeanWeighted", KarcherAttrs(20, 1e-10), x, np.full(3, 2.0)),
          uniform, rtol=1e-12)
    close(run_single("SpdKarcherMeanWeighted", KarcherAttrs(20, 1e-10), x, np.zeros(3)),
          uniform, rtol=1e-12)


# ── verifier rules ─────────────────────────────────────────────────────────

def errors(kind, attrs, inputs, out):
    return " | ".join(verify_single(kind, attrs, inputs, out))


def test_verifier_rejects_other_dtypes_and_bad_shapes():
    f32 = Shape((3, 3), DType.F32)
    e = errors("LogEig", SpdEpsAttrs(1e-4), [f32], Shape((21,), DType.F32))
    assert "(C1)" in e and "f64" in e
    e = errors("SpdLogMap", None, [Shape((3, 3), DType.F64), Shape((2, 2), DType.F64)],
               Shape((2, 2), DType.F64))
    assert "(C2)" in e and "n=3" in e
    e = errors("BiMap", None, [Shape((2, 4), DType.F64), Shape((3, 3), DType.F64)],
               Shape((2, 2), DType.F64))
    assert "(C2)" in e
    e = errors("SpdKarcherMeanWeighted", KarcherAttrs(5, 1e-6),
               [Shape((3, 2, 2), DType.F64), Shape((2,), DType.F64)], Shape((2, 2), DType.F64))
    assert "(C3)" in e
    e = errors("ReEigBackward", SpdEpsAttrs(1.0), [Shape((3,), DType.F64),
               Shape((8,), DType.F64), Shape((9,), DType.F64)], Shape((3, 3), DType.F64))
    assert "(C2)" in e and "`u`" in e
    assert errors("SpdParallelTransportBackward", None, [Shape((2, 2), DType.F64)] * 4,
                  Shape((3, 2, 2), DType.F64)) == ""


def test_the_family_kind_list_is_what_the_family_files_register():
    from rlx_ref.ops._spd_checks import KINDS
    from rlx_ref.ops.opdef import all_opdefs

    registered = {d.kind for d in all_opdefs()
                  if d.family == "spd" or d.reference.__module__.endswith("spd_backward")}
    assert registered == set(KINDS)
    assert all(get_dtypes == (DType.F64,) for get_dtypes in
               (d.dtypes for d in all_opdefs() if d.kind in KINDS))


def test_sign_pivot_ties_pick_the_first_entry():
    v = np.array([[-1.0, 1.0 + 1e-9], [1.0, 1.0]]) / np.sqrt(2.0)
    fixed = sm.fix_signs(v)
    assert fixed[0, 0] > 0 and fixed[1, 0] > 0
    assert np.array_equal(np.abs(fixed), np.abs(v))
