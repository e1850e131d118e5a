"""aten elementwise, movement and creation ops onto Activation, Binary, Reshape, Narrow..."""
from __future__ import annotations

import math

import numpy as np

from ._convert import handles, is_t, meta, rlx_dtype

A = "aten."

# ── elementwise ──────────────────────────────────────────────────────────────

_ACTIVATIONS = {"relu": "Relu", "hardswish": "HardSwish", "hardsigmoid": "HardSigmoid",
                "silu": "Silu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp",
                "log": "Log", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "neg": "Neg", "abs": "Abs",
                "sin": "Sin", "cos": "Cos", "erf": "Erf", "floor": "Floor", "ceil": "Ceil",
                "round": "Round", "sign": "Sign", "mish": "Mish", "reciprocal": "Recip"}


def _act_names():
    return [f"{A}{n}{s}.default" for n in _ACTIVATIONS for s in ("", "_")]


@handles(*_act_names())
def _activation(ctx, node):
    name = str(node.target).split(".")[1].rstrip("_")
    return ctx.g.activation(_ACTIVATIONS[name], ctx.arg(node.args[0]))


def _gelu_supported(node):
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return None if approx in ("none", "tanh") else f"gelu approximate={approx!r}"


@handles(A + "gelu.default", A + "gelu_.default", supports=_gelu_supported)
def _gelu(ctx, node):
    x, approx = ctx.args(node, (None, "none"))[:2]
    return ctx.g.activation("GeluApprox" if approx == "tanh" else "Gelu", x)


@handles(A + "softplus.default")
def _softplus(ctx, node):
    x, beta, threshold = ctx.args(node, (None, 1.0, 20.0))[:3]
    if beta == 1:
        # torch returns x past the threshold; ln(1 + e^x) equals x there within an ulp
        return ctx.g.activation("Softplus", x)
    bx = ctx.g.mul(x, ctx.scalar(beta, ctx.dtype(x)))
    return ctx.g.div(ctx.g.activation("Softplus", bx), ctx.scalar(beta, ctx.dtype(x)))


@handles(A + "hardtanh.default", A + "hardtanh_.default", A + "clamp.default",
         A + "clamp_.default", A + "relu6.default")
def _clamp(ctx, node):
    name = str(node.target)
    lo_hi = (-1.0, 1.0) if "hardtanh" in name else (0.0, 6.0) if "relu6" in name else (None,) * 2
    x, lo, hi = ctx.args(node, (None,) + lo_hi)[:3]
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    return ctx.g.op("Clamp", (x,), min=float(lo), max=float(hi))


@handles(A + "leaky_relu.default", A + "leaky_relu_.default")
def _leaky_relu(ctx, node):
    x, slope = ctx.args(node, (None, 0.01))[:2]
    g = ctx.g
    zero = ctx.scalar(0, ctx.dtype(x))
    return g.where_(g.compare("Gt", x, zero), x, g.mul(x, ctx.scalar(slope, ctx.dtype(x))))


_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max",
           "minimum": "Min", "pow": "Pow", "fmod": "Mod", "atan2": "Atan2"}
_OVERLOADS = ("Tensor", "Scalar", "default", "Tensor_Scalar", "Tensor_Tensor")


def _div_supported(node):
    mode = node.kwargs.get("rounding_mode")
    return None if mode is None else f"div rounding_mode={mode!r}"


@handles(*[f"{A}{n}.{o}" for n in _BINARY for o in _OVERLOADS], A + "add_.Tensor",
         A + "mul_.Tensor", A + "div.Tensor_mode", supports=_div_supported)
def _binary(ctx, node):
    op = _BINARY[str(node.target).split(".")[1].rstrip("_")]
    a, b = ctx.args(node)[:2]
    dt = rlx_dtype(meta(node).dtype)
    alpha = node.kwargs.get("alpha", 1)
    a, b = ctx.as_dtype(a, dt), ctx.as_dtype(b, dt)
    if alpha != 1:
        b = ctx.g.mul(b, ctx.scalar(alpha, dt))
    return ctx.g.binary(op, a, b)


@handles(A + "rsub.Scalar", A + "rsub.Tensor")
def _rsub(ctx, node):
    a, b = ctx.args(node)[:2]
    dt = rlx_dtype(meta(node).dtype)
    return ctx.g.sub(ctx.as_dtype(b, dt), ctx.as_dtype(a, dt))


_COMPARE = {"eq": "Eq", "ne": "Ne", "lt": "Lt", "le": "Le", "gt": "Gt", "ge": "Ge"}


@handles(*[f"{A}{n}.{o}" for n in _COMPARE for o in ("Tensor", "Scalar")])
def _compare(ctx, node):
    a, b = ctx.args(node)[:2]
    dt = ctx.dtype(a)
    if is_t(b) and ctx.dtype(b) != dt and not dt.is_float:
        dt = ctx.dtype(b)
    return ctx.g.compare(_COMPARE[str(node.target).split(".")[1]], ctx.as_dtype(a, dt),
                         ctx.as_dtype(b, dt))


@handles(A + "where.self", A + "where.ScalarOther", A + "where.ScalarSelf", A + "where.Scalar")
def _where(ctx, node):
    c, a, b = ctx.args(node)[:3]
    dt = rlx_dtype(meta(node).dtype)
    return ctx.g.where_(c, ctx.as_dtype(a, dt), ctx.as_dtype(b, dt))


@handles(A + "_to_copy.default", A + "to.dtype", A + "type_as.default")
def _cast(ctx, node):
    return ctx.as_dtype(ctx.arg(node.args[0]), rlx_dtype(meta(node).dtype))


def _dropout_supported(node):
    train = node.kwargs.get("train", node.args[2] if len(node.args) > 2 else False)
    return "dropout in training mode" if train else None


@handles(A + "clone.default", A + "contiguous.default", A + "alias.default",
         A + "detach.default", A + "lift_fresh_copy.default", A + "dropout.default",
         A + "dropout_.default", supports=_dropout_supported)
def _identity(ctx, node):
    return ctx.arg(node.args[0])


@handles(A + "_assert_tensor_metadata.default", A + "_assert_scalar.default",
         A + "sym_constrain_range_for_size.default")
def _assertion(ctx, node):
    """Export-time checks of metadata the static graph already fixes: no node."""
    return None


# ── movement ─────────────────────────────────────────────────────────────────

@handles(A + "view.default", A + "_unsafe_view.default", A + "reshape.default",
         A + "flatten.using_ints", A + "unsqueeze.default", A + "squeeze.dim",
         A + "squeeze.dims", A + "squeeze.default", A + "view_as.default")
def _reshape(ctx, node):
    return ctx.reshape(ctx.arg(node.args[0]), meta(node).shape)


def _axis(ax, rank):
    return ax % rank if rank else 0


@handles(A + "permute.default")
def _permute(ctx, node):
    x, perm = ctx.args(node)[:2]
    rank = len(ctx.dims(x))
    return ctx.g.transpose(x, [_axis(p, rank) for p in perm])


@handles(A + "transpose.int", A + "t.default", A + "numpy_T.default")
def _transpose(ctx, node):
    x = ctx.arg(node.args[0])
    rank = len(ctx.dims(x))
    d0, d1 = (node.args[1], node.args[2]) if len(node.args) == 3 else (0, rank - 1)
    perm = list(range(rank))
    a, b = _axis(d0, rank), _axis(d1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return x if a == b else ctx.g.transpose(x, perm)


@handles(A + "expand.default", A + "expand_as.default")
def _expand(ctx, node):
    x, dims = ctx.arg(node.args[0]), tuple(meta(node).shape)
    return x if ctx.dims(x) == dims else ctx.g.op("Expand", (x,), target_shape=dims)


@handles(A + "cat.default", A + "concat.default")
def _cat(ctx, node):
    xs, axis = ctx.args(node, (None, 0))[:2]
    dt = rlx_dtype(meta(node).dtype)
    xs = [ctx.as_dtype(x, dt) for x in xs if 0 not in ctx.dims(x) or len(xs) == 1]
    return xs[0] if len(xs) == 1 else ctx.g.concat(xs, _axis(axis, len(ctx.dims(xs[0]))))


def narrow(ctx, x, axis, start, length, step=1):
    """``x[..., start : start + length*step : step, ...]`` as Narrow or Slice."""
    if step == 1 and start == 0 and length == ctx.dims(x)[axis]:
        return x
    if step == 1:
        return ctx.g.op("Narrow", (x,), axis=axis, start=start, len=length)
    return ctx.g.op("Slice", (x,), axis=axis, start=start, len=length, step=step)


@handles(A + "slice.Tensor")
def _slice(ctx, node):
    x, dim, start, end, step = ctx.args(node, (None, 0, None, None, 1))[:5]
    n = ctx.dims(x)[_axis(dim, len(ctx.dims(x)))]
    start, end, step = slice(start, end, step).indices(n)
    length = max(0, -(-(end - start) // step))
    return narrow(ctx, x, _axis(dim, len(ctx.dims(x))), start, length, step)


@handles(A + "select.int")
def _select(ctx, node):
    x, dim, index = ctx.args(node)[:3]
    axis = _axis(dim, len(ctx.dims(x)))
    index = index % ctx.dims(x)[axis]
    return ctx.reshape(narrow(ctx, x, axis, index, 1), meta(node).shape)


@handles(A + "narrow.default")
def _narrow(ctx, node):
    x, dim, start, length = ctx.args(node)[:4]
    axis = _axis(dim, len(ctx.dims(x)))
    return narrow(ctx, x, axis, start % ctx.dims(x)[axis], length)


@handles(A + "split.Tensor", A + "split_with_sizes.default", A + "unbind.int")
def _split(ctx, node):
    outs = meta(node)
    x = ctx.arg(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    if str(node.target).startswith(A + "unbind"):
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    axis = _axis(dim, len(ctx.dims(x)))
    start, res = 0, []
    unbind = str(node.target).startswith(A + "unbind")
    for o in outs:
        n = 1 if unbind else o.shape[axis]
        res.append(ctx.reshape(narrow(ctx, x, axis, start, n), o.shape))
        start += n
    return tuple(res)


# ── creation: values fixed at export time ────────────────────────────────────

def _no_tensor_args(node):
    from torch.fx import Node

    flat = list(node.args) + list(node.kwargs.values())
    return "a tensor operand" if any(isinstance(a, Node) for a in flat) else None


@handles(A + "arange.default", A + "arange.start", A + "arange.start_step", A + "full.default",
         A + "zeros.default", A + "ones.default", A + "scalar_tensor.default",
         supports=_no_tensor_args)
def _creation(ctx, node):
    value = node.target(*node.args, **node.kwargs)
    dt = rlx_dtype(value.dtype)
    return ctx.g.constant(np.asarray(value.numpy(), dtype=dt.np), dt)
