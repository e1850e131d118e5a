"""ONNX If, Scan and Loop, expanded at import where their control is static.

An If whose condition is known at import time is its chosen branch, inlined. A Scan runs
a static number of steps (its scan axis), and a Loop whose trip count and conditions are
static runs a known number of steps: both are unrolled, one copy of the body per step,
which is exactly ONNX's meaning. A condition known only at run time is refused by name.
"""
from __future__ import annotations

import numpy as np

from ..context import Unmappable, norm_axis
from . import converts

MAX_STEPS = 4096        # an unrolled loop longer than this is refused, not built


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _local_names(graph) -> set:
    names = {vi.name for vi in graph.input}
    for n in graph.node:
        names.update(o for o in n.output if o)
    return names


def inline(ctx, graph, feeds: list) -> list:
    """Convert ``graph``'s nodes in ``ctx`` with its inputs bound to ``feeds`` (node ids
    or static arrays); its outputs, each a node id or a static array. Outer names stay
    visible, as ONNX's scoping says; the body's own names are cleared first, so every
    unrolled step binds them afresh."""
    from ..load import convert_node

    if len(feeds) != len(graph.input):
        raise Unmappable(f"body {graph.name!r} takes {len(graph.input)} inputs, "
                         f"{len(feeds)} are bound")
    for name in _local_names(graph):
        ctx.ids.pop(name, None)
        ctx.static.pop(name, None)
    for t in graph.initializer:
        from onnx import numpy_helper

        ctx.static[t.name] = numpy_helper.to_array(t)
    for vi, v in zip(graph.input, feeds):
        _bind(ctx, vi.name, v)
    for node in graph.node:
        ins = list(node.input)
        ctx.producers.update((o, (next(ctx.order), node)) for o in node.output if o)
        if node.domain not in ("", "ai.onnx"):
            raise Unmappable(f"the body holds a {node.domain}.{node.op_type} node")
        try:
            outs = convert_node(ctx, node, ins, f"{graph.name}/{node.op_type}")
        except Unmappable as e:
            raise Unmappable(f"in the body, {node.op_type}: {e.why}") from None
        for oname, out in zip(node.output, outs):
            if oname:
                _bind(ctx, oname, out)
    return [ctx.static[o.name] if o.name in ctx.static and o.name not in ctx.ids
            else ctx.id(o.name) for o in graph.output]


def _bind(ctx, name, v):
    ctx.ids.pop(name, None)
    ctx.static.pop(name, None)
    if isinstance(v, np.ndarray):
        ctx.static[name] = v
    else:
        ctx.ids[name] = v


def _node(ctx, v):
    return ctx.const(v) if isinstance(v, np.ndarray) else v


def _static_value(ctx, name):
    """The import-time value of ``name``, or None when it is known only at run time."""
    try:
        return ctx.need(name, "a control value")
    except Unmappable:
        return None


@converts("If")
def if_(ctx, node, ins, attrs):
    cond = _static_value(ctx, ins[0])
    then, other = attrs.get("then_branch"), attrs.get("else_branch")
    if cond is None:
        raise Unmappable("If on a condition computed at run time (only an import-time "
                         "condition maps: its branch is inlined)")
    return inline(ctx, then if bool(np.asarray(cond).reshape(-1)[0]) else other, [])


def _steps(n, what):
    if n > MAX_STEPS:
        raise Unmappable(f"{what} of {n} steps (RLX import unrolls at most {MAX_STEPS})")
    return n


def _stack(ctx, rows, axis):
    """Stack per-step values along a new ``axis`` (ONNX's scan outputs)."""
    rows = [_node(ctx, r) for r in rows]
    dims = ctx.dims(rows[0])
    ax = norm_axis(axis, len(dims) + 1, "scan_output_axes")
    shaped = [ctx.reshape(r, dims[:ax] + (1,) + dims[ax:]) for r in rows]
    if len(shaped) == 1:
        return ctx.op("StopGradient", shaped)
    return ctx.op("Concat", shaped, axis=ax)


@converts("Scan")
def scan(ctx, node, ins, attrs):
    body = attrs.get("body")
    m = attrs.get("num_scan_inputs")
    n_state = len(ins) - m
    in_axes = list(attrs.get("scan_input_axes", [0] * m))
    in_dirs = list(attrs.get("scan_input_directions", [0] * m))
    n_out = len(body.output) - n_state
    out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
    out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
    xs = [ctx.id(n) for n in ins[n_state:]]
    axes = [norm_axis(a, len(ctx.dims(x)), "scan_input_axes") for a, x in zip(in_axes, xs)]
    lengths = {ctx.dims(x)[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise Unmappable(f"scan inputs of different lengths {sorted(lengths)}")
    steps = _steps(lengths.pop(), "a Scan")
    if steps == 0:
        raise Unmappable("a Scan of 0 steps (its scan outputs would be empty)")
    state = [ctx.value(n) if ctx.value(n) is not None else ctx.id(n) for n in ins[:n_state]]
    rows: list = [[] for _ in range(n_out)]
    for t in range(steps):
        xt = []
        for x, a, d in zip(xs, axes, in_dirs):
            i = steps - 1 - t if d else t
            s = ctx.op("Slice", (x,), axis=a, start=i, len=1, step=1)
            dims = ctx.dims(s)
            xt.append(ctx.reshape(s, dims[:a] + dims[a + 1:]))
        outs = inline(ctx, body, state + xt)
        state = outs[:n_state]
        for k, y in enumerate(outs[n_state:]):
            rows[k].append(y)
    stacked = [_stack(ctx, r[::-1] if d else r, a)
               for r, a, d in zip(rows, out_axes, out_dirs)]
    return state + stacked


@converts("Loop")
def loop(ctx, node, ins, attrs):
    body = attrs.get("body")
    trip = _static_value(ctx, ins[0]) if _opt(ins, 0) else None
    if _opt(ins, 0) and trip is None:
        raise Unmappable("a Loop trip count computed at run time")
    cond = _static_value(ctx, ins[1]) if _opt(ins, 1) else np.array(True)
    if cond is None:
        raise Unmappable("a Loop condition computed at run time")
    limit = int(np.asarray(trip).reshape(())) if trip is not None else MAX_STEPS + 1
    state = [ctx.value(n) if ctx.value(n) is not None else ctx.id(n) for n in ins[2:]]
    n_state = len(state)
    rows: list = [[] for _ in range(len(body.output) - 1 - n_state)]
    t = 0
    while t < limit and bool(np.asarray(cond).reshape(-1)[0]):
        _steps(t + 1, "a Loop")
        outs = inline(ctx, body, [np.array(t, np.int64), np.array(bool(cond))] + state)
        cond, state = outs[0], outs[1:1 + n_state]
        if not isinstance(cond, np.ndarray):
            raise Unmappable("a Loop whose body computes its condition at run time")
        for k, y in enumerate(outs[1 + n_state:]):
            rows[k].append(y)
        t += 1
    if any(not r for r in rows):
        raise Unmappable("a Loop of 0 steps with scan outputs (they would be empty)")
    return state + [_stack(ctx, r, 0) for r in rows]
