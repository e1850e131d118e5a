"""Kernel sources of the sequence family (numba-cpu).

One call runs a whole sequence: a prange over the independent lanes (batch × channel for
the state-space scans, batch × head for GatedDeltaNet, batch rows for Lstm/Gru/Rnn), each
lane keeping its recurrent state in local f64 arrays across the time loop. Outputs are
rounded once, when stored.
"""

SELECTIVE_SCAN = '''
@njit(cache=True, nogil=True, parallel=True)
def selective_scan(x, delta, a, b, c, out):
    bt, sq, hd = x.shape
    n = a.shape[1]
    for lane in prange(bt * hd):
        bi = lane // hd
        d = lane - bi * hd
        h = np.zeros(n)
        for t in range(sq):
            dl = np.float64(delta[bi, t, d])
            xv = np.float64(x[bi, t, d])
            acc = 0.0
            for k in range(n):
                h[k] = math.exp(dl * a[d, k]) * h[k] + dl * b[bi, t, k] * xv
                acc += c[bi, t, k] * h[k]
            out[bi, t, d] = acc
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


@njit(cache=True, nogil=True, parallel=True)
def recurrent(x, w_ih, w_hh, b1, b2, h0, c0, out, hid, layers, dirs, gates, mode, ih_off,
              carry):
    # mode: 0 Lstm (i, f, g, o), 1 Gru (r, z, n; b2 = b_hh), 2 Rnn tanh, 3 Rnn relu
    bt, sq, inp = x.shape
    gh = gates * hid
    wide = max(inp, dirs * hid)
    for bi in prange(bt):
        cur = np.zeros((sq, wide))
        nxt = np.zeros((sq, dirs * hid))
        for t in range(sq):
            for i in range(inp):
                cur[t, i] = x[bi, t, i]
        width = inp
        h = np.zeros(hid)
        c = np.zeros(hid)
        zx = np.zeros(gh)
        zh = np.zeros(gh)
        for layer in range(layers):
            for d in range(dirs):
                blk = layer * dirs + d
                wi, wh, bo = ih_off[blk], blk * gh * hid, blk * gh
                for j in range(hid):
                    h[j] = h0[blk, bi, j] if carry else 0.0
                    c[j] = c0[blk, bi, j] if carry and mode == 0 else 0.0
                for step in range(sq):
                    t = step if d == 0 else sq - 1 - step
                    for r in range(gh):
                        acc = np.float64(b1[bo + r])
                        for i in range(width):
                            acc += w_ih[wi + r * width + i] * cur[t, i]
                        zx[r] = acc
                        acc = np.float64(b2[bo + r]) if mode == 1 else 0.0
                        for i in range(hid):
                            acc += w_hh[wh + r * hid + i] * h[i]
                        zh[r] = acc
                    for j in range(hid):
                        if mode == 0:
                            ig = _sig(zx[j] + zh[j])
                            fg = _sig(zx[hid + j] + zh[hid + j])
                            gg = math.tanh(zx[2 * hid + j] + zh[2 * hid + j])
                            og = _sig(zx[3 * hid + j] + zh[3 * hid + j])
                            c[j] = fg * c[j] + ig * gg
                            h[j] = og * math.tanh(c[j])
                        elif mode == 1:
                            rg = _sig(zx[j] + zh[j])
                            zg = _sig(zx[hid + j] + zh[hid + j])
                            ng = math.tanh(zx[2 * hid + j] + rg * zh[2 * hid + j])
                            h[j] = (1.0 - zg) * ng + zg * h[j]
                        else:
                            z = zx[j] + zh[j]
                            if mode == 2:
                                h[j] = math.tanh(z)
                            else:
                                h[j] = z if z > 0.0 or z != z else 0.0
                        nxt[t, d * hid + j] = h[j]
            width = dirs * hid
            for t in range(sq):
                for i in range(width):
                    cur[t, i] = nxt[t, i]
        for t in range(sq):
            for j in range(dirs * hid):
                out[bi, t, j] = cur[t, j]
'''
