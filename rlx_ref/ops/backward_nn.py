"""Backward kinds of Rope, Cumsum and Gather: the gradients RLX's autodiff emits for them.

Each kind is the exact vector-Jacobian product of its forward op as rlx_ref defines it:
``RopeBackward`` rotates by the negated angles, ``CumsumBackward`` sums from the end,
``GatherBackward`` adds every row of ``dy`` back into the table row it was read from.
Operand orders and payloads are RLX's (``rlx-ir/src/ops/backward.rs``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from ._indexing_index import check_index_dtype, decode, in_range
from .attention import ROPE_STYLE, rope_tables
from .codec import BOOL, I32, USIZE, attr
from .opdef import Caps, OpDef, Sample, compute_dtype, register, want
from .reduction import signed_axis

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)


def _work(*arrays):
    """Arrays in one arithmetic dtype: f64 if any input is f64, else f32."""
    dt = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]


# ── RopeBackward ──────────────────────────────────────────────────────────

@dataclass(frozen=True)
class RopeBackwardAttrs:
    head_dim: int = attr(USIZE, doc="the forward Rope's per-head width")
    n_rot: int = attr(USIZE, doc="the forward Rope's rotated lanes per head")
    style: str = attr(ROPE_STYLE, "NeoX", doc="the forward Rope's pairing (NeoX or GptJ)")


def _check_rope_backward(shapes, a, out):
    dy, cos, sin = shapes
    want(a.style in ROPE_STYLE.units, f"(C1) style must be NeoX or GptJ, got {a.style!r}")
    want(a.head_dim > 0 and a.head_dim % 2 == 0,
         f"(C1) head_dim must be non-zero and even, got {a.head_dim}")
    want(a.n_rot % 2 == 0 and a.n_rot <= a.head_dim,
         f"(C1) n_rot must be even and <= head_dim ({a.head_dim}), got {a.n_rot}")
    for s, n in ((dy, "dy"), (cos, "cos"), (sin, "sin")):
        want(s.dtype.is_float, f"(C2) RopeBackward operand `{n}` must be a float tensor, "
                               f"got {s.dtype}")
    want(dy.rank >= 2, f"(C2) dy must be [..., S, H*head_dim] (rank >= 2), got {dy}")
    if dy.is_static:
        want(dy.dims[-1] % a.head_dim == 0,
             f"(C2) dy's last dim ({dy.dims[-1]}) is not a multiple of head_dim ({a.head_dim})")
    want(cos.dims == sin.dims and cos.rank >= 1,
         f"(C3) cos and sin must share one shape of rank >= 1, got {cos} and {sin}")
    if a.n_rot and dy.is_static and cos.is_static:
        rope_tables(dy.dims, cos.dims, a.n_rot // 2)


def rope_angles(shape, cos, sin, half: int):
    """cos/sin of pair i at each (batch, position), shaped ``[batch, S, 1, half]``."""
    batch, seq, stride, rows, per_token = rope_tables(shape, cos.shape, half)
    c = cos.reshape(rows, stride)[:, :half]
    s = sin.reshape(rows, stride)[:, :half]
    if per_token:                                   # row b*S + s
        c, s = c.reshape(batch, seq, half), s.reshape(batch, seq, half)
    else:                                           # row s, shared by every batch entry
        c, s = c[None, :seq], s[None, :seq]
    return c[:, :, None, :], s[:, :, None, :]


def _ref_rope_backward(ctx, dy, cos, sin):
    a = ctx.attrs
    half = a.n_rot // 2
    want(dy.shape[-1] % a.head_dim == 0, f"(C2) dy's last dim ({dy.shape[-1]}) is not a "
                                         f"multiple of head_dim ({a.head_dim})")
    g, cos, sin = _work(dy, cos, sin)
    if half == 0:
        return g.astype(ctx.out_np)
    c, s = rope_angles(dy.shape, cos, sin, half)
    batch, seq = int(np.prod(dy.shape[:-2], dtype=np.int64)), dy.shape[-2]
    gr = g.reshape(batch, seq, dy.shape[-1] // a.head_dim, a.head_dim)
    dx = gr.copy()                                  # lanes n_rot.. pass straight through
    if a.style == "NeoX":
        lo, hi = slice(0, half), slice(half, a.n_rot)
    else:
        lo, hi = slice(0, a.n_rot, 2), slice(1, a.n_rot, 2)
    g1, g2 = gr[..., lo], gr[..., hi]
    # the transpose of [[c, -s], [s, c]]: rotate back by the same angle
    dx[..., lo] = g1 * c + g2 * s
    dx[..., hi] = g2 * c - g1 * s
    return dx.reshape(dy.shape).astype(ctx.out_np)


# a 90° forward turn of (1, 2, 3, 4); the gradient turns the cotangent back by 90°
_TURNED_BACK = {("NeoX", 4): [3, 4, -1, -2], ("GptJ", 4): [2, -1, 4, -3],
                ("NeoX", 2): [2, -1, 3, 4], ("NeoX", 0): [1, 2, 3, 4]}


def _rope_backward_samples(rng):
    """Rope's samples (every style, table form and edge case) with dy in place of x."""
    from ._attention_samples import rope_samples

    out = []
    for s in rope_samples(rng):
        a = s.attrs
        expect = None
        if "hand" in s.tags:
            expect = np.array([_TURNED_BACK[a.style, a.n_rot]], np.float32)
        out.append(Sample(s.inputs, RopeBackwardAttrs(a.head_dim, a.n_rot, a.style),
                          tags=s.tags, expect=expect))
    return out


register(OpDef(
    kind="RopeBackward", family="backward", attrs=RopeBackwardAttrs, payload="struct",
    arity=3, caps=Caps.NONE, infer=lambda s, a: s[0], check=_check_rope_backward,
    reference=_ref_rope_backward, input_names=("dy", "cos", "sin"),
    doc="The gradient of `Rope` with respect to x: `dy` (the cotangent of Rope's output, "
        "`[..., S, H*head_dim]`) rotated back by the same angles, i.e. Rope with `sin` "
        "negated. For pair i with `c = cos[row, i]`, `s = sin[row, i]`: `dx₁ = dy₁·c + "
        "dy₂·s`, `dx₂ = dy₂·c − dy₁·s`; lanes n_rot.. pass through. Pairs (NeoX / GptJ), "
        "table rows and the per-token rule are Rope's. The output has dy's shape and dtype.",
    constraints=(
        "C1: head_dim is non-zero and even; n_rot is even and <= head_dim; style is NeoX or "
        "GptJ.",
        "C2: dy is float of rank >= 2 and its last dim is a multiple of head_dim.",
        "C3: cos and sin are float and share one shape of rank >= 1.",
        "C4: the tables fit dy as Rope's C4 (rows >= n_rot/2 wide; one per token or >= S).",
    ),
    samples=_rope_backward_samples, dtypes=FLOATS,
    accuracy=reduction(2, 2, "row", axes=(-1,)),
    notes="Payload: the newest RLX form with `style`; older RLX has no `style` field (NeoX "
          "only), which parses as NeoX. RLX's CPU kernel (training_bwd.rs) handles NeoX only "
          "and reads each table row as head_dim/2 wide.",
))


# ── CumsumBackward ────────────────────────────────────────────────────────

@dataclass(frozen=True)
class CumsumBackwardAttrs:
    axis: int = attr(I32, doc="the forward Cumsum's axis (negative counts from the end)")
    exclusive: bool = attr(BOOL, doc="the forward Cumsum was exclusive")


def _check_cumsum_backward(shapes, a, out):
    (dy,) = shapes
    want(dy.dtype.is_float or dy.dtype.is_int,
         f"(C2) CumsumBackward is defined on float and integer tensors, got {dy.dtype}")


def _infer_cumsum_backward(shapes, a):
    signed_axis(a.axis, shapes[0].rank, "CumsumBackward")
    return shapes[0]


def _ref_cumsum_backward(ctx, dy):
    ax = signed_axis(ctx.attrs.axis, dy.ndim, "CumsumBackward")
    g = np.moveaxis(compute_dtype(dy), ax, -1)[..., ::-1]    # scan from the end
    with np.errstate(all="ignore"):
        acc = np.add.accumulate(g, axis=-1, dtype=g.dtype)
    if ctx.attrs.exclusive and g.shape[-1] > 0:
        # forward out[j] sums x[0..j): x[i] feeds every j > i, so dx[i] sums dy(i..]
        acc = np.concatenate([np.zeros_like(acc[..., :1]), acc[..., :-1]], axis=-1)
    return np.moveaxis(acc[..., ::-1], -1, ax).astype(ctx.out_np)


def _cumsum_backward_samples(rng):
    A = CumsumBackwardAttrs
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    v = np.array([1, 2, 3, 4], np.float32)
    return [
        Sample((v,), A(0, False), tags=("hand",), expect=np.array([10, 9, 7, 4], np.float32)),
        Sample((v,), A(-1, True), tags=("hand", "exclusive"),
               expect=np.array([9, 7, 4, 0], np.float32)),
        Sample((x,), A(-1, False), tags=("last-axis", "prime-length")),
        Sample((x,), A(1, True), tags=("middle-axis", "exclusive", "odd")),
        Sample((x,), A(-3, False), tags=("negative-index",)),
        Sample((np.array([1, np.nan, 3, -np.inf, np.inf], np.float32),), A(0, False),
               tags=("nan", "inf")),
        Sample((np.array([[2.5]], np.float32),), A(1, True), tags=("size-1",)),
        Sample((np.zeros((2, 0), np.float32),), A(1, True), tags=("empty",)),
        Sample((np.array([5, -3, 7, 2], np.int32),), A(0, True), tags=("int",)),
        Sample((rng.standard_normal((3, 4)),), A(0, False), tags=("f64",)),
        Sample((rng.standard_normal(7).astype(np.float16),), A(0, False), tags=("f16",)),
    ]


register(OpDef(
    kind="CumsumBackward", family="backward", attrs=CumsumBackwardAttrs, payload="struct",
    arity=1, caps=Caps.NONE, infer=_infer_cumsum_backward, check=_check_cumsum_backward,
    reference=_ref_cumsum_backward, input_names=("dy",),
    doc="The gradient of `Cumsum` with respect to its input: the running sum of `dy` taken "
        "from the END of `axis`. Inclusive: `dx[i] = Σ_{j >= i} dy[j]`; exclusive: "
        "`dx[i] = Σ_{j > i} dy[j]` (the last element gets 0). It equals "
        "`Reverse(Cumsum(Reverse(dy)))` with the same `exclusive`; shape and dtype are dy's, "
        "integers wrap and f16/bf16 accumulate in f32.",
    constraints=("C1: dy has rank >= 1 and -rank <= axis < rank.",
                 "C2: dy is float or integer; the output has its shape and dtype."),
    samples=_cumsum_backward_samples, dtypes=FLOATS + (DType.I32, DType.I64),
    accuracy=reduction(2, lambda a, s: s[0].dims[a.axis]),
    notes="RLX's builder takes the output shape from the caller (the forward input's, which "
          "is dy's); rlx_ref infers it. RLX's CPU kernel scans the last axis whatever "
          "`axis` says; the reference honours `axis`.",
))


# ── GatherBackward ────────────────────────────────────────────────────────

@dataclass(frozen=True)
class GatherBackwardAttrs:
    axis: int = attr(I32, doc="the forward Gather's table axis (negative counts from the end)")


def _check_gather_backward(shapes, a, out):
    dy, idx = shapes
    want(dy.dtype.is_float or dy.dtype.is_int,
         f"(C1) GatherBackward accumulates numbers: dy must be float or integer, got "
         f"{dy.dtype}")
    want(out.dtype == dy.dtype, f"(C1) the declared table gradient is {out.dtype} but dy is "
                                f"{dy.dtype}: they share one dtype")
    check_index_dtype(idx.dtype, "GatherBackward", "C2")
    want(out.rank >= 1 and -out.rank <= a.axis < out.rank,
         f"(C3) axis {a.axis} is out of range for the declared table {out} (rank "
         f"{out.rank}; expected {-out.rank}..{out.rank - 1})")
    ax = a.axis % out.rank
    expect = out.dims[:ax] + idx.dims + out.dims[ax + 1:]
    want(len(expect) == dy.rank and all(isinstance(p, Dyn) or isinstance(q, Dyn) or p == q
                                        for p, q in zip(expect, dy.dims)),
         f"(C4) dy {dy.dims_text()} must be Gather's output for the table {out.dims_text()} "
         f"and indices {idx.dims_text()} along axis {ax}: "
         f"[{', '.join(str(d) for d in expect)}]")


def _ref_gather_backward(ctx, dy, indices):
    dims = ctx.out_dims
    ax = ctx.attrs.axis % len(dims)
    i = in_range(decode(indices, "GatherBackward", "C5"), dims[ax], ax, "GatherBackward",
                 "C5", negative_ok=False)
    g = compute_dtype(dy)
    table = np.zeros(dims, g.dtype)
    # dy holds, for every index position p, the table slice indices[p] selected: bring
    # those positions to the front and add each slice back into its row (in row-major
    # order of p, so duplicate indices accumulate in that order)
    rows = np.moveaxis(g, list(range(ax, ax + i.ndim)), list(range(i.ndim)))
    np.add.at(np.moveaxis(table, ax, 0), i, rows)
    return table.astype(ctx.out_np)


def _gather_backward_samples(rng):
    A = GatherBackwardAttrs
    f = np.float32
    r = lambda *s: rng.standard_normal(s).astype(f)  # noqa: E731
    dy3 = np.arange(1, 7, dtype=f).reshape(3, 2)
    return [
        Sample((dy3, np.array([2, 0, 2], f)), A(0), Shape((4, 2), DType.F32),
               tags=("hand", "duplicates", "embedding"),
               expect=np.array([[3, 4], [0, 0], [6, 8], [0, 0]], f)),
        Sample((r(4, 2, 1), np.array([[1], [2]], f)), A(1), Shape((4, 3), DType.F32),
               tags=("axis>0", "2-d-indices")),
        Sample((r(2, 5, 3), np.array([0, 3, 3, 1, 0], f)), A(-2), Shape((2, 4, 3), DType.F32),
               tags=("negative-index", "duplicates", "prime-length")),
        Sample((r(3), f(3)), A(0), Shape((4, 3), DType.F32), tags=("0-d",)),
        Sample((np.zeros((0, 3), f), np.zeros(0, f)), A(0), Shape((4, 3), DType.F32),
               tags=("empty",)),
        Sample((r(2, 3), np.array([3, 3], np.int64)), A(0), Shape((4, 3), DType.F32),
               tags=("int", "edge-index")),
        Sample((rng.standard_normal((5, 2)), np.array([4, 4, 0, 1, 2], f)), A(0),
               Shape((5, 2), DType.F64), tags=("f64",)),
        Sample((np.array([1, 2, 3], np.int32), np.array([1, 1, 0], f)), A(0),
               Shape((2,), DType.I32), tags=("int-data", "duplicates"),
               expect=np.array([3, 3], np.int32)),
        Sample((r(2, 1, 1, 3), np.array([[1, 0, 1]], f)), A(2), Shape((2, 1, 2), DType.F32),
               tags=("last-axis", "size-1", "2-d-indices")),
    ]


register(OpDef(
    kind="GatherBackward", family="backward", attrs=GatherBackwardAttrs, payload="struct",
    arity=2, caps=Caps.NONE, check=_check_gather_backward, reference=_ref_gather_backward,
    input_names=("dy", "indices"),
    doc="The gradient of `Gather` with respect to its table: starts from zeros of the "
        "declared table shape and adds every slice of `dy` back into the table row its "
        "index selected (`np.add.at` along `axis`), so duplicate indices accumulate, in "
        "row-major order of the index positions. `dy` is Gather's output for that table: "
        "`table.dims[:axis] ++ indices.dims ++ table.dims[axis+1:]`. Indices are "
        "f32-encoded integers (or an integer tensor) in `0..table.dims[axis]-1`; a "
        "fractional or out-of-range index is an error (never a read or write outside a "
        "buffer). f16/bf16 accumulate in f32.",
    constraints=(
        "C1: dy is float or integer and the declared output (the table's shape) has its "
        "dtype.",
        "C2: indices are a float (integral values) or integer tensor.",
        "C3: -rank <= axis < rank for the declared table rank.",
        "C4: dy's dims are table.dims[:axis] ++ indices.dims ++ table.dims[axis+1:].",
        "C5: at run time every index is an integer in 0..table.dims[axis]-1.",
    ),
    samples=_gather_backward_samples, dtypes=FLOATS + INTS,
    accuracy=reduction(2, lambda a, s: max(1, s[1].numel or 1), operands=(0,)),
    notes="RLX's builder takes the table shape from the caller (the output shape is "
          "authoritative); the check here verifies it against dy and indices. RLX's "
          "autodiff emits ScatterAdd for axis 0 and GatherBackward otherwise; its CPU "
          "kernel reads `indices.dims[axis]` indices (right for the rank-1 indices it "
          "builds) and does not check the range in release builds; here the true "
          "np.take adjoint is computed for any index shape and a bad index is an error. "
          "Gather moves any dtype; its gradient adds, so bool and complex are left out.",
))
