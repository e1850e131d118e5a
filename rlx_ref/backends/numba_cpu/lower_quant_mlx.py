"""Numba lowering of DequantGroupedMatMulMlx: one fused kernel that decodes each routed
row's expert codes inside the K loop (no f32 weight is written), parallel over the M·N
outputs.

Codes are read from the LSB-first bit stream MLX packs (a code of <= 8 bits spans at most
two bytes); MlxAffine forms ``scale·code + bias`` and MlxMxfp4 ``e2m1(code)·scale`` in f32,
as the oracle rounds each weight, and products accumulate in f64. Expert ids are clamped
on the host exactly as the oracle (and RLX's CPU) clamps them.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _quant_linear as L
from ...ops import _quant_scheme as S
from ...ops.quant_mlx import expert_rows
from .kernels import compile_kernel
from .lowering import Step, lowers

_SRC = '''
@njit(cache=True, nogil=True, parallel=True)
def mlx_grouped(x, codes, scales, biases, ids, out, bits, gs, slab, mxfp4, e2m1):
    # out[r, j] = sum_k x[r, k] * W_e[k, j], e = ids[r]; W_e[k, j] decodes code (j*K + k)
    # of expert e's slab with group g = k // gs of row j
    m, k = x.shape
    n = out.shape[1]
    ng = k // gs
    mask = (1 << bits) - 1
    for t in prange(m * n):
        r = t // n
        j = t % n
        e = ids[r]
        acc = 0.0
        for g in range(ng):
            s = scales[e, j, g]
            b = biases[e, j, g]
            for kk in range(g * gs, (g + 1) * gs):
                off = (j * k + kk) * bits
                byte = e * slab + (off >> 3)
                sh = off & 7
                v = np.int64(codes[byte]) >> sh
                if sh + bits > 8:
                    v = v | (np.int64(codes[byte + 1]) << (8 - sh))
                c = v & mask
                if mxfp4:
                    w = e2m1[c] * s
                else:
                    w = s * np.float32(c) + b
                acc += np.float64(x[r, kk]) * np.float64(w)
        out[r, j] = acc
'''


@lowers("DequantGroupedMatMulMlx", (DType.F32,),
        reason="fused MlxAffine (bits 2-8) and MlxMxfp4 decode inside the K loop")
def lower_dequant_grouped_mlx(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    mxfp4 = S.name_of(scheme) == "MlxMxfp4"
    bits = 4 if mxfp4 else S.field(scheme, "bits")
    gs = S.field(scheme, "group_size")
    m, k = ins[0].dims
    n = node.shape.dims[1]
    slab = n * k * bits // 8                     # bytes per expert (C4)
    kern = compile_kernel("mlx_grouped", _SRC)
    e2m1 = np.ascontiguousarray(L.FP4_E2M1, np.float32)

    def run(out, x, w_q, scales, biases, idx):
        if out.size == 0:
            return
        sc = np.ascontiguousarray(scales, np.float32)
        bi = np.ascontiguousarray(biases, np.float32)
        ids = expert_rows(idx, sc.shape[0])
        kern.fn(np.ascontiguousarray(x), np.ascontiguousarray(w_q).reshape(-1), sc, bi, ids,
                out, bits, gs, slab, mxfp4, e2m1)
    return Step(run, [kern])
