"""The fused Attention kernel's source (rendered by ``lower_attention``).

One block per (batch, head, tile of BQ queries). Per tile of BKV keys the block stages
the keys and values in shared memory (the query tile stays there throughout); each row
of the tile is served by TPR threads: lane ``l`` scores keys ``l, l + TPR, ...`` and owns
output columns ``l, l + TPR, ...``. Scores get scale, bias, softcap and mask in the
reference's order (hidden keys are SET to -1e9, so a row that sees no key weighs all
keys alike), then an online softmax: the running max ``m``, each lane's running sum and
its output columns are rescaled by ``exp(m_old - m_new)`` whenever the max grows, and
the row is divided by its total once at the end. NaN scores propagate through the max
(the reference's NaN row); a tile whose max is -inf adds zero weights without
rescaling, so a key with score -inf never turns a later finite row into NaN.

Causal and sliding-window masks hide whole key tiles from every row of a block; those
tiles are skipped (phase 0 visits only the union of the rows' visible ranges) unless a
hidden key could still change the result: when V holds inf or NaN (0·inf is NaN in the
reference) or some row's best score is within 746 of the -1e9 fill (a hidden key's
weight exp(-1e9 - m) is then not exactly 0). Phase 1 then visits the skipped tiles too;
the online softmax is order independent, so the result is the reference's either way.
"""

ATTENTION = '''
def {name}(out, q, k, v, mask, flag, batch, nh, nkv, sq, sk, q_st, k_st, v_st, o_st,
           d, dv, mk, win, scale, cap):
    sq_t = cuda.shared.array(({BQ}, {DP}), {acc})
    sk_t = cuda.shared.array(({BKV}, {DP}), {acc})
    sv_t = cuda.shared.array(({BKV}, {DV}), {acc})
    sp = cuda.shared.array(({BQ}, {BKVP}), {acc})
    more = cuda.shared.array(1, np.int32)
    o = cuda.local.array({DVP}, {acc})
    s = cuda.local.array({KPT}, {acc})
    t = cuda.threadIdx.x
    r = t // {TPR}
    lane = t - r * {TPR}
    qtiles = (sq + {BQ} - 1) // {BQ}
    ktiles = (sk + {BKV} - 1) // {BKV}
    shift = max(sk - sq, 0)
    work = cuda.blockIdx.x
    while work < batch * nh * qtiles:
        b = work // (nh * qtiles)
        h = (work // qtiles) % nh
        q0 = (work % qtiles) * {BQ}
        hk = h // (nh // nkv)
        qi = q0 + r
        live = qi < sq
        apos = shift + qi
        qbase = b * q_st[0] + h * q_st[1]
        kbase = b * k_st[0] + hk * k_st[1]
        vbase = b * v_st[0] + hk * v_st[1]
{load_q}
        m = {acc}(-math.inf)
        lsum = {acc}(0)
        for c in range({DVP}):
            o[c] = 0
        lo = 0
        hi = sk
        if mk == 1 or mk == 2:
            hi = min(shift + min(q0 + {BQ}, sq), sk)
            if mk == 2:
                lo = min(max(shift + q0 - win, 0), hi)
        kt_lo = lo // {BKV}
        kt_hi = (hi + {BKV} - 1) // {BKV}
        for phase in range(2):
            kt = kt_lo
            stop = kt_hi
            if phase == 1:
                if t == 0:
                    more[0] = flag[0]
                cuda.syncthreads()
                if lane == 0 and live and not m > -1e9 + 746.0 and m == m:
                    more[0] = 1
                cuda.syncthreads()
                go = more[0] != 0 and (kt_lo > 0 or kt_hi < ktiles)
                cuda.syncthreads()
                if not go:
                    break
                kt = 0
                stop = ktiles
            while kt < stop:
                if phase == 1 and kt == kt_lo:
                    kt = kt_hi
                    if kt >= stop:
                        break
                k0 = kt * {BKV}
{tile}
                kt += 1
        sp[r, lane] = lsum
        cuda.syncthreads()
        total = {acc}(0)
        for ln in range({TPR}):
            total += sp[r, ln]
        if live:
            obase = b * o_st[0] + h * o_st[1] + qi * o_st[2]
            for c in range({DVP}):
                col = lane + c * {TPR}
                if col < dv:
                    out[obase + col] = {store}
        cuda.syncthreads()
        work += cuda.gridDim.x
'''

TILE = '''
{load_k}
{load_v}
cuda.syncthreads()
for u in range({KPT}):
    s[u] = 0
for dd in range(d):
    qv = sq_t[r, dd]
    for u in range({KPT}):
        s[u] += qv * sk_t[lane + u * {TPR}, dd]
for u in range({KPT}):
    jj = lane + u * {TPR}
    kj = k0 + jj
    x = s[u] * scale
    if kj >= sk:
        x = {acc}(-math.inf)
    else:
{score}
    s[u] = x
    sp[r, jj] = x
cuda.syncthreads()
tmax = {acc}(-math.inf)
for jj in range({BKV}):
    x = sp[r, jj]
    if x > tmax or x != x:
        tmax = x
m_new = tmax if (tmax > m or tmax != tmax) else m
corr = {acc}(1)
if m_new != -math.inf:
    corr = math.exp(m - m_new)
cuda.syncthreads()
part = {acc}(0)
for u in range({KPT}):
    p = {acc}(0)
    if m_new != -math.inf:
        p = math.exp(s[u] - m_new)
    part += p
    sp[r, lane + u * {TPR}] = p
lsum = lsum * corr + part
m = m_new
cuda.syncthreads()
for c in range({DVP}):
    col = lane + c * {TPR}
    if col < dv:
        a = o[c] * corr
        for jj in range({BKV}):
            a += sp[r, jj] * sv_t[jj, col]
        o[c] = a
cuda.syncthreads()
'''

# the logit of key kj (< sk) for row qi from its scaled score x, in the reference's order:
# bias, softcap, then hidden keys set to the -1e9 fill (mk: 1 Causal, 2 SlidingWindow,
# 3 Custom, 4 Bias; uniform branches, so one kernel serves every mask kind)
SCORE = '''
if mk == 4 and live:
    x += {acc}({wcast}({read_bias}))
if cap > 0:
    x = cap * math.tanh(x / cap)
if (mk == 1 or mk == 2) and (kj > apos or (mk == 2 and kj < apos - win)):
    x = {acc}(-1e9)
if mk == 3 and {read_keep} < 0.5:
    x = {acc}(-1e9)
'''
# one tile row range of a shared array: thread t copies element (jr, dc) of every group of
# PER rows (CHUNK = min(threads, width) columns at a time: no division by the runtime width)
LOAD = '''
for j0 in range(0, {ROWS}, {PER}):
    for c0 in range(0, {WIDTH}, {CHUNK}):
        jj = j0 + t // {CHUNK}
        dd = c0 + t % {CHUNK}
        if jj < {ROWS} and dd < {limit}:
            x = {acc}(0)
            if {row_ok}:
                x = {acc}({read})
            {dest}[jj, dd] = x
'''

NONFINITE = '''
def {name}(x, flag):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < x.size:
        y = {read}
        if y != y or y == math.inf or y == -math.inf:
            flag[0] = 1
        i += stride
'''
