"""Scaled family (native low-precision GEMM operands): ScaledQuantScale, ScaledQuantize,
ScaledDequantize, ScaledMatMul and ScaledGroupedMatMul, with RLX's payloads
(``rlx-ir/src/op.rs``, formats and layouts in ``rlx-ir/src/quant.rs``) and its CPU
reference oracle's arithmetic (``_scaled_math``; codec in ``_lowp_codec``).

Codes travel as U8 tensors of the logical shape, one code per byte; the element format
is on the payload. Scales run along the last (contraction) axis: one f32 for PerTensor,
one E8M0 byte per ``block`` elements (OCP MX) or one FP8 E4M3 byte per ``group`` (NVFP4).
Matmuls are TN: ``lhs [m, k]``, ``rhs [n, k]``, ``out = lhs · rhsᵀ`` in f32.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..conformance.accuracy import exact, reduction, ulp
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _lowp_codec as lc
from . import _scaled_math as sm
from ._scaled_samples import (dequantize_samples, grouped_samples, matmul_samples,
                              quantize_samples, scale_samples)
from .codec import BOOL, attr
from .opdef import Caps, OpDef, register, want

U8, F32 = DType.U8, DType.F32


@dataclass(frozen=True)
class ScaledQuantAttrs:
    format: object = attr(lc.FORMAT, doc="element format: F8E4M3, F8E5M2, F8E4M3Fnuz, "
                          "F8E5M2Fnuz, F6E2M3, F6E3M2, F4E2M1 or {\"Custom\":{...}}")
    scale_layout: object = attr(lc.LAYOUT, doc="PerTensor, {\"BlockMxE8M0\":{\"block\":b}} "
                                "or {\"Nvfp4\":{\"group\":g}}")


@dataclass(frozen=True)
class ScaledMatMulAttrs:
    lhs_format: object = attr(lc.FORMAT, doc="element format of lhs (the input)")
    rhs_format: object = attr(lc.FORMAT, doc="element format of rhs (the weight)")
    scale_layout: object = attr(lc.LAYOUT, doc="shared by both operands' scales")
    has_bias: bool = attr(BOOL, doc="a trailing f32 bias operand is present")


def _scale_dtype(layout) -> DType:
    return F32 if lc.layout_tag(layout) == "PerTensor" else U8


# ── checks ───────────────────────────────────────────────────────────────────

def _check_payload(kind: str, formats, layout):
    for f in formats:
        why = lc.format_problem(f)
        want(not why, f"(C1) {kind}: {why}")
    want(lc.layout_tag(layout) == "PerTensor" or lc.block_of(layout) > 0,
         f"(C1) {kind}: a block layout needs a block/group of at least 1, got 0")


def _want_dtype(kind: str, s: Shape, dt: DType, name: str, cid: str):
    want(s.dtype is dt, f"({cid}) {kind} operand `{name}` must be {dt}, got {s.dtype}")


def _check_scale(kind, s: Shape, rows, cols, layout, name: str, cid: str):
    """The scale operand: the layout's dtype and exactly the count RLX reads."""
    _want_dtype(kind, s, _scale_dtype(layout), name, cid)
    if not (s.is_static and all(isinstance(d, int) for d in (rows, cols))):
        return
    n = sm.scale_count(rows, cols, layout)
    want(s.numel == n, f"({cid}) {kind} `{name}` must hold {n} scale(s) ({_count_text(layout)}),"
                       f" got shape {s.dims_text()}")


def _count_text(layout) -> str:
    if lc.layout_tag(layout) == "PerTensor":
        return "one f32 for PerTensor"
    return f"rows · ceil(cols / {lc.block_of(layout)}) bytes"


def _rows_cols(s: Shape):
    """(rows, cols) of a static shape, else (None, None)."""
    return sm.rows_cols(s.dims) if s.is_static else (None, None)


def _check_quant_kind(kind, in_dt, names):
    def check(shapes, a, out):
        _check_payload(kind, (a.format,), a.scale_layout)
        x = shapes[0]
        _want_dtype(kind, x, in_dt, names[0], "C2")
        want(x.rank >= 1, f"(C2) {kind} `{names[0]}` needs rank >= 1 (its last axis is the "
                          f"blocked one), got a 0-d tensor")
        if len(shapes) > 1:
            rows, cols = _rows_cols(x)
            _check_scale(kind, shapes[1], rows, cols, a.scale_layout, "scale", "C3")
    return check


def _check_matmul(shapes, a, out):
    kind = "ScaledMatMul"
    _check_payload(kind, (a.lhs_format, a.rhs_format), a.scale_layout)
    want(len(shapes) == 4 + a.has_bias, f"(C2) {kind} takes lhs, rhs, lhs_scale, rhs_scale"
         f"{' and bias' if a.has_bias else ''} ({4 + a.has_bias} operands), got {len(shapes)}")
    lhs, rhs = shapes[0], shapes[1]
    for s, n in ((lhs, "lhs"), (rhs, "rhs")):
        _want_dtype(kind, s, U8, n, "C3")
        want(s.rank == 2, f"(C3) {kind} `{n}` must be rank 2 (TN: lhs [m, k], rhs [n, k]), "
                          f"got rank {s.rank}")
    k = lhs.dims[1]
    want(isinstance(k, Dyn) or isinstance(rhs.dims[1], Dyn) or rhs.dims[1] == k,
         f"(C4) {kind} lhs and rhs must share k (their last dim): {lhs.dims_text()} vs "
         f"{rhs.dims_text()}")
    _check_scale(kind, shapes[2], lhs.dims[0], k, a.scale_layout, "lhs_scale", "C5")
    _check_scale(kind, shapes[3], rhs.dims[0], k, a.scale_layout, "rhs_scale", "C5")
    if a.has_bias:
        b = shapes[4]
        _want_dtype(kind, b, F32, "bias", "C6")
        want(b.rank == 1 and (isinstance(b.dims[0], Dyn) or b.dims[0] == rhs.dims[0]),
             f"(C6) {kind} bias must be [n] = [{rhs.dims[0]}], got {b.dims_text()}")


def _check_grouped(shapes, a, out):
    kind = "ScaledGroupedMatMul"
    _check_payload(kind, (a.lhs_format, a.rhs_format), a.scale_layout)
    want(len(shapes) == 5 + a.has_bias, f"(C2) {kind} takes input, weight, input_scale, "
         f"weight_scale, expert_idx{' and bias' if a.has_bias else ''} "
         f"({5 + a.has_bias} operands), got {len(shapes)}")
    inp, w, ids = shapes[0], shapes[1], shapes[4]
    _want_dtype(kind, inp, U8, "input", "C3")
    _want_dtype(kind, w, U8, "weight", "C3")
    want(inp.rank == 2 and w.rank == 3, f"(C3) {kind} needs input [m, k] and weight "
         f"[E, n, k], got ranks {inp.rank} and {w.rank}")
    want(any(isinstance(d, Dyn) for d in (inp.dims[1], w.dims[2])) or inp.dims[1] == w.dims[2],
         f"(C4) {kind} input and weight must share k: {inp.dims_text()} vs {w.dims_text()}")
    ne, n = w.dims[0], w.dims[1]
    _check_scale(kind, shapes[2], inp.dims[0], inp.dims[1], a.scale_layout, "input_scale",
                 "C5")
    rows = ne * n if isinstance(ne, int) and isinstance(n, int) else None
    _check_scale(kind, shapes[3], rows, w.dims[2], a.scale_layout, "weight_scale", "C5")
    _want_dtype(kind, ids, F32, "expert_idx", "C6")
    want(ids.numel is None or not isinstance(inp.dims[0], int) or ids.numel == inp.dims[0],
         f"(C6) {kind} expert_idx must hold one id per input row ({inp.dims[0]}), got "
         f"{ids.dims_text()}")
    if a.has_bias:
        _want_dtype(kind, shapes[5], F32, "bias", "C7")
        want(shapes[5].numel is None or rows is None or shapes[5].numel == rows,
             f"(C7) {kind} bias must hold E·n = {rows} values ([E, n]), got "
             f"{shapes[5].dims_text()}")


# ── shapes and references ────────────────────────────────────────────────────

def _infer_scale(shapes, a):
    """[1] f32 (PerTensor), else x's dims with the last one ceil(K / block), U8"""
    if lc.layout_tag(a.scale_layout) == "PerTensor":
        return Shape((1,), F32)
    x = shapes[0]
    if x.rank == 0 or isinstance(x.dims[-1], Dyn):
        return None
    return Shape(x.dims[:-1] + (sm.nblk(x.dims[-1], a.scale_layout),), U8)


def _ref_scale(ctx, x):
    raw = sm.quant_scales(x, ctx.attrs.format, ctx.attrs.scale_layout)
    out = sm.stored_scales(raw, ctx.attrs.scale_layout)
    return out.reshape(ctx.out_dims).astype(ctx.out_np)


def _ref_quantize(ctx, x, scale):
    return sm.quantize(x, scale, ctx.attrs.format, ctx.attrs.scale_layout)


def _ref_dequantize(ctx, codes, scale):
    dt = ctx.out_np
    return sm.dequantize(codes, scale, ctx.attrs.format, ctx.attrs.scale_layout, dt)


def _ref_matmul(ctx, lhs, rhs, ls, rs, *bias):
    out = sm.scaled_matmul(ctx.attrs, lhs, rhs, ls, rs, bias[0] if bias else None,
                           ctx.out_np)
    return out.astype(ctx.out_np)


def _ref_grouped(ctx, inp, w, isc, wsc, ids, *bias):
    out = sm.scaled_grouped_matmul(ctx.attrs, inp, w, isc, wsc, ids,
                                   bias[0] if bias else None, ctx.out_np)
    return out.astype(ctx.out_np)


def _infer_matmul(shapes, a):
    """[m, n] f32 (m = lhs.dims[0], n = rhs.dims[0])"""
    if shapes[0].rank < 2 or shapes[1].rank < 2:
        return None
    return Shape((shapes[0].dims[-2], shapes[1].dims[-2]), F32)


def _infer_grouped(shapes, a):
    """[m, n] f32 (m = input.dims[0], n = weight.dims[1])"""
    if shapes[0].rank < 2 or shapes[1].rank < 3:
        return None
    return Shape((shapes[0].dims[-2], shapes[1].dims[-2]), F32)


def _k(a, s) -> int:
    k = s[0].dims[-1] if s[0].rank else 1
    return k if isinstance(k, int) else 64


# ── registrations ────────────────────────────────────────────────────────────

_C1 = ("C1: every format decodes (a Custom one has exp_bits >= 1 and 1 + exp_bits + "
       "mant_bits <= 8) and a block layout's block/group is at least 1.")
_SCALE_DOC = ("Scales: PerTensor one f32; BlockMxE8M0 one E8M0 byte (2^(b-127)) and Nvfp4 "
              "one FP8 E4M3 byte per block of the last axis, rows·ceil(cols/block) of them "
              "row-major.")
_CODEC = ("`encode` is RLX's nearest-code search: ties go to the code with the lower "
          "lowest bit, an exact or rounded zero to +0, a finite overflow saturates, and NaN "
          "and ±inf give code 0.")

register(OpDef(
    kind="ScaledQuantScale", family="scaled", attrs=ScaledQuantAttrs, payload="struct",
    arity=1, caps=Caps.NONE, infer=_infer_scale,
    check=_check_quant_kind("ScaledQuantScale", F32, ("x",)), reference=_ref_scale,
    input_names=("x",),
    doc="The scale tensor for quantizing x to `format`: `s = amax / max_finite(format)` "
        "(1 where amax = 0), amax the largest |x| (NaN ignored) of the whole tensor "
        "(PerTensor: `[1]` f32) or of each block of the last axis (block layouts, `[..., "
        "ceil(K/block)]` U8). A block scale is stored as E8M0 `ceil(log2 s) + 127` "
        "(clamped to 0..254; non-finite or non-positive s gives 0) or as the nearest FP8 "
        "E4M3 code (Nvfp4).",
    constraints=(_C1, "C2: x is an f32 tensor of rank >= 1."),
    samples=scale_samples, dtypes=(F32,), accuracy=ulp(1),
    notes="RLX declares the output shape in its builder; its shape rule is the one used "
          "here. RLX has no verifier rule for C1-C2 (an f16 x is read as f32 there).",
))

register(OpDef(
    kind="ScaledQuantize", family="scaled", attrs=ScaledQuantAttrs, payload="struct",
    arity=2, caps=Caps.NONE, infer=lambda s, a: s[0].with_dtype(U8),
    check=_check_quant_kind("ScaledQuantize", F32, ("x", "scale")), reference=_ref_quantize,
    input_names=("x", "scale"),
    doc="Encode x to `format` codes: `code = encode(x / s)` with s the element's block "
        "scale (0 where s = 0), one code per byte, x's shape, U8. " + _CODEC + " " +
        _SCALE_DOC,
    constraints=(_C1, "C2: x is an f32 tensor of rank >= 1.",
                 "C3: scale has the layout's dtype (f32 PerTensor, else U8) and holds "
                 "exactly its count (1, or rows·ceil(cols/block))."),
    samples=quantize_samples, dtypes=(F32,), accuracy=exact(),
    notes="RLX's codec documentation says ±inf saturates to the largest finite code; its "
          "exhaustive search (the CPU oracle every backend is checked against) returns "
          "code 0 for ±inf, which is what the reference does. Computed in f32 also by the "
          "float64 oracle (codes are exact outputs).",
))

register(OpDef(
    kind="ScaledDequantize", family="scaled", attrs=ScaledQuantAttrs, payload="struct",
    arity=2, caps=Caps.NONE, infer=lambda s, a: s[0].with_dtype(F32),
    check=_check_quant_kind("ScaledDequantize", U8, ("codes", "scale")),
    reference=_ref_dequantize, input_names=("codes", "scale"),
    doc="Reconstruct f32 from codes: `decode(code) · s`, codes' shape. Decoding is "
        "closed-form from the sign, exponent and mantissa bits (bits above the format's "
        "width are ignored): OCP E4M3 has one NaN (S.1111.111), OCP E5M2 has inf and NaN "
        "at the top exponent, the FNUZ formats one NaN at 0x80, the rest are finite. " +
        _SCALE_DOC,
    constraints=(_C1, "C2: codes is a U8 tensor of rank >= 1.",
                 "C3: scale has the layout's dtype and holds exactly its count."),
    samples=dequantize_samples, dtypes=(U8,), accuracy=exact(),
    notes="Custom formats decode by the same closed form (RLX's codec is generic over "
          "the format's fields; its Custom variant is documented all-finite, IEEE-style "
          "subnormals, sign above the exponent and mantissa).",
))

_MM_DOC = ("Each contraction block's dot product of decoded codes is scaled once: `out[i, "
           "j] = Σ_b (Σ_(p in b) dec(lhs[i,p])·dec(rhs[j,p])) · (s_lhs[i,b]·s_rhs[j,b])` "
           "(PerTensor: one block over all k), accumulated in f32, then `+ bias`.")

register(OpDef(
    kind="ScaledMatMul", family="scaled", attrs=ScaledMatMulAttrs, payload="struct",
    arity=None, min_arity=4, caps=Caps.BLAS | Caps.FUSION_BOUNDARY, infer=_infer_matmul,
    check=_check_matmul, reference=_ref_matmul,
    input_names=("lhs", "rhs", "lhs_scale", "rhs_scale", "bias"),
    doc="Low-precision GEMM, TN layout: lhs `[m, k]` and rhs `[n, k]` U8 codes (both "
        "K-last), `out [m, n] f32 = lhs · rhsᵀ` over the decoded, block-scaled values. " +
        _MM_DOC + " " + _SCALE_DOC,
    constraints=(_C1, "C2: operands lhs, rhs, lhs_scale, rhs_scale, plus bias when "
                 "has_bias.",
                 "C3: lhs and rhs are rank-2 U8 tensors.", "C4: they share k.",
                 "C5: each scale has the layout's dtype and count (its operand's rows "
                 "and k).", "C6: bias is f32 [n]."),
    samples=matmul_samples, dtypes=(U8,),
    accuracy=reduction(2, lambda a, s: _k(a, s) + 2, "all",
                       reason="k products summed per block, one scale product per block"),
    notes="RLX's CPU kernel derives m from the output's element count and k from lhs's; "
          "with the rank-2 operands required here (C3) that is lhs's [m, k].",
))

register(OpDef(
    kind="ScaledGroupedMatMul", family="scaled", attrs=ScaledMatMulAttrs, payload="struct",
    arity=None, min_arity=5, caps=Caps.BLAS | Caps.FUSION_BOUNDARY, infer=_infer_grouped,
    check=_check_grouped, reference=_ref_grouped,
    input_names=("input", "weight", "input_scale", "weight_scale", "expert_idx", "bias"),
    doc="Expert-indexed (MoE) ScaledMatMul: input `[m, k]` U8 codes, weight `[E, n, k]` "
        "U8 codes (one TN slab per expert), expert_idx `[m]` f32; row i multiplies expert "
        "`e = expert_idx[i]` (truncated; NaN and negatives are 0): `out[i] = dec(input[i])"
        " · dec(weight[e])ᵀ` block-scaled as ScaledMatMul, plus `bias[e]` (`[E, n]`). "
        "input_scale has m rows, weight_scale E·n rows (row-major `[E, n, nblk]`).",
    constraints=(_C1, "C2: operands input, weight, input_scale, weight_scale, expert_idx, "
                 "plus bias when has_bias.",
                 "C3: input is U8 [m, k], weight U8 [E, n, k].", "C4: they share k.",
                 "C5: each scale has the layout's dtype and count.",
                 "C6: expert_idx is f32 with one id per row, each below E (checked when "
                 "run).", "C7: bias is f32 with E·n values."),
    samples=grouped_samples, dtypes=(U8,),
    accuracy=reduction(2, lambda a, s: _k(a, s) + 2, "all",
                       reason="k products summed per block, one scale product per block"),
    notes="The payload is RLX's (its builder and sample_ops), the operand order its CPU "
          "compile step's, the arithmetic its CPU oracle `lowp_scaled_grouped_matmul`; "
          "the kind is newer than some op.rs snapshots (capability.rs lists it). An expert "
          "id past E indexes out of the weight in RLX (a debug assertion) and is an error "
          "here.",
))
