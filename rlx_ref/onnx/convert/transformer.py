"""Transformer building blocks ONNX names as ops: RotaryEmbedding and SwiGLU, decomposed."""
from __future__ import annotations

from ..context import Unmappable
from . import converts
from .movement import _indices


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _half(ctx, x, interleaved, rot):
    """(x1, x2): the even/odd lanes (interleaved) or the two halves of the last axis."""
    ax = len(ctx.dims(x)) - 1
    if interleaved:
        return [ctx.op("Slice", (x,), axis=ax, start=s, len=rot // 2, step=2) for s in (0, 1)]
    return [ctx.op("Slice", (x,), axis=ax, start=s, len=rot // 2, step=1)
            for s in (0, rot // 2)]


@converts("RotaryEmbedding")
def rotary_embedding(ctx, node, ins, attrs):
    """ONNX's reference step for step on [batch, seq, heads, head] (4-D input is
    [batch, heads, seq, head] and is transposed there and back)."""
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    interleaved = attrs.get("interleaved", 0)
    heads = attrs.get("num_heads", 0)
    rot = attrs.get("rotary_embedding_dim", 0)
    if len(dims) == 4:
        x = ctx.op("Transpose", (x,), perm=(0, 2, 1, 3))
    elif len(dims) == 3:
        if not heads or dims[2] % heads:
            raise Unmappable(f"num_heads={heads} does not divide the hidden size {dims[2]} "
                             "of a 3-D input", "num_heads")
        x = ctx.reshape(x, (dims[0], dims[1], heads, dims[2] // heads))
    else:
        raise Unmappable(f"a rank-{len(dims)} input (ONNX defines rank 3 and 4)")
    b, s, h, d = ctx.dims(x)
    rot = rot or d
    if rot % 2 or rot > d:
        raise Unmappable(f"rotary_embedding_dim={rot} for head size {d}",
                         "rotary_embedding_dim")
    cos, sin = ctx.id(ins[1]), ctx.id(ins[2])
    if _opt(ins, 3):
        rows = ctx.dims(cos)[0]
        cos, sin = (ctx.op("Gather", (t, _indices(ctx, ins[3], rows)), axis=0)
                    for t in (cos, sin))
    if ctx.dims(cos) != (b, s, rot // 2) or ctx.dims(sin) != (b, s, rot // 2):
        raise Unmappable(f"cos/sin caches of shape {list(ctx.dims(cos))} for "
                         f"[{b}, {s}, {rot // 2}]")
    cos, sin = (ctx.reshape(t, (b, s, 1, rot // 2)) for t in (cos, sin))
    xr = x if rot == d else ctx.op("Slice", (x,), axis=3, start=0, len=rot, step=1)
    x1, x2 = _half(ctx, xr, interleaved, rot)
    real = ctx.bin("Sub", ctx.bin("Mul", cos, x1), ctx.bin("Mul", sin, x2))
    imag = ctx.bin("Add", ctx.bin("Mul", sin, x1), ctx.bin("Mul", cos, x2))
    if interleaved:
        pair = [ctx.reshape(t, (b, s, h, rot // 2, 1)) for t in (real, imag)]
        y = ctx.reshape(ctx.op("Concat", pair, axis=4), (b, s, h, rot))
    else:
        y = ctx.op("Concat", (real, imag), axis=3)
    if rot < d:
        rest = ctx.op("Slice", (x,), axis=3, start=rot, len=d - rot, step=1)
        y = ctx.op("Concat", (y, rest), axis=3)
    if len(dims) == 3:
        return [ctx.reshape(y, dims)]
    return [ctx.op("Transpose", (y,), perm=(0, 2, 1, 3))]


@converts("SwiGLU")
def swiglu(ctx, node, ins, attrs):
    """a · sigmoid(alpha · a) · b, the gate rounded to a's dtype as ONNX's reference does."""
    a, b = ctx.id(ins[0]), ctx.id(ins[1])
    if ctx.dims(a) != ctx.dims(b) or ctx.dt(a) is not ctx.dt(b):
        raise Unmappable("SwiGLU's operands differ in shape or dtype (ONNX does not "
                         "broadcast them)")
    alpha = float(attrs.get("alpha", 1.0))
    z = a if alpha == 1.0 else ctx.bin("Mul", a, ctx.like(alpha, a))
    return [ctx.bin("Mul", ctx.bin("Mul", a, ctx.act("Sigmoid", z)), b)]
