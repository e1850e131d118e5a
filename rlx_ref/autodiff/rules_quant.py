"""VJP rules of the quant matmuls: LoraMatMul (every operand), GroupedMatMul (input and
expert bank), DequantMatMul and DequantGroupedMatMul (activations only).

Quantized weights are constants here, as in RLX's inference and frozen-QAT convention:
packed bytes carry no gradient, and asking for one of a scale or zero point is an
AutodiffError naming it. Expert ids are indices: no gradient flows to them.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ._build import binary, constant, reshape, scalar, static_dims, swap_last_two, transpose, \
    unary
from .vjp import vjp_rule


def _refuse(ctx, i: int, what: str):
    if ctx.needs(i):
        raise ctx.fail(f"no gradient with respect to {what} (operand {i}): quantized "
                       "weights are constants")


def _mm(g, a: int, b: int) -> int:
    return g.op("MatMul", (a, b))


def _rows(g, x: int) -> int:
    """``x [..., M, C]`` as ``[P, C]`` (P = every leading element)."""
    dims = static_dims(g, x, "a quant matmul's gradient")
    return reshape(g, x, (int(np.prod(dims[:-1])), dims[-1]))


def _scaled(g, x: int, s: float) -> int:
    return x if s == 1.0 else binary(g, "Mul", x, scalar(g, s, g.shape(x).dtype))


@vjp_rule("LoraMatMul")
def vjp_lora_matmul(ctx, dy):
    """y = x·W + s·(x·A)·B: dx = dy·Wᵀ + s·(dy·Bᵀ)·Aᵀ, dW = xᵀ·dy, dA = s·xᵀ·(dy·Bᵀ),
    dB = s·(x·A)ᵀ·dy, the leading dims of x folded into rows for the weights."""
    g, (x, w, a, b) = ctx.g, ctx.x
    s = ctx.attrs.scale
    dyb = _mm(g, dy, swap_last_two(g, b))                    # dy·Bᵀ   [..., M, R]
    out = [None] * 4
    if ctx.needs(0):
        out[0] = binary(g, "Add", _mm(g, dy, swap_last_two(g, w)),
                        _scaled(g, _mm(g, dyb, swap_last_two(g, a)), s))
    xr, dyr = _rows(g, x), _rows(g, dy)
    if ctx.needs(1):
        out[1] = _mm(g, transpose(g, xr, (1, 0)), dyr)
    if ctx.needs(2):
        out[2] = _scaled(g, _mm(g, transpose(g, xr, (1, 0)), _rows(g, dyb)), s)
    if ctx.needs(3):
        out[3] = _scaled(g, _mm(g, transpose(g, _mm(g, xr, a), (1, 0)), dyr), s)
    return out


def _expert_rows(g, ids: int) -> int:
    """The ids as ScatterAdd reads them: truncated toward zero as the forward reads them
    (``floor(max(id, 0))``: ids in (-1, 0) are expert 0, larger ones drop their fraction)."""
    return unary(g, "Floor", binary(g, "Max", ids, scalar(g, 0, g.shape(ids).dtype)))


def _grouped_dx(g, dy: int, w_ekn: int, ids: int) -> int:
    """dx[i] = dy[i]·W[ids[i]]ᵀ: a GroupedMatMul against the transposed bank."""
    return g.op("GroupedMatMul", (dy, transpose(g, w_ekn, (0, 2, 1)), ids))


@vjp_rule("GroupedMatMul")
def vjp_grouped_matmul(ctx, dy):
    """out[i] = x[i]·W[e_i]: dx as above; dW[e] = Σ_{i: e_i = e} x[i]ᵀ·dy[i], the per-token
    outer products scatter-added into their expert's slot."""
    g, (x, w, ids) = ctx.g, ctx.x
    out = [None, None, None]
    if ctx.needs(0):
        out[0] = _grouped_dx(g, dy, w, ids)
    if ctx.needs(1):
        m, k = static_dims(g, x, "GroupedMatMul's weight gradient")
        e, _, n = static_dims(g, w, "GroupedMatMul's weight gradient")
        outer = _mm(g, reshape(g, x, (m, k, 1)), reshape(g, dy, (m, 1, n)))    # [M, K, N]
        dw = g.op("ScatterAdd", (reshape(g, outer, (m, k * n)), _expert_rows(g, ids)),
                  shape=Shape((e, k * n), g.shape(dy).dtype))
        out[1] = reshape(g, dw, (e, k, n))
    return out


@vjp_rule("DequantMatMul")
def vjp_dequant_matmul(ctx, dy):
    """y = x·W with W [K, N] decoded from constants: dx = dy·Wᵀ. W is rebuilt in the
    gradient graph: a GGUF blob by DequantMoEWeights (one expert), the 4-operand forms by
    the op itself on the identity (x = I_K gives W exactly)."""
    g = ctx.g
    for i, what in ((2, "scale"), (3, "zero point (zp)")):
        if i < len(ctx.x):
            _refuse(ctx, i, f"DequantMatMul's {what}")
    k = ctx.in_shapes[0].dims[-1]
    n = ctx.node.shape.dims[-1]
    if len(ctx.x) == 2:
        w = g.op("DequantMoEWeights", (ctx.x[1],), ctx.attrs,
                 shape=Shape((1, k, n), DType.F32))
        w = reshape(g, w, (k, n))
    else:
        eye = constant(g, np.eye(k, dtype=np.float32), DType.F32, (k, k))
        w = g.op("DequantMatMul", (eye,) + tuple(ctx.x[1:]), ctx.attrs,
                 shape=Shape((k, n), DType.F32))
    return [_mm(g, dy, transpose(g, w, (1, 0)))] + [None] * (len(ctx.x) - 1)


@vjp_rule("DequantGroupedMatMul")
def vjp_dequant_grouped_matmul(ctx, dy):
    """dx[i] = dy[i]·W[e_i]ᵀ with the bank decoded by DequantMoEWeights (as RLX's VJP)."""
    g, (x, packed, ids) = ctx.g, ctx.x
    m, k = static_dims(g, x, "DequantGroupedMatMul's gradient")
    n = ctx.node.shape.dims[-1]
    from ..ops.quant_matmul import _gguf_bytes

    _, slab = _gguf_bytes(ctx.attrs.scheme, k, n, "C3")
    e = static_dims(g, packed, "DequantGroupedMatMul's gradient")
    experts = int(np.prod(e)) // slab
    w = g.op("DequantMoEWeights", (packed,), ctx.attrs,
             shape=Shape((experts, k, n), DType.F32))
    return [_grouped_dx(g, dy, w, ids), None, None]
