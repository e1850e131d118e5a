"""llama.cpp's reference scale searches for the K-quants, vectorized over sub-blocks.

Each function takes ``x`` as f32 ``[R, n]`` (one sub-block per row) and runs the reference
routine of ``ggml-quants.c`` (``make_qkx2_quants``, ``make_q3_quants``, ``make_qx_quants``)
on every row at once. The per-row loop state (best error, scale, min) lives in arrays and
each accept/reject decision becomes a mask, so the rows follow exactly the branches the
scalar code takes. Work arrays are transposed to ``[n, R]`` so that the reference's
element loops become n vector operations over all rows: sums run in the reference's
order, products and quotients are evaluated in its order, and no multiply-add is fused;
the results are those of the reference compiled without floating-point contraction.

This module registers no scheme; ``blocks_kquants`` builds the quantizers from it.
"""
from __future__ import annotations

import numpy as np

F = np.float32
GROUP_MAX_EPS = F(1e-15)


def nearest_int(v) -> np.ndarray:
    """``nearest_int`` bit for bit: add 1.5 * 2**23 in f32 and read the low mantissa bits.
    For |v| <= 4194303 (the reference's assertion) that is round half to even; beyond it
    (reached only when a scale overflowed) the same bits as the compiled reference."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = (np.asarray(v, dtype=F) + F(12582912)).view(np.int32)
    return (t & 0x007FFFFF) - 0x00400000


def col_sum(t: np.ndarray, from_zero: bool = True) -> np.ndarray:
    """Sums over axis 0 of ``[n, R]``, in order: the reference's ``s += t[i]`` loop, from 0
    (so -0 becomes +0 at the first step) or, with ``from_zero=False``, from ``t[0]``."""
    acc = t[0] + F(0) if from_zero else t[0].copy()
    for i in range(1, t.shape[0]):
        acc = acc + t[i]
    return acc


def seq_sum(t: np.ndarray) -> np.ndarray:
    """Row sums of ``[R, n]`` in the reference's order (from 0)."""
    return col_sum(np.ascontiguousarray(np.asarray(t, dtype=F).T))


def _t(a) -> np.ndarray:
    """``[R, n]`` -> contiguous f32 ``[n, R]``."""
    return np.ascontiguousarray(np.asarray(a, dtype=F).T)


def make_qkx2(x, w, nmax: int, rmin: float, rdelta: float, nstep: int, use_mad: bool):
    """Asymmetric fit x ~ scale * L - the_min with L in 0..nmax: scale, the_min [R], L."""
    with np.errstate(all="ignore"):
        scale, the_min, lv = _make_qkx2(_t(x), _t(w), nmax, rmin, rdelta, nstep, use_mad)
    return scale, the_min, np.ascontiguousarray(lv.T)


def _err(scale, lv, mn, x, w, use_mad):
    diff = (scale * lv + mn) - x
    return col_sum(w * (np.abs(diff) if use_mad else diff * diff))


def _make_qkx2(x, w, nmax, rmin, rdelta, nstep, use_mad):
    mn0 = x.min(axis=0)
    mx = x.max(axis=0)
    sum_w = col_sum(w, from_zero=False)
    sum_x = col_sum(w * x, from_zero=False)
    mn0 = np.where(mn0 > 0, F(0), mn0)
    flat = mx == mn0
    iscale = F(nmax) / (mx - mn0)
    scale = F(1) / iscale
    lv = np.clip(nearest_int(iscale * (x - mn0)), 0, nmax).astype(F)
    best = _err(scale, lv, mn0, x, w, use_mad)
    mn = mn0
    for step in range(nstep + 1) if nstep >= 1 else ():
        c = (F(rmin) + F(rdelta) * F(step)) + F(nmax)
        la = np.clip(nearest_int((c / (mx - mn)) * (x - mn)), 0, nmax).astype(F)
        wl = w * la
        sum_l, sum_l2, sum_xl = col_sum(wl), col_sum(wl * la), col_sum(wl * x)
        den = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / den
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / den
        pos = this_min > 0
        this_min = np.where(pos, F(0), this_min)
        this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
        cur = _err(this_scale, la, this_min, x, w, use_mad)
        take = (den > 0) & (cur < best)
        lv = np.where(take, la, lv)
        best = np.where(take, cur, best)
        scale = np.where(take, this_scale, scale)
        mn = np.where(take, this_min, mn)
    scale = np.where(flat, F(0), scale)
    the_min = -np.where(flat, mn0, mn)
    lv = np.where(flat, F(0), lv)
    return scale.astype(F), the_min.astype(F), lv.astype(np.uint8)


def _signed_absmax(x):
    """Per column of ``[n, R]``: the value of largest magnitude (first on ties), and it."""
    i = np.abs(x).argmax(axis=0)[None, :]
    mx = np.take_along_axis(x, i, axis=0)[0]
    return mx, np.abs(mx)


def make_q3(x, nmax: int):
    """Symmetric fit with the reference's rmse refinement (``do_rmse``): scale [R] and
    L in 0..2*nmax-1 (code + nmax)."""
    x = _t(x)
    with np.errstate(all="ignore"):
        mx, amax = _signed_absmax(x)
        zero = amax < GROUP_MAX_EPS
        lv = np.clip(nearest_int((F(-nmax) / mx) * x), -nmax, nmax - 1).astype(F)
        w = x * x
        wx = w * x
        sumlx, suml2 = col_sum(wx * lv), col_sum((w * lv) * lv)
        for _ in range(5):
            # a pass that changes nothing leaves the state as it was, so running all five
            # passes matches the reference's early exit
            for i in range(x.shape[0]):
                wi, wxi, li = w[i], wx[i], lv[i]
                slx = sumlx - wxi * li
                sl2 = suml2 - (wi * li) * li
                new = np.clip(nearest_int((x[i] * sl2) / slx), -nmax, nmax - 1).astype(F)
                slx2 = slx + wxi * new
                sl22 = sl2 + (wi * new) * new
                take = ((slx > 0) & (new != li) & (sl22 > 0)
                        & ((slx2 * slx2) * suml2 > (sumlx * sumlx) * sl22))
                lv[i] = np.where(take, new, li)
                sumlx = np.where(take, slx2, sumlx)
                suml2 = np.where(take, sl22, suml2)
        scale = np.where(suml2 > 0, sumlx / suml2, F(0))
    scale = np.where(zero, F(0), scale).astype(F)
    lv = np.where(zero, F(0), lv + F(nmax))
    return scale, np.ascontiguousarray(lv.T.astype(np.uint8))


def make_qx(x, nmax: int):
    """Symmetric fit weighted by x*x, trying 18 nearby inverse scales (``rmse_type`` 1):
    scale [R] and L in 0..2*nmax-1 (code + nmax)."""
    x = _t(x)
    with np.errstate(all="ignore"):
        mx, amax = _signed_absmax(x)
        zero = amax < GROUP_MAX_EPS
        w = x * x
        wx = w * x

        def fit(iscale):
            lq = np.clip(nearest_int(iscale * x), -nmax, nmax - 1).astype(F)
            return lq, col_sum(wx * lq), col_sum((w * lq) * lq)

        lv, sumlx, suml2 = fit(F(-nmax) / mx)
        scale = np.where(suml2 != 0, sumlx / suml2, F(0))
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            lq, sumlx, suml2 = fit(-(F(nmax) + F(0.1) * F(step)) / mx)
            take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            lv = np.where(take, lq, lv)
            scale = np.where(take, sumlx / suml2, scale)
            best = np.where(take, scale * sumlx, best)
    scale = np.where(zero, F(0), scale).astype(F)
    lv = np.where(zero, F(0), lv + F(nmax))
    return scale, np.ascontiguousarray(lv.T.astype(np.uint8))
