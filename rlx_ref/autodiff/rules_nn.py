"""VJP rules of the normalization, attention, rope, convolution, pooling and loss kinds,
emitting RLX's backward kinds with RLX's operand orders.

Operands the backward kinds do not differentiate (Rope's cos/sin tables, an Attention
bias, BatchNorm's running statistics) get their cotangent from primitives where it is
cheap, or an AutodiffError when a gradient is asked of them; never a silent zero.
"""
from __future__ import annotations

import numpy as np

from ._build import binary, constant, expand, reduce_sum, reshape, scalar, transpose, \
    unbroadcast, unary
from .vjp import vjp_rule


def _refuse(ctx, i: int, what: str):
    if ctx.needs(i):
        raise ctx.fail(f"no gradient with respect to {what} (operand {i}); RLX's backward "
                       "kind treats it as a constant")


@vjp_rule("LayerNorm")
def vjp_layer_norm(ctx, dy):
    g, (x, gamma), a = ctx.g, ctx.x[:2], ctx.attrs
    dx = g.op("LayerNormBackwardInput", (x, gamma, dy), axis=a.axis, eps=a.eps)
    dgamma = g.op("LayerNormBackwardGamma", (x, dy), axis=a.axis, eps=a.eps,
                  shape=ctx.in_shapes[1]) if ctx.needs(1) else None
    return [dx, dgamma, unbroadcast(g, dy, ctx.in_shapes[2]) if ctx.needs(2) else None]


@vjp_rule("RmsNorm")
def vjp_rms_norm(ctx, dy):
    g, ops, a = ctx.g, (*ctx.x, dy), ctx.attrs
    return [g.op("RmsNormBackwardInput", ops, axis=a.axis, eps=a.eps),
            g.op("RmsNormBackwardGamma", ops, axis=a.axis, eps=a.eps) if ctx.needs(1) else None,
            g.op("RmsNormBackwardBeta", ops, axis=a.axis, eps=a.eps) if ctx.needs(2) else None]


@vjp_rule("GroupNorm")
def vjp_group_norm(ctx, dy):
    g, (x, gamma, beta), a = ctx.g, ctx.x, ctx.attrs
    kw = dict(num_groups=a.num_groups, eps=a.eps)
    return [g.op("GroupNormBackwardInput", (x, gamma, beta, dy), **kw),
            g.op("GroupNormBackwardGamma", (x, dy), shape=ctx.in_shapes[1], **kw)
            if ctx.needs(1) else None,
            g.op("GroupNormBackwardBeta", (x, dy), shape=ctx.in_shapes[2], **kw)
            if ctx.needs(2) else None]


@vjp_rule("LayerNorm2d")
def vjp_layer_norm2d(ctx, dy):
    """LayerNorm over C of NCHW: the LayerNorm kinds on the NHWC view."""
    g, (x, gamma), eps = ctx.g, ctx.x[:2], ctx.attrs.eps
    to_last, back = (0, 2, 3, 1), (0, 3, 1, 2)
    xt, dyt = transpose(g, x, to_last), transpose(g, dy, to_last)
    c = ctx.in_shapes[0].dims[1]
    gam = reshape(g, gamma, (c,))
    dx = transpose(g, g.op("LayerNormBackwardInput", (xt, gam, dyt), axis=-1, eps=eps), back)
    dgamma = None
    if ctx.needs(1):
        dg = g.op("LayerNormBackwardGamma", (xt, dyt), axis=-1, eps=eps,
                  shape=ctx.in_shapes[1].with_dims((c,)))
        dgamma = reshape(g, dg, ctx.in_shapes[1].dims)
    dbeta = None
    if ctx.needs(2):
        dbeta = reshape(g, reduce_sum(g, dy, (0, 2, 3), keep_dim=False), ctx.in_shapes[2].dims)
    return [dx, dgamma, dbeta]


@vjp_rule("BatchNormInference")
def vjp_batch_norm(ctx, dy):
    """y = (x - mean)·rsqrt(var + eps)·gamma + beta over the last axis; the running
    statistics' gradients from primitives."""
    g, (x, gamma, _, mean, var), eps = ctx.g, ctx.x, ctx.attrs.eps
    dx = g.op("BatchNormInferenceBackwardInput", (x, gamma, mean, var, dy), eps=eps)
    out = [dx, None, None, None, None]
    if ctx.needs(1):
        out[1] = g.op("BatchNormInferenceBackwardGamma", (x, mean, var, dy), eps=eps,
                      shape=ctx.in_shapes[1])
    if ctx.needs(2):
        out[2] = g.op("BatchNormInferenceBackwardBeta", (dy,), shape=ctx.in_shapes[2])
    if ctx.needs(3) or ctx.needs(4):
        dt = ctx.in_shapes[0].dtype
        rstd = unary(g, "Rsqrt", binary(g, "Add", var, scalar(g, eps, dt)))
        dn = binary(g, "Mul", dy, gamma)                     # d(normalized)
        if ctx.needs(3):
            out[3] = unbroadcast(g, unary(g, "Neg", binary(g, "Mul", dn, rstd)),
                                 ctx.in_shapes[3])
        if ctx.needs(4):    # d/dvar (x-m)(v+e)^-1/2 = -1/2 (x-m)(v+e)^-3/2
            cube = binary(g, "Mul", rstd, binary(g, "Mul", rstd, rstd))
            t = binary(g, "Mul", binary(g, "Mul", dn, binary(g, "Sub", x, mean)), cube)
            out[4] = unbroadcast(g, binary(g, "Mul", t, scalar(g, -0.5, dt)), ctx.in_shapes[4])
    return out


@vjp_rule("Rope")
def vjp_rope(ctx, dy):
    _refuse(ctx, 1, "Rope's cos table")
    _refuse(ctx, 2, "Rope's sin table")
    a = ctx.attrs
    return [ctx.g.op("RopeBackward", (dy, ctx.x[1], ctx.x[2]), head_dim=a.head_dim,
                     n_rot=a.n_rot, style=a.style), None, None]


@vjp_rule("Attention")
def vjp_attention(ctx, dy):
    """``AttentionBackward{wrt}`` per operand asked for (RLX's payload: no score_scale,
    softcap or distinct v_head_dim; those attentions are refused by name)."""
    a = ctx.attrs
    if a.score_scale is not None or a.attn_logit_softcap is not None or \
            (a.v_head_dim is not None and a.v_head_dim != a.head_dim):
        raise ctx.fail("Attention with score_scale, attn_logit_softcap or a v_head_dim other "
                       "than head_dim has no VJP rule (AttentionBackward's payload, as RLX's, "
                       "has none of them)")
    q, k, v, *mask = ctx.x
    for i in range(3, len(ctx.x)):
        _refuse(ctx, i, f"Attention's {a.mask_kind} mask")
    out = []
    for i, wrt in enumerate(("Query", "Key", "Value")):
        out.append(ctx.g.op("AttentionBackward", (q, k, v, dy, *mask), num_heads=a.num_heads,
                            head_dim=a.head_dim, mask_kind=a.mask_kind, wrt=wrt)
                   if ctx.needs(i) else None)
    return out + [None] * len(mask)


def _conv2d_only(ctx, what: str):
    if len(ctx.attrs.kernel_size) != 2:
        raise ctx.fail(f"{what} with kernel_size {list(ctx.attrs.kernel_size)} has no VJP rule "
                       "(RLX's backward kinds are 2-D)")


@vjp_rule("Conv")
def vjp_conv(ctx, dy):
    _conv2d_only(ctx, "Conv")
    g, (x, w), a = ctx.g, ctx.x, ctx.attrs
    kw = dict(kernel_size=a.kernel_size, stride=a.stride, padding=a.padding,
              dilation=a.dilation, groups=a.groups)
    dx = g.op("Conv2dBackwardInput", (dy, w), shape=ctx.in_shapes[0], **kw) \
        if ctx.needs(0) else None
    dw = g.op("Conv2dBackwardWeight", (x, dy), shape=ctx.in_shapes[1], **kw) \
        if ctx.needs(1) else None
    return [dx, dw]


@vjp_rule("Pool")
def vjp_pool(ctx, dy):
    """Max: ``MaxPool2dBackward`` (first maximum wins); Min: the same on -x; Sum and Mean
    (padding counts as zeros): a depthwise transposed convolution with a ones kernel."""
    _conv2d_only(ctx, "Pool")
    g, (x,), a = ctx.g, ctx.x, ctx.attrs
    kh, kw_ = a.kernel_size
    stride = tuple(a.stride) + (1,) * (2 - len(a.stride))
    padding = tuple(a.padding) + (0,) * (2 - len(a.padding))
    if a.kind in ("Max", "Min"):
        sign = (lambda v: v) if a.kind == "Max" else (lambda v: unary(g, "Neg", v))
        return [g.op("MaxPool2dBackward", (sign(x), dy), kernel_size=a.kernel_size,
                     stride=stride, padding=padding)]
    if a.kind not in ("Sum", "Mean"):
        raise ctx.fail(f"Pool {a.kind} has no VJP rule")
    c = ctx.in_shapes[0].dims[1]
    dt = ctx.in_shapes[0].dtype
    ones = constant(g, np.ones((c, 1, kh, kw_)), dt, (c, 1, kh, kw_))
    d = dy if a.kind == "Sum" else binary(g, "Div", dy, scalar(g, kh * kw_, dt))
    return [g.op("Conv2dBackwardInput", (d, ones), kernel_size=(kh, kw_), stride=stride,
                 padding=padding, dilation=(1, 1), groups=c, shape=ctx.in_shapes[0])]


@vjp_rule("SoftmaxCrossEntropyWithLogits")
def vjp_softmax_xent_labels(ctx, dy):
    logits, labels = ctx.x
    return [ctx.g.op("SoftmaxCrossEntropyBackward", (logits, labels, dy)), None]


@vjp_rule("SoftmaxCrossEntropy")
def vjp_softmax_xent_dense(ctx, dy):
    """loss_n = logsumexp(x_n) - Σ t_n·x_n: dx = dy·(softmax(x) - t), dt = -dy·x."""
    g, (logits, targets) = ctx.g, ctx.x
    dims = ctx.in_shapes[0].dims
    col = expand(g, reshape(g, dy, (dims[0], 1)), dims)
    p = g.op("Softmax", (logits,), axis=-1)
    dx = binary(g, "Mul", col, binary(g, "Sub", p, targets))
    dt = unary(g, "Neg", binary(g, "Mul", col, logits)) if ctx.needs(1) else None
    return [dx, dt]



@vjp_rule("ConvTranspose2d")
def vjp_conv_transpose2d(ctx, dy):
    """The transpose of a Conv is its adjoint: dx = Conv(dy, w) with the same geometry
    (w's layout [C_in, C_out/groups, kh, kw] reads as a Conv weight), and dw is that Conv's
    weight gradient with input dy and output cotangent x."""
    g, (x, w), a = ctx.g, ctx.x, ctx.attrs
    kw = dict(kernel_size=a.kernel_size, stride=a.stride, padding=a.padding,
              dilation=a.dilation, groups=a.groups)
    dx = g.op("Conv", (dy, w), shape=ctx.in_shapes[0], **kw) if ctx.needs(0) else None
    dw = g.op("Conv2dBackwardWeight", (dy, x), shape=ctx.in_shapes[1], **kw) \
        if ctx.needs(1) else None
    return [dx, dw]
