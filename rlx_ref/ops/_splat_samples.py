"""Small splat scenes (<= 6 splats, <= 16x16 pixels) for the splat family's samples.

Scenes are hand placed, not random, so no splat sits on a tile-binning boundary where an
ulp could move it between tiles; only colours come from the generator.
"""
from __future__ import annotations

import math

import numpy as np

from .opdef import Sample

F32 = np.float32
BG = (0.2, 0.3, 0.4)


def meta(cam=(0.0, 0.0, -4.0), target=(0.0, 0.0, 0.0), up=(0.0, 1.0, 0.0), fov=50.0,
         bg=BG, far=100.0):
    """RLX's 23-float meta; entries 15-22 echo the payload and are ignored."""
    return np.array([*cam, *target, *up, fov, 0.1, far, *bg] + [0.0] * 8, F32)


def scene(pos, log_sigma, opacity, colors, rot=None, sh=None):
    """The six scene tensors, flat f32 (identity rotations and zero SH by default)."""
    n = len(pos)
    rot = [(1.0, 0.0, 0.0, 0.0)] * n if rot is None else rot
    sh = np.zeros(3 * n) if sh is None else sh
    return tuple(np.asarray(x, F32).reshape(-1)
                 for x in (pos, log_sigma, rot, opacity, colors, sh))


def _colors(rng, n):
    return rng.uniform(0.1, 0.9, (n, 3))


def _three(rng):
    ls = math.log(0.25)
    return scene([(-0.8, -0.3, 0.0), (0.6, 0.4, 0.5), (0.1, -0.6, -0.4)],
                 [(ls, ls, ls), (ls - 0.3, ls + 0.2, ls), (ls, ls - 0.4, ls + 0.1)],
                 [0.9, 0.7, 0.55], _colors(rng, 3))


def _stack(rng):
    """Three splats on one line of sight at different depths (depth order, early exit)."""
    ls = math.log(0.3)
    return scene([(0.05, 0.02, 1.0), (0.05, 0.02, -1.0), (0.05, 0.02, 0.0)],
                 [(ls, ls, ls)] * 3, [0.95, 0.95, 0.95], _colors(rng, 3))


def _sh1(rng):
    """K = 4 SH coefficients with a non-zero DC band: `colors` is not used."""
    ls = math.log(0.3)
    sh = rng.uniform(-0.6, 0.6, (2, 4, 3))
    return scene([(-0.4, 0.1, 0.0), (0.5, -0.2, 0.3)], [(ls, ls, ls)] * 2, [0.8, 0.6],
                 _colors(rng, 2), sh=sh)


def _aniso(rng):
    """Anisotropic splats under unnormalised, non-trivial rotations."""
    a, b = math.log(0.45), math.log(0.12)
    rot = [(0.9, 0.2, -0.1, 0.35), (1.3, 0.0, 0.5, 0.0), (0.7, -0.3, 0.2, -0.4)]
    return scene([(-0.5, 0.2, 0.2), (0.4, -0.3, 0.0), (0.0, 0.6, -0.3)],
                 [(a, b, b), (b, a, b), (a, a, b)], [0.85, 0.75, 0.65], _colors(rng, 3),
                 rot=rot)


def _culled(rng):
    """One splat behind the camera, one below alpha_cutoff: nothing is drawn."""
    ls = math.log(0.3)
    return scene([(0.0, 0.0, -6.0), (0.2, 0.1, 0.0)], [(ls, ls, ls)] * 2, [0.9, 0.002],
                 _colors(rng, 2))


def _six(rng):
    ls = math.log(0.2)
    xs = [(-0.9, -0.5, 0.3), (-0.3, 0.5, -0.2), (0.3, -0.5, 0.1), (0.9, 0.5, 0.4),
          (0.0, 0.0, 0.8), (-0.6, 0.1, -0.5)]
    return scene(xs, [(ls, ls + 0.1 * i, ls) for i in range(6)],
                 [0.5 + 0.08 * i for i in range(6)], _colors(rng, 6))


def _background_image(w, h, bg=BG):
    """What an all-empty tile list draws: the linearised background, alpha 1."""
    px = [max(c, 0.0) ** 2.2 for c in np.asarray(bg, F32)] + [1.0]
    return np.tile(np.asarray(px, F32), w * h)


def _cases(rng):
    from .splat import SplatRenderAttrs as A

    m = meta()
    return [
        (_three(rng) + (m,), A(12, 10, 4, 1.0, 1 / 255, 32, 0.01, 64), ("basic",), None),
        (_stack(rng) + (m,), A(8, 8, 4, 1.0, 1 / 255, 32, 0.5, 64),
         ("depth-sort", "early-exit"), None),
        (_sh1(rng) + (meta(cam=(1.0, 0.5, -3.5)),), A(10, 10, 5, 1.2, 1 / 255, 32, 0.01, 64),
         ("sh-band-1", "off-axis-camera"), None),
        (_aniso(rng) + (meta(up=(0.2, 1.0, 0.1)),), A(16, 16, 16, 1.0, 0.02, 32, 1e-3, 64),
         ("anisotropic", "rotation", "single-tile"), None),
        (_six(rng) + (m,), A(12, 12, 4, 1.0, 1 / 255, 32, 0.01, 7),
         ("list-overflow", "prime-length"), None),
        (_culled(rng) + (m,), A(8, 6, 4, 1.0, 0.01, 32, 0.01, 32), ("culled", "hand"),
         _background_image(8, 6)),
        (_three(rng) + (meta(bg=(0.0, 1.0, 0.5)),), A(6, 5, 4, 1.0, 1 / 255, 32, 0.01, 0),
         ("empty-list", "hand"), _background_image(6, 5, (0.0, 1.0, 0.5))),
    ]


def render_samples(rng):
    return [Sample(x, a, tags=t, expect=e) for x, a, t, e in _cases(rng)]


def prepare_samples(rng):
    return [Sample(x, a, tags=t) for x, a, t, _ in _cases(rng)[:5]]


def rasterize_samples(rng):
    from . import _splat_bin as B
    from . import _splat_raster as R
    from .splat import SplatRasterAttrs

    out = []
    for x, a, t, e in _cases(rng):
        p, vals, ranges, cam = R.prepare(x[:6], x[6], a, F32)
        prep = B.pack(p, vals, ranges, cam, a, x[6][12:15], F32)
        ra = SplatRasterAttrs(a.width, a.height, a.tile_size, a.alpha_cutoff,
                              a.max_splat_steps, a.transmittance_threshold,
                              a.max_list_entries)
        out.append(Sample((prep, x[6]), ra, tags=t, expect=e))
    return out
