"""Gaussian splat pipeline: project, tile-bin, sort, pack, rasterize.

A transcription of RLX's CPU splat reference (``rlx-splat/src/reference/{project,binning,
raster,native_prep}.rs`` and ``prep_layout.rs``), loop for loop, so tie orders, cut-offs
and early exits are RLX's. ``F`` is the working float type (numpy scalar type).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._splat_geom import SUPPORT_SIGMA, Camera, outline_ellipse, quat_rotate, splat_colors
from .opdef import want

GAMMA = 2.2                           # OUTPUT_GAMMA
NO_RANGE = 0xFFFF_FFFF                # an empty tile's start (u32::MAX)
PARAM_FLOATS = 11                     # trailing raster params of the prepare buffer


@dataclass
class Projected:
    """Per-splat projection (RLX's ``ProjectedSplats``); arrays of the working dtype."""

    color_alpha: np.ndarray           # [N, 4] SH colour + raw opacity
    valid: np.ndarray                 # [N] 0/1
    pos_local: np.ndarray             # [N, 3] camera origin in the splat's 3-sigma frame
    inv_scale: np.ndarray             # [N, 3] 1 / (exp(log_scale) · radius_scale · 3)
    quat: np.ndarray                  # [N, 4] rotations as given (w, x, y, z)
    crd: np.ndarray                   # [N, 4] screen centre x, y, radius px, camera distance
    conic: np.ndarray                 # [N, 3] screen conic (a, b, c)


def tiles(width: int, height: int, tile_size: int) -> tuple:
    """(tiles across, tiles down)."""
    return -(-width // tile_size), -(-height // tile_size)


def prep_len(n: int, max_list: int, width: int, height: int, tile_size: int) -> int:
    """RLX's ``gaussian_splat_prep_packed_len``."""
    tw, th = tiles(width, height, tile_size)
    return 15 * max(n, 1) + max_list + 2 * tw * th + 3 * max(width * height, 1) + PARAM_FLOATS


def project(scene, cam: Camera, radius_scale, alpha_cutoff) -> Projected:
    """``project_splats``: colour, raster frame and screen ellipse of every splat."""
    F = cam.F
    pos, scl, rot, opa, col, sh = scene
    n = pos.size // 3
    dt = pos.dtype
    p = Projected(np.zeros((n, 4), dt), np.zeros(n, dt), np.zeros((n, 3), dt),
                  np.zeros((n, 3), dt), rot.reshape(n, 4).copy(), np.zeros((n, 4), dt),
                  np.zeros((n, 3), dt))
    p.color_alpha[:, :3] = splat_colors(pos, col, sh, n, cam)
    p.color_alpha[:, 3] = opa
    rs, cut = F(radius_scale), F(alpha_cutoff)
    for i in range(n):
        wp = tuple(F(x) for x in pos[3 * i:3 * i + 3])
        q = tuple(F(x) for x in rot[4 * i:4 * i + 4])
        sig = [np.exp(F(x)) for x in scl[3 * i:3 * i + 3]]
        inv = [F(1) / max(s * rs * F(SUPPORT_SIGMA), F(1e-6)) for s in sig]
        r = quat_rotate((cam.pos[0] - wp[0], cam.pos[1] - wp[1], cam.pos[2] - wp[2]), q)
        p.inv_scale[i] = inv
        p.pos_local[i] = [r[k] * inv[k] for k in range(3)]
        depth = cam.to_camera(wp)[2]
        d = (wp[0] - cam.pos[0], wp[1] - cam.pos[1], wp[2] - cam.pos[2])
        dist = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        o = min(max(F(opa[i]), F(0)), F(1))
        if o < cut:
            continue
        # the silhouette is the iso-surface where opacity · gaussian falls to alpha_cutoff
        k = np.sqrt(max(F(-2) * np.log(cut / max(o, cut)), F(0)))
        out_inv = [F(1) / max(s * rs * k, F(1e-6)) for s in sig]
        fit = outline_ellipse(wp, out_inv, q, cam)
        if fit is None:
            continue
        (cx, cy), rad, conic = fit
        rad = max(rad + F(1), F(1))                     # ELLIPSE_RADIUS_PAD_PX
        p.crd[i] = (cx, cy, rad, dist)
        p.conic[i] = conic
        p.valid[i] = (depth > F(1e-4) and cx + rad >= 0 and cx - rad < F(cam.w)
                      and cy + rad >= 0 and cy - rad < F(cam.h))
    return p


def ray_alpha(p: Projected, i: int, ray, alpha_cutoff):
    """``ray_splat_intersection_alpha``: opacity · gaussian at the ray's closest approach."""
    F = type(ray[0])
    o = min(max(F(p.color_alpha[i, 3]), F(0)), F(1))
    cut = F(alpha_cutoff)
    if o < cut:
        return F(0)
    k = np.sqrt(max(F(-2) * np.log(cut / max(o, cut)), F(0)))
    if k <= F(1e-10):
        return F(0)
    s = F(SUPPORT_SIGMA) / k
    ro = [F(x) * s for x in p.pos_local[i]]
    r = quat_rotate(ray, tuple(F(x) for x in p.quat[i]))
    rl = [r[j] * F(p.inv_scale[i, j]) * s for j in range(3)]
    den = rl[0] * rl[0] + rl[1] * rl[1] + rl[2] * rl[2]
    if den <= F(1e-10):
        return F(0)
    t = -(rl[0] * ro[0] + rl[1] * ro[1] + rl[2] * ro[2]) / den
    if t <= 0:
        return F(0)
    c = [ro[j] + rl[j] * t for j in range(3)]
    rho2 = max(c[0] * c[0] + c[1] * c[1] + c[2] * c[2], F(0))
    return o * np.exp(F(-0.5) * k * k * rho2)


def rasterize(p: Projected, values, ranges, cam: Camera, tile_size, tile_width, background,
              alpha_cutoff, transmittance_threshold):
    """Front-to-back compositing per pixel over its tile's sorted list (RLX ``rasterize``).

    An empty tile is the linearised background with alpha 1; otherwise the sRGB
    background is composited under the splats and the sum is raised to the 2.2 gamma.
    """
    F, w, h = cam.F, cam.w, cam.h
    out = np.zeros((h, w, 4), p.color_alpha.dtype)
    bg = [F(b) for b in background]
    bg_lin = [max(b, F(0)) ** F(GAMMA) for b in bg]
    cut, t_min = F(alpha_cutoff), F(transmittance_threshold)
    for py in range(h):
        for px in range(w):
            tile = (py // tile_size) * tile_width + px // tile_size
            start, end = int(ranges[2 * tile]), min(int(ranges[2 * tile + 1]), len(values))
            if start >= NO_RANGE or end <= start:
                out[py, px] = (*bg_lin, F(1))
                continue
            ray = cam.ray(px, py)
            acc, trans = [F(0), F(0), F(0)], F(1)
            for sid in values[start:end]:
                sid = int(sid)
                want(sid < len(p.valid), f"(C4) the tile list names splat {sid}, but the "
                                         f"buffer holds {len(p.valid)}")
                if not p.valid[sid]:
                    continue
                a = ray_alpha(p, sid, ray, cut)
                if a < cut:
                    continue
                acc = [acc[c] + trans * a * F(p.color_alpha[sid, c]) for c in range(3)]
                trans = trans * (F(1) - a)
                if trans < t_min:
                    break
            rgb = [max(acc[c] + trans * bg[c], F(0)) ** F(GAMMA) for c in range(3)]
            out[py, px] = (*rgb, F(1) - trans)
    return out.reshape(-1)


def prepare(scene, meta, a, F):
    """Project, bin and sort; return (projected, sorted splat ids, tile ranges, camera)."""
    from ._splat_bin import bin_tiles, sort_and_range

    cam = Camera(meta, a.width, a.height, F)
    p = project(scene, cam, a.radius_scale, a.alpha_cutoff)
    tw, th = tiles(a.width, a.height, a.tile_size)
    keys, vals, generated = bin_tiles(p, tw, th, a.tile_size, a.max_list_entries, F)
    sorted_vals, ranges = sort_and_range(keys, vals, min(generated, a.max_list_entries),
                                         tw * th)
    return p, sorted_vals, ranges, cam


def render(scene, meta, a, F):
    """GaussianSplatRender: prepare then rasterize, without the packed buffer in between."""
    p, vals, ranges, cam = prepare(scene, meta, a, F)
    tw = tiles(a.width, a.height, a.tile_size)[0]
    return rasterize(p, vals, ranges, cam, a.tile_size, tw, meta[12:15], a.alpha_cutoff,
                     a.transmittance_threshold)
