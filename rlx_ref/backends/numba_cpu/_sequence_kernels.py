"""Kernel sources of the sequence family (numba-cpu).

One call runs a whole sequence, the recurrent state in local f64 arrays across the time
loop. The state-space scans run a prange over independent lanes (batch × channel block for
SelectiveScan, batch × head for GatedDeltaNet), each lane walking all time steps.
Lstm/Gru/Rnn compute a layer's input projection and each step's recurrent product
([B, H] · [H, G·H]) as BLAS products and update the gates serially: that update is O(B·H) against
the product's O(B·H·G·H), and a parallel region per time step cost more than it saved (6×
slower at B 4, L 128, H 512 on this 2-core machine). Outputs are rounded once, when
stored.
"""
from ._vmath import VMATH

SELECTIVE_SCAN = VMATH + '''
SCAN_BLOCK = 64


@njit(cache=True, nogil=True, parallel=True)
def selective_scan(x, delta, a, b, c, out):
    # one job per (batch, block of SCAN_BLOCK channels): the block's state h [n, w] and
    # exponents at [n, w] stay local, and every inner loop runs over the block's channels
    # (contiguous in x, delta and out), so LLVM vectorizes the exp (_vexp) and the C·h
    # sum (each channel still adds its n terms in order k = 0 .. n-1)
    bt, sq, hd = x.shape
    n = a.shape[1]
    nblk = (hd + SCAN_BLOCK - 1) // SCAN_BLOCK
    for job in prange(bt * nblk):
        bi = job // nblk
        d0 = (job - bi * nblk) * SCAN_BLOCK
        w = min(hd, d0 + SCAN_BLOCK) - d0
        at = np.empty((n, w))
        for k in range(n):
            for i in range(w):
                at[k, i] = a[d0 + i, k]
        h = np.zeros((n, w))
        dl = np.empty(w)
        xv = np.empty(w)
        acc = np.empty(w)
        for t in range(sq):
            for i in range(w):
                dl[i] = delta[bi, t, d0 + i]
                xv[i] = x[bi, t, d0 + i]
                acc[i] = 0.0
            for k in range(n):
                bk = np.float64(b[bi, t, k])
                ck = np.float64(c[bi, t, k])
                for i in range(w):
                    hk = _vexp(dl[i] * at[k, i]) * h[k, i] + dl[i] * bk * xv[i]
                    h[k, i] = hk
                    acc[i] += ck * hk
            for i in range(w):
                out[bi, t, d0 + i] = acc[i]
'''

MAMBA2 = '''
@njit(cache=True, nogil=True, parallel=True)
def mamba2(x, dt, a, b, c, out):
    bt, sq, hd, p = x.shape
    n = b.shape[3]
    for lane in prange(bt * hd * p):
        bi = lane // (hd * p)
        rest = lane - bi * hd * p
        hh = rest // p
        pp = rest - hh * p
        s = np.zeros(n)
        for t in range(sq):
            d = np.float64(dt[bi, t, hh])
            decay = math.exp(d * a[hh])
            u = d * x[bi, t, hh, pp]
            acc = 0.0
            for k in range(n):
                s[k] = decay * s[k] + u * b[bi, t, hh, k]
                acc += s[k] * c[bi, t, hh, k]
            out[bi, t, hh, pp] = acc
'''

GATED_DELTA_NET = '''
@njit(cache=True, nogil=True, parallel=True)
def gated_delta_net(q, k, v, g, beta, state, out, carry, scale):
    # g is [b, s, h, 1] (per head) or [b, s, h, n] (per key channel)
    bt, sq, hd, n = q.shape
    per_channel = g.shape[3] == n and n > 1
    for lane in prange(bt * hd):
        bi = lane // hd
        hh = lane - bi * hd
        s = np.zeros((n, n))
        if carry:
            for i in range(n):
                for j in range(n):
                    s[i, j] = state[bi, hh, i, j]
        sk = np.zeros(n)
        for t in range(sq):
            e = math.exp(np.float64(g[bi, t, hh, 0]))
            for i in range(n):
                if per_channel:
                    e = math.exp(np.float64(g[bi, t, hh, i]))
                for j in range(n):
                    s[i, j] *= e
            for j in range(n):
                acc = 0.0
                for i in range(n):
                    acc += s[i, j] * k[bi, t, hh, i]
                sk[j] = (v[bi, t, hh, j] - acc) * beta[bi, t, hh]
            for i in range(n):
                ki = np.float64(k[bi, t, hh, i])
                for j in range(n):
                    s[i, j] += ki * sk[j]
            for j in range(n):
                acc = 0.0
                for i in range(n):
                    acc += s[i, j] * q[bi, t, hh, i]
                out[bi, t, hh, j] = acc * scale
'''

RECURRENT = '''
@njit(cache=True, nogil=True)
def _sig(z):
    return 1.0 / (1.0 + math.exp(-z))


@njit(cache=True, nogil=True)
def _direction(cur, wi, wh, b1, b2, h, c, nxt, col, bt, sq, hid, mode, reverse):
    # one (layer, direction) pass; wi [G·H, width] and wh [G·H, H] are f64 blocks
    xw = np.dot(cur, np.ascontiguousarray(wi.T))                         # [B·L, G·H]
    wt = np.ascontiguousarray(wh.T)                                      # [H, G·H]
    for step in range(sq):
        t = sq - 1 - step if reverse else step
        zh = np.dot(h, wt)                                               # [B, G·H]
        for r in range(bt):
            row = r * sq + t
            for j in range(hid):
                if mode == 0:
                    ig = _sig(xw[row, j] + b1[j] + zh[r, j])
                    k = hid + j
                    fg = _sig(xw[row, k] + b1[k] + zh[r, k])
                    k = 2 * hid + j
                    gg = math.tanh(xw[row, k] + b1[k] + zh[r, k])
                    k = 3 * hid + j
                    og = _sig(xw[row, k] + b1[k] + zh[r, k])
                    c[r, j] = fg * c[r, j] + ig * gg
                    h[r, j] = og * math.tanh(c[r, j])
                elif mode == 1:
                    rg = _sig(xw[row, j] + b1[j] + zh[r, j] + b2[j])
                    k = hid + j
                    zg = _sig(xw[row, k] + b1[k] + zh[r, k] + b2[k])
                    k = 2 * hid + j
                    ng = math.tanh(xw[row, k] + b1[k] + rg * (zh[r, k] + b2[k]))
                    h[r, j] = (1.0 - zg) * ng + zg * h[r, j]
                else:
                    z = xw[row, j] + b1[j] + zh[r, j]
                    if mode == 2:
                        h[r, j] = math.tanh(z)
                    else:
                        h[r, j] = z if z > 0.0 or z != z else 0.0
                nxt[row, col + j] = h[r, j]


@njit(cache=True, nogil=True)
def recurrent(x, w_ih, w_hh, b1, b2, h0, c0, out, hid, layers, dirs, gates, mode, ih_off,
              carry):
    # mode: 0 Lstm (i, f, g, o), 1 Gru (r, z, n; b2 = b_hh), 2 Rnn tanh, 3 Rnn relu.
    # Weights and biases come in flat f64; the input projection of a whole layer and the
    # recurrent product of each step are BLAS products, the gates run per batch row.
    bt, sq, inp = x.shape
    gh = gates * hid
    cur = np.empty((bt * sq, inp))
    for r in range(bt):
        for t in range(sq):
            for i in range(inp):
                cur[r * sq + t, i] = x[r, t, i]
    width = inp
    for layer in range(layers):
        nxt = np.empty((bt * sq, dirs * hid))
        for d in range(dirs):
            blk = layer * dirs + d
            wi = w_ih[ih_off[blk]:ih_off[blk] + gh * width].reshape(gh, width)
            wh = w_hh[blk * gh * hid:(blk + 1) * gh * hid].reshape(gh, hid)
            h = np.zeros((bt, hid))
            c = np.zeros((bt, hid))
            if carry:
                for r in range(bt):
                    for j in range(hid):
                        h[r, j] = h0[blk, r, j]
                        if mode == 0:
                            c[r, j] = c0[blk, r, j]
            g2 = b2[blk * gh:(blk + 1) * gh] if mode == 1 else b2
            _direction(cur, wi, wh, b1[blk * gh:(blk + 1) * gh], g2, h, c, nxt, d * hid,
                       bt, sq, hid, mode, d == 1)
        cur = nxt
        width = dirs * hid
    for r in range(bt):
        for t in range(sq):
            for j in range(dirs * hid):
                out[r, t, j] = cur[r * sq + t, j]
'''
