"""Resize (nearest, linear) as Gathers per resized axis, with ONNX's coordinate rules; Einsum."""
from __future__ import annotations

import math

import numpy as np

from ..context import Unmappable, norm_axis
from . import converts

_COORD = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(x, scale, n_out, n_in, how):
    """x_original of ONNX's coordinate_transformation_mode, for output positions ``x``."""
    if how == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if how == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(x)
    if how == "align_corners":      # ONNX's resized length here is in·scale, unrounded
        span = n_in * scale
        return np.zeros_like(x) if span == 1 else x * (n_in - 1) / (span - 1)
    if how == "asymmetric":
        return x / scale
    adjust = n_out / (scale * n_in)         # half_pixel_symmetric
    offset = n_in / 2 * (1 - adjust)
    return offset + (x + 0.5) / scale - 0.5


def _nearest(v, how):
    if how == "floor":
        return np.floor(v)
    if how == "ceil":
        return np.ceil(v)
    half = v - np.floor(v) == 0.5
    if how == "round_prefer_floor":
        return np.where(half, np.floor(v), np.round(v))
    return np.where(half, np.ceil(v), np.round(v))


def _sizes(ctx, ins, attrs, dims, axes):
    """(output size, scale) per listed axis from ``scales`` or ``sizes``."""
    scales = ctx.need(ins[2], "Resize's scales") if len(ins) > 2 and ins[2] else None
    if scales is not None and np.size(scales):
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        attrs.get("keep_aspect_ratio_policy")
        return [int(math.floor(dims[a] * s)) for a, s in zip(axes, sc)], sc
    if len(ins) < 4 or not ins[3]:
        raise Unmappable("Resize needs scales or sizes")
    sizes = [int(v) for v in np.asarray(ctx.need(ins[3], "Resize's sizes")).reshape(-1)]
    policy = attrs.only("keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"),
                        "stretch")
    if policy == "stretch":
        return sizes, [s / dims[a] for a, s in zip(axes, sizes)]
    ratios = [s / dims[a] for a, s in zip(axes, sizes)]
    s = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(math.floor(dims[a] * s + 0.5)) for a in axes], [s] * len(axes)


@converts("Resize")
def resize(ctx, node, ins, attrs):
    mode = attrs.only("mode", ("nearest", "linear", "cubic"), "nearest")
    how = attrs.only("coordinate_transformation_mode", _COORD + ("tf_crop_and_resize",),
                     "half_pixel")
    near = attrs.only("nearest_mode", _NEAREST, "round_prefer_floor")
    antialias = attrs.only("antialias", (0, 1), 0)
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    axes = [norm_axis(a, len(dims)) for a in attrs.get("axes", range(len(dims)))]
    outs, scales = _sizes(ctx, ins, attrs, dims, axes)
    if mode == "cubic" or antialias or how == "tf_crop_and_resize" or \
            attrs.get("exclude_outside", 0):
        from .resize_weights import resize_by_weights

        return resize_by_weights(ctx, ins, attrs, mode, how, antialias, near, axes, outs,
                                 scales)
    for unused in ("cubic_coeff_a", "extrapolation_value"):
        attrs.get(unused)       # they apply to other modes and coordinate rules
    for a, n_out, sc in zip(axes, outs, scales):
        src = _source(np.arange(n_out, dtype=np.float64), sc, n_out, dims[a], how)
        if mode == "linear":
            x = _linear_axis(ctx, x, a, src, dims[a])
            continue
        idx = np.clip(_nearest(src, near), 0, dims[a] - 1).astype(np.int64)
        if n_out == dims[a] and (idx == np.arange(n_out)).all():
            continue
        x = ctx.op("Gather", (x, ctx.const(idx)), axis=a)
    return [x if x != ctx.id(ins[0]) else ctx.op("StopGradient", (x,))]


def _linear_axis(ctx, x, axis, src, n_in):
    """Linear interpolation along one axis: two Gathers and their static weights (edges
    repeat, as ONNX's reference pads them)."""
    src = np.clip(src, 0, n_in - 1)
    lo = np.floor(src)
    w = src - lo
    i0 = np.clip(lo, 0, n_in - 1).astype(np.int64)
    i1 = np.clip(lo + 1, 0, n_in - 1).astype(np.int64)
    shape = [1] * len(ctx.dims(x))
    shape[axis] = len(src)
    dt = ctx.dt(x)
    a = ctx.op("Gather", (x, ctx.const(i0)), axis=axis)
    b = ctx.op("Gather", (x, ctx.const(i1)), axis=axis)
    wa = ctx.const((1 - w).reshape(shape).astype(dt.np), dt)
    wb = ctx.const(w.reshape(shape).astype(dt.np), dt)
    return ctx.bin("Add", ctx.bin("Mul", a, wa), ctx.bin("Mul", b, wb))


@converts("Einsum")
def einsum(ctx, node, ins, attrs):
    eq = attrs.get("equation").replace(" ", "")
    ops = [ctx.id(n) for n in ins]
    terms, out = _spell_out(eq, [len(ctx.dims(o)) for o in ops])
    if len(terms) not in (1, 2):
        raise Unmappable("only one or two operands", "equation")
    for i, t in enumerate(terms):
        ops[i], terms[i] = _diagonals(ctx, ops[i], t)
    # sum away letters that only one operand has and the output does not keep
    for i, t in enumerate(terms):
        others = "".join(terms[:i] + terms[i + 1:]) + out
        gone = [j for j, c in enumerate(t) if c not in others]
        if gone:
            ops[i] = ctx.op("Reduce", (ops[i],), op="Sum", axes=tuple(gone), keep_dim=False)
            terms[i] = "".join(c for c in t if c in others)
    if len(terms) == 1:
        cur, letters = ops[0], terms[0]
    else:
        a, b = terms
        batch = [c for c in a if c in b and c in out]
        contract = [c for c in a if c in b and c not in out]
        cur = ctx.op("DotGeneral", tuple(ops),
                     lhs_contracting=tuple(a.index(c) for c in contract),
                     rhs_contracting=tuple(b.index(c) for c in contract),
                     lhs_batch=tuple(a.index(c) for c in batch),
                     rhs_batch=tuple(b.index(c) for c in batch))
        letters = "".join(batch) + "".join(c for c in a if c not in b) + \
            "".join(c for c in b if c not in a)
    perm = tuple(letters.index(c) for c in out)
    if perm != tuple(range(len(perm))):
        cur = ctx.op("Transpose", (cur,), perm=perm)
    return [cur if cur not in ops else ctx.op("StopGradient", (cur,))]


_DOTS = "αβγδεζηθικλμνξπρστυφχψω"


def _spell_out(eq, ranks):
    """(terms, output) with each "..." replaced by letters of its own (Greek, which ONNX's
    equations cannot hold; right-aligned, as numpy broadcasts) and the implicit output
    made explicit."""
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unmappable(f"{len(terms)} terms for {len(ranks)} operands", "equation")
    width = 0
    for i, (t, r) in enumerate(zip(terms, ranks)):
        if "..." in t:
            k = r - len(t.replace("...", ""))
            width = max(width, k)
            terms[i] = t.replace("...", _DOTS[len(_DOTS) - k:] if k else "")
    dots = _DOTS[len(_DOTS) - width:] if width else ""
    if not arrow:
        letters = "".join(terms)
        out = dots + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                    and c not in _DOTS))
    return terms, out.replace("...", dots)


def _diagonals(ctx, x, term):
    """x with each repeated letter of ``term`` reduced to its diagonal (the letter moves
    last): the two axes flattened and their equal-index entries gathered."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        p, q = term.index(c), term.index(c, term.index(c) + 1)
        dims = ctx.dims(x)
        if dims[p] != dims[q]:
            raise Unmappable(f"a diagonal over axes of sizes {dims[p]} and {dims[q]}",
                             "equation")
        rest = [i for i in range(len(dims)) if i not in (p, q)]
        x = ctx.op("Transpose", (x,), perm=tuple(rest + [p, q]))
        n = dims[p]
        x = ctx.reshape(x, tuple(dims[i] for i in rest) + (n * n,))
        x = ctx.op("Gather", (x, ctx.const(np.arange(n, dtype=np.int64) * (n + 1))),
                   axis=len(rest))
        term = "".join(term[i] for i in rest) + c
    return x, term
