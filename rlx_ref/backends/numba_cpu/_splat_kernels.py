"""Numba source of GaussianSplatRasterize: one pass over the pixels, each compositing its
tile's sorted splat list front to back (the oracle is ``ops/_splat_raster.rasterize``).

Everything is f32 as in RLX's CPU reference: every literal is wrapped in ``F`` so no step
widens to f64 except the two RLX does in f64 (the pixel's normalised screen coordinate), and
there is no fastmath, so no a·b + c is fused into one rounding.
"""
from __future__ import annotations

SOURCE = '''
F = np.float32
D = np.float64
NO_RANGE = 4294967295
_NJ = dict(inline="always", error_model="numpy", cache=True)


@njit(**_NJ)
def _u32(x):
    """Rust's saturating `f32 as u32`."""
    if not x > 0:
        return 0
    if x >= D(4294967295.0):
        return NO_RANGE
    return int(x)


@njit(**_NJ)
def _unit(x, y, z):
    n = np.sqrt(x * x + y * y + z * z)
    if n <= F(1e-8):
        return F(0), F(0), F(1)
    return x / n, y / n, z / n


@njit(**_NJ)
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(**_NJ)
def _qrot(vx, vy, vz, w, qx, qy, qz):
    """RLX's quat_rotate with q = (w, x, y, z) as stored."""
    t1x, t1y, t1z = _cross(vx, vy, vz, qx, qy, qz)
    t2x, t2y, t2z = _cross(t1x + w * vx, t1y + w * vy, t1z + w * vz, qx, qy, qz)
    return vx + F(2) * t2x, vy + F(2) * t2y, vz + F(2) * t2z


@njit(**_NJ)
def _alpha(prep, n, i, rx, ry, rz, cut):
    """Opacity · gaussian at the ray's closest approach to splat i (RLX's
    ray_splat_intersection_alpha)."""
    o = min(max(prep[4 * i + 3], F(0)), F(1))
    if o < cut:
        return F(0)
    k = np.sqrt(max(F(-2) * np.log(cut / max(o, cut)), F(0)))
    if k <= F(1e-10):
        return F(0)
    s = F(3) / k
    pl, iv, q = 5 * n + 3 * i, 8 * n + 3 * i, 11 * n + 4 * i
    ox, oy, oz = prep[pl] * s, prep[pl + 1] * s, prep[pl + 2] * s
    ax, ay, az = _qrot(rx, ry, rz, prep[q], prep[q + 1], prep[q + 2], prep[q + 3])
    lx, ly, lz = ax * prep[iv] * s, ay * prep[iv + 1] * s, az * prep[iv + 2] * s
    den = lx * lx + ly * ly + lz * lz
    if den <= F(1e-10):
        return F(0)
    t = -(lx * ox + ly * oy + lz * oz) / den
    if t <= F(0):
        return F(0)
    cx, cy, cz = ox + lx * t, oy + ly * t, oz + lz * t
    rho2 = max(cx * cx + cy * cy + cz * cz, F(0))
    return o * np.exp(F(-0.5) * k * k * rho2)


@njit(cache=True, error_model="numpy", nogil=True)
def splat_rasterize(out, prep, meta, n, w, h, ts, nlist, cut, tmin):
    """out[(py·w + px)·4 + c] for every pixel; prep in GaussianSplatPrepare's layout."""
    px_, py_, pz_ = meta[0], meta[1], meta[2]
    ux, uy, uz = _unit(meta[6], meta[7], meta[8])
    fx, fy, fz = _unit(meta[3] - px_, meta[4] - py_, meta[5] - pz_)
    rx, ry, rz = _cross(ux, uy, uz, fx, fy, fz)
    rx, ry, rz = _unit(rx, ry, rz)
    vx, vy, vz = _cross(fx, fy, fz, rx, ry, rz)
    vx, vy, vz = _unit(vx, vy, vz)
    focal = F(0.5) * F(h) / np.tan(F(0.5) * (meta[9] * (F(np.pi) / F(180))))
    ccx, ccy = F(0.5) * F(w), F(0.5) * F(h)
    bg = (meta[12], meta[13], meta[14])
    g = F(2.2)
    lin = (max(bg[0], F(0)) ** g, max(bg[1], F(0)) ** g, max(bg[2], F(0)) ** g)
    ntile = ((w + ts - 1) // ts) * ((h + ts - 1) // ts)
    ids, rng = 15 * n, 15 * n + nlist
    tw = _u32(prep[rng + 2 * ntile + 3 * w * h + 3])
    for py in range(h):
        for px in range(w):
            o = (py * w + px) * 4
            tile = (py // ts) * tw + px // ts
            start = _u32(prep[rng + 2 * tile])
            end = min(_u32(prep[rng + 2 * tile + 1]), nlist)
            if start == NO_RANGE or end <= start:
                out[o], out[o + 1], out[o + 2], out[o + 3] = lin[0], lin[1], lin[2], F(1)
                continue
            u = F(D(F(px) + F(0.5) - ccx) / D(max(focal, F(1e-12))))
            v = F(D(F(py) + F(0.5) - ccy) / D(max(focal, F(1e-12))))
            wx = px_ + (rx * u + vx * v + fx * F(1))
            wy = py_ + (ry * u + vy * v + fy * F(1))
            wz = pz_ + (rz * u + vz * v + fz * F(1))
            dx, dy, dz = _unit(wx - px_, wy - py_, wz - pz_)
            a0, a1, a2, trans = F(0), F(0), F(0), F(1)
            for j in range(start, end):
                sid = _u32(prep[ids + j])
                if sid >= n:
                    raise ValueError("GaussianSplatRasterize: prep lists a splat id >= N")
                if _u32(prep[4 * n + sid]) == 0:
                    continue
                a = _alpha(prep, n, sid, dx, dy, dz, cut)
                if a < cut:
                    continue
                a0 = a0 + trans * a * prep[4 * sid]
                a1 = a1 + trans * a * prep[4 * sid + 1]
                a2 = a2 + trans * a * prep[4 * sid + 2]
                trans = trans * (F(1) - a)
                if trans < tmin:
                    break
            out[o] = max(a0 + trans * bg[0], F(0)) ** g
            out[o + 1] = max(a1 + trans * bg[1], F(0)) ** g
            out[o + 2] = max(a2 + trans * bg[2], F(0)) ** g
            out[o + 3] = F(1) - trans
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of the splat rasterizer."""
    return "splat_rasterize", SOURCE
