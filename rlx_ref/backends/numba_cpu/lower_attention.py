"""Lowering of the attention family: Attention (every mask kind, layout, GQA, softcap,
v_head_dim) and Rope.

Attention is one fused kernel over query tiles of one (batch, head): the tile's scores
``Q_tile·Kᵀ`` come from one BLAS call into a per-thread ``rows × S_k`` buffer (at most
TILE_ELEMS scores, whatever S), then each row gets scale, bias, softcap and mask in the
reference's order and a max-subtracted row softmax, and one more BLAS call forms ``P·V``.
Tiles run in parallel (prange, BLAS at one thread). Why tiles and not one row per thread:
measured single-threaded at B1 H8 S256 D64, the fused row kernel (unit-stride axpys over a
transposed K, f64) took 16.5 ms, the tiles 4.9 ms in f64 (BLAS runs the two products).
Tiles are TILE_ROWS (512) rows, or BAND_ROWS (128) under a causal or sliding-window mask,
whose tiles score every key their last row sees (waste ∝ rows); each BLAS call packs all
of K or V, so larger tiles amortize it (B1 H8 S1024 D64 f32, 2 threads, one process:
18.0 ms with 128 rows, 17.4 with 256, 16.8 with 512; causal 10.5 ms with 128, 11.1 with
256). Products run in f64, or in f32 for f32/f16/bf16 when S_k and S_k·D are large enough that
the contract's budget (∝ S_k·D) dwarfs the f32 rounding of a D-term dot (``_gemm_dtype``).
A row's softmax is four vectorized passes: scale (which also sums x·0, NaN when a score is
NaN or ±inf), the max by halving into a scratch row (a running max of floats does not
vectorize here), ``_vmath``'s exp in the product dtype (about 1 ulp of f64 or f32) and an
f64 sum; a row holding NaN or ±inf takes a scalar path with libm's exp instead. Against
the scalar max, the f64-argument exp and the 4-chain sum they replace, the softmax went
from ~8 ms to ~3 ms at B1 H8 S1024 D64 f32 (the products take ~13.5 ms): with the tiles,
22-23 ms became 16.5-16.8 (torch 15.6-17.1), causal 12.8-16.2 became 10.7-11.9 (torch
11.4-13.7), in the op benchmark. Q, K and V are read into ``[B, H, S, D]`` buffers of the
product dtype (a copy, skipped when an input is already that). Keys hidden from every row
of a tile by a causal or sliding-window mask are neither scored nor summed when V is finite
(0·inf must stay NaN) and they would get no weight (a row whose best visible score is below
the -1e9 fill redoes the tile over every key). Rope is a row-parallel kernel over positions
that copies the pass-through lanes and rotates the pairs in f64.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops import _attention_geom as geo
from ...ops.attention import rope_tables
from ._vmath import VMATH
from .kernels import compile_kernel
from .lower_linalg import FLOATS, blas_serial, numba_threads
from .lowering import Step, lowers
from .variant_table import th, use, use_par

ROW_CHUNKS = 16                  # tile chunks per call (a few per thread balance the load)
TILE_ROWS = 512                  # query rows per tile (one BLAS call each for QKᵀ and PV)
BAND_ROWS = 128                  # ... under a causal or sliding-window mask
TILE_ELEMS = 1 << 19             # and at most this many scores per tile (2 MiB of f32)
TILES_PER_THREAD = 2             # tiles shrink (not below BAND_ROWS) to give each thread this
# attention.par_min: scored key·dim products below it run serially; f32 products need
# S_k >= attention.f32_min_keys and S_k·D >= attention.f32_min_terms (see _gemm_dtype)
MASKS = {"None": 0, "Causal": 1, "SlidingWindow": 2, "Custom": 3, "Bias": 4}

_EXP_ROW = """
@njit(cache=True, nogil=True, error_model="numpy", fastmath={{"contract"}})
def _exp_row(row, m):
    # row <- exp(row - m) for a finite m that is one of the row's values ({exp} of _vmath):
    # the difference in the product dtype is the exact one rounded once
    mc = {ct}(m)
    for j in range(row.size):
        row[j] = {exp}(row[j] - mc)
"""

_ATTN_SRC = """
_FILL = -1e9


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _scale_row(row, scale):
    # row <- row·scale; NaN when a scaled score is NaN or ±inf (x·0), else 0
    z = 0.0
    for j in range(row.size):
        row[j] = row[j] * scale
        z += row[j] * 0.0
    return z


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _row_bad(row):
    # NaN when the row holds a NaN or ±inf, else 0
    z = 0.0
    for j in range(row.size):
        z += row[j] * 0.0
    return z


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _row_sum(row):
    t = 0.0
    for j in range(row.size):
        t += row[j]
    return t


@njit(cache=True, nogil=True)
def _max_into(dst, a, b):
    for j in range(dst.size):
        x = a[j]
        y = b[j]
        dst[j] = x if x > y else y


@njit(cache=True, nogil=True)
def _row_max(row, tmp):
    # the max of a row without NaN, by halving into disjoint slices of tmp (>= row.size):
    # elementwise selects vectorize, a running max does not
    m = -np.inf
    src = row
    off = 0
    while src.size > 32:
        h = src.size // 2
        if src.size % 2:
            m = max(m, src[src.size - 1])
        dst = tmp[off:off + h]
        _max_into(dst, src[:h], src[h:2 * h])
        off += h
        src = dst
    for j in range(src.size):
        m = max(m, src[j])
    return m


@njit(cache=True, nogil=True)
def _softmax_row(row, tmp, z):
    # row <- exp(row - max(row)) (a NaN max gives NaN rows, as the reference); (sum, max).
    # z is NaN when the row may hold a NaN or ±inf (0 when finite: the fast path)
    n = row.size
    if z == 0.0:
        m = _row_max(row, tmp)
        _exp_row(row, m)
        return _row_sum(row), m
    m = -np.inf
    for j in range(n):
        if row[j] > m or row[j] != row[j]:
            m = row[j]
    if not np.isfinite(m):             # NaN or ±inf scores: libm exp keeps IEEE's answers
        tot = 0.0
        for j in range(n):
            row[j] = math.exp(row[j] - m)
            tot += row[j]
        return tot, m
    _exp_row(row, m)
    return _row_sum(row), m


@njit(cache=True, nogil=True, inline="always")
def _keys(qi, gi):
    # the keys a synthetic mask lets query qi see: [lo, hi)
    sq, sk, mk, win = gi[3], gi[4], gi[16], gi[17]
    if mk != 1 and mk != 2:
        return 0, sk
    apos = max(sk - sq, 0) + qi
    hi = min(apos + 1, sk)
    lo = min(max(apos - win, 0), hi) if mk == 2 else 0
    return lo, hi


@njit(cache=True, nogil=True)
def _scores(s2, b, h, t0, klo, gi, keep, bias, scale, cap, tot, tmp):
    # scale, bias, softcap, mask and softmax of each row; False if a hidden key outside
    # [klo, klo + kw) could still get weight (its score would be within 745 of the max)
    mk = gi[16]
    kw = s2.shape[1]
    ok = True
    plain = mk != 4 and cap <= 0.0
    for i in range(s2.shape[0]):
        qi = t0 + i
        row = s2[i]
        z = _scale_row(row, scale)     # NaN only from a scaled score: bias and cap look again
        if mk == 4:
            brow = bias[b, h, qi, klo:klo + kw]
            for j in range(kw):
                row[j] += brow[j]
        if cap > 0.0:
            for j in range(kw):
                row[j] = cap * math.tanh(row[j] / cap)
        lo, hi = _keys(qi, gi)
        for j in range(0, min(max(lo - klo, 0), kw)):
            row[j] = _FILL
        for j in range(min(max(hi - klo, 0), kw), kw):
            row[j] = _FILL
        if mk == 3:
            krow = keep[b, klo:klo + kw]
            for j in range(kw):
                row[j] = row[j] if krow[j] != 0 else _FILL
        if not plain:
            z = _row_bad(row)
        tot[i], m = _softmax_row(row, tmp, z)
        ok = ok and (_FILL - m < -745.2 or m != m)
    return ok


@njit(cache=True, nogil=True)
def _tile(w, qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite, sb, tot, tmp):
    # one (batch, head, query tile): scores by BLAS, row softmax, weighted V sum by BLAS.
    # Keys hidden from every row of the tile are skipped when V is finite (0·v = 0).
    nh, nkv, sq, sk, dv, tr = gi[1], gi[2], gi[3], gi[4], gi[6], gi[18]
    ntile = (sq + tr - 1) // tr
    b = w // (nh * ntile)
    h = (w // ntile) % nh
    t0 = (w % ntile) * tr
    nt = min(tr, sq - t0)
    hk = h // (nh // nkv)
    klo = _keys(t0, gi)[0]
    last_lo, khi = _keys(t0 + nt - 1, gi)
    if not v_finite or last_lo >= khi:
        klo, khi = 0, sk                   # a row that sees no key weighs every key
    for attempt in range(2):
        kw = khi - klo
        s2 = sb[:nt * kw].reshape(nt, kw)
        np.dot(qb[b, h, t0:t0 + nt], kb[b, hk, klo:khi].T, s2)
        if _scores(s2, b, h, t0, klo, gi, keep, bias, scale, cap, tot, tmp) or kw == sk:
            break
        klo, khi = 0, sk
    o2 = ob[b, h, t0:t0 + nt]
    np.dot(s2, vb[b, hk, klo:khi], o2)
    for i in range(nt):
        inv = 1.0 / tot[i]
        orow = o2[i]
        for c in range(dv):
            orow[c] = orow[c] * inv


@njit(cache=True, nogil=True, inline="always")
def _chunk(c, chunks, qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite):
    items = gi[0] * gi[1] * ((gi[3] + gi[18] - 1) // gi[18])
    sb = np.empty(gi[18] * gi[4], qb.dtype)
    tot = np.empty(gi[18])
    tmp = np.empty(gi[4], qb.dtype)
    for w in range(c * items // chunks, (c + 1) * items // chunks):
        _tile(w, qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite, sb, tot, tmp)


@njit(cache=True, nogil=True)
def attention(qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite, chunks):
    for c in range(chunks):
        _chunk(c, chunks, qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite)


@njit(cache=True, nogil=True, parallel=True)
def attention_par(qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite, chunks):
    for c in prange(chunks):
        _chunk(c, chunks, qb, kb, vb, ob, keep, bias, gi, scale, cap, v_finite)
"""


def _work_dtype(*dts) -> type:
    return np.float64 if DType.F64 in dts else np.float32


def _gemm_dtype(g, out_dt: DType) -> type:
    """f32 products for f32/f16/bf16 when the contract's K = S_k·D leaves room for the f32
    rounding of each score (its budget grows with K; the error of a D-term dot does not)."""
    small = g.s_k < th("attention.f32_min_keys") or g.s_k * g.d < th("attention.f32_min_terms")
    f64 = out_dt is DType.F64 or small
    use("attention.f64_products" if f64 else "attention.f32_products")
    return np.float64 if f64 else np.float32


def _tile_rows(g, code: int) -> int:
    """Query rows per tile: large tiles amortize each BLAS call's packing of K and V, but a
    banded mask scores the keys a tile's last row sees for every row of it (waste ∝ rows)."""
    tile = max(1, min(BAND_ROWS if code in (1, 2) else TILE_ROWS, TILE_ELEMS // max(g.s_k, 1),
                      g.s_q))
    while tile > BAND_ROWS and g.batch * g.heads * -(-g.s_q // tile) < (
            TILES_PER_THREAD * numba_threads()):
        tile = max(BAND_ROWS, -(-tile // 2))
    return tile


@lowers("Attention", FLOATS, reason="f16/bf16 are read into f32 (or f64) [B, H, S, D] copies")
def lower_attention(node, ins, ctx) -> Step:
    a = node.attrs
    g = geo.attention_geom(*(tuple(s.dims) for s in ins[:3]), a)
    wdt, gdt = _work_dtype(ins[0].dtype), _gemm_dtype(g, node.shape.dtype)
    mk = a.mask_kind
    code = MASKS[mk[0] if isinstance(mk, tuple) else mk]
    win = mk[1] if isinstance(mk, tuple) else 0
    tile = _tile_rows(g, code)
    gi = np.array([g.batch, g.heads, g.kv_heads, g.s_q, g.s_k, g.d, g.dv] + [0] * 9
                  + [code, win, tile], np.int64)
    if a.score_scale is not None:
        scale = float(wdt(a.score_scale))
    else:
        scale = float(wdt(1) / np.sqrt(wdt(g.d)))
    cap = float(wdt(a.attn_logit_softcap)) if a.attn_logit_softcap is not None else 0.0
    items = g.batch * g.heads * -(-g.s_q // tile)
    work_units = g.batch * g.heads * g.s_q * max(g.s_k, 1) * (g.d + g.dv)
    f32 = gdt is np.float32
    exp_row = _EXP_ROW.format(exp="_vexpf_le0" if f32 else "_vexp",
                              ct="np.float32" if f32 else "np.float64")
    kernel = compile_kernel("attention", VMATH + exp_row + _ATTN_SRC)
    par = use_par("attention", work_units >= th("attention.par_min"))
    fn = kernel.get("attention_par") if par else kernel.fn
    chunks = min(items, ROW_CHUNKS if par else 1)
    no_keep, no_bias = np.ones((1, 1), np.uint8), np.zeros((1, 1, 1, 1), gdt)
    bhsd_dims = {"q": (g.batch, g.heads, g.s_q, g.d), "k": (g.batch, g.kv_heads, g.s_k, g.d),
                 "v": (g.batch, g.kv_heads, g.s_k, g.dv), "o": (g.batch, g.heads, g.s_q, g.dv)}
    same = g.layout == "BHSD" and np.dtype(node.shape.dtype.np) == np.dtype(gdt)
    bufs = {} if same else {n: np.empty(d, gdt) for n, d in bhsd_dims.items()}

    def bhsd(x, name):
        view = geo.to_bhsd(x, g, bhsd_dims[name][1], bhsd_dims[name][3])
        if same:
            return np.ascontiguousarray(view)
        np.copyto(bufs[name], view, casting="unsafe")   # f16/bf16/f32 -> the product dtype
        return bufs[name]

    def run(out, q, k, v, *mask):
        if out.size == 0:
            return
        qb, kb, vb = bhsd(q, "q"), bhsd(k, "k"), bhsd(v, "v")
        keep, bias = no_keep, no_bias
        if code == 3:
            keep = (~(np.asarray(mask[0], np.float64) < geo.MASK_THRESHOLD)).astype(np.uint8)
        elif code == 4:    # rounded to the working dtype first, as the reference adds it
            bias = np.ascontiguousarray(np.asarray(mask[0]).astype(wdt), gdt)
        ob = out if same else bufs["o"]
        v_finite = code not in (1, 2) or bool(np.isfinite(vb).all())   # only masks skip keys
        blas_serial(fn, qb, kb, vb, ob, keep, bias, gi, gdt(scale), cap, v_finite, chunks)
        if not same:
            with np.errstate(over="ignore"):
                out[...] = geo.from_bhsd(ob, g)
    return Step(run, [kernel])


_ROPE_SRC = '''
@njit(cache=True, nogil=True, inline="always")
def _rope_row(t, x3, cos, sin, o3, hd, half, gptj, per_token):
    seq = x3.shape[1]
    t = np.int64(t)         # a prange index is unsigned: uint64 // int64 would be a float
    b = t // seq
    si = t % seq
    row = t if per_token else si
    xr = x3[b, si]
    orow = o3[b, si]
    for e in range(xr.size):
        orow[e] = xr[e]
    for base in range(0, xr.size, hd):
        for i in range(half):
            if gptj:
                i1 = base + 2 * i
                i2 = i1 + 1
            else:
                i1 = base + i
                i2 = i1 + half
            c = np.float64(cos[row, i])
            s = np.float64(sin[row, i])
            x1 = np.float64(xr[i1])
            x2 = np.float64(xr[i2])
            orow[i1] = x1 * c - x2 * s
            orow[i2] = x2 * c + x1 * s


@njit(cache=True, nogil=True)
def rope(x3, cos, sin, o3, hd, half, gptj, per_token):
    for t in range(x3.shape[0] * x3.shape[1]):
        _rope_row(t, x3, cos, sin, o3, hd, half, gptj, per_token)


@njit(cache=True, nogil=True, parallel=True)
def rope_par(x3, cos, sin, o3, hd, half, gptj, per_token):
    for t in prange(x3.shape[0] * x3.shape[1]):
        _rope_row(t, x3, cos, sin, o3, hd, half, gptj, per_token)
'''


@lowers("Rope", FLOATS, reason="f16/bf16 run through f32 inputs and an f64 output shadow")
def lower_rope(node, ins, ctx) -> Step:
    a = node.attrs
    x_dims, c_dims = tuple(ins[0].dims), tuple(ins[1].dims)
    half = a.n_rot // 2
    wdt = _work_dtype(*(s.dtype for s in ins))
    batch, seq, width = math.prod(x_dims[:-2]), x_dims[-2], x_dims[-1]
    if half:
        _, _, stride, rows, per_token = rope_tables(x_dims, c_dims, half)
    else:
        stride, rows, per_token = 1, 0, False
    kernel = compile_kernel("rope", _ROPE_SRC)
    par = use_par("rope", math.prod(x_dims) >= th("attention.par_min"))
    fn = kernel.get("rope_par") if par else kernel.fn
    sixteen = node.shape.dtype in (DType.F16, DType.BF16)
    gptj = a.style == "GptJ"

    def run(out, x, cos, sin):
        if out.size == 0:
            return
        if half == 0:
            out[...] = x
            return
        xs = np.ascontiguousarray(x, wdt).reshape(batch, seq, width)
        cs, sn = (np.ascontiguousarray(t, wdt).reshape(rows, stride) for t in (cos, sin))
        o = np.empty(out.shape, np.float64) if sixteen else out
        fn(xs, cs, sn, o.reshape(batch, seq, width), a.head_dim, half, gptj, per_token)
        if sixteen:
            with np.errstate(over="ignore"):
                out[...] = o.astype(out.dtype)
    return Step(run, [kernel])
