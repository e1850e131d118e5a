"""Numba source of the NCDHW kernels (compiled by ``lower_conv3d``).

``geo`` is an int64 array ``[sd, sh, sw, pd, ph, pw, dd, dh, dw, groups]`` (the unfold
and fold append ``kd, kh, kw`` and the unfolded extent ``H, W``; pool backward: kernel,
stride, padding). Loops run parallel over rows, channels or planes so no two threads write
one element, and range-guard every input read (zero padding).
"""
from __future__ import annotations

_GEO = '''
    sd, sh, sw, pd, ph, pw = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    dd, dh, dw, groups = geo[6], geo[7], geo[8], geo[9]
'''

UNFOLD3D = '''
@njit(cache=True, nogil=True, parallel=True)
def unfold3d(x, rows, n, c0, geo, z0, nz):
    # rows[((oz - z0)*ho + oy)*wo + ox, ((c*kd + i)*kh + j)*kw + l] =
    #     x[n, c0 + c, oz*sd + i*dd - pd, oy*sh + j*dh - ph, ox*sw + l*dw - pw] or 0,
    # for output depth planes z0 .. z0 + nz; geo also carries (kd, kh, kw, ho, wo)
''' + _GEO + '''
    kd, kh, kw, ho, wo = geo[10], geo[11], geo[12], geo[13], geo[14]
    d_in, h_in, w_in = x.shape[2], x.shape[3], x.shape[4]
    cg = rows.shape[1] // (kd * kh * kw)
    for t in prange(nz * ho):
        oz = z0 + t // ho
        oy = t % ho
        for ox in range(wo):
            row = rows[t * wo + ox]
            q = 0
            for c in range(cg):
                for i in range(kd):
                    iz = oz * sd + i * dd - pd
                    for j in range(kh):
                        iy = oy * sh + j * dh - ph
                        inside = iz >= 0 and iz < d_in and iy >= 0 and iy < h_in
                        for l in range(kw):
                            ix = ox * sw + l * dw - pw
                            if inside and ix >= 0 and ix < w_in:
                                row[q] = x[n, c0 + c, iz, iy, ix]
                            else:
                                row[q] = 0
                            q += 1
'''

FOLD3D = '''
@njit(cache=True, nogil=True, parallel=True)
def fold3d(rows, out, n, co0, geo, z0, nz):
    # the transposed conv's scatter: rows[((iz - z0)*h + iy)*w + ix, ((o*kd + i)*kh + j)*kw
    # + l] is added to out[n, co0 + o, iz*sd + i*dd - pd, iy*sh + j*dh - ph, ix*sw + l*dw
    # - pw] (dropped outside); one output channel per thread, so no two threads collide.
    # geo also carries (kd, kh, kw, h, w) of the input
''' + _GEO + '''
    kd, kh, kw, h, w = geo[10], geo[11], geo[12], geo[13], geo[14]
    d_out, h_out, w_out = out.shape[2], out.shape[3], out.shape[4]
    kvol = kd * kh * kw
    for o in prange(rows.shape[1] // kvol):
        dst = out[n, co0 + o]
        for q in range(nz * h * w):
            iz = z0 + q // (h * w)
            iy = (q // w) % h
            ix = q % w
            row = rows[q]
            for i in range(kd):
                oz = iz * sd + i * dd - pd
                if oz < 0 or oz >= d_out:
                    continue
                for j in range(kh):
                    oy = iy * sh + j * dh - ph
                    if oy < 0 or oy >= h_out:
                        continue
                    base = ((o * kd + i) * kh + j) * kw
                    for l in range(kw):
                        ox = ix * sw + l * dw - pw
                        if ox >= 0 and ox < w_out:
                            dst[oz, oy, ox] += row[base + l]
'''

MAXPOOL3D_BWD = '''
@njit(cache=True, nogil=True, parallel=True)
def maxpool3d_bwd(x, dy, dx, geo):
    # x, dx [P, D, H, W]; dy [P, Do, Ho, Wo]. Each window's dy goes to its first maximum
    # (a NaN counts as the maximum; padding never wins); one plane per thread.
    kd, kh, kw, sd, sh, sw, pd, ph, pw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                          geo[6], geo[7], geo[8])
    d_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    do_, ho, wo = dy.shape[1], dy.shape[2], dy.shape[3]
    for p in prange(x.shape[0]):
        for z in range(d_in):
            for y in range(h_in):
                for xx in range(w_in):
                    dx[p, z, y, xx] = 0.0
        for oz in range(do_):
            for oy in range(ho):
                for ox in range(wo):
                    found = False
                    best = 0.0
                    bz = 0
                    by = 0
                    bx = 0
                    for i in range(kd):
                        z = oz * sd - pd + i
                        if z < 0 or z >= d_in:
                            continue
                        for j in range(kh):
                            y = oy * sh - ph + j
                            if y < 0 or y >= h_in:
                                continue
                            for l in range(kw):
                                xx = ox * sw - pw + l
                                if xx < 0 or xx >= w_in:
                                    continue
                                v = np.float64(x[p, z, y, xx])
                                if (not found) or v > best or (v != v and best == best):
                                    found = True
                                    best = v
                                    bz = z
                                    by = y
                                    bx = xx
                    if found:
                        dx[p, bz, by, bx] += dy[p, oz, oy, ox]
'''

GATHER3D = '''
@njit(cache=True, nogil=True, parallel=True)
def gather3d(x, out, iz, iy, ix):
    # out[p, z, y, x] = x[p, iz[z], iy[y], ix[x]] (nearest resample; a bit-exact copy)
    do_, ho, wo = out.shape[1], out.shape[2], out.shape[3]
    for t in prange(out.shape[0] * do_):
        p = t // do_
        z = t % do_
        for y in range(ho):
            for xx in range(wo):
                out[p, z, y, xx] = x[p, iz[z], iy[y], ix[xx]]
'''

AXIAL_ROPE = '''
@njit(cache=True, nogil=True, parallel=True)
def axial_rope(x, cx, sx, cy, sy, out, heads, head_dim):
    # x, out [B, S, heads*head_dim]; tables [S, head_dim/4]. Pairs (2c, 2c+1) of each
    # head's first half turn by the column angle, those of its second half by the row angle
    b_, s_ = x.shape[0], x.shape[1]
    q4 = head_dim // 4
    half = head_dim // 2
    for t in prange(b_ * s_):
        b = t // s_
        s = t % s_
        for h in range(heads):
            base = h * head_dim
            for c in range(q4):
                i0 = base + 2 * c
                x0 = x[b, s, i0]
                x1 = x[b, s, i0 + 1]
                out[b, s, i0] = x0 * cx[s, c] - x1 * sx[s, c]
                out[b, s, i0 + 1] = x0 * sx[s, c] + x1 * cx[s, c]
                i0 = base + half + 2 * c
                x0 = x[b, s, i0]
                x1 = x[b, s, i0 + 1]
                out[b, s, i0] = x0 * cy[s, c] - x1 * sy[s, c]
                out[b, s, i0 + 1] = x0 * sy[s, c] + x1 * cy[s, c]
'''
