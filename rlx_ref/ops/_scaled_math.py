"""The numpy oracles of the Scaled* kinds, as RLX's CPU reference (``rlx-cpu/src/thunk/
ops/quant.rs``: ``lowp_compute_scales``, ``lowp_quantize``, ``lowp_dequantize``,
``lowp_scaled_matmul``, ``lowp_scaled_grouped_matmul``, ``lowp_read_scales``).

A tensor is viewed as ``[rows, cols]``: cols its last dim, rows the product of the
others. Block layouts give each row ``nblk = ceil(cols / block)`` scales, row-major; the
last block of a row may be short. Quantization and its scales are computed in f32 even for
the float64 oracle: their outputs are codes, which a wider computation could round the
other way at a tie.
"""
from __future__ import annotations

import numpy as np

from . import _lowp_codec as lc
from .opdef import OpError

F32 = np.float32


def rows_cols(shape) -> tuple:
    cols = int(shape[-1])
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    return rows, cols


def nblk(cols: int, layout) -> int:
    """Scales per row: 1 for PerTensor, else ceil(cols / block)."""
    if lc.layout_tag(layout) == "PerTensor":
        return 1
    return -(-cols // lc.block_of(layout))


def scale_count(rows: int, cols: int, layout) -> int:
    """Elements of a scale tensor: 1 for PerTensor, rows·nblk otherwise."""
    return 1 if lc.layout_tag(layout) == "PerTensor" else rows * nblk(cols, layout)


def read_scales(layout, scale) -> np.ndarray:
    """Raw f32 scales from the stored tensor: f32 as is (PerTensor), E8M0 bytes
    (``2^(b-127)``, 0xFF NaN) or FP8 E4M3 bytes (NVFP4)."""
    s = np.asarray(scale).ravel()
    tag = lc.layout_tag(layout)
    if tag == "PerTensor":
        return s[:1].astype(F32)
    if tag == "BlockMxE8M0":
        return lc.e8m0_to_f32(s)
    return lc.decode("F8E4M3", s)


def per_element(layout, scales, rows: int, cols: int) -> np.ndarray:
    """The ``[rows, cols]`` scale of every element (block b covers cols b·block ..)."""
    if lc.layout_tag(layout) == "PerTensor":
        return np.full((rows, cols), scales[0], scales.dtype)
    b = lc.block_of(layout)
    grid = np.asarray(scales).reshape(rows, nblk(cols, layout))
    return np.repeat(grid, b, axis=1)[:, :cols]


def _pad_blocks(a, block: int, nb: int, fill=0):
    """``a [rows, cols]`` padded to ``[rows, nb, block]`` (the short last block filled)."""
    rows, cols = a.shape
    out = np.full((rows, nb * block), fill, a.dtype)
    out[:, :cols] = a
    return out.reshape(rows, nb, block)


def quant_scales(x, fmt, layout) -> np.ndarray:
    """Raw scales: ``amax / max_finite`` (1 where amax is 0), amax the max |x| of the
    tensor or of each block (NaN ignored); block scales snapped to what the layout can
    store (a power of two via E8M0, or the nearest FP8 E4M3)."""
    x = np.asarray(x, F32)
    rows, cols = rows_cols(x.shape)
    maxf = F32(lc.max_finite(fmt))
    tag = lc.layout_tag(layout)
    a = np.abs(x.reshape(rows, cols))
    if tag == "PerTensor":
        amax = np.fmax.reduce(a.ravel(), initial=F32(0))[None]
    else:
        nb = nblk(cols, layout)
        amax = np.fmax.reduce(_pad_blocks(a, lc.block_of(layout), nb), axis=2,
                              initial=F32(0)).ravel()
    with np.errstate(all="ignore"):
        raw = np.where(amax > 0, amax / maxf, F32(1)).astype(F32)
    if tag == "BlockMxE8M0":
        return lc.e8m0_to_f32(lc.f32_to_e8m0(raw))
    if tag == "Nvfp4":
        return lc.decode("F8E4M3", lc.encode("F8E4M3", raw))
    return raw


def stored_scales(raw, layout) -> np.ndarray:
    """The scale tensor's contents: f32 (PerTensor), E8M0 or FP8 E4M3 bytes."""
    tag = lc.layout_tag(layout)
    if tag == "PerTensor":
        return raw.astype(F32)
    if tag == "BlockMxE8M0":
        return lc.f32_to_e8m0(raw)
    return lc.encode("F8E4M3", raw)


def quantize(x, scale, fmt, layout) -> np.ndarray:
    """``encode(x / s)`` per element (0 where s is 0), as uint8 codes of x's shape."""
    x = np.asarray(x, F32)
    rows, cols = rows_cols(x.shape)
    s = per_element(layout, read_scales(layout, scale).astype(F32), rows, cols)
    with np.errstate(all="ignore"):
        v = np.where(s != 0, x.reshape(rows, cols) / s, F32(0))
    return lc.encode(fmt, v).reshape(x.shape)


def dequantize(codes, scale, fmt, layout, dt) -> np.ndarray:
    """``decode(code) · s`` per element, in ``dt``."""
    codes = np.asarray(codes)
    rows, cols = rows_cols(codes.shape)
    s = per_element(layout, read_scales(layout, scale).astype(dt), rows, cols)
    with np.errstate(all="ignore"):
        out = lc.decode(fmt, codes.reshape(rows, cols)).astype(dt) * s
    return out.reshape(codes.shape)


def _block_dot(a, b, sa, sb, layout, k: int):
    """``Σ_blocks (Σ_p a·b) · (sa·sb)`` for ``a [m, k]``, ``b [n, k]`` and their raw scales:
    RLX's reassociation (each block's dot product scaled once)."""
    m, n = a.shape[0], b.shape[0]
    tag = lc.layout_tag(layout)
    bs = max(k, 1) if tag == "PerTensor" else lc.block_of(layout)
    nb = 1 if tag == "PerTensor" else nblk(k, layout)
    acc = np.zeros((m, n), a.dtype)
    with np.errstate(all="ignore"):
        for blk in range(nb):
            lo, hi = blk * bs, min(blk * bs + bs, k)
            part = a[:, lo:hi] @ b[:, lo:hi].T
            ga = sa[0] if tag == "PerTensor" else sa.reshape(m, nb)[:, blk][:, None]
            gb = sb[0] if tag == "PerTensor" else sb.reshape(n, nb)[:, blk][None, :]
            acc = acc + part * (ga * gb)
    return acc


def scaled_matmul(a, lhs, rhs, ls, rs, bias, dt) -> np.ndarray:
    """``out = lhs · rhsᵀ`` over decoded codes, block-scaled, plus bias ``[n]``."""
    k = lhs.shape[1]
    ad = lc.decode(a.lhs_format, lhs).astype(dt)
    bd = lc.decode(a.rhs_format, rhs).astype(dt)
    sa = read_scales(a.scale_layout, ls).astype(dt)
    sb = read_scales(a.scale_layout, rs).astype(dt)
    out = _block_dot(ad, bd, sa, sb, a.scale_layout, k)
    return out if bias is None else out + np.asarray(bias, dt)[None, :]


def expert_ids(ids, num_experts: int) -> np.ndarray:
    """Rust's ``f32 as usize`` (truncation; NaN and negatives are 0); an id past the
    expert count is an error (RLX indexes out of its weight)."""
    v = np.asarray(ids, np.float64)
    e = np.where(np.isnan(v) | (v < 0), 0, np.trunc(np.where(np.isfinite(v), v, 2.0**63)))
    bad = e >= num_experts
    if bad.any():
        raise OpError(f"(C6) expert_idx {float(v[bad][0])!r} selects expert "
                      f"{int(min(e[bad][0], 2**63))}, but the weight has {num_experts}")
    return e.astype(np.int64)


def scaled_grouped_matmul(a, inp, w, isc, wsc, ids, bias, dt) -> np.ndarray:
    """Row i against expert ``ids[i]``'s ``[n, k]`` slab, block-scaled, plus
    ``bias[e]``."""
    m, k = inp.shape
    ne, n = w.shape[0], w.shape[1]
    layout = a.scale_layout
    eids = expert_ids(ids, ne)
    ad = lc.decode(a.lhs_format, inp).astype(dt)
    wd = lc.decode(a.rhs_format, w).astype(dt)
    sa = read_scales(layout, isc).astype(dt)
    sw = read_scales(layout, wsc).astype(dt)
    nb = nblk(k, layout)
    per_tensor = lc.layout_tag(layout) == "PerTensor"
    out = np.zeros((m, n), dt)
    for i in range(m):
        e = eids[i]
        si = sa if per_tensor else sa.reshape(m, nb)[i]
        sw_e = sw if per_tensor else sw.reshape(ne * n, nb)[e * n:(e + 1) * n].ravel()
        out[i] = _block_dot(ad[i:i + 1], wd[e], si, sw_e, layout, k)[0]
        if bias is not None:
            out[i] = out[i] + np.asarray(bias, dt).reshape(ne, n)[e]
    return out
