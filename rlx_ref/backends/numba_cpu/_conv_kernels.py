"""Numba source of the conv family kernels (compiled by ``lower_conv``).

Each template is rendered twice, serial and ``prange``; Numba specializes on dtype and
rank. ``geo`` is an int64 array of window numbers: conv and im2col use
``[kh, kw, sh, sw, ph, pw, dh, dw, ho, wo]``; pool uses ``[kd, kh, kw, sd, sh, sw, pd, ph,
pw]``. Every input read is guarded by its valid range (padding reads 0 or is skipped).
"""
from __future__ import annotations

SPAN = '''
@njit(cache=True, nogil=True, inline="always")
def _span(off, step, size, count):
    # [lo, hi): the positions o < count with 0 <= o*step + off < size
    lo = 0 if off >= 0 else (step - 1 - off) // step
    hi = (size - 1 - off) // step + 1 if size - 1 - off >= 0 else 0
    hi = min(hi, count)
    lo = min(lo, hi)
    return lo, hi
'''

_TAPS = SPAN + '''

@njit(cache=True, nogil=True, inline="always")
def _tap_row(xin, geo, r, row):
    # one row (c, i, j) of the transposed im2col matrix from the channel plane xin[c]
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = (geo[0], geo[1], geo[2], geo[3], geo[4],
                                              geo[5], geo[6], geo[7], geo[8], geo[9])
    c = r // (kh * kw)
    i = (r // kw) % kh
    j = r % kw
    h = xin.shape[1]
    w = xin.shape[2]
    off = j * dw - pw
    lo, hi = _span(off, sw, w, wo)
    for oy in range(ho):
        iy = oy * sh + i * dh - ph
        out = row[oy * wo:(oy + 1) * wo]
        if iy < 0 or iy >= h:
            for t in range(wo):
                out[t] = 0
            continue
        for t in range(lo):
            out[t] = 0
        mid = out[lo:hi]
        if sw == 1:
            src = xin[c, iy, lo + off:hi + off]
            for t in range(mid.size):
                mid[t] = src[t]
        else:
            src = xin[c, iy, lo * sw + off:]
            for t in range(mid.size):
                mid[t] = src[t * sw]
        tail = out[hi:]
        for t in range(tail.size):
            tail[t] = 0
'''

CONV_HEAD = _TAPS + '''

@njit(cache=True, nogil=True)
def _nhwc_stage(x5, n, g, xl, geo, oy0, ny, ox0, nx):
    # the input window that output rows [oy0, oy0 + ny) x columns [ox0, ox0 + nx) read,
    # channels last: xl[r, l, c] = x5[n, g, c, oy0*sh - ph + r, ox0*sw - pw + l], 0 outside
    # the input (contiguous reads, writes strided by Cg within one L1-sized row of xl)
    kh, kw, sh, sw, ph, pw, dh, dw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                      geo[6], geo[7])
    cg, h, w = x5.shape[2], x5.shape[3], x5.shape[4]
    nr = (ny - 1) * sh + (kh - 1) * dh + 1
    nl = (nx - 1) * sw + (kw - 1) * dw + 1
    x0 = ox0 * sw - pw
    lo = min(max(-x0, 0), nl)
    hi = max(min(w - x0, nl), lo)
    for r in range(nr):
        iy = oy0 * sh - ph + r
        drow = xl[r].reshape(-1)
        if iy < 0 or iy >= h:
            for e in range(nl * cg):
                drow[e] = 0
            continue
        for e in range(lo * cg):
            drow[e] = 0
        for e in range(hi * cg, nl * cg):
            drow[e] = 0
        for c in range(cg):
            src = x5[n, g, c, iy, x0 + lo:x0 + hi]
            dst = drow[lo * cg + c:]
            for e in range(src.size):
                dst[e * cg] = src[e]


@njit(cache=True, nogil=True)
def _nhwc_unfold(xl, cols, geo, ny, nx):
    # cols[y*nx + x, (i*kw + j)*Cg + c] = xl[y*sh + i*dh, x*sw + j*dw, c]
    kh, kw, sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3], geo[6], geo[7]
    wl, cg = xl.shape[1], xl.shape[2]
    xf = xl.reshape(-1)
    run = kw * cg if dw == 1 else cg       # taps j of one row i are contiguous when dw = 1
    nrun = 1 if dw == 1 else kw
    for y in range(ny):
        for x in range(nx):
            row = cols[y * nx + x]
            k = 0
            for i in range(kh):
                base = ((y * sh + i * dh) * wl + x * sw) * cg
                for j in range(nrun):
                    src = xf[base + j * dw * cg:base + j * dw * cg + run]
                    dst = row[k:k + run]
                    for e in range(run):
                        dst[e] = src[e]
                    k += run


@njit(cache=True, nogil=True)
def _nhwc_chunk(c, chunks, x5, wr, o4, geo, by, bx):
    # items c*items/chunks .. : blocks of by output rows x bx output columns of one
    # (image, group), each staged, unfolded, multiplied and transposed into o4
    kh, kw, sh, sw, dh, dw, ho, wo = (geo[0], geo[1], geo[2], geo[3], geo[6], geo[7],
                                      geo[8], geo[9])
    ng, cog = o4.shape[1], o4.shape[2]
    nby = (ho + by - 1) // by
    nbx = (wo + bx - 1) // bx
    items = x5.shape[0] * ng * nby * nbx
    xl = np.empty(((by - 1) * sh + (kh - 1) * dh + 1, (bx - 1) * sw + (kw - 1) * dw + 1,
                   x5.shape[2]), wr.dtype)
    cols = np.empty((by * bx, wr.shape[1]), wr.dtype)
    res = np.empty((by * bx, cog), wr.dtype)
    for t in range(c * items // chunks, (c + 1) * items // chunks):
        n = t // (ng * nby * nbx)
        g = (t // (nby * nbx)) % ng
        oy0 = (t // nbx) % nby * by
        ox0 = t % nbx * bx
        ny = min(by, ho - oy0)
        nx = min(bx, wo - ox0)
        m = ny * nx
        _nhwc_stage(x5, n, g, xl, geo, oy0, ny, ox0, nx)
        _nhwc_unfold(xl, cols, geo, ny, nx)
        np.dot(cols[:m], wr[g], res[:m])
        o2 = o4[n, g]
        for c0 in range(0, cog, 8):          # res[:m] transposed, 8 output rows at a time
            c1 = min(c0 + 8, cog)
            for y in range(ny):
                p = (oy0 + y) * wo + ox0
                for x in range(nx):
                    rrow = res[y * nx + x]
                    for co in range(c0, c1):
                        o2[co, p + x] = rrow[co]
'''

CONV = '''
@njit(cache=True, nogil=True{par})
def conv_1x1{sfx}(x4, w3, o4, cb):
    # a 1x1, stride-1, unpadded conv: x4 [N, G, Cg, H*W] is its own im2col matrix
    ng, cog = x4.shape[1], w3.shape[1]
    nblk = (cog + cb - 1) // cb
    for t in {rng}(x4.shape[0] * ng * nblk):
        n = t // (ng * nblk)
        g = (t // nblk) % ng
        c0 = (t % nblk) * cb
        c1 = min(c0 + cb, cog)
        np.dot(w3[g, c0:c1], x4[n, g], o4[n, g, c0:c1])


@njit(cache=True, nogil=True{par})
def conv_gemm{sfx}(x5, w3, o4, cols, geo, cb):
    # x5 [N, G, Cg, H, W]; w3 [G, Cog, Cg*kh*kw]; o4 [N, G, Cog, Ho*Wo];
    # cols [NB, G, Cg*kh*kw, Ho*Wo]: NB images are unfolded in one pass, then multiplied
    # in blocks of cb output channels (single-threaded BLAS calls, in parallel)
    nimg, ng = x5.shape[0], x5.shape[1]
    nb, kg = cols.shape[0], cols.shape[2]
    cog = w3.shape[1]
    nblk = (cog + cb - 1) // cb
    for n0 in range(0, nimg, nb):
        m = min(nb, nimg - n0)
        for t in {rng}(m * ng * kg):
            i = t // (ng * kg)
            g = (t // kg) % ng
            r = t % kg
            _tap_row(x5[n0 + i, g], geo, r, cols[i, g, r])
        for t in {rng}(m * ng * nblk):
            i = t // (ng * nblk)
            g = (t // nblk) % ng
            c0 = (t % nblk) * cb
            c1 = min(c0 + cb, cog)
            np.dot(w3[g, c0:c1], cols[i, g], o4[n0 + i, g, c0:c1])


@njit(cache=True, nogil=True{par})
def conv_nhwc{sfx}(x5, wr, o4, geo, by, bx, chunks):
    # x5 [N, G, Cg, H, W]; wr [G, kh*kw*Cg, Cog] (taps (i, j, c)); o4 [N, G, Cog, Ho*Wo].
    # Work items are blocks of by x bx output positions of one (image, group): the input
    # window they read, copied channels last, gives their rows of the im2col matrix as
    # contiguous runs; one BLAS call [by*bx, K]·[K, Cog] and a transpose into NCHW
    for c in {rng}(chunks):
        _nhwc_chunk(c, chunks, x5, wr, o4, geo, by, bx)


@njit(cache=True, nogil=True{par})
def conv_dw{sfx}(x4, w3, o4, geo):
    # one input channel per group (depthwise): x4 [N, G, H, W]; w3 [G*Cog, kh, kw];
    # o4 [N, G*Cog, Ho, Wo]. Per output plane: its input plane copied zero padded (padding
    # reads 0, as the unfold's), then each output sums its kh*kw taps in order (i, j),
    # each tap a scaled run of a padded row
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = (geo[0], geo[1], geo[2], geo[3], geo[4],
                                              geo[5], geo[6], geo[7], geo[8], geo[9])
    ng, h, w = x4.shape[1], x4.shape[2], x4.shape[3]
    co = o4.shape[1]
    cog = co // ng
    hp = max((ho - 1) * sh + (kh - 1) * dh + 1, ph + h)
    wp = max((wo - 1) * sw + (kw - 1) * dw + 1, pw + w)
    for t in {rng}(o4.shape[0] * co):
        n = t // co
        c = t % co
        xp = np.zeros((hp + 1, wp), o4.dtype)     # a spare row: the flat runs' tails
        xin = x4[n, c // cog]
        for y in range(h):
            for e in range(w):
                xp[y + ph, e + pw] = xin[y, e]
        wk = w3[c]
        plane = o4[n, c]
        if sh == 1 and sw == 1:
            # unit strides: the plane at the padded width is one flat run per tap
            # (ho*wp lanes, the columns past wo discarded), long enough to vectorize
            xf = xp.reshape(-1)
            acc = np.zeros(ho * wp, o4.dtype)
            for i in range(kh):
                for j in range(kw):
                    wv = wk[i, j]
                    src = xf[i * dh * wp + j * dw:]
                    for q in range(acc.size):
                        acc[q] += wv * src[q]
            for oy in range(ho):
                for e in range(wo):
                    plane[oy, e] = acc[oy * wp + e]
            continue
        # strided: each output row summed at every input column (unit-stride runs, which
        # vectorize, where strided reads would not), then every sw-th column kept
        wf = (wo - 1) * sw + 1
        acc = np.empty(wf, o4.dtype)
        for oy in range(ho):
            acc[:] = 0
            for i in range(kh):
                xr = xp[oy * sh + i * dh]
                for j in range(kw):
                    wv = wk[i, j]
                    src = xr[j * dw:]
                    for q in range(wf):
                        acc[q] += wv * src[q]
            orow = plane[oy]
            for e in range(wo):
                orow[e] = acc[e * sw]


@njit(cache=True, nogil=True{par})
def convt_gemm{sfx}(x4, wt, o5, cols, geo, cb):
    # x4 [N, G, Cig, H*W]; wt [G, Cog*kh*kw, Cig]; o5 [N, G, Cog, Ho, Wo] (zeroed here);
    # cols [NB, G, Cog*kh*kw, H*W]: NB images of Wᵀ·x (blocks of cb rows, single-threaded
    # BLAS calls in parallel), then col2im over (image, group, output channel) planes
    kh, kw, sh, sw, ph, pw, dh, dw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                      geo[6], geo[7])
    h = geo[10]
    w = geo[11]
    nimg, ng, cog, ho, wo = o5.shape[0], o5.shape[1], o5.shape[2], o5.shape[3], o5.shape[4]
    nb, krows = cols.shape[0], cols.shape[2]
    nblk = (krows + cb - 1) // cb
    for n0 in range(0, nimg, nb):
        m = min(nb, nimg - n0)
        for t in {rng}(m * ng * nblk):
            i = t // (ng * nblk)
            g = (t // nblk) % ng
            r0 = (t % nblk) * cb
            r1 = min(r0 + cb, krows)
            np.dot(wt[g, r0:r1], x4[n0 + i, g], cols[i, g, r0:r1])
        for t in {rng}(m * ng * cog):
            i = t // (ng * cog)
            g = (t // cog) % ng
            o = t % cog
            plane = o5[n0 + i, g, o]
            for y in range(ho):
                for x in range(wo):
                    plane[y, x] = 0
            for a in range(kh):
                for b in range(kw):
                    crow = cols[i, g, (o * kh + a) * kw + b]
                    off = b * dw - pw
                    lo, hi = _span(off, sw, wo, w)   # input columns that land inside
                    for iy in range(h):
                        oy = iy * sh + a * dh - ph
                        if oy < 0 or oy >= ho:
                            continue
                        dst = plane[oy, lo * sw + off:]
                        src = crow[iy * w + lo:iy * w + hi]
                        for t2 in range(src.size):
                            dst[t2 * sw] += src[t2]
'''

IM2COL = '''
@njit(cache=True, nogil=True{par})
def im2col{sfx}(x, out, geo):
    # out[(n*Ho + oy)*Wo + ox, (c*kh + i)*kw + j] = x[n, c, oy*sh + i*dh - ph, ...] or 0
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = (geo[0], geo[1], geo[2], geo[3], geo[4],
                                              geo[5], geo[6], geo[7], geo[8], geo[9])
    nc = x.shape[1]
    h = x.shape[2]
    w = x.shape[3]
    for t in {rng}(x.shape[0] * ho):
        n = t // ho
        oy = t % ho
        for ox in range(wo):
            row = out[t * wo + ox]
            for c in range(nc):
                for i in range(kh):
                    iy = oy * sh + i * dh - ph
                    for j in range(kw):
                        ix = ox * sw + j * dw - pw
                        col = (c * kh + i) * kw + j
                        if iy >= 0 and iy < h and ix >= 0 and ix < w:
                            row[col] = x[n, c, iy, ix]
                        else:
                            row[col] = 0
'''

POOL = '''
@njit(cache=True, nogil=True{par})
def pool{sfx}(x, out, geo, kind):
    # x [P, D, H, W] -> out [P, Do, Ho, Wo]; kind 0 Sum, 1 Mean, 2 Max, 3 Min, 4 Prod.
    # Padding is skipped (Mean divides by the full window); Max/Min propagate NaN.
    # One output row at a time: each window tap (z, y, j) is folded, in the order z, y, j
    # (as a direct loop visits them), into a float64 row accumulator over every input
    # column a window could start at (unit-stride runs, which vectorize; strided reads do
    # not), and every sw-th column is kept; the kind is chosen once per tap
    kd, kh, kw, sd, sh, sw, pd, ph, pw = (geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                          geo[6], geo[7], geo[8])
    d_in = x.shape[1]
    h_in = x.shape[2]
    w_in = x.shape[3]
    do_ = out.shape[1]
    ho = out.shape[2]
    wo = out.shape[3]
    vol = kd * kh * kw
    wf = (wo - 1) * sw + 1
    init = -np.inf if kind == 2 else (np.inf if kind == 3 else (1.0 if kind == 4 else 0.0))
    for t in {rng}(out.shape[0] * do_ * ho):
        p = t // (do_ * ho)
        od = (t // ho) % do_
        oy = t % ho
        z0 = max(od * sd - pd, 0)
        z1 = min(od * sd - pd + kd, d_in)
        y0 = max(oy * sh - ph, 0)
        y1 = min(oy * sh - ph + kh, h_in)
        acc = np.full(wf, init)
        for z in range(z0, z1):
            for y in range(y0, y1):
                xr = x[p, z, y]
                for j in range(kw):
                    # the columns q (of every input column the row's windows start at)
                    # whose tap j lies inside the input: q + j - pw in [0, w_in)
                    lo = min(max(pw - j, 0), wf)
                    hi = max(min(w_in + pw - j, wf), lo)
                    a = acc[lo:hi]
                    src = xr[lo + j - pw:hi + j - pw]
                    if kind == 2:
                        for e in range(a.size):
                            v = np.float64(src[e])
                            m = a[e]
                            a[e] = v if v > m or v != v else m
                    elif kind == 3:
                        for e in range(a.size):
                            v = np.float64(src[e])
                            m = a[e]
                            a[e] = v if v < m or v != v else m
                    elif kind == 4:
                        for e in range(a.size):
                            a[e] *= np.float64(src[e])
                    else:
                        for e in range(a.size):
                            a[e] += np.float64(src[e])
        orow = out[p, od, oy]
        for e in range(wo):
            orow[e] = acc[e * sw] / vol if kind == 1 else acc[e * sw]
'''


def render(template: str, head: str = "") -> str:
    """``head`` then the serial and ``prange`` variants (suffix ``_par``) of a template."""
    serial = template.format(par="", sfx="", rng="range")
    par = template.format(par=", parallel=True", sfx="_par", rng="prange")
    return head + "\n\n" + serial + "\n\n" + par
