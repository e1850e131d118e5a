"""Samples of the SPD-manifold backward kinds: the operands a forward pass would hand
them (eigenpairs from ``_spd_math.eigh``), random cotangents, and the edges of the
Loewner matrix: repeated eigenvalues (f' on the diagonal blocks), ReEig's floor straddled."""
from __future__ import annotations

import numpy as np

from . import _spd_math as sm
from ._spd_samples import spd, tangent, with_spectrum
from .opdef import Sample


def _eig_operands(rng, x):
    lam, u = sm.eigh(x)
    n = len(lam)
    return lam, u.reshape(-1), rng.standard_normal(n * n)


def _spectral_bwd(rng, floor: float):
    from .spd import SpdEpsAttrs as E

    def s(x, eps, tags, expect=None):
        return Sample(_eig_operands(rng, x), E(eps), tags=tags, expect=expect)
    out = [
        s(spd(rng, 3), 1e-4, ("well-conditioned",)),
        s(spd(rng, 4), 1e-4, ("n=4",)),
        s(np.eye(3), 1e-4, ("identity", "repeated-eigenvalues")),
        s(with_spectrum(rng, [1.5, 1.5, 4.0]), 1e-4, ("repeated-eigenvalues",)),
        s(with_spectrum(rng, [0.05, 0.5, 2.0, 3.0]), floor, ("floor-hit",)),
        s(np.array([[3.0]]), 1e-4, ("n=1",)),
    ]
    # dX of the identity's spectral function: f'(1)·sym(dY)
    dy = np.array([[1.0, 2.0], [0.0, 3.0]])
    out.append(Sample((np.ones(2), np.eye(2).reshape(-1), dy.reshape(-1)), E(1e-4),
                      tags=("hand", "repeated-eigenvalues"), expect=sm.sym(dy)))
    return out


def reeig_bwd(rng):
    return _spectral_bwd(rng, 1.0)


def logeig_bwd(rng):
    return _spectral_bwd(rng, 0.1)


def bn_x(rng):
    from .spd import SpdEpsAttrs as E

    dy = np.array([[[1.0, 2.0], [0.0, 1.0]]])
    return [
        Sample((np.eye(2), np.eye(2), dy), E(1e-5), tags=("hand", "identity"),
               expect=sm.sym(dy)),
        Sample((spd(rng, 3), spd(rng, 3), rng.standard_normal((3, 3, 3))), E(1e-5),
               tags=("well-conditioned",)),
        Sample((spd(rng, 4), spd(rng, 4), rng.standard_normal((1, 4, 4))), E(1e-5),
               tags=("n=4",)),
        Sample((with_spectrum(rng, [1e-3, 2.0]), spd(rng, 2), rng.standard_normal((2, 2, 2))),
               E(0.1), tags=("floor-hit",)),
        Sample((np.eye(2), np.eye(2), np.zeros((0, 2, 2))), E(1e-5), tags=("empty",)),
    ]


def bn_g(rng):
    from .spd import SpdEpsAttrs as E

    return [
        Sample((spd(rng, 3, 2), spd(rng, 3), spd(rng, 3), rng.standard_normal((2, 3, 3))),
               E(1e-5), tags=("well-conditioned",)),
        Sample((spd(rng, 2, 3), np.eye(2), np.eye(2), rng.standard_normal((3, 2, 2))),
               E(1e-5), tags=("identity", "repeated-eigenvalues")),
        Sample((spd(rng, 4, 1), spd(rng, 4), spd(rng, 4), rng.standard_normal((1, 4, 4))),
               E(1e-5), tags=("n=4",)),
        Sample((spd(rng, 2, 2), spd(rng, 2), with_spectrum(rng, [1e-3, 2.0]),
                rng.standard_normal((2, 2, 2))), E(0.1), tags=("floor-hit",)),
        Sample((np.zeros((0, 2, 2)), np.eye(2), 2 * np.eye(2), np.zeros((0, 2, 2))),
               E(1e-5), tags=("empty",), expect=np.zeros((2, 2))),
    ]


def _map_bwd(rng, arg):
    return [
        Sample((spd(rng, 3), arg(3), rng.standard_normal((3, 3))), tags=("well-conditioned",)),
        Sample((spd(rng, 4), arg(4), rng.standard_normal((4, 4))), tags=("n=4",)),
        Sample((np.eye(3), arg(3), rng.standard_normal((3, 3))),
               tags=("identity-base", "repeated-eigenvalues")),
        Sample((np.array([[2.0]]), arg(1), np.array([[1.0]])), tags=("n=1",)),
    ]


def log_map_bwd(rng):
    p = spd(rng, 2)
    out = _map_bwd(rng, lambda n: spd(rng, n))
    out.append(Sample((p, p, rng.standard_normal((2, 2))), tags=("x=base",
                                                                 "repeated-eigenvalues")))
    return out


def exp_map_bwd(rng):
    out = _map_bwd(rng, lambda n: tangent(rng, n))
    out.append(Sample((spd(rng, 2), np.zeros((2, 2)), rng.standard_normal((2, 2))),
                      tags=("zero-tangent", "repeated-eigenvalues")))
    return out


def transport_bwd(rng):
    p = spd(rng, 3)
    return [
        Sample((spd(rng, 3), spd(rng, 3), tangent(rng, 3), rng.standard_normal((3, 3))),
               tags=("well-conditioned",)),
        Sample((spd(rng, 4), spd(rng, 4), tangent(rng, 4), rng.standard_normal((4, 4))),
               tags=("n=4",)),
        Sample((p, p, tangent(rng, 3), rng.standard_normal((3, 3))),
               tags=("to=from", "repeated-eigenvalues")),
        Sample((np.eye(2), np.eye(2), tangent(rng, 2), rng.standard_normal((2, 2))),
               tags=("identity",)),
    ]


def matrix_fn_bwd(rng):
    from .spd import MatFnAttrs as F

    out = []
    for kind in ("Logm", "Expm", "Sqrtm", "Invsqrtm"):
        x = spd(rng, 3, 2) if kind != "Expm" else np.stack([tangent(rng, 3) for _ in "ab"])
        out.append(Sample((x, rng.standard_normal((2, 3, 3))), F(kind), tags=(kind.lower(),)))
    out.append(Sample((np.stack([np.eye(3), with_spectrum(rng, [2.0, 2.0, 5.0])]),
                       rng.standard_normal((2, 3, 3))), F("Sqrtm"),
                      tags=("repeated-eigenvalues",)))
    dy = np.array([[[0.0, 1.0], [1.0, 2.0]]])
    out.append(Sample((np.stack([np.eye(2)]), dy), F("Logm"), tags=("hand", "identity"),
                      expect=dy))
    out.append(Sample((np.zeros((0, 2, 2)), np.zeros((0, 2, 2))), F("Expm"), tags=("empty",)))
    return out
