"""Elementwise ONNX ops: Activation, Binary, Compare, Where and Cast, or short decompositions."""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable, dtype_of
from . import converts

# ONNX op_type → RLX Activation with the same meaning.
UNARY = {"Abs": "Abs", "Neg": "Neg", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt", "Sin": "Sin",
         "Cos": "Cos", "Tan": "Tan", "Atan": "Atan", "Tanh": "Tanh", "Sigmoid": "Sigmoid",
         "Relu": "Relu", "Floor": "Floor", "Ceil": "Ceil", "Round": "Round", "Sign": "Sign",
         "Softplus": "Softplus", "Erf": "Erf", "Reciprocal": "Recip", "Softsign": "Softsign",
         "Mish": "Mish", "HardSwish": "HardSwish"}
BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "BitwiseAnd": "BitAnd",
          "BitwiseOr": "BitOr", "BitwiseXor": "BitXor", "And": "BitAnd", "Or": "BitOr",
          "Xor": "BitXor"}
COMPARE = {"Equal": "Eq", "Less": "Lt", "LessOrEqual": "Le", "Greater": "Gt",
           "GreaterOrEqual": "Ge"}


@converts(*UNARY)
def unary(ctx, node, ins, attrs):
    return [ctx.act(UNARY[node.op_type], ctx.id(ins[0]))]


@converts(*BINARY)
def binary(ctx, node, ins, attrs):
    return [ctx.bin(BINARY[node.op_type], ctx.id(ins[0]), ctx.id(ins[1]))]


@converts(*COMPARE)
def compare(ctx, node, ins, attrs):
    return [ctx.cmp(COMPARE[node.op_type], ctx.id(ins[0]), ctx.id(ins[1]))]


@converts("Pow")
def pow_(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    return [ctx.bin("Pow", x, ctx.cast(ctx.id(ins[1]), ctx.dt(x)))]


@converts("Mod")
def mod(ctx, node, ins, attrs):
    a, b = ctx.id(ins[0]), ctx.id(ins[1])
    r = ctx.bin("Mod", a, b)
    if attrs.get("fmod", 0):
        return [r]
    # Python's modulo (numpy's mod): the remainder takes the divisor's sign
    zero = ctx.like(0, r)
    fix = ctx.bin("BitAnd", ctx.cmp("Ne", r, zero),
                  ctx.cmp("Ne", ctx.cmp("Lt", r, zero), ctx.cmp("Lt", b, zero)))
    return [ctx.where(fix, ctx.bin("Add", r, b), r)]


@converts("BitShift")
def bitshift(ctx, node, ins, attrs):
    d = attrs.only("direction", ("LEFT", "RIGHT"), None)
    return [ctx.bin("Shl" if d == "LEFT" else "Shr", ctx.id(ins[0]), ctx.id(ins[1]))]


@converts("Not")
def not_(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    return [ctx.bin("BitXor", x, ctx.like(True, x))]


@converts("BitwiseNot")
def bitwise_not(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    dt = ctx.dt(x)
    ones = np.iinfo(dt.np).max if dt in (DType.U8, DType.U32) else -1
    return [ctx.bin("BitXor", x, ctx.like(ones, x))]


@converts("Max", "Min", "Sum", "Mean")
def variadic(ctx, node, ins, attrs):
    kind = {"Max": "Max", "Min": "Min", "Sum": "Add", "Mean": "Add"}[node.op_type]
    acc = ctx.id(ins[0])
    for n in ins[1:]:
        acc = ctx.bin(kind, acc, ctx.id(n))
    if node.op_type == "Mean":
        acc = ctx.bin("Div", acc, ctx.like(len(ins), acc))
    if node.op_type in ("Max", "Min") and len(ins) == 1:
        return [ctx.op("StopGradient", (acc,))]  # a fresh node: outputs are distinct values
    return [acc]


@converts("Where")
def where(ctx, node, ins, attrs):
    return [ctx.where(ctx.id(ins[0]), ctx.id(ins[1]), ctx.id(ins[2]))]


@converts("Cast")
def cast(ctx, node, ins, attrs):
    to = dtype_of(attrs.get("to"), "Cast's target")
    sat = attrs.get("saturate", 1)
    if not sat:
        raise Unmappable("saturate=0 applies only to float8 targets, which RLX lacks",
                         "saturate")
    attrs.only("round_mode", ("up",), "up")
    return [ctx.cast(ctx.id(ins[0]), to)]


@converts("CastLike")
def cast_like(ctx, node, ins, attrs):
    attrs.only("saturate", (1,), 1)
    attrs.only("round_mode", ("up",), "up")
    v = ctx.value(ins[0])
    if v is not None:       # a constant cast to a runtime tensor's dtype stays a constant
        return [v.astype(ctx.dtype(ins[1]).np)]
    return [ctx.cast(ctx.id(ins[0]), ctx.dtype(ins[1]))]


@converts("Identity")
def identity(ctx, node, ins, attrs):
    v = ctx.value(ins[0])
    return [v if v is not None else ctx.op("StopGradient", (ctx.id(ins[0]),))]


@converts("Dropout")
def dropout(ctx, node, ins, attrs):
    attrs.get("seed")
    if len(ins) > 2 and ins[2] and bool(ctx.need(ins[2], "training_mode")):
        ratio = ctx.need(ins[1], "ratio") if len(ins) > 1 and ins[1] else 0.5
        if float(ratio) != 0.0:     # ratio 0 drops nothing: the identity, an all-true mask
            raise Unmappable("training_mode=True with a ratio above 0 draws a random mask; "
                             "only inference and ratio 0 map")
    x = ctx.id(ins[0])
    out = ctx.op("StopGradient", (x,))
    mask = np.ones(ctx.dims(x), bool)
    return [out, mask]


def clip(ctx, x, lo, hi):
    """min(max(x, lo), hi) with NaN kept (ONNX Clip; RLX's Clamp turns NaN into lo)."""
    if lo is not None:
        x = ctx.where(ctx.cmp("Lt", x, lo), lo, x)
    if hi is not None:
        x = ctx.where(ctx.cmp("Gt", x, hi), hi, x)
    return x


@converts("Clip")
def clip_(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    lo = ctx.id(ins[1]) if len(ins) > 1 and ins[1] else None
    hi = ctx.id(ins[2]) if len(ins) > 2 and ins[2] else None
    y = clip(ctx, x, lo, hi)
    return [y if y != x else ctx.op("StopGradient", (x,))]


def _neg_branch(ctx, x, neg):
    """where(x > 0, x, neg): the shape of the ELU family."""
    return ctx.where(ctx.cmp("Gt", x, ctx.like(0, x)), x, neg)


def _expm1_scaled(ctx, x, alpha):
    return ctx.bin("Mul", ctx.like(alpha, x),
                   ctx.bin("Sub", ctx.act("Exp", x), ctx.like(1, x)))


@converts("Elu")
def elu(ctx, node, ins, attrs):
    x, alpha = ctx.id(ins[0]), attrs.get("alpha", 1.0)
    if alpha == 1.0:
        return [ctx.act("Elu", x)]
    return [_neg_branch(ctx, x, _expm1_scaled(ctx, x, alpha))]


@converts("Selu")
def selu(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    alpha = attrs.get("alpha", 1.67326319217681884765625)
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    y = _neg_branch(ctx, x, _expm1_scaled(ctx, x, alpha))
    return [ctx.bin("Mul", ctx.like(gamma, x), y)]


@converts("Celu")
def celu(ctx, node, ins, attrs):
    x, alpha = ctx.id(ins[0]), attrs.get("alpha", 1.0)
    inner = ctx.bin("Div", x, ctx.like(alpha, x))
    return [_neg_branch(ctx, x, _expm1_scaled(ctx, inner, alpha))]


@converts("LeakyRelu")
def leaky_relu(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    neg = ctx.bin("Mul", ctx.like(attrs.get("alpha", 0.01), x), x)
    return [ctx.where(ctx.cmp("Lt", x, ctx.like(0, x)), neg, x)]


@converts("PRelu")
def prelu(ctx, node, ins, attrs):
    x, s = ctx.id(ins[0]), ctx.id(ins[1])
    return [ctx.where(ctx.cmp("Lt", x, ctx.like(0, x)), ctx.bin("Mul", s, x), x)]


@converts("ThresholdedRelu")
def thresholded_relu(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    keep = ctx.cmp("Gt", x, ctx.like(attrs.get("alpha", 1.0), x))
    return [ctx.where(keep, x, ctx.like(0, x))]


@converts("HardSigmoid")
def hard_sigmoid(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    lin = ctx.bin("Add", ctx.bin("Mul", ctx.like(attrs.get("alpha", 0.2), x), x),
                  ctx.like(attrs.get("beta", 0.5), x))
    return [clip(ctx, lin, ctx.like(0, x), ctx.like(1, x))]


@converts("Gelu")
def gelu(ctx, node, ins, attrs):
    how = attrs.only("approximate", ("none", "tanh"), "none")
    return [ctx.act("Gelu" if how == "none" else "GeluApprox", ctx.id(ins[0]))]


@converts("Swish")
def swish(ctx, node, ins, attrs):
    x, alpha = ctx.id(ins[0]), attrs.get("alpha", 1.0)
    if alpha == 1.0:
        return [ctx.act("Silu", x)]
    return [ctx.bin("Mul", x, ctx.act("Sigmoid", ctx.bin("Mul", ctx.like(alpha, x), x)))]


@converts("Shrink")
def shrink(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    b, lam = ctx.like(attrs.get("bias", 0.0), x), ctx.like(attrs.get("lambd", 0.5), x)
    lo = ctx.cmp("Lt", x, ctx.act("Neg", lam))
    hi = ctx.cmp("Gt", x, lam)
    return [ctx.where(lo, ctx.bin("Add", x, b),
                      ctx.where(hi, ctx.bin("Sub", x, b), ctx.like(0, x)))]


@converts("Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh")
def hyperbolic(ctx, node, ins, attrs):
    x, t = ctx.id(ins[0]), node.op_type
    one, half = ctx.like(1, x), ctx.like(0.5, x)
    if t in ("Sinh", "Cosh"):
        e, ne = ctx.act("Exp", x), ctx.act("Exp", ctx.act("Neg", x))
        return [ctx.bin("Mul", half, ctx.bin("Sub" if t == "Sinh" else "Add", e, ne))]
    sq = ctx.bin("Mul", x, x)
    if t in ("Asin", "Acos"):
        root = ctx.act("Sqrt", ctx.bin("Sub", one, sq))
        return [ctx.bin("Atan2", x, root) if t == "Asin" else ctx.bin("Atan2", root, x)]
    if t == "Atanh":
        q = ctx.bin("Div", ctx.bin("Add", one, x), ctx.bin("Sub", one, x))
        return [ctx.bin("Mul", half, ctx.act("Log", q))]
    root = ctx.act("Sqrt", ctx.bin("Add" if t == "Asinh" else "Sub", sq, one))
    return [ctx.act("Log", ctx.bin("Add", x, root))]


@converts("IsNaN")
def isnan(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    return [ctx.cmp("Ne", x, x)]


@converts("IsInf")
def isinf(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    hits = []
    if pos:
        hits.append(ctx.cmp("Eq", x, ctx.like(math.inf, x)))
    if neg:
        hits.append(ctx.cmp("Eq", x, ctx.like(-math.inf, x)))
    if not hits:
        return [np.zeros(ctx.dims(x), bool)]
    return [hits[0] if len(hits) == 1 else ctx.bin("BitOr", *hits)]
