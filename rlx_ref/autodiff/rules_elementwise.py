"""VJP rules of the elementwise kinds: Binary, Activation, Cast, Where, Fma, Clamp.

Broadcast operands get their cotangent summed back to their own shape (``unbroadcast``).
Subgradients at kinks follow RLX: Max/Min send the whole cotangent to the first operand
where the operands tie; Clamp passes it where min <= x <= max (bounds included); Relu's
is 0 at x = 0 (``ReluBackward``).
"""
from __future__ import annotations

from ..ir.dtype import DType
from ._build import binary, cast, scalar, unary, unbroadcast
from .vjp import vjp_rule


def _to_operands(ctx, grads):
    return [None if gr is None else unbroadcast(ctx.g, gr, s)
            for gr, s in zip(grads, ctx.in_shapes)]


def _where(ctx, cond, a, b):
    return ctx.g.op("Where", (cond, a, b))


def _zero(ctx):
    return scalar(ctx.g, 0, ctx.out_shape.dtype)


def _binary_grads(ctx, dy):
    g, (a, b), op = ctx.g, ctx.x, ctx.attrs.op
    if op == "Add":
        return dy, dy
    if op == "Sub":
        return dy, unary(g, "Neg", dy)
    if op == "Mul":
        return binary(g, "Mul", dy, b), binary(g, "Mul", dy, a)
    if op == "Div":                 # d/db (a/b) = -(a/b)/b, so db = -(dy/b)·y
        da = binary(g, "Div", dy, b)
        return da, unary(g, "Neg", binary(g, "Mul", da, ctx.y))
    if op in ("Max", "Min"):        # ties: all to the first operand (RLX)
        first = g.op("Compare", (a, ctx.y), op="Eq")
        return _where(ctx, first, dy, _zero(ctx)), _where(ctx, first, _zero(ctx), dy)
    if op == "Pow":
        return _pow_grads(ctx, dy)
    if op == "Mod":                 # fmod: a - trunc(a/b)·b
        q = _trunc(g, binary(g, "Div", a, b))
        return dy, unary(g, "Neg", binary(g, "Mul", dy, q))
    if op == "Atan2":               # atan2(a, b): d/da = b/(a²+b²), d/db = -a/(a²+b²)
        r2 = binary(g, "Add", binary(g, "Mul", a, a), binary(g, "Mul", b, b))
        return (binary(g, "Mul", dy, binary(g, "Div", b, r2)),
                unary(g, "Neg", binary(g, "Mul", dy, binary(g, "Div", a, r2))))
    return None, None           # bit operations: piecewise constant, no gradient


def _trunc(g, v):
    """trunc(v) = sign(v)·floor(|v|)."""
    return binary(g, "Mul", unary(g, "Sign", v), unary(g, "Floor", unary(g, "Abs", v)))


def _pow_grads(ctx, dy):
    """d/da a^b = b·a^(b-1); d/db a^b = a^b·ln(a), taken as 0 where a = 0 (as JAX)."""
    g, (a, b) = ctx.g, ctx.x
    dt = ctx.out_shape.dtype
    one = scalar(g, 1, dt)
    da = binary(g, "Mul", dy, binary(g, "Mul", b, binary(g, "Pow", a, binary(g, "Sub", b, one))))
    a_is_0 = g.op("Compare", (a, scalar(g, 0, dt)), op="Eq")
    safe_a = _where(ctx, a_is_0, one, a)
    db = binary(g, "Mul", dy, binary(g, "Mul", ctx.y, unary(g, "Log", safe_a)))
    return da, db


@vjp_rule("Binary")
def vjp_binary(ctx, dy):
    return _to_operands(ctx, _binary_grads(ctx, dy))


@vjp_rule("Activation")
def vjp_activation(ctx, dy):
    """``ReluBackward(x, dy)`` for Relu, ``ActivationBackward{kind}(x, dy)`` otherwise."""
    (x,) = ctx.x
    if ctx.attrs.op == "Relu":
        return [ctx.g.op("ReluBackward", (x, dy))]
    return [ctx.g.op("ActivationBackward", (x, dy), kind=ctx.attrs.op)]


@vjp_rule("Cast")
def vjp_cast(ctx, dy):
    """Straight-through: the cotangent, cast back to the operand's dtype."""
    src = ctx.in_shapes[0].dtype
    return [cast(ctx.g, dy, src) if src.is_float or src.is_complex else None]


@vjp_rule("Where")
def vjp_where(ctx, dy):
    cond = ctx.x[0]
    z = _zero(ctx)
    return _to_operands(ctx, [None, _where(ctx, cond, dy, z), _where(ctx, cond, z, dy)])


@vjp_rule("Fma")
def vjp_fma(ctx, dy):
    g, (a, b) = ctx.g, ctx.x[:2]
    return _to_operands(ctx, [binary(g, "Mul", dy, b), binary(g, "Mul", dy, a), dy])


@vjp_rule("Clamp")
def vjp_clamp(ctx, dy):
    """The cotangent where min <= x <= max (a NaN bound is no bound), else 0."""
    g, (x,) = ctx.g, ctx.x
    dt, keep = ctx.in_shapes[0].dtype, None
    for bound, cmp in ((ctx.attrs.min, "Ge"), (ctx.attrs.max, "Le")):
        if bound is None or bound != bound:
            continue
        inside = g.op("Compare", (x, scalar(g, bound, dt)), op=cmp)
        keep = inside if keep is None else g.op(
            "Where", (keep, inside, scalar(g, False, DType.BOOL)))
    return [dy if keep is None else _where(ctx, keep, dy, _zero(ctx))]
