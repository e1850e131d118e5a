"""Samples of the linalg_decomp kinds: small, well-conditioned matrices (SPD as M·Mᵀ + n·I,
spectra and singular values with gaps >= 1) so every factor is unique and stable, plus
hand-computed cases, sign-convention ties, ignored triangles and empty matrices."""
from __future__ import annotations

import math

import numpy as np

from ._linalg_decomp_math import (eigh_packed, separated, spd, with_singular_values,
                                  with_spectrum)
from .opdef import Sample

_S = math.sqrt(0.5)


def _f32(*xs):
    return tuple(np.asarray(x, np.float32) for x in xs)


def _tri(rng, n: int, lower: bool) -> np.ndarray:
    """A triangular matrix with a dominant diagonal (κ small) and noise in the other half."""
    a = rng.standard_normal((n, n)) * 0.5
    d = np.arange(n)
    a[d, d] = (2.0 + rng.random(n)) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    return np.where(keep, a, 100.0 * rng.standard_normal((n, n)))   # the ignored half


def cholesky_samples(rng):
    garbage_upper = np.array([[4, 99], [2, 5]], np.float32)
    return [
        Sample(_f32([[4, 2], [2, 5]]), None, tags=("hand",), expect=_f32([[2, 0], [1, 2]])[0]),
        Sample((garbage_upper,), None, tags=("hand", "upper-ignored"),
               expect=_f32([[2, 0], [1, 2]])[0]),
        Sample(_f32(spd(rng, 5)), None, tags=("prime-length",)),
        Sample(_f32(spd(rng, 3)), None, tags=("odd",)),
        Sample(_f32([[9.0]]), None, tags=("size-1",), expect=_f32([[3.0]])[0]),
        Sample((np.zeros((0, 0), np.float32),), None, tags=("empty",)),
    ]


def trisolve_samples(rng):
    from .linalg_decomp import TriangularSolveAttrs as T

    low = np.array([[2, 7], [1, 1]], np.float32)        # the 7 is never read
    rhs = rng.standard_normal
    return [
        Sample(_f32(low, [4, 3]), T(True, False), tags=("hand", "upper-ignored"),
               expect=_f32([2, 1])[0]),
        Sample(_f32(low, [4, 3]), T(True, True), tags=("hand", "transpose"),
               expect=_f32([0.5, 3])[0]),
        Sample(_f32(_tri(rng, 5, True), rhs((5, 3))), T(True, False),
               tags=("prime-length", "multi-rhs")),
        Sample(_f32(_tri(rng, 4, False), rhs(4)), T(False, False), tags=("upper",)),
        Sample(_f32(_tri(rng, 3, False), rhs((3, 2))), T(False, True),
               tags=("upper", "transpose")),
        Sample(_f32(_tri(rng, 4, True), rhs((4, 1))), T(True, True), tags=("transpose",)),
        Sample(_f32([[0, 0], [1, 1]], [1, 2]), T(True, False), tags=("singular", "inf", "nan")),
        Sample((np.zeros((0, 0), np.float32), np.zeros((0, 2), np.float32)), T(True, False),
               tags=("empty",)),
    ]


def det_samples(kind: str):
    log = kind == "LogDet"

    def value(d: float):
        return np.float32(math.log(abs(d)) if log else d)

    def samples(rng):
        well = spd(rng, 4) * np.where(rng.random(4) < 0.5, -1.0, 1.0)[:, None]
        return [
            Sample(_f32([[1, 2], [3, 4]]), None, tags=("hand", "negative"), expect=value(-2)),
            Sample(_f32([[0, 1], [1, 0]]), None, tags=("hand", "pivot"), expect=value(-1)),
            Sample(_f32([[1, 2], [2, 4]]), None, tags=("singular",),
                   expect=np.float32(-np.inf if log else 0.0)),
            Sample(_f32(well), None, tags=("even",)),
            Sample(_f32(spd(rng, 5) / 5.0), None, tags=("prime-length",)),
            Sample(_f32([[-3.0]]), None, tags=("size-1",), expect=value(-3)),
            Sample(_f32([[1, np.nan], [0, 1]]), None, tags=("nan",)),
            Sample((np.zeros((0, 0), np.float32),), None, tags=("empty",),
                   expect=np.float32(0.0 if log else 1.0)),
        ]
    return samples


def _with_parts(make, attrs, parts):
    """Input matrices sampled once per payload part (one factor each): ``make`` yields
    (sample, its parts or None for all); a sample's ``expect`` is a dict of hand values."""
    def samples(rng):
        return [Sample(s.inputs, attrs(p), tags=s.tags + (p,), expect=(s.expect or {}).get(p))
                for s, only in make(rng) for p in (only or parts)]
    return samples


def _svd_inputs(rng):
    diag = Sample(_f32([[3, 0], [0, -2]]), tags=("hand", "sign"), expect={
        "U": _f32([[1, 0], [0, 1]])[0], "S": _f32([3, 2])[0], "Vt": _f32([[1, 0], [0, -1]])[0]})
    tall = with_singular_values(rng, 5, 3, separated(rng, 3)[::-1])
    wide = with_singular_values(rng, 2, 4, separated(rng, 2)[::-1])
    return [(diag, None), (Sample(_f32(tall), tags=("tall", "prime-length")), None),
            (Sample(_f32(wide), tags=("wide",)), ("Vt",)),
            (Sample((np.zeros((3, 0), np.float32),), tags=("empty",)), ("U",))]


def svd_samples(rng):
    from ._linalg_svd_qr import SvdAttrs

    return _with_parts(_svd_inputs, SvdAttrs, ("U", "S", "Vt"))(rng)


def _qr_inputs(rng):
    hand = Sample(_f32([[3, 0], [4, 5]]), tags=("hand",), expect={
        "Q": _f32([[0.6, -0.8], [0.8, 0.6]])[0], "R": _f32([[5, 4], [0, 3]])[0]})
    flip = Sample(_f32([[-2, 1], [0, -3]]), tags=("hand", "sign"), expect={
        "Q": _f32([[-1, 0], [0, -1]])[0], "R": _f32([[2, -1], [0, 3]])[0]})
    tall = with_singular_values(rng, 5, 3, separated(rng, 3))
    wide = with_singular_values(rng, 2, 3, separated(rng, 2))
    return [(hand, None), (flip, None),
            (Sample(_f32(tall), tags=("tall", "prime-length")), None),
            (Sample(_f32(wide), tags=("wide", "trapezoidal")), None)]


def qr_samples(rng):
    from ._linalg_svd_qr import QrAttrs

    return _with_parts(_qr_inputs, QrAttrs, ("Q", "R"))(rng)


def _sym(rng, n: int, low: float = -2.0) -> np.ndarray:
    return with_spectrum(rng, separated(rng, n, low))


def eigh_samples(rng):
    hand = np.array([[2, 1], [1, 2]], np.float32)     # λ 1, 3; vectors (1, ∓1)/√2: ties
    low_only = np.array([[2, -50], [1, 2]], np.float32)
    packed = _f32([1, 3, _S, _S, -_S, _S])[0]
    return [
        Sample((hand,), None, tags=("hand", "ties"), expect=packed),
        Sample((low_only,), None, tags=("hand", "upper-ignored"), expect=packed),
        Sample(_f32(_sym(rng, 5)), None, tags=("prime-length", "negative")),
        Sample(_f32(_sym(rng, 4, 1.0)), None, tags=("even", "spd")),
        Sample(_f32([[-7.0]]), None, tags=("size-1",), expect=_f32([-7, 1])[0]),
        Sample((np.zeros((0, 0), np.float32),), None, tags=("empty",)),
    ]


def eigh_batch_samples(rng):
    two = np.stack([_sym(rng, 3), _sym(rng, 3, 0.5)])
    return [
        Sample(_f32(two), None, tags=("batch",)),
        Sample(_f32([[[2, 1], [1, 2]]]), None, tags=("hand", "ties", "size-1"),
               expect=_f32([[1, 3, _S, _S, -_S, _S]])[0]),
        Sample((np.zeros((0, 3, 3), np.float32),), None, tags=("empty",)),
    ]


def _bwd_pair(rng, n: int):
    fwd = eigh_packed(_sym(rng, n))
    return _f32(fwd, rng.standard_normal(fwd.size))


def eigh_bwd_samples(batched: bool):
    def samples(rng):
        # diag(1, 3): U = I; bar = (λ̄ 0 | Ū = e0·e1ᵀ) couples by 1/(3-1): Ā01 = Ā10 = 1/4
        hand = _f32([1, 3, 1, 0, 0, 1], [0, 0, 0, 1, 0, 0])
        hand_out = _f32([[0, 0.25], [0.25, 0]])[0]
        diag_bar = _f32([1, 3, 1, 0, 0, 1], [1, 2, 0, 0, 0, 0])
        repeated = _f32([2, 2, 1, 0, 0, 1], rng.standard_normal(6))   # coupling dropped
        if batched:
            b = [_bwd_pair(rng, 3) for _ in range(2)]
            return [
                Sample((hand[0][None], hand[1][None]), None, tags=("hand",),
                       expect=hand_out[None]),
                Sample((np.stack([x[0] for x in b]), np.stack([x[1] for x in b])), None,
                       tags=("batch",)),
                Sample((repeated[0][None], repeated[1][None]), None, tags=("degenerate",)),
                Sample((np.zeros((0, 12), np.float32),) * 2, None, tags=("empty",)),
            ]
        return [
            Sample(hand, None, tags=("hand",), expect=hand_out),
            Sample(diag_bar, None, tags=("hand", "λ̄ only"), expect=_f32([[1, 0], [0, 2]])[0]),
            Sample(repeated, None, tags=("degenerate", "ties")),
            Sample(_bwd_pair(rng, 4), None, tags=("even",)),
            Sample(_bwd_pair(rng, 5), None, tags=("prime-length",)),
            Sample(_f32([2.0, 1.0], [0.5, 3.0]), None, tags=("size-1",),
                   expect=_f32([[0.5]])[0]),
        ]
    return samples
