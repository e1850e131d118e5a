"""Conv family: Conv, ConvTranspose2d, Pool, Im2Col (NCHW windows over spatial axes).

Shapes, payload rules and checks live here; the numpy references are in ``_conv_ref.py``.
RLX leaves these output shapes to the declaration (its ``infer_shape`` returns None); rlx_ref
infers the true shape so the verifier catches a wrong declaration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, per_op, reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _conv_ref as R
from .codec import USIZE, Enum, ListOf, attr
from .opdef import Caps, OpDef, compute_dtype, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
BLAS_BOUNDARY = Caps.BLAS | Caps.FUSION_BOUNDARY
ROWS_SYM = 2   # RLX's dynamic::sym::ROWS (Im2Col rows when the batch is dynamic)
_LIST = ListOf(USIZE)


@dataclass(frozen=True)
class ConvAttrs:
    kernel_size: tuple = attr(_LIST, doc="[kH, kW] (rank-3 input: [1, kL])")
    stride: tuple = attr(_LIST, (1, 1), doc="[sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (0, 0), doc="[pH, pW], symmetric; missing entries are 0")
    dilation: tuple = attr(_LIST, (1, 1), doc="[dH, dW]; missing entries are 1")
    groups: int = attr(USIZE, 1, doc="channel groups (C_in and C_out both divisible)")


@dataclass(frozen=True)
class ConvTransposeAttrs:
    kernel_size: tuple = attr(_LIST, doc="[kH, kW] (rank-3 input: [1, kL])")
    stride: tuple = attr(_LIST, (1, 1), doc="[sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (0, 0), doc="[pH, pW] cropped from each side")
    dilation: tuple = attr(_LIST, (1, 1), doc="[dH, dW]; missing entries are 1")
    output_padding: tuple = attr(_LIST, (0, 0), doc="extra rows/cols at the far end")
    groups: int = attr(USIZE, 1, doc="channel groups")


POOL_ENUM = Enum("ReduceOp", units=("Sum", "Mean", "Max", "Min", "Prod"))


@dataclass(frozen=True)
class PoolAttrs:
    kind: str = attr(POOL_ENUM, doc="the window reduction")
    kernel_size: tuple = attr(_LIST, doc="[kH, kW] (2-D) or [kD, kH, kW] (3-D)")
    stride: tuple = attr(_LIST, (), doc="per spatial axis; missing entries are 1")
    padding: tuple = attr(_LIST, (), doc="symmetric, per spatial axis; missing entries are 0")


@dataclass(frozen=True)
class Im2ColAttrs:
    kernel_size: tuple = attr(_LIST, doc="[kH, kW]")
    stride: tuple = attr(_LIST, (1, 1), doc="[sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (0, 0), doc="[pH, pW]; missing entries are 0")
    dilation: tuple = attr(_LIST, (1, 1), doc="[dH, dW]; missing entries are 1")


# ── shared payload checks ──────────────────────────────────────────────────

def _window(a, n: int, fields=("stride", "padding", "dilation")) -> dict:
    """kernel_size plus the per-axis fields, each padded to ``n`` entries and validated."""
    k = tuple(a.kernel_size)
    want(len(k) == n, f"(C2) kernel_size has {len(k)} entries, expected {n}")
    want(all(v >= 1 for v in k), f"(C2) kernel_size entries must be >= 1, got {list(k)}")
    out = {"kernel": k}
    for f in fields:
        out[f] = R.per_axis(a, f, n)
        if f in ("stride", "dilation"):
            want(all(v >= 1 for v in out[f]), f"(C2) {f} entries must be >= 1, got "
                                               f"{list(out[f])}")
    return out


def _float_operands(shapes, kind: str) -> None:
    dts = [s.dtype for s in shapes]
    want(all(d == dts[0] for d in dts),
         f"(C4) {kind} operands must share one dtype, got {', '.join(map(str, dts))}")
    want(dts[0].is_float, f"(C4) {kind} is defined on float tensors, got {dts[0]}")


def _dims_or_none(shape, skip_batch=True):
    """Static dims (batch may be dynamic); None when another dim is dynamic."""
    dims = shape.dims
    rest = dims[1:] if skip_batch else dims
    return None if any(isinstance(d, Dyn) for d in rest) else dims


# ── Conv and ConvTranspose2d ───────────────────────────────────────────────

def _conv_geometry(shapes, a, transpose: bool):
    """Validate Conv/ConvTranspose2d and return the output Shape (None when dims are dynamic)."""
    kind = "ConvTranspose2d" if transpose else "Conv"
    x, w = shapes
    want(x.rank in (3, 4), f"(C1) {kind} input must be NCHW (rank 4) or NCL (rank 3), "
                           f"got rank {x.rank} {x}")
    want(w.rank == x.rank, f"(C1) {kind} weight must have the input's rank {x.rank}, "
                           f"got rank {w.rank} {w}")
    fields = ("stride", "padding", "dilation") + (("output_padding",) if transpose else ())
    g = _window(a, 2, fields)
    want(a.groups >= 1, f"(C3) groups must be >= 1, got {a.groups}")
    if x.rank == 3:
        want(g["kernel"][0] == 1 and g["padding"][0] == 0
             and g.get("output_padding", (0,))[0] == 0,
             f"(C2) a rank-3 input [N, C, L] is read as [N, C, 1, L]: kernel_size[0] must be 1 "
             f"and padding[0]{' and output_padding[0]' if transpose else ''} 0, got "
             f"kernel_size {list(a.kernel_size)}, padding {list(a.padding)}")
    if transpose:
        for ax, op, s, d in zip("HW", g["output_padding"], g["stride"], g["dilation"]):
            want(op < max(s, d), f"(C2) output_padding {op} along {ax} must be smaller than "
                                 f"stride {s} or dilation {d}")
    _float_operands(shapes, kind)
    xd, wd = _dims_or_none(x), _dims_or_none(w, skip_batch=False)
    if xd is None or wd is None:
        return None
    k_w = wd[2:] if x.rank == 4 else (1,) + tuple(wd[2:])
    want(tuple(k_w) == g["kernel"],
         f"(C2) kernel_size {list(a.kernel_size)} does not match the weight's spatial dims "
         f"{list(wd[2:])} (weight {w})")
    c_in, groups = xd[1], a.groups
    if transpose:
        want(wd[0] == c_in, f"(C3) conv_transpose2d weight C_in={wd[0]} != input C={c_in} "
                            f"(weight is [C_in, C_out/groups, kH, kW])")
        want(c_in % groups == 0, f"(C3) groups={groups} does not divide C_in={c_in}")
        c_out = wd[1] * groups
    else:
        want(wd[1] * groups == c_in, f"(C3) conv2d weight C_in/g={wd[1]} * groups={groups} "
                                     f"!= input C={c_in}")
        want(wd[0] % groups == 0, f"(C3) groups={groups} does not divide C_out={wd[0]}")
        c_out = wd[0]
    spatial = (1,) + tuple(xd[2:]) if x.rank == 3 else tuple(xd[2:])
    outs = []
    for i, ax in enumerate("HW"):
        if transpose:
            outs.append(R.conv_transpose_out_size(
                spatial[i], g["kernel"][i], g["stride"][i], g["padding"][i],
                g["dilation"][i], g["output_padding"][i], ax))
        else:
            outs.append(R.conv_out_size(spatial[i], g["kernel"][i], g["stride"][i],
                                        g["padding"][i], g["dilation"][i], ax))
    dims = (xd[0], c_out) + (tuple(outs) if x.rank == 4 else (outs[1],))
    return Shape(dims, x.dtype)


def _check_conv(shapes, a, out):
    _conv_geometry(shapes, a, False)


def _check_conv_t(shapes, a, out):
    _conv_geometry(shapes, a, True)


def _lazy_samples(name: str):
    """Samples live in ``_conv_samples``, which imports this module's attrs classes."""
    def samples(rng):
        from . import _conv_samples

        return getattr(_conv_samples, name)(rng)
    return samples


def _as_4d(x, w):
    """Rank-3 NCL operands viewed as NCHW with H = 1."""
    if x.ndim == 3:
        return x[:, :, None, :], w[:, :, None, :]
    return x, w


def _ref_conv(ctx, x, w):
    g = _window(ctx.attrs, 2)
    x4, w4 = _as_4d(compute_dtype(x), compute_dtype(w))
    out = R.conv2d(x4, w4, g["stride"], g["padding"], g["dilation"], ctx.attrs.groups)
    return out.reshape(ctx.out_dims).astype(ctx.out_np)


def _ref_conv_transpose(ctx, x, w):
    g = _window(ctx.attrs, 2, ("stride", "padding", "dilation", "output_padding"))
    x4, w4 = _as_4d(compute_dtype(x), compute_dtype(w))
    out = R.conv_transpose2d(x4, w4, g["stride"], g["padding"], g["dilation"],
                             g["output_padding"], ctx.attrs.groups)
    return out.reshape(ctx.out_dims).astype(ctx.out_np)






_CONV_DOC = (
    "2-D cross-correlation (no kernel flip) on NCHW: `x [N, C_in, H, W]`, weight "
    "`w [C_out, C_in/groups, kH, kW]`, no bias (add one with `Binary Add`). "
    "`out[n, co, ho, wo] = Σ_c Σ_i Σ_j x[n, g·C_in/groups + c, ho·sH + i·dH − pH, "
    "wo·sW + j·dW − pW] · w[co, c, i, j]` with `g = co // (C_out/groups)`; positions outside "
    "the input read 0 (zero padding, symmetric). "
    "`H_out = (H + 2pH − dH(kH−1) − 1) // sH + 1` (floor), likewise W. A rank-3 `[N, C, L]` "
    "input is read as `[N, C, 1, L]` (weight `[C_out, C_in/groups, kL]`, kernel_size `[1, kL]`)"
    " and the output is `[N, C_out, L_out]`."
)
_CONV_CONSTRAINTS = (
    "C1: x is rank 4 (NCHW) or rank 3 (NCL); w has the same rank.",
    "C2: kernel_size has 2 entries >= 1 equal to w's spatial dims; stride, padding, dilation "
    "have at most 2 entries (missing: stride 1, padding 0, dilation 1); stride, dilation >= 1; "
    "rank 3 needs kernel_size[0] = 1 and padding[0] = 0.",
    "C3: groups >= 1; w.dim1 · groups == C_in; groups divides C_out.",
    "C4: x and w share one float dtype; the output has it.",
    "C5: the dilated kernel fits the padded input on each axis: in + 2p >= d(k−1) + 1.",
    "C6: the output is [N, C_out, H_out, W_out] (rank 3: [N, C_out, L_out]).",
)

register(OpDef(
    kind="Conv", family="conv", attrs=ConvAttrs, payload="struct", arity=2,
    caps=BLAS_BOUNDARY, input_names=("x", "w"),
    check=_check_conv, infer=lambda s, a: _conv_geometry(s, a, False), reference=_ref_conv,
    doc=_CONV_DOC, constraints=_CONV_CONSTRAINTS, samples=_lazy_samples("conv_samples"),
    accuracy=reduction(2, lambda a, s: s[1].numel // s[1].dims[0]),  # C_in/groups · kvol
    dtypes=FLOATS,
    notes="RLX's infer_shape returns None for Conv; rlx_ref infers the true shape. RLX's "
          "conv2d_spatial_output saturates to 1 when the dilated kernel exceeds the padded "
          "input; rlx_ref rejects that (C5). RLX's CPU relabels an `[N, C, 1, L]` input with "
          "kernel_size `[k, 1]` (ONNX 1-D import) so the k taps run along L; rlx_ref computes "
          "the literal 2-D convolution, which C5 rejects for that case: write such convs as "
          "rank 3 with kernel_size `[1, k]` or as `[N, C, L, 1]`. Floats only (RLX: f32). "
          "16-bit floats accumulate in f32.",
))




register(OpDef(
    kind="ConvTranspose2d", family="conv", attrs=ConvTransposeAttrs, payload="struct",
    arity=2, caps=BLAS_BOUNDARY, input_names=("x", "w"),
    check=_check_conv_t,
    infer=lambda s, a: _conv_geometry(s, a, True), reference=_ref_conv_transpose,
    doc="Transposed 2-D convolution (the adjoint of `Conv` with the same geometry) on NCHW: "
        "`x [N, C_in, H, W]`, weight `w [C_in, C_out/groups, kH, kW]` (PyTorch layout), no "
        "bias. Scatter form: every `x[n, ci, iy, ix] · w[ci, o, i, j]` is added to "
        "`out[n, g·C_out/groups + o, iy·sH + i·dH − pH, ix·sW + j·dW − pW]` (g = ci // "
        "(C_in/groups)); contributions that land outside the output are dropped. "
        "`H_out = (H − 1)·sH + opH + dH(kH − 1) − 2pH + 1`, likewise W; output_padding only "
        "adds rows/cols at the far end (they receive whatever taps reach them). Rank-3 "
        "`[N, C, L]` inputs are read as `[N, C, 1, L]` like Conv.",
    constraints=(
        "C1: x is rank 4 (NCHW) or rank 3 (NCL); w has the same rank.",
        "C2: kernel_size has 2 entries >= 1 equal to w's spatial dims; stride, padding, "
        "dilation, output_padding have at most 2 entries (missing: 1, 0, 1, 0); stride, "
        "dilation >= 1; output_padding < max(stride, dilation) per axis; rank 3 needs "
        "kernel_size[0] = 1, padding[0] = 0, output_padding[0] = 0.",
        "C3: groups >= 1 divides C_in; w.dim0 == C_in; C_out = w.dim1 · groups.",
        "C4: x and w share one float dtype; the output has it.",
        "C5: the input is non-empty spatially and H_out, W_out >= 1.",
        "C6: the output is [N, C_out, H_out, W_out] (rank 3: [N, C_out, L_out]).",
    ),
    samples=_lazy_samples("conv_t_samples"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[1].dims[0] // a.groups * int(np.prod(s[1].dims[2:]))),
    notes="RLX's infer_shape returns None for ConvTranspose2d; rlx_ref infers the PyTorch "
          "shape (RLX's builder formula). The output_padding < max(stride, dilation) rule is "
          "PyTorch's; RLX does not check it. RLX's CPU kernel takes the output size from the "
          "declared shape and ignores output_padding, which gives the same values.",
))


# ── Pool ───────────────────────────────────────────────────────────────────

def _pool_geometry(shapes, a):
    (x,) = shapes
    n = len(a.kernel_size)
    want(n in (2, 3), f"(C2) kernel_size has {n} entries, expected 2 (NCHW) or 3 (NCDHW)")
    want(x.rank == n + 2, f"(C1) a {n}-D pool needs a rank-{n + 2} input "
                          f"({'NCHW' if n == 2 else 'NCDHW'}), got rank {x.rank} {x}")
    g = _window(a, n, ("stride", "padding"))
    want(a.kind in POOL_ENUM.units, f"(C3) unknown pool kind {a.kind!r}")
    want(x.dtype.is_float, f"(C4) Pool is defined on float tensors, got {x.dtype}")
    xd = _dims_or_none(x)
    if xd is None:
        return None
    outs = [R.pool_out_size(sz, k, s, p, ax) for sz, k, s, p, ax in
            zip(xd[2:], g["kernel"], g["stride"], g["padding"], "DHW"[-n:])]
    return Shape(tuple(xd[:2]) + tuple(outs), x.dtype)


def _check_pool(shapes, a, out):
    _pool_geometry(shapes, a)


def _ref_pool(ctx, x):
    g = _window(ctx.attrs, len(ctx.attrs.kernel_size), ("stride", "padding"))
    with np.errstate(invalid="ignore", over="ignore"):
        out = R.pool(compute_dtype(x), ctx.attrs.kind, g["kernel"], g["stride"], g["padding"])
    return np.asarray(out).astype(ctx.out_np)




register(OpDef(
    kind="Pool", family="conv", attrs=PoolAttrs, payload="struct", arity=1, caps=Caps.NONE,
    input_names=("x",), check=_check_pool, infer=lambda s, a: _pool_geometry(s, a),
    reference=_ref_pool,
    doc="Sliding-window reduction over the spatial axes of NCHW (2-D, `kernel_size` "
        "`[kH, kW]`) or NCDHW (3-D, `[kD, kH, kW]`) input; no dilation. Window `(ho, wo)` "
        "covers input rows `ho·sH − pH .. ho·sH − pH + kH − 1` (likewise columns and depth); "
        "`H_out = (H + 2pH − kH) // sH + 1` (floor, no ceil mode). Padding positions are "
        "**skipped** by `Max`, `Min`, `Sum` and `Prod` (they never win a max/min; a window "
        "made only of padding gives -inf / +inf / 0 / 1), while `Mean` divides the in-range "
        "sum by the full window size `kH·kW` (`kD·kH·kW`): **padding counts as zeros in Mean** "
        "(PyTorch's count_include_pad=True). `Max`/`Min` propagate NaN.",
    constraints=(
        "C1: x is rank 4 for a 2-D pool, rank 5 for a 3-D pool.",
        "C2: kernel_size has 2 or 3 entries >= 1; stride and padding have at most as many "
        "(missing: stride 1, padding 0); stride >= 1.",
        "C3: kind is Sum, Mean, Max, Min or Prod.",
        "C4: x is float; the output has its dtype.",
        "C5: every padded spatial axis holds at least one window: in + 2p >= k.",
        "C6: the output is [N, C, *out] with out = (in + 2p − k) // s + 1.",
    ),
    samples=_lazy_samples("pool_samples"), dtypes=FLOATS,
    accuracy=per_op({"Sum": reduction(2, lambda a, s: int(np.prod(a.kernel_size))),
                     "Mean": reduction(2, lambda a, s: int(np.prod(a.kernel_size)), mean=True),
                     "Prod": reduction(2, lambda a, s: int(np.prod(a.kernel_size)), "value"),
                     "Max": exact(), "Min": exact()}, key="kind"),
    notes="RLX's infer_shape returns None for Pool; rlx_ref infers the builder's shape. "
          "RLX's CPU Pool2D computes Sum for Sum, Min and Prod alike (`_ => acc += v`); "
          "rlx_ref gives each kind its own reduction. RLX's comparison-based max drops NaN; "
          "rlx_ref propagates it (as numpy and PyTorch do). Floats only.",
))


# ── Im2Col ─────────────────────────────────────────────────────────────────

def _im2col_geometry(shapes, a):
    (x,) = shapes
    want(x.rank == 4, f"(C1) Im2Col input must be NCHW (rank 4), got rank {x.rank} {x}")
    g = _window(a, 2)
    want(x.dtype.is_float, f"(C4) Im2Col is defined on float tensors, got {x.dtype}")
    xd = _dims_or_none(x)
    if xd is None:
        return None
    n, c, h, w = xd
    ho, wo = (R.conv_out_size(sz, k, s, p, d, ax) for sz, k, s, p, d, ax in
              zip((h, w), g["kernel"], g["stride"], g["padding"], g["dilation"], "HW"))
    rows = Dyn(ROWS_SYM) if isinstance(n, Dyn) else n * ho * wo
    return Shape((rows, c * g["kernel"][0] * g["kernel"][1]), x.dtype)


def _check_im2col(shapes, a, out):
    _im2col_geometry(shapes, a)


def _ref_im2col(ctx, x):
    g = _window(ctx.attrs, 2)
    out = R.im2col(compute_dtype(x), g["kernel"], g["stride"], g["padding"], g["dilation"])
    return out.astype(ctx.out_np)




register(OpDef(
    kind="Im2Col", family="conv", attrs=Im2ColAttrs, payload="struct", arity=1,
    caps=BLAS_BOUNDARY, input_names=("x",), check=_check_im2col,
    infer=lambda s, a: _im2col_geometry(s, a), reference=_ref_im2col,
    doc="Unfolds the conv windows of an NCHW input into a matrix so a convolution becomes a "
        "MatMul: output `[N·H_out·W_out, C·kH·kW]` with "
        "`out[(n·H_out + ho)·W_out + wo, (c·kH + i)·kW + j] = x[n, c, ho·sH + i·dH − pH, "
        "wo·sW + j·dW − pW]`, 0 outside the input (zero padding). H_out, W_out follow Conv. "
        "`Conv(x, w) == (Im2Col(x) @ w.reshape(C_out, −1).T)` reshaped to "
        "`[N, H_out, W_out, C_out]` and transposed to NCHW (groups = 1). With a dynamic batch "
        "the row count is RLX's ROWS symbol `?2`.",
    constraints=(
        "C1: x is rank 4 (NCHW).",
        "C2: kernel_size has 2 entries >= 1; stride, padding, dilation have at most 2 entries "
        "(missing: 1, 0, 1); stride, dilation >= 1.",
        "C3: the output is [N·H_out·W_out, C·kH·kW] (rows ?2 when N is dynamic).",
        "C4: x is float; the output has its dtype.",
        "C5: the dilated kernel fits the padded input on each axis.",
    ),
    samples=_lazy_samples("im2col_samples"), dtypes=FLOATS, accuracy=exact(True),
    notes="RLX's shape rule takes kernel_size[1] as 1 when absent; rlx_ref requires both "
          "entries, as RLX's CPU kernel does. RLX saturates an oversized kernel to one "
          "output position; rlx_ref rejects it (C5).",
))
