"""Direct JVP rules: ``rule(ctx, tangents) -> id | None`` (``tangents[i]`` is operand i's
tangent id or None for a symbolic zero). Linear kinds apply themselves to the tangents;
the rest use the derivative in closed form. Kinds not listed here get the rule derived
from their VJP (``jvp.derived``), which is exact but builds more nodes.
"""
from __future__ import annotations

from ._build import binary, cast, expand, unary, zeros
from .jvp import derived, jvp_rule

# kinds that are linear in their differentiable operands and keep every payload: the
# tangent is the same op applied to the tangents (index operands reused as they are)
LINEAR_UNARY = ("Reshape", "Transpose", "Expand", "Reverse", "Narrow", "Slice", "Tile",
                "ResizeNearest2x", "Cumsum", "Trilu")
INDEXED = {"Gather": (0,), "GatherElements": (0,), "GatherNd": (0,)}


def _full(ctx, t):
    """A tangent broadcast to the node's output shape."""
    return expand(ctx.g, t, ctx.out_shape.dims)


def _same_op(ctx, operands):
    return ctx.g.add_node(ctx.node.op, operands, ctx.out_shape)


@jvp_rule(*LINEAR_UNARY)
def jvp_linear_unary(ctx, ts):
    (t,) = ts
    return _same_op(ctx, [t])


@jvp_rule(*INDEXED)
def jvp_gather(ctx, ts):
    if ts[0] is None:
        return None
    return _same_op(ctx, [ts[0], *ctx.x[1:]])


@jvp_rule("Reduce")
def jvp_reduce(ctx, ts):
    if ctx.attrs.op in ("Sum", "Mean"):
        return _same_op(ctx, [ts[0]])
    return derived(ctx, ts)


@jvp_rule("Concat")
def jvp_concat(ctx, ts):
    parts = [t if t is not None else zeros(ctx.g, s) for t, s in zip(ts, ctx.in_shapes)]
    return _same_op(ctx, parts)


@jvp_rule("Cast")
def jvp_cast(ctx, ts):
    return cast(ctx.g, ts[0], ctx.out_shape.dtype)


@jvp_rule("Activation")
def jvp_activation(ctx, ts):
    """f'(x)·t: the backward kinds are elementwise in their second operand."""
    (x,), (t,) = ctx.x, ts
    if ctx.attrs.op == "Relu":
        return ctx.g.op("ReluBackward", (x, t))
    return ctx.g.op("ActivationBackward", (x, t), kind=ctx.attrs.op)


@jvp_rule("Binary")
def jvp_binary(ctx, ts):
    g, (a, b), op = ctx.g, ctx.x, ctx.attrs.op
    ta, tb = ts
    if op in ("Add", "Sub"):
        if tb is None:
            return _full(ctx, ta)
        tb = tb if op == "Add" else unary(g, "Neg", tb)
        return _full(ctx, tb if ta is None else binary(g, "Add", ta, tb))
    if op == "Mul":
        parts = [binary(g, "Mul", ta, b)] if ta is not None else []
        parts += [binary(g, "Mul", a, tb)] if tb is not None else []
        return _full(ctx, parts[0] if len(parts) == 1 else binary(g, "Add", *parts))
    if op == "Div":                 # (ta - y·tb) / b
        num = ta
        if tb is not None:
            ytb = binary(g, "Mul", ctx.y, tb)
            num = unary(g, "Neg", ytb) if num is None else binary(g, "Sub", num, ytb)
        return _full(ctx, binary(g, "Div", num, b))
    return derived(ctx, ts)


@jvp_rule("MatMul")
def jvp_matmul(ctx, ts):
    g, (a, b), (ta, tb) = ctx.g, ctx.x, ts
    parts = [g.op("MatMul", (ta, b))] if ta is not None else []
    parts += [g.op("MatMul", (a, tb))] if tb is not None else []
    return _full(ctx, parts[0] if len(parts) == 1 else binary(g, "Add", *parts))


@jvp_rule("Where")
def jvp_where(ctx, ts):
    g, cond = ctx.g, ctx.x[0]
    t_true = ts[1] if ts[1] is not None else zeros(g, ctx.in_shapes[1])
    t_false = ts[2] if ts[2] is not None else zeros(g, ctx.in_shapes[2])
    return _full(ctx, g.op("Where", (cond, t_true, t_false)))


@jvp_rule("Softmax")
def jvp_softmax(ctx, ts):
    """y·(t - Σ y·t) along the axis."""
    from ..ir.shape import normalize_axis

    g, y, (t,) = ctx.g, ctx.y, ts
    axis = normalize_axis(ctx.attrs.axis, ctx.out_shape.rank)
    dot = g.op("Reduce", (binary(g, "Mul", y, t),), op="Sum", axes=(axis,), keep_dim=True)
    return binary(g, "Mul", y, binary(g, "Sub", t, expand(g, dot, ctx.out_shape.dims)))


@jvp_rule("CustomFn")
def jvp_custom_fn(ctx, ts):
    """The ``jvp_body`` inlined: primal Inputs bind to the operands, ``tangent_i`` to the
    tangents (zeros where none), ``primal_output`` to the node's value."""
    from .prepare import inline

    body = ctx.attrs.jvp_body
    if body is None:
        raise ctx.fail("a CustomFn without jvp_body should have been inlined by the "
                       "pre-pass (prepare_for_ad)")
    named = {"primal_output": ctx.y}
    for i, (t, s) in enumerate(zip(ts, ctx.in_shapes)):
        named[f"tangent_{i}"] = t if t is not None else zeros(ctx.g, s)
    return inline(ctx.g, body, ctx.x, named)[0]
