"""Gaussian splat geometry: look-at camera, SH colour, per-splat screen ellipse.

A scalar transcription of RLX's CPU splat reference (``rlx-splat`` ``core/camera.rs``,
``core/sh.rs``, ``reference/project.rs``). Every value is a numpy scalar of the working
type ``F`` (float32 as RLX, float64 for the high-precision oracle); the steps RLX does in
f64 (perspective divide, the five-point conic fit) are done in f64 here too.
"""
from __future__ import annotations

import math

import numpy as np

D = np.float64
ELLIPSE_EPS = 1e-6                    # f32 constant; widened where RLX widens it
SUPPORT_SIGMA = 3.0                   # GAUSSIAN_SUPPORT_SIGMA_RADIUS
VEC_EPS = 1e-8
SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_FULL = 16                          # SUPPORTED_SH_COEFF_COUNT: no colour override at >= 16


def v_sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def v_dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def v_cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def v_normalize(v, F):
    n = np.sqrt(v_dot(v, v))
    if n <= F(VEC_EPS):
        return (F(0), F(0), F(1))
    return (v[0] / n, v[1] / n, v[2] / n)


def quat_rotate(v, q):
    """RLX's ``quat_rotate`` with q = (w, x, y, z) as stored (not normalised)."""
    qv, w = (q[1], q[2], q[3]), q[0]
    t1 = v_cross(v, qv)
    t2 = v_cross((t1[0] + w * v[0], t1[1] + w * v[1], t1[2] + w * v[2]), qv)
    return (v[0] + 2 * t2[0], v[1] + 2 * t2[1], v[2] + 2 * t2[2])


class Camera:
    """``Camera::look_at`` from meta[0:12]: pinhole, square pixels, centred principal point."""

    def __init__(self, meta, width: int, height: int, F):
        m = [F(x) for x in meta[:12]]
        self.F, self.w, self.h = F, width, height
        self.pos, target = tuple(m[0:3]), tuple(m[3:6])
        up = v_normalize(tuple(m[6:9]), F)
        self.far = m[11]
        fwd = v_normalize(v_sub(target, self.pos), F)
        right = v_normalize(v_cross(up, fwd), F)
        self.basis = (right, v_normalize(v_cross(fwd, right), F), fwd)
        half_fov = F(0.5) * (m[9] * (F(math.pi) / F(180)))    # Rust's to_radians
        self.f = F(0.5) * F(height) / np.tan(half_fov)          # fx = fy
        self.cx, self.cy = F(0.5) * F(width), F(0.5) * F(height)

    def to_camera(self, p):
        d = v_sub(p, self.pos)
        return tuple(v_dot(row, d) for row in self.basis)

    def project(self, p):
        """World point -> (screen xy, ok); the divide is f64 as in RLX."""
        c = self.to_camera(p)
        if not np.isfinite(c[2]) or c[2] <= 1e-12:
            return (self.F(0), self.F(0)), False
        u, v = self.F(D(c[0]) / D(c[2])), self.F(D(c[1]) / D(c[2]))
        s = (u * self.f + self.cx, v * self.f + self.cy)
        return s, bool(np.isfinite(s[0]) and np.isfinite(s[1]))

    def ray(self, px: int, py: int):
        """Unit world direction through the centre of pixel (px, py)."""
        F, b = self.F, self.basis
        u = F(D(F(px) + F(0.5) - self.cx) / D(max(self.f, F(1e-12))))
        v = F(D(F(py) + F(0.5) - self.cy) / D(max(self.f, F(1e-12))))
        c = (u, v, F(1))
        off = tuple(b[0][k] * c[0] + b[1][k] * c[1] + b[2][k] * c[2] for k in range(3))
        world = (self.pos[0] + off[0], self.pos[1] + off[1], self.pos[2] + off[2])
        return v_normalize(v_sub(world, self.pos), F)


def splat_colors(positions, colors, sh, count: int, cam: Camera):
    """View-dependent RGB per splat: SH bands 0 and 1 (RLX's ``evaluate_sh0_sh1``)."""
    F = cam.F
    k = sh.size // (3 * count)
    coef = np.zeros((count, SH_FULL, 3), sh.dtype)
    coef[:, :min(k, SH_FULL)] = sh.reshape(count, k, 3)[:, :SH_FULL]
    # an all-zero DC band (k < 16) means "use `colors`": DC = (clamp(c) - 0.5) / C0
    if k < SH_FULL and not np.any(np.abs(sh.reshape(count, k, 3)[:, 0]) > F(1e-8)):
        for i in range(count):
            for ch in range(3):
                c = min(max(F(colors[3 * i + ch]), F(0)), F(1))
                coef[i, 0, ch] = (c - F(0.5)) / F(SH_C0)
    out = np.zeros((count, 3), colors.dtype)
    for i in range(count):
        d = v_sub(cam.pos, tuple(F(x) for x in positions[3 * i:3 * i + 3]))
        n = np.sqrt(v_dot(d, d))
        x, y, z = (d[0] / n, d[1] / n, d[2] / n) if n > F(1e-8) else (F(0), F(0), F(0))
        for ch in range(3):
            c = coef[i, :, ch]
            rgb = F(0.5) + F(SH_C0) * c[0]
            rgb = rgb - F(SH_C1) * y * c[1]
            rgb = rgb + F(SH_C1) * z * c[2]
            out[i, ch] = rgb - F(SH_C1) * x * c[3]
    return out


def _frustum_hit(cc, cam: Camera, r):
    """Does the support sphere (camera-space centre cc, radius r) meet the view frustum?"""
    F = cam.F
    if not all(np.isfinite(x) for x in (*cc, r)) or r <= 0:
        return False
    if cc[2] + r <= F(1e-4) or cc[2] - r >= cam.far:
        return False
    w, h, f = F(cam.w), F(cam.h), cam.f
    for p in ((f, F(0), cam.cx), (-f, F(0), w - cam.cx),
              (F(0), f, cam.cy), (F(0), -f, h - cam.cy)):
        if v_dot(p, cc) < -r * np.sqrt(v_dot(p, p)):
            return False
    return True


def _fullscreen(cam: Camera):
    F = cam.F
    r = F(max(cam.w, cam.h, 1))
    inv = F(1) / max(r * r, F(ELLIPSE_EPS))
    return (F(0.5) * F(cam.w), F(0.5) * F(cam.h)), r, (inv, F(0), inv)


def _unit(v, F):
    n = np.sqrt(v_dot(v, v))
    if n <= F(ELLIPSE_EPS) or not np.isfinite(n):
        return None
    return (v[0] / n, v[1] / n, v[2] / n)


def outline_ellipse(pos, inv_scale, q, cam: Camera):
    """Screen ellipse (centre, radius, conic) of a splat's silhouette, or None (culled).

    Five points of the tangent circle seen from the camera are projected and an ellipse
    is fitted through them (``compute_outline_ellipse``).
    """
    from ._splat_conic import fit_conic

    F = cam.F
    centre, centre_ok = cam.project(pos)
    scale = tuple(F(1) / max(s, F(1e-12)) for s in inv_scale)
    hit = _frustum_hit(cam.to_camera(pos), cam, max(scale))
    if not centre_ok and not hit:
        return None
    rot = quat_rotate(v_sub(cam.pos, pos), q)
    o = tuple(rot[k] * inv_scale[k] for k in range(3))
    dist = np.sqrt(v_dot(o, o))
    if dist <= F(1) + F(ELLIPSE_EPS):
        return _fullscreen(cam) if hit else None
    vd = (o[0] / dist, o[1] / dist, o[2] / dist)
    tc = (vd[0] / dist, vd[1] / dist, vd[2] / dist)
    tr = np.sqrt(max(F(1) - F(1) / (dist * dist), F(0)))
    axis = (F(0), F(0), F(1)) if abs(vd[2]) < F(0.999) else (F(0), F(1), F(0))
    u = _unit(v_cross(axis, vd), F)
    v = None if u is None else _unit(v_cross(vd, u), F)
    if v is None:
        return None
    q_inv = (q[0], -q[1], -q[2], -q[3])
    pts, lo, hi = [], [F(1e30), F(1e30)], [F(-1e30), F(-1e30)]
    for i in range(5):
        th = F(2) * F(math.pi) * F(i) / F(5)
        ct, st = np.cos(th), np.sin(th)
        lp = tuple(tc[k] + tr * (ct * u[k] + st * v[k]) for k in range(3))
        r = quat_rotate(tuple(lp[k] * scale[k] for k in range(3)), q_inv)
        s, ok = cam.project((pos[0] + r[0], pos[1] + r[1], pos[2] + r[2]))
        if not ok:
            return _fullscreen(cam) if hit else None
        pts.append(s)
        lo = [min(lo[0], s[0]), min(lo[1], s[1])]
        hi = [max(hi[0], s[0]), max(hi[1], s[1])]
    if centre_ok:
        lo = [min(lo[0], centre[0]), min(lo[1], centre[1])]
        hi = [max(hi[0], centre[0]), max(hi[1], centre[1])]
    if hi[0] < 0 or lo[0] >= F(cam.w) or hi[1] < 0 or lo[1] >= F(cam.h):
        return None
    return fit_conic(pts, lo, hi, F)
