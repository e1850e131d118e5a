"""Movement family, part 2: Pad, Tile, Trilu, ResizeNearest2x (imported by movement.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import ALL_DTYPES
from ..ir.shape import Dyn
from .codec import BOOL, F32, INT, USIZE, Enum, ListOf, TupleOf, attr
from .elementwise import cast_array
from .opdef import Caps, OpDef, Sample, register, want

_F = np.float32


def _arange(*dims, dtype=_F):
    return np.arange(math.prod(dims), dtype=np.float64).astype(dtype).reshape(dims)


def _grow(d, extra):
    return d if isinstance(d, Dyn) else d + extra


def _times(d, k):
    return d if isinstance(d, Dyn) else d * k


# ── Pad ───────────────────────────────────────────────────────────────────

PAD_MODE = Enum("PadMode", units=("Reflect", "Replicate", "Circular"), data={"Constant": F32})


@dataclass(frozen=True)
class PadAttrs:
    pads: tuple = attr(ListOf(TupleOf(USIZE, USIZE)), doc="[before, after] for each axis")
    mode: object = attr(PAD_MODE, doc='("Constant", v), "Reflect", "Replicate" or "Circular"')


def _mode_name(mode) -> str:
    return mode if isinstance(mode, str) else mode[0]


def _check_pad_axis(axis, n, before, after, mode):
    if isinstance(n, Dyn) or mode == "Constant" or before == after == 0:
        return
    most = max(before, after)
    if mode == "Reflect":
        want(most < n, f"(C2) Reflect pad {most} on axis {axis} of size {n} needs pad < {n} "
                       "(the mirror excludes the edge element)")
    elif mode == "Circular":
        want(most <= n, f"(C3) Circular pad {most} on axis {axis} of size {n} needs pad <= {n}")
    else:
        want(n > 0, f"(C4) Replicate pad on axis {axis} of size 0: there is no edge to repeat")


def _infer_pad(shapes, a):
    x = shapes[0]
    want(len(a.pads) == x.rank,
         f"(C1) pads has {len(a.pads)} [before, after] pairs, the input has rank {x.rank}")
    mode = _mode_name(a.mode)
    for axis, (n, (before, after)) in enumerate(zip(x.dims, a.pads)):
        _check_pad_axis(axis, n, before, after, mode)
    return x.with_dims(_grow(n, b + e) for n, (b, e) in zip(x.dims, a.pads))


def pad_source(mode: str, p: np.ndarray, n: int) -> np.ndarray:
    """The input index each output position ``p`` (counted from the input start) reads."""
    if mode == "Replicate":
        return np.clip(p, 0, n - 1)
    if mode == "Circular":
        return p % n                      # numpy's % is already non-negative for n > 0
    period = 2 * (n - 1)                  # Reflect: ... c b | a b c d | c b ...
    i = p % period
    return np.where(i >= n, period - i, i)


def _pad_constant(x, axis, before, after, fill):
    """``x`` with ``before``/``after`` copies of ``fill`` added on ``axis``."""
    shape = list(x.shape)
    shape[axis] += before + after
    out = np.full(shape, fill, x.dtype)
    inside = [slice(None)] * x.ndim
    inside[axis] = slice(before, before + x.shape[axis])
    out[tuple(inside)] = x
    return out


def _ref_pad(ctx, x):
    a = ctx.attrs
    mode = _mode_name(a.mode)
    if mode == "Constant":      # the f32 payload value, cast like Cast (ints truncate)
        fill = cast_array(np.float32(a.mode[1]), ctx.out.dtype, x.dtype)
    out = x.copy()
    for axis, (before, after) in enumerate(a.pads):
        if before == after == 0:
            continue
        n = x.shape[axis]
        _check_pad_axis(axis, n, before, after, mode)
        if mode == "Constant":
            out = _pad_constant(out, axis, before, after, fill)
        else:
            p = np.arange(-before, n + after)        # each output index minus `before`
            out = np.take(out, pad_source(mode, p, n), axis=axis)
    return out


def _pad_samples(rng):
    x = _arange(2, 4)
    return [
        Sample((x,), PadAttrs(((1, 2), (0, 1)), ("Constant", 0.5)),
               expect=np.pad(x, ((1, 2), (0, 1)), constant_values=0.5)),
        Sample((x,), PadAttrs(((1, 1), (3, 2)), "Reflect"), tags=("reflect",),
               expect=np.pad(x, ((1, 1), (3, 2)), mode="reflect")),
        Sample((x,), PadAttrs(((2, 0), (3, 3)), "Replicate"), tags=("replicate",),
               expect=np.pad(x, ((2, 0), (3, 3)), mode="edge")),
        Sample((x,), PadAttrs(((2, 2), (4, 1)), "Circular"), tags=("circular",),
               expect=np.pad(x, ((2, 2), (4, 1)), mode="wrap")),
        Sample((np.arange(7, dtype=np.int32),), PadAttrs(((2, 3),), ("Constant", -1.5)),
               tags=("int", "prime-length", "truncate")),
        Sample((_F(3.0),), PadAttrs((), ("Constant", 0.0)), tags=("0-d",)),
        Sample((np.zeros((0, 2), _F),), PadAttrs(((1, 1), (0, 0)), ("Constant", 2.0)),
               tags=("empty",)),
        Sample((np.ones((1, 3), np.float16),), PadAttrs(((2, 2), (0, 0)), "Replicate"),
               tags=("f16", "size-1")),
        Sample((rng.standard_normal((3,)),), PadAttrs(((2, 2),), "Reflect"), tags=("f64",)),
    ]


register(OpDef(
    kind="Pad", family="movement", attrs=PadAttrs, payload="struct", arity=1,
    infer=_infer_pad, check=lambda s, a, o: _infer_pad(s, a), reference=_ref_pad,
    doc="Grows axis `i` by `pads[i] = [before, after]` elements; output index `o` on an axis "
        "of size n reads position `p = o - before`. Inside `0..n-1` it copies the input; "
        "outside, `mode` decides: `Constant(v)` writes `v` (cast to the dtype like Cast: "
        "truncated for integers); `Reflect` mirrors without repeating the edge (`abcd` → "
        "`cb|abcd|cb`, `np.pad` 'reflect'); `Replicate` repeats the edge (`aa|abcd|dd`, "
        "'edge'); `Circular` wraps around (`cd|abcd|ab`, 'wrap').",
    constraints=("C1: len(pads) == rank.",
                 "C2: Reflect: before < n and after < n on each padded axis.",
                 "C3: Circular: before <= n and after <= n on each padded axis.",
                 "C4: Replicate: a padded axis is not empty."),
    samples=_pad_samples, dtypes=ALL_DTYPES,
    notes="RLX has no shape rule for Pad; here the shape is inferred and checked. RLX's CPU "
          "kernel extends Reflect/Circular periodically past the documented limits (C2, C3); "
          "here those pads are errors, as RLX documents.",
))


# ── Tile ──────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class TileAttrs:
    reps: tuple = attr(ListOf(USIZE), doc="copies of the whole tensor along each axis")


def _infer_tile(shapes, a):
    x = shapes[0]
    want(len(a.reps) == x.rank, f"(C1) reps has {len(a.reps)} entries, the input has rank "
                                f"{x.rank}")
    return x.with_dims(_times(d, r) for d, r in zip(x.dims, a.reps))


def _tile_samples(rng):
    x = _arange(2, 3)
    return [
        Sample((x,), TileAttrs((2, 1)), expect=np.concatenate([x, x], 0)),
        Sample((x,), TileAttrs((1, 3)), tags=("odd",)),
        Sample((x,), TileAttrs((0, 2)), tags=("empty", "zero-reps")),
        Sample((_F(4.0),), TileAttrs(()), tags=("0-d",)),
        Sample((np.array([1, 2], np.int32),), TileAttrs((5,)), tags=("int", "prime-length")),
        Sample((rng.standard_normal((1, 2)),), TileAttrs((2, 2)), tags=("f64", "size-1")),
    ]


register(OpDef(
    kind="Tile", family="movement", attrs=TileAttrs, payload="struct", arity=1,
    infer=_infer_tile, check=lambda s, a, o: _infer_tile(s, a),
    reference=lambda ctx, x: np.tile(x, ctx.attrs.reps),
    doc="Repeats the whole tensor `reps[i]` times along axis `i` (`np.tile`), so output dim "
        "`i` is `dims[i] * reps[i]`; blocks repeat, not single elements (`ab` → `abab`). A "
        "rep of 0 makes that axis empty.",
    constraints=("C1: len(reps) == rank.",),
    samples=_tile_samples, dtypes=ALL_DTYPES,
    notes="RLX has no shape rule for Tile; here the shape is inferred and checked.",
))


# ── Trilu ─────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class TriluAttrs:
    upper: bool = attr(BOOL, doc="keep the upper triangle (else the lower)")
    diagonal: int = attr(INT, doc="offset of the boundary diagonal (0 = main, >0 above)")


def _check_trilu(shapes, a, out=None):
    want(shapes[0].rank >= 2, f"(C1) Trilu needs rank >= 2, got rank {shapes[0].rank}")


def _ref_trilu(ctx, x):
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]      # j - i
    d = ctx.attrs.diagonal
    keep = offset >= d if ctx.attrs.upper else offset <= d
    return np.where(keep, x, np.zeros((), x.dtype))


def _trilu_samples(rng):
    x = _arange(3, 4) + 1
    nan = np.full((3, 3), np.nan, _F)
    return [
        Sample((x,), TriluAttrs(True, 0), expect=np.triu(x)),
        Sample((x,), TriluAttrs(False, 0), expect=np.tril(x)),
        Sample((x,), TriluAttrs(True, -1), tags=("negative-diagonal",), expect=np.triu(x, -1)),
        Sample((x,), TriluAttrs(False, 2), expect=np.tril(x, 2)),
        Sample((_arange(2, 3, 3),), TriluAttrs(True, 1), tags=("batched",)),
        Sample((nan,), TriluAttrs(True, 0), tags=("nan",), expect=np.triu(nan)),
        Sample((np.zeros((0, 3), _F),), TriluAttrs(False, 0), tags=("empty",)),
        Sample((np.arange(1, 6, dtype=np.int32).reshape(1, 5),), TriluAttrs(True, 2),
               tags=("int", "size-1", "prime-length")),
        Sample((rng.standard_normal((2, 2)),), TriluAttrs(False, -1), tags=("f64",)),
    ]


register(OpDef(
    kind="Trilu", family="movement", attrs=TriluAttrs, payload="struct", arity=1,
    infer=lambda s, a: s[0], check=_check_trilu, reference=_ref_trilu,
    doc="On the last two axes (row i, column j) keeps the elements with `j - i >= diagonal` "
        "when `upper` (`np.triu(x, diagonal)`) or `j - i <= diagonal` otherwise "
        "(`np.tril`); every other element becomes exactly 0, even when it was NaN or inf. "
        "Leading axes are batch axes.",
    constraints=("C1: rank >= 2.",),
    samples=_trilu_samples, dtypes=ALL_DTYPES,
    notes="Kept apart from RLX for a defect of its lowering: RLX's LowerStructural pass "
          "rewrites Trilu as a multiply by a 0/1 mask, which changes what it should zero "
          "(NaN and ±inf become NaN, negatives -0), so the rewrite is not the op it "
          "replaces (ONNX Trilu, which RLX imports, writes zeros). The oracle writes +0 "
          "there, as np.triu and a native kernel do. RLX has no shape rule for Trilu; here "
          "the shape is inferred.",
))


# ── ResizeNearest2x ───────────────────────────────────────────────────────

def _infer_resize(shapes, a):
    x = shapes[0]
    want(x.rank == 4, f"(C1) ResizeNearest2x needs an NCHW (rank 4) input, got rank {x.rank}")
    n, c, h, w = x.dims
    return x.with_dims((n, c, _times(h, 2), _times(w, 2)))


def _resize_samples(rng):
    x = _arange(1, 2, 2, 3)
    return [
        Sample((x,), None, expect=x.repeat(2, axis=2).repeat(2, axis=3)),
        Sample((_arange(2, 1, 3, 1),), None, tags=("size-1", "odd")),
        Sample((np.zeros((1, 2, 0, 2), _F),), None, tags=("empty",)),
        Sample((np.arange(4, dtype=np.int32).reshape(1, 1, 2, 2),), None, tags=("int",)),
        Sample((rng.standard_normal((1, 1, 1, 2)),), None, tags=("f64",)),
    ]


register(OpDef(
    kind="ResizeNearest2x", family="movement", payload="unit", arity=1, caps=Caps.TRANSFORM,
    infer=_infer_resize, check=lambda s, a, o: _infer_resize(s, a),
    reference=lambda ctx, x: x.repeat(2, axis=2).repeat(2, axis=3),
    doc="Nearest-neighbour 2x upsampling of an NCHW tensor `[N, C, H, W]` to "
        "`[N, C, 2H, 2W]`: `out[n, c, y, x] = in[n, c, y // 2, x // 2]`.",
    constraints=("C1: the input has rank 4 (NCHW).",),
    samples=_resize_samples, dtypes=ALL_DTYPES,
    notes="RLX infers a shape only for rank 4 and leaves other ranks unchecked; here other "
          "ranks are verifier errors.",
))
