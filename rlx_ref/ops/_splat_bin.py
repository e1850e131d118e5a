"""Tile binning, key sort and the packed prepare buffer of RLX's splat pipeline
(``rlx-splat/src/reference/binning.rs``, ``prep_layout.rs``, ``native_prep.rs``)."""
from __future__ import annotations

import numpy as np

from ._splat_raster import NO_RANGE, PARAM_FLOATS, GAMMA, Projected, prep_len, tiles


def _conic_bbox(conic, radius, half_tile, F):
    """``try_prepare_conic_for_binning``: the ellipse's half-extents, or None (not binned)."""
    a, b, c = conic
    det = a * c - b * b
    if not all(np.isfinite(x) for x in conic) or a <= F(1e-10) or c <= F(1e-10) \
            or det <= F(1e-12):
        return None
    tr = a + c
    disc = np.sqrt(max(F(0.25) * tr * tr - det, F(0)))
    e_min, e_max = F(0.5) * tr - disc, F(0.5) * tr + disc
    max_axis = F(1) / np.sqrt(max(e_min, F(1e-20)))
    min_axis = F(1) / np.sqrt(max(e_max, F(1e-20)))
    limit = max(radius, F(1)) * F(2) + half_tile
    if not (np.isfinite(max_axis) and np.isfinite(min_axis)) or e_min <= 0 or e_max <= 0 \
            or max_axis > limit or min_axis < F(0.125):
        return None
    ext = (np.sqrt(max(c / det, F(0))), np.sqrt(max(a / det, F(0))))
    if not (np.isfinite(ext[0]) and np.isfinite(ext[1])):
        return None
    return tuple(min(max(e, F(1e-4)), radius) for e in ext)


def _q(conic, x, y):
    """a·x² + 2b·xy + c·y², associated as RLX writes it."""
    return conic[0] * x * x + type(x)(2) * conic[1] * x * y + conic[2] * y * y


def _min_over_box(conic, x0, x1, y0, y1, F):
    """Minimum of the conic's quadratic form over a tile box (centre-relative coords)."""
    vals = [_q(conic, x0, y0), _q(conic, x1, y0), _q(conic, x0, y1), _q(conic, x1, y1)]
    if x0 <= 0 <= x1 and y0 <= 0 <= y1:
        return F(0)
    a, b, c = conic
    if c > F(1e-12):
        vals += [_q(conic, x, min(max(-b * x / c, y0), y1)) for x in (x0, x1)]
    if a > F(1e-12):
        vals += [_q(conic, min(max(-b * y / a, x0), x1), y) for y in (y0, y1)]
    m = vals[0]
    for v in vals[1:]:
        m = np.fmin(m, v)                              # f32::min ignores NaN
    return m


def _hit(centre, conic, along_x, ts, line, minor, F):
    tx, ty = (minor, line) if along_x else (line, minor)
    s = F(ts)
    x0, x1 = F(tx) * s - centre[0], (F(tx) + F(1)) * s - centre[0]
    y0, y1 = F(ty) * s - centre[1], (F(ty) + F(1)) * s - centre[1]
    return _min_over_box(conic, x0, x1, y0, y1, F) <= F(1) + F(1e-6)


def bin_tiles(p: Projected, tw: int, th: int, ts: int, max_list: int, F):
    """``build_tile_key_value_pairs``: (tile keys, splat ids, entries generated).

    Splats are visited nearest first (stable sort on camera distance); each one's tiles
    are scanlines of the ellipse's tile rows (or columns, along the longer axis), and a
    scanline's span runs from its first to its last intersecting tile. Entries past
    ``max_list`` are counted but not written.
    """
    keys, vals, counter = [0] * max_list, [0] * max_list, 0
    order = sorted((i for i in range(len(p.valid)) if p.valid[i]), key=lambda i: p.crd[i, 3])
    half = F(0.5) * F(ts)
    for sid in order:
        cx, cy, rad = (F(v) for v in p.crd[sid, :3])
        conic = tuple(F(v) for v in p.conic[sid])
        bb = _conic_bbox(conic, rad, half, F)
        if bb is None:
            continue
        ex, ey = bb[0] + half, bb[1] + half
        min_x = int(max(np.floor((cx - ex) / F(ts)), F(0)))
        max_x = int(min(np.ceil((cx + ex) / F(ts)), F(tw - 1)))
        min_y = int(max(np.floor((cy - ey) / F(ts)), F(0)))
        max_y = int(min(np.ceil((cy + ey) / F(ts)), F(th - 1)))
        if min_x > max_x or min_y > max_y:
            continue
        along_x = bb[0] > bb[1] or (abs(bb[0] - bb[1]) < F(1e-6)
                                    and max_x - min_x >= max_y - min_y)
        lines, minors = ((min_y, max_y), (min_x, max_x)) if along_x else \
            ((min_x, max_x), (min_y, max_y))
        spans = []
        for line in range(lines[0], lines[1] + 1):
            hit = [m for m in range(max(minors[0], 0), minors[1] + 1)
                   if _hit((cx, cy), conic, along_x, ts, line, m, F)]
            if hit:
                spans.append((line, hit[0], hit[-1] - hit[0] + 1))
        total = sum(s[2] for s in spans)
        if total <= 0:
            continue
        base, counter = counter, counter + total
        if base >= max_list:
            continue
        w = base
        for line, first, cnt in spans:
            for off in range(min(cnt, max_list - w)):
                tx, ty = (first + off, line) if along_x else (line, first + off)
                keys[w], vals[w] = ty * tw + tx, sid
                w += 1
    return keys, vals, counter


def sort_and_range(keys, vals, count: int, tile_count: int):
    """Stable sort of the first ``count`` entries by tile; per-tile [start, end) ranges."""
    order = sorted(range(count), key=lambda i: keys[i])
    skeys, svals = [keys[i] for i in order], [vals[i] for i in order]
    ranges = [NO_RANGE, 0] * tile_count
    start = 0
    while start < count:
        end = start + 1
        while end < count and skeys[end] == skeys[start]:
            end += 1
        if 2 * skeys[start] + 1 < len(ranges):
            ranges[2 * skeys[start]:2 * skeys[start] + 2] = [start, end]
        start = end
    return svals, ranges


def pack(p: Projected, vals, ranges, cam, a, background, F) -> np.ndarray:
    """The prepare buffer, in RLX's order (see the GaussianSplatPrepare docs)."""
    n, w, h = len(p.valid), a.width, a.height
    out = np.zeros(prep_len(n, a.max_list_entries, w, h, a.tile_size), p.color_alpha.dtype)
    rays = np.zeros((h, w, 3), out.dtype)
    for py in range(h):
        for px in range(w):
            rays[py, px] = cam.ray(px, py)
    bg_lin = [max(F(b), F(0)) ** F(GAMMA) for b in background]
    listed = np.zeros(a.max_list_entries, out.dtype)
    listed[:len(vals)] = vals
    # u32::MAX stored in an f32 buffer rounds to 2^32; it reads back as u32::MAX
    rng = np.array(ranges, np.float64).astype(np.float32).astype(out.dtype)
    tw = tiles(w, h, a.tile_size)[0]
    params = [w, h, a.tile_size, tw, F(a.alpha_cutoff), F(a.transmittance_threshold), *bg_lin,
              0, 0]
    parts = [p.color_alpha.ravel(), p.valid, p.pos_local.ravel(), p.inv_scale.ravel(),
             p.quat.ravel(), listed, rng, rays.ravel(), np.array(params, out.dtype)]
    flat = np.concatenate([np.asarray(x, out.dtype) for x in parts])
    out[:flat.size] = flat
    return out


def unpack(buf, n: int, a):
    """(projected, sorted ids, ranges, tile_width) from a prepare buffer (``unpack_prepared``)."""
    tw, th = tiles(a.width, a.height, a.tile_size)
    sizes = [4 * n, n, 3 * n, 3 * n, 4 * n, a.max_list_entries, 2 * tw * th,
             3 * max(a.width * a.height, 1), PARAM_FLOATS]
    cuts = np.cumsum([0] + sizes)
    ca, valid, pl, inv, quat, vals, ranges, _rays, params = (
        buf[cuts[i]:cuts[i + 1]] for i in range(len(sizes)))
    as_u32 = lambda x: np.clip(np.nan_to_num(x), 0, NO_RANGE).astype(np.int64)  # noqa: E731
    p = Projected(ca.reshape(n, 4), as_u32(valid), pl.reshape(n, 3), inv.reshape(n, 3),
                  quat.reshape(n, 4), None, None)
    return p, as_u32(vals), as_u32(ranges), int(as_u32(params[3:4])[0])
