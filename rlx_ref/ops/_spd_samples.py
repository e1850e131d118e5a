"""Samples of the SPD-manifold forward kinds: small well-conditioned SPD matrices
(A·Aᵀ + n·I, batch ≤ 3, n ≤ 4) plus the edges: the identity and other repeated
eigenvalues, ReEig's floor hit, n = 1, an empty batch, an asymmetric input."""
from __future__ import annotations

import numpy as np

from . import _spd_math as sm
from .opdef import Sample


def spd(rng, n: int, batch: int | None = None):
    """A·Aᵀ + n·I (exactly symmetric), or a stack of ``batch`` of them."""
    if batch is not None:
        return np.stack([spd(rng, n) for _ in range(batch)])
    a = rng.standard_normal((n, n))
    return sm.sym(a @ a.T + n * np.eye(n))


def with_spectrum(rng, lam):
    """Q·diag(lam)·Qᵀ for a random orthogonal Q: a chosen spectrum, a random basis."""
    q, _ = np.linalg.qr(rng.standard_normal((len(lam), len(lam))))
    return sm.sym(q @ np.diag(np.asarray(lam, np.float64)) @ q.T)


def tangent(rng, n: int, scale: float = 0.5):
    """A symmetric matrix (a tangent vector)."""
    return sm.sym(scale * rng.standard_normal((n, n)))


def packed(y, lam, u):
    return np.concatenate([np.asarray(y, np.float64).reshape(-1), lam,
                           np.asarray(u, np.float64).reshape(-1)])


def bimap(rng):
    w = np.array([[1.0, 2.0], [0.0, 1.0]])
    x = np.array([[2.0, 1.0], [1.0, 3.0]])
    return [
        Sample((w, x), tags=("hand",), expect=np.array([[18.0, 7.0], [7.0, 3.0]])),
        Sample((rng.standard_normal((2, 4)), spd(rng, 4)), tags=("reduce-dim",)),
        Sample((rng.standard_normal((3, 3)), spd(rng, 3)), tags=("square",)),
        Sample((np.eye(3)[:2], np.eye(3)), tags=("identity", "stiefel")),
        Sample((rng.standard_normal((1, 2)), spd(rng, 2)), tags=("m=1",)),
    ]


def _spectral(rng, kind: str):
    from .spd import SpdEpsAttrs as E

    floor = 1.0 if kind == "ReEig" else 0.1
    out = [
        Sample((spd(rng, 3),), E(1e-4), tags=("well-conditioned",)),
        Sample((spd(rng, 4),), E(1e-4), tags=("n=4",)),
        Sample((np.eye(3),), E(1e-4), tags=("identity", "repeated-eigenvalues")),
        Sample((np.diag([2.0, 5.0, 2.0]),), E(1e-4), tags=("repeated-eigenvalues",)),
        Sample((np.array([[7.0]]),), E(1e-4), tags=("n=1",)),
        Sample((with_spectrum(rng, [0.05, 0.5, 2.0, 3.0]),), E(floor),
               tags=("floor-hit",)),
    ]
    asym = spd(rng, 3)
    asym[0, 2] += 1.0      # the upper triangle is not read
    out.append(Sample((asym,), E(1e-4), tags=("asymmetric", "lower-triangle")))
    return out


def reeig(rng):
    from .spd import SpdEpsAttrs as E

    hand = Sample((np.diag([0.5, 2.0]),), E(1.0), tags=("hand", "floor-hit"),
                  expect=packed(np.diag([1.0, 2.0]), [0.5, 2.0], np.eye(2)))
    return [hand] + _spectral(rng, "ReEig")


def logeig(rng):
    from .spd import SpdEpsAttrs as E

    hand = Sample((np.diag([np.e, 1.0]),), E(1e-4), tags=("hand",),
                  expect=packed(np.diag([1.0, 0.0]), [1.0, np.e], [[0, 1], [1, 0]]))
    return [hand] + _spectral(rng, "LogEig")


def batch_norm(rng):
    from .spd import SpdEpsAttrs as E

    x = spd(rng, 3, 3)
    return [
        Sample((np.stack([np.diag([4.0, 9.0])]), np.diag([4.0, 9.0]), np.diag([1.0, 4.0])),
               E(1e-5), tags=("hand",), expect=np.array([[[1.0, 0.0], [0.0, 4.0]]])),
        Sample((x, x.mean(axis=0), spd(rng, 3)), E(1e-5), tags=("batch-mean",)),
        Sample((spd(rng, 2, 2), np.eye(2), np.eye(2)), E(1e-5), tags=("identity",)),
        Sample((spd(rng, 4, 1), spd(rng, 4), spd(rng, 4)), E(1e-5), tags=("n=4",)),
        Sample((spd(rng, 2, 2), with_spectrum(rng, [1e-3, 2.0]), spd(rng, 2)), E(0.1),
               tags=("floor-hit",)),
        Sample((np.zeros((0, 2, 2)), np.eye(2), np.eye(2)), E(1e-5), tags=("empty",)),
    ]


def karcher(rng):
    from .spd import KarcherAttrs as K

    a = spd(rng, 3)
    return [
        Sample((np.stack([np.diag([1.0, 4.0]), np.diag([4.0, 1.0])]),), K(10, 1e-10),
               tags=("hand", "commuting"), expect=np.diag([2.0, 2.0])),
        Sample((np.stack([a, a, a]),), K(20, 1e-10), tags=("identical",)),
        Sample((spd(rng, 3, 3),), K(20, 1e-10), tags=("converges",)),
        Sample((spd(rng, 4, 2),), K(2, 0.0), tags=("iteration-cap",)),
        Sample((spd(rng, 2, 3),), K(0, 1e-6), tags=("iters=0", "arithmetic-mean")),
        Sample((spd(rng, 3, 1),), K(5, 1e-6), tags=("batch=1",)),
        Sample((np.zeros((0, 2, 2)),), K(5, 1e-6), tags=("empty",),
               expect=np.zeros((2, 2))),
    ]


def karcher_weighted(rng):
    from .spd import KarcherAttrs as K

    pair = np.stack([np.diag([1.0, 4.0]), np.diag([4.0, 1.0])])
    return [
        Sample((pair, np.array([1.0, 1.0])), K(10, 1e-10), tags=("hand", "uniform"),
               expect=np.diag([2.0, 2.0])),
        Sample((pair, np.array([3.0, 1.0])), K(20, 1e-12), tags=("weighted",)),
        Sample((spd(rng, 3, 3), rng.uniform(0.1, 2.0, 3)), K(20, 1e-10), tags=("converges",)),
        Sample((spd(rng, 2, 3), np.array([0.0, 1.0, 0.0])), K(20, 1e-10),
               tags=("one-hot",)),
        Sample((spd(rng, 2, 2), np.zeros(2)), K(20, 1e-10), tags=("zero-weights",)),
        Sample((spd(rng, 4, 2), np.array([0.25, 0.75])), K(1, 0.0), tags=("iteration-cap",)),
    ]


def log_map(rng):
    p = spd(rng, 3)
    return [
        Sample((np.eye(2), np.diag([np.e, 1.0])), tags=("hand", "identity-base"),
               expect=np.diag([1.0, 0.0])),
        Sample((p, p), tags=("x=base",)),
        Sample((spd(rng, 3), spd(rng, 3)), tags=("well-conditioned",)),
        Sample((spd(rng, 4), spd(rng, 4)), tags=("n=4",)),
        Sample((np.array([[2.0]]), np.array([[8.0]])), tags=("n=1", "hand"),
               expect=np.array([[2.0 * np.log(4.0)]])),
    ]


def exp_map(rng):
    return [
        Sample((np.eye(2), np.diag([1.0, 0.0])), tags=("hand", "identity-base"),
               expect=np.diag([np.e, 1.0])),
        Sample((spd(rng, 3), np.zeros((3, 3))), tags=("zero-tangent",)),
        Sample((spd(rng, 3), tangent(rng, 3)), tags=("well-conditioned",)),
        Sample((spd(rng, 4), tangent(rng, 4)), tags=("n=4",)),
        Sample((np.array([[2.0]]), np.array([[2.0]])), tags=("n=1", "hand"),
               expect=np.array([[2.0 * np.e]])),
    ]


def transport(rng):
    p = spd(rng, 3)
    v = tangent(rng, 3)
    return [
        Sample((np.eye(2), np.diag([4.0, 9.0]), np.array([[1.0, 1.0], [1.0, 1.0]])),
               tags=("hand", "identity-base"), expect=np.array([[4.0, 6.0], [6.0, 9.0]])),
        Sample((p, p, v), tags=("to=from",)),
        Sample((spd(rng, 3), spd(rng, 3), tangent(rng, 3)), tags=("well-conditioned",)),
        Sample((spd(rng, 4), spd(rng, 4), tangent(rng, 4)), tags=("n=4",)),
        Sample((np.eye(3), np.eye(3), v), tags=("identity",)),
    ]


def matrix_fn(rng):
    from .spd import MatFnAttrs as F

    out = [Sample((np.stack([np.diag([4.0, 9.0])]),), F("Sqrtm"), tags=("hand",),
                  expect=np.stack([np.diag([2.0, 3.0])])),
           Sample((np.stack([np.diag([4.0, 0.25])]),), F("Invsqrtm"), tags=("hand",),
                  expect=np.stack([np.diag([0.5, 2.0])]))]
    for kind in ("Logm", "Expm", "Sqrtm", "Invsqrtm"):
        x = spd(rng, 3, 2) if kind != "Expm" else np.stack([tangent(rng, 3) for _ in "ab"])
        out.append(Sample((x,), F(kind), tags=(kind.lower(),)))
    out.append(Sample((np.stack([np.eye(2), np.diag([3.0, 3.0])]),), F("Logm"),
                      tags=("identity", "repeated-eigenvalues")))
    out.append(Sample((np.zeros((0, 3, 3)),), F("Expm"), tags=("empty",)))
    return out
