"""Numba source of the NCDHW kernels (compiled by ``lower_conv3d``).

``geo`` is an int64 array ``[sd, sh, sw, pd, ph, pw, dd, dh, dw, groups]`` (the unfold
appends ``kd, kh, kw, H_out, W_out``; pool backward: kernel, stride, padding). The direct
loops run parallel over output planes so no two threads write one element, accumulate in
float64 and range-guard every input read (zero padding). Transposed forms gather: output
``z`` takes tap ``i`` from input ``(z + p − i·d) / s`` when that is a whole, in-range index.
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

CONV_T3D = '''
@njit(cache=True, nogil=True, inline="always")
def _src(o, k, s, p, d, size):
    # the input index tap k of a transposed conv reads for output o, or -1
    q = o + p - k * d
    if q < 0 or q % s != 0:
        return -1
    q = q // s
    return q if q < size else -1


@njit(cache=True, nogil=True, parallel=True)
def conv_t3d(x, w, out, geo):
    # w [C_in, C_out/groups, kd, kh, kw]; out[n, g*cog + o, z, y, x] gathers every
    # x[n, g*cig + c, iz, iy, ix] * w[g*cig + c, o, i, j, l] with iz*sd + i*dd - pd == z
''' + _GEO + '''
    n_, cin, d_in, h_in, w_in = x.shape
    cog, kd, kh, kw = w.shape[1], w.shape[2], w.shape[3], w.shape[4]
    cout = out.shape[1]
    do_, ho, wo = out.shape[2], out.shape[3], out.shape[4]
    cig = cin // groups
    for t in prange(n_ * cout):
        n = t // cout
        co = t % cout
        g = co // cog
        o = co % cog
        for oz in range(do_):
            for oy in range(ho):
                for ox in range(wo):
                    acc = 0.0
                    for i in range(kd):
                        iz = _src(oz, i, sd, pd, dd, d_in)
                        if iz < 0:
                            continue
                        for j in range(kh):
                            iy = _src(oy, j, sh, ph, dh, h_in)
                            if iy < 0:
                                continue
                            for l in range(kw):
                                ix = _src(ox, l, sw, pw, dw, w_in)
                                if ix < 0:
                                    continue
                                for c in range(cig):
                                    ci = g * cig + c
                                    acc += (np.float64(x[n, ci, iz, iy, ix])
                                            * np.float64(w[ci, o, i, j, l]))
                    out[n, co, oz, oy, ox] = acc
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
