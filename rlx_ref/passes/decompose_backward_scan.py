"""Decompositions of ScanBackward and ScanBackwardXs into a reversed Scan over body_vjp.

The backward walk is itself a scan: its carry is the running cotangent ``d`` and its
per-step rows are, reversed in time, the carry entering each forward step, the xs rows
and (with a trajectory) the upstream rows. Its body adds the step's upstream row and
inlines ``body_vjp``. ScanBackward keeps the final carry; ScanBackwardXs packs ``d`` and
the step's ``dx`` into one flat carry and reads the dx rows back from the trajectory.
Every product is a differentiable kind, so a gradient graph holding these kinds can be
differentiated again (the autodiff pre-pass decomposes them).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ops.backward_scan import SEED, checkpointed
from ..ops.control import scan_kept_steps
from .decompose import constant, decomposes

PRODUCTS = ("Scan", "Reverse", "Concat", "Narrow", "Reshape", "Expand", "Constant", "Cast")
NOTE = ("with 0 < num_checkpoints < length the carries are recomputed from the checkpoint "
        "rows, segment by segment as the op does, but all length of them are held at once "
        "(the op holds O(K + length/K))")


def _inline(g: Graph, body: Graph, operands, named: dict) -> list:
    """Copy ``body`` into ``g``: Inputs named in ``named`` bind there, the others bind
    ``operands`` in node order; returns the ids of its outputs."""
    ids, rest = {}, iter(operands)
    for n in body.nodes:
        if n.kind == "Input":
            ids[n.id] = named[n.attrs.name] if n.attrs.name in named else next(rest)
        else:
            ids[n.id] = g.add_node(n.op, [ids[i] for i in n.inputs], n.shape, n.name)
    return [ids[o] for o in body.outputs]


def _reshape(g, x, dims):
    dims = tuple(dims)
    return x if g.shape(x).dims == dims else g.op("Reshape", (x,), new_shape=dims)


def _cast(g, x, dt):
    return x if g.shape(x).dtype is dt else g.op("Cast", (x,), to=dt)


def _zeros(g, dims, dt):
    return g.op("Expand", (constant(g, 0, dt),), target_shape=tuple(dims))


def _rows(g, x, start, n):
    return g.op("Narrow", (x,), axis=0, start=start, len=n)


def _carries_in(g, a, init, traj, xs) -> int:
    """``[length, *carry]``: row t is the carry entering step t; checkpointed, each segment
    after a saved row is recomputed by a Scan of forward_body from that row."""
    n, dims = a.length, g.shape(init).dims
    first = _reshape(g, init, (1,) + dims)
    if not checkpointed(a):
        return first if n == 1 else g.op("Concat", (first, _rows(g, traj, 0, n - 1)), axis=0)
    starts = [0] + [s + 1 for s in scan_kept_steps(a)]
    parts = []
    for j, (s, e) in enumerate(zip(starts, starts[1:] + [n])):
        anchor = first if j == 0 else _rows(g, traj, j - 1, 1)
        parts.append(anchor)
        if e - s > 1:
            seg = [_rows(g, x, s, e - s - 1) for x in xs]
            parts.append(g.op("Scan", [_reshape(g, anchor, dims)] + seg, body=a.forward_body,
                              length=e - s - 1, save_trajectory=True, num_bcast=0,
                              num_xs=len(xs), num_checkpoints=0))
    return g.op("Concat", parts, axis=0)


def _upstream_rows(g, a, up) -> tuple:
    """(upstream per step ``[length, *carry]``, bool mask of the steps that have a row)
    with a checkpointed trajectory; (upstream, None) otherwise."""
    if not checkpointed(a):
        return up, None
    dims, dt = g.shape(up).dims[1:], g.shape(up).dtype
    kept, parts, t = scan_kept_steps(a), [], 0
    for r, step in enumerate(kept):
        if step > t:
            parts.append(_zeros(g, (step - t,) + dims, dt))
        parts.append(_rows(g, up, r, 1))
        t = step + 1
    if t < a.length:
        parts.append(_zeros(g, (a.length - t,) + dims, dt))
    mask = np.zeros(a.length, bool)
    mask[kept] = True
    return g.op("Concat", parts, axis=0), constant(g, mask, DType.BOOL)


def _pack_dtype(cd: DType, xd: DType):
    if cd is xd:
        return cd
    if cd.is_float and xd.is_float:         # both exact in the wider one
        return DType.F64 if DType.F64 in (cd, xd) else DType.F32
    return None


def _step_body(a, g, init, xs, up, mask, keep, pd) -> Graph:
    """The reversed scan's body; its Inputs, in node order (the binding order), are
    (state, carry_t, x_t..., [up_t], [mask_t])."""
    c_dims, cd = g.shape(init).dims, g.shape(init).dtype
    b = Graph("scan_backward_step")
    if keep is None:
        state = b.input("d", c_dims, cd)
    else:
        size = math.prod(c_dims) + math.prod(g.shape(xs[keep]).dims[1:])
        state = b.input("d_dx", (size,), pd)
    carry = b.input("carry_t", c_dims, cd)
    step = [b.input(f"x_t{i}", g.shape(x).dims[1:], g.shape(x).dtype)
            for i, x in enumerate(xs)]
    d = state if keep is None else _cast(b, _reshape(b, b.op(
        "Narrow", (state,), axis=0, start=0, len=math.prod(c_dims)), c_dims), cd)
    if up is not None:
        added = b.op("Binary", (d, b.input("up_t", c_dims, cd)), op="Add")
        d = added if mask is None else b.op(
            "Where", (b.input("mask_t", (), DType.BOOL), added, d))
    outs = _inline(b, a.body_vjp, [carry] + step, {SEED: d})
    if keep is None:
        b.set_outputs([outs[0]])
        return b
    flat = [_cast(b, _reshape(b, o, (math.prod(b.shape(o).dims),)), pd)
            for o in (outs[0], outs[1 + keep])]
    b.set_outputs([b.op("Concat", flat, axis=0)])
    return b


def _reversed(g, x):
    return g.op("Reverse", (x,), axes=(0,))


def _sweep(g: Graph, node, ins, keep: int | None) -> int | None:
    """The reversed Scan; dinit (``keep`` None) or the dx rows of xs ``keep``."""
    a = node.attrs
    if not all(g.shape(i).is_static for i in ins):
        return None
    init, traj, up, xs = ins[0], ins[1], ins[2], list(ins[3:])
    cshape = g.shape(init)
    if a.length == 0:           # no step: dinit is the final-carry upstream, or zeros
        if keep is None:
            return _zeros(g, cshape.dims, cshape.dtype) if a.save_trajectory else up
        return _zeros(g, g.shape(xs[keep]).dims, g.shape(xs[keep]).dtype)
    pd = cshape.dtype
    if keep is not None:
        pd = _pack_dtype(cshape.dtype, g.shape(xs[keep]).dtype)
        if pd is None:
            return None
    rows = [_reversed(g, _carries_in(g, a, init, traj, xs))] + [_reversed(g, x) for x in xs]
    up_rows, mask = (None, None)
    if a.save_trajectory:
        up_rows, mask = _upstream_rows(g, a, up)
        rows.append(_reversed(g, up_rows))
        if mask is not None:
            rows.append(_reversed(g, mask))
    d0 = up if not a.save_trajectory else _zeros(g, cshape.dims, cshape.dtype)
    if keep is not None:
        xrow = g.shape(xs[keep]).dims[1:]
        flat = _cast(g, _reshape(g, d0, (math.prod(cshape.dims),)), pd)
        d0 = g.op("Concat", (flat, _zeros(g, (math.prod(xrow),), pd)), axis=0)
    body = _step_body(a, g, init, xs, up_rows, mask, keep, pd)
    out = g.op("Scan", [d0] + rows, body=body, length=a.length,
               save_trajectory=keep is not None, num_bcast=0, num_xs=len(rows),
               num_checkpoints=0)
    if keep is None:
        return out
    c = math.prod(cshape.dims)
    dx = g.op("Narrow", (out,), axis=1, start=c, len=math.prod(xrow))
    dx = _reshape(g, _reversed(g, dx), g.shape(xs[keep]).dims)
    return _cast(g, dx, g.shape(xs[keep]).dtype)


@decomposes("ScanBackward", PRODUCTS, note=NOTE)
def lower_scan_backward(g: Graph, node, ins) -> int | None:
    """dinit: the final carry of the reversed Scan."""
    return _sweep(g, node, ins, None)


@decomposes("ScanBackwardXs", PRODUCTS, note=NOTE)
def lower_scan_backward_xs(g: Graph, node, ins) -> int | None:
    """dxs_{xs_idx}: the dx half of the reversed Scan's packed trajectory, reversed."""
    return _sweep(g, node, ins, node.attrs.xs_idx)
