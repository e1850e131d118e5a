"""Shape and data-movement ONNX ops; shape operands must be static (constants or folded)."""
from __future__ import annotations

import numpy as np

from ..context import Unmappable, dtype_of, norm_axis
from . import converts


def _ints(arr) -> list:
    return [int(v) for v in np.asarray(arr).reshape(-1)]


def _opt(ins, i):
    return ins[i] if len(ins) > i and ins[i] else None


@converts("Constant")
def constant(ctx, node, ins, attrs):
    from onnx import numpy_helper

    for key in ("sparse_value", "value_string", "value_strings"):
        if attrs.has(key):
            attrs.get(key)
            raise Unmappable(f"a {key} Constant has no RLX dtype", key)
    if attrs.has("value"):
        t = attrs.get("value")
        dtype_of(t.data_type, "the Constant")
        return [numpy_helper.to_array(t)]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if attrs.has(key):
            return [np.asarray(attrs.get(key), dt)]
    raise Unmappable("a Constant without a value")


@converts("Shape")
def shape(ctx, node, ins, attrs):
    dims = ctx.shape(ins[0])
    start, end = attrs.get("start", 0), attrs.get("end", None)
    return [np.asarray(dims[slice(start, end)], np.int64)]


@converts("Size")
def size(ctx, node, ins, attrs):
    return [np.asarray(int(np.prod(ctx.shape(ins[0]), dtype=np.int64)), np.int64)]


@converts("Reshape")
def reshape(ctx, node, ins, attrs):
    dims, want = ctx.shape(ins[0]), _ints(ctx.need(ins[1], "Reshape's shape"))
    if not attrs.get("allowzero", 0):
        want = [dims[i] if d == 0 else d for i, d in enumerate(want)]
    return [ctx.op("Reshape", (ctx.id(ins[0]),), new_shape=tuple(want))]


@converts("Flatten")
def flatten(ctx, node, ins, attrs):
    dims = ctx.shape(ins[0])
    ax = attrs.get("axis", 1)
    ax = ax + len(dims) if ax < 0 else ax      # ONNX's range is [-r, r]
    lead = int(np.prod(dims[:ax], dtype=np.int64))
    return [ctx.op("Reshape", (ctx.id(ins[0]),),
                   new_shape=(lead, int(np.prod(dims[ax:], dtype=np.int64))))]


def _axes(ctx, ins, attrs, i, rank, what="axes"):
    """Axes from the operand at ``i`` (opset 13+) or the attribute; None when absent."""
    if attrs.has("axes"):
        vals = attrs.get("axes")
    elif _opt(ins, i):
        vals = _ints(ctx.need(ins[i], what))
    else:
        return None
    return [norm_axis(a, rank, what) for a in vals]


@converts("Squeeze")
def squeeze(ctx, node, ins, attrs):
    dims = ctx.shape(ins[0])
    axes = _axes(ctx, ins, attrs, 1, len(dims))
    if axes is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    keep = [d for i, d in enumerate(dims) if i not in axes]
    return [ctx.op("Reshape", (ctx.id(ins[0]),), new_shape=tuple(keep))]


@converts("Unsqueeze")
def unsqueeze(ctx, node, ins, attrs):
    dims = list(ctx.shape(ins[0]))
    raw = attrs.get("axes") if attrs.has("axes") else _ints(ctx.need(ins[1], "axes"))
    r = len(dims) + len(raw)
    for a in sorted(norm_axis(a, r, "axes") for a in raw):
        dims.insert(a, 1)
    return [ctx.op("Reshape", (ctx.id(ins[0]),), new_shape=tuple(dims))]


@converts("Transpose")
def transpose(ctx, node, ins, attrs):
    r = ctx.rank(ins[0])
    perm = attrs.get("perm", list(range(r))[::-1])
    return [ctx.op("Transpose", (ctx.id(ins[0]),), perm=tuple(norm_axis(p, r) for p in perm))]


@converts("Concat")
def concat(ctx, node, ins, attrs):
    r = ctx.rank(ins[0])
    ax = norm_axis(attrs.get("axis"), r)
    return [ctx.op("Concat", [ctx.id(n) for n in ins if n], axis=ax)]


@converts("Expand")
def expand(ctx, node, ins, attrs):
    want = _ints(ctx.need(ins[1], "Expand's shape"))
    return [ctx.op("Expand", (ctx.id(ins[0]),), target_shape=tuple(want))]


@converts("Tile")
def tile(ctx, node, ins, attrs):
    reps = _ints(ctx.need(ins[1], "Tile's repeats"))
    return [ctx.op("Tile", (ctx.id(ins[0]),), reps=tuple(reps))]


def slice_axis(ctx, x, axis, start, end, step):
    """One ONNX/Python slice of ``axis`` as RLX Slice (clamped as Python clamps)."""
    n = ctx.dims(x)[axis]
    r = range(n)[slice(start, end, step)]
    if len(r) == n and step == 1:
        return x
    return ctx.op("Slice", (x,), axis=axis, start=r.start if len(r) else 0, len=len(r),
                  step=step)


@converts("Slice")
def slice_(ctx, node, ins, attrs):
    r = ctx.rank(ins[0])
    starts = _ints(ctx.need(ins[1], "Slice's starts"))
    ends = _ints(ctx.need(ins[2], "Slice's ends"))
    axes = _axes(ctx, ins, attrs, 3, r) or list(range(len(starts)))
    steps = _ints(ctx.need(ins[4], "Slice's steps")) if _opt(ins, 4) else [1] * len(starts)
    x = ctx.id(ins[0])
    big = 2 ** 62      # ONNX writes "to the end" as INT64_MAX/MIN: Python's slice clamps them
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise Unmappable("a Slice step of 0", "steps")
        x = slice_axis(ctx, x, a, max(min(s, big), -big), max(min(e, big), -big), st)
    return [x if x != ctx.id(ins[0]) else ctx.op("StopGradient", (x,))]


def _indices(ctx, name, n):
    """Indices with ONNX's negative wrap made explicit (RLX's Gather does not wrap)."""
    v = ctx.value(name)
    if v is not None:
        return ctx.const(np.where(v < 0, v + n, v))
    i = ctx.id(name)
    neg = ctx.cmp("Lt", i, ctx.like(0, i))
    return ctx.where(neg, ctx.bin("Add", i, ctx.like(n, i)), i)


@converts("Gather")
def gather(ctx, node, ins, attrs):
    dims = ctx.shape(ins[0])
    ax = norm_axis(attrs.get("axis", 0), len(dims))
    idx = _indices(ctx, ins[1], dims[ax])
    return [ctx.op("Gather", (ctx.id(ins[0]), idx), axis=ax)]


@converts("GatherElements")
def gather_elements(ctx, node, ins, attrs):
    ax = norm_axis(attrs.get("axis", 0), ctx.rank(ins[0]))
    return [ctx.op("GatherElements", (ctx.id(ins[0]), ctx.id(ins[1])), axis=ax)]


@converts("GatherND")
def gather_nd(ctx, node, ins, attrs):
    return [ctx.op("GatherNd", (ctx.id(ins[0]), ctx.id(ins[1])),
                   batch_dims=attrs.get("batch_dims", 0))]


_REDUCTIONS = {"none": "None", "add": "Add", "mul": "Mul", "max": "Max", "min": "Min"}


@converts("ScatterElements", "ScatterND")
def scatter(ctx, node, ins, attrs):
    red = _REDUCTIONS[attrs.only("reduction", tuple(_REDUCTIONS), "none")]
    args = (ctx.id(ins[0]), ctx.id(ins[1]), ctx.id(ins[2]))
    if node.op_type == "ScatterND":
        return [ctx.op("ScatterNd", args, reduction=red)]
    ax = norm_axis(attrs.get("axis", 0), ctx.rank(ins[0]))
    return [ctx.op("ScatterElements", args, axis=ax, reduction=red)]


@converts("Split")
def split(ctx, node, ins, attrs):
    dims = ctx.shape(ins[0])
    ax = norm_axis(attrs.get("axis", 0), len(dims))
    n_out = len(node.output)
    if _opt(ins, 1):
        sizes = _ints(ctx.need(ins[1], "Split's split"))
    elif attrs.has("split"):
        sizes = list(attrs.get("split"))
    else:
        n = attrs.get("num_outputs", n_out)
        chunk = -(-dims[ax] // n)
        sizes = [min(chunk, dims[ax] - i * chunk) for i in range(n)]
    x, outs, at = ctx.id(ins[0]), [], 0
    for s in sizes:
        outs.append(ctx.op("Narrow", (x,), axis=ax, start=at, len=s))
        at += s
    return outs


@converts("ConstantOfShape")
def constant_of_shape(ctx, node, ins, attrs):
    from onnx import numpy_helper

    dims = _ints(ctx.need(ins[0], "ConstantOfShape's shape"))
    t = attrs.get("value")
    fill = numpy_helper.to_array(t).reshape(-1) if t is not None else np.zeros(1, np.float32)
    return [np.full(dims, fill[0], fill.dtype)]


@converts("Range")
def range_(ctx, node, ins, attrs):
    vals = [np.asarray(ctx.need(n, "Range's start/limit/delta")) for n in ins]
    # ONNX's reference (numpy) accepts one-element tensors where the spec says scalars
    vals = [v.reshape(()) if v.size == 1 else v for v in vals]
    return [np.arange(vals[0], vals[1], vals[2]).astype(vals[0].dtype)]


@converts("EyeLike")
def eye_like(ctx, node, ins, attrs):
    n, m = ctx.shape(ins[0])
    dt = dtype_of(attrs.get("dtype"), "EyeLike") if attrs.has("dtype") else ctx.dtype(ins[0])
    return [np.eye(n, m, attrs.get("k", 0), dtype=dt.np)]


@converts("Trilu")
def trilu(ctx, node, ins, attrs):
    k = int(ctx.need(ins[1], "Trilu's k")) if _opt(ins, 1) else 0
    return [ctx.op("Trilu", (ctx.id(ins[0]),), upper=bool(attrs.get("upper", 1)), diagonal=k)]


_PAD_MODES = {"constant": None, "reflect": "Reflect", "edge": "Replicate", "wrap": "Circular"}


@converts("Pad")
def pad(ctx, node, ins, attrs):
    mode = attrs.only("mode", tuple(_PAD_MODES), "constant")
    r = ctx.rank(ins[0])
    pads = _ints(ctx.need(ins[1], "Pad's pads"))
    axes = _axes(ctx, ins, attrs, 3, r) or list(range(r))
    per = [[0, 0] for _ in range(r)]
    for j, a in enumerate(axes):
        per[a] = [pads[j], pads[j + len(axes)]]
    x = ctx.id(ins[0])
    for a, (b, e) in enumerate(per):       # negative pads crop
        if b < 0 or e < 0:
            n = ctx.dims(x)[a]
            x = slice_axis(ctx, x, a, max(-b, 0), n - max(-e, 0), 1)
            per[a] = [max(b, 0), max(e, 0)]
    if mode == "constant":
        v = ctx.need(ins[2], "Pad's constant_value") if _opt(ins, 2) else np.zeros(())
        how = ("Constant", float(np.asarray(v).reshape(-1)[0]) if np.size(v) else 0.0)
    else:
        how = _PAD_MODES[mode]
    return [ctx.op("Pad", (x,), pads=tuple(tuple(p) for p in per), mode=how)]


@converts("DepthToSpace", "SpaceToDepth")
def depth_space(ctx, node, ins, attrs):
    b = attrs.get("blocksize")
    x = ctx.id(ins[0])
    n, c, h, w = ctx.dims(x)
    mode = attrs.only("mode", ("DCR", "CRD"), "DCR")
    if node.op_type == "SpaceToDepth":
        # DCR: channel (bh·b + bw)·C + c; CRD (opset 28): c·b² + bh·b + bw
        t = ctx.reshape(x, (n, c, h // b, b, w // b, b))
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        t = ctx.op("Transpose", (t,), perm=perm)
        return [ctx.reshape(t, (n, c * b * b, h // b, w // b))]
    if mode == "DCR":
        t = ctx.reshape(x, (n, b, b, c // (b * b), h, w))
        perm = (0, 3, 4, 1, 5, 2)
    else:
        t = ctx.reshape(x, (n, c // (b * b), b, b, h, w))
        perm = (0, 1, 4, 2, 5, 3)
    t = ctx.op("Transpose", (t,), perm=perm)
    return [ctx.reshape(t, (n, c // (b * b), h * b, w * b))]
