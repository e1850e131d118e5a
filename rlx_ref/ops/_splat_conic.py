"""The five-point ellipse fit of RLX's splat projection (``solve_conic_renorm`` and the tail
of ``compute_outline_ellipse`` in ``rlx-splat/src/reference/project.rs``), in f64 as RLX."""
from __future__ import annotations

import numpy as np

D = np.float64
EPS64 = D(np.float32(1e-6))           # RLX's `ELLIPSE_EPS as f64` (an f32 constant widened)


def _solve(pts, eps):
    """Conic a·x² + 2b·xy + c·y² + d·x + e·y = 1 through five normalised points, or None.

    Points 0 and 1 fix the affine frame (x: p1 → p0, y: p0 → p1); the remaining three
    give a 3×3 system, eliminated without pivoting exactly as RLX does.
    """
    sx, sy = D(pts[0][0] - pts[1][0]), D(pts[1][1] - pts[0][1])
    if abs(sx) <= eps or abs(sy) <= eps:
        return None
    isx, isy = D(1) / sx, D(1) / sy
    ox, oy = D(pts[1][0]), D(pts[0][1])
    uv = [((D(p[0]) - ox) * isx, (D(p[1]) - oy) * isy) for p in pts[2:]]
    rows = [[u * u - u, 2 * u * v, v * v - v, u + v - 1] for u, v in uv]
    (m00, m01, m02, r0), (m10, m11, m12, r1), (m20, m21, m22, r2) = rows
    if abs(m00) <= eps:
        return None
    inv = 1 / m00
    m01, m02, r0 = m01 * inv, m02 * inv, r0 * inv
    m11, m12, r1 = m11 - m10 * m01, m12 - m10 * m02, r1 - m10 * r0
    m21, m22, r2 = m21 - m20 * m01, m22 - m20 * m02, r2 - m20 * r0
    if abs(m11) <= eps:
        return None
    inv = 1 / m11
    m12, r1 = m12 * inv, r1 * inv
    m22, r2 = m22 - m21 * m12, r2 - m21 * r1
    if abs(m22) <= eps:
        return None
    cc = r2 / m22
    cb = r1 - m12 * cc
    ca = r0 - m01 * cb - m02 * cc
    cd, ce = -(ca + 1), -(cc + 1)
    a, b, c = ca * (isx * isx), cb * (isx * isy), cc * (isy * isy)
    d = -2 * a * ox - 2 * b * oy + cd * isx
    e = -2 * b * ox - 2 * c * oy + ce * isy
    f = a * ox * ox + 2 * b * ox * oy + c * oy * oy - cd * isx * ox - ce * isy * oy + 1
    if abs(f) <= eps:
        return None
    k = -1 / f
    # RLX returns the solution as f32 and widens it again before use
    return [D(np.float32(t * k)) for t in (a, b, c, d, e)]


def fit_conic(pts, lo, hi, F):
    """(centre_px, radius_px, conic) of the ellipse through ``pts`` (bbox ``lo``..``hi``)."""
    e = F(1e-6)
    bc = (F(0.5) * (lo[0] + hi[0]), F(0.5) * (lo[1] + hi[1]))
    bh = (max(F(0.5) * (hi[0] - lo[0]), e), max(F(0.5) * (hi[1] - lo[1]), e))
    norm = [((p[0] - bc[0]) / bh[0], (p[1] - bc[1]) / bh[1]) for p in pts]
    sol = _solve(norm, EPS64)
    if sol is None:
        return None
    a, b, c, lx, ly = sol
    det = a * c - b * b
    if det <= EPS64:
        return None
    ex, ey = D(0.5) * (b * ly - c * lx) / det, D(0.5) * (b * lx - a * ly) / det
    scale = 1 + ex * (a * ex + b * ey) + ey * (b * ex + c * ey)
    if scale <= EPS64:
        return None
    a, b, c = a / scale, b / scale, c / scale
    tr, det = a + c, a * c - b * b
    if det <= EPS64 or a <= EPS64 or c <= EPS64:
        return None
    disc = np.sqrt(max(D(0.25) * tr * tr - det, D(0)))
    ax0 = 1 / np.sqrt(max(D(0.5) * tr + disc, EPS64))
    ax1 = 1 / np.sqrt(max(D(0.5) * tr - disc, EPS64))
    centre = (bc[0] + F(ex) * bh[0], bc[1] + F(ey) * bh[1])
    h0, h1 = D(bh[0]), D(bh[1])
    radius = F(max(ax0 * h0, ax1 * h1))
    conic = (F(a / max(h0 * h0, EPS64)), F(b / max(h0 * h1, EPS64)),
             F(c / max(h1 * h1, EPS64)))
    if not all(np.isfinite(t) for t in (*centre, radius, *conic)) or radius <= 0:
        return None
    return centre, radius, conic
