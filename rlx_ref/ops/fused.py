"""Fused family: the composites RLX's fusion passes create (FusedMatMulBiasAct,
FusedConvBiasAct, FusedResidualLN, FusedResidualRmsNorm, FusedSwiGLU, FusedAttentionBlock,
FusedTransformerLayer) and the DiT modulation kinds (``_fused_dit``).

Each kind means exactly its RLX ``unfuse`` decomposition: the program in ``_fused_forms``
is run on arrays through the primitive OpDefs (the oracle) and appended to graphs by
``passes/unfuse_composites`` (the decomposition), so the two agree bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtype import DType
from . import _fused_forms as F
from ._fused_def import BLAS_FUSED, register_fused
from ._fused_emit import form_graph
from .codec import BOOL, DTYPE, F32, USIZE, ListOf, Optional, attr
from .elementwise import ACTIVATION_ENUM
from .opdef import Caps, want

FLOATS = (DType.F32, DType.F64)
_LIST = ListOf(USIZE)


def _samples(name: str):
    def samples(rng):
        from . import _fused_samples

        return getattr(_fused_samples, name)(rng)
    return samples


class _Eps:
    """Rounds the eps fields to f32 on construction, as RLX stores them."""

    EPS = ("eps",)

    def __post_init__(self):
        for f in self.EPS:
            object.__setattr__(self, f, F32.normalize(getattr(self, f)))


# ── FusedMatMulBiasAct ────────────────────────────────────────────────────

@dataclass(frozen=True)
class FusedMatMulBiasActAttrs:
    activation: str | None = attr(Optional(ACTIVATION_ENUM), None,
                                  doc="the epilogue Activation (None = bias only)")


register_fused(
    "FusedMatMulBiasAct", F.matmul_bias_act, FusedMatMulBiasActAttrs, ("x", "w", "bias"),
    "`act(MatMul(x, w) + Expand(bias))`: RLX's unfuse is MatMul, an Expand of the bias to "
    "the product's dims, Binary Add, then the Activation when `activation` is set. All "
    "MatMul layouts and batch broadcasts apply; bias broadcasts numpy-style to the product.",
    ("C1: three operands: x, w, bias.",
     "C2: one dtype, f32 or f64.",
     "C3: x and w obey MatMul's rules; bias broadcasts (Expand) to the product's dims."),
    _samples("matmul_bias_act"), FLOATS, caps=BLAS_FUSED)


# ── FusedMatMulResidual ───────────────────────────────────────────────────

def _residual_rules(shapes, a):
    lhs, rhs, res = shapes
    if not (lhs.is_static and rhs.is_static and res.is_static):
        return
    try:
        g = form_graph(lambda e, _a, x, w, _r: e.op("MatMul", (x, w)), a, shapes)
    except Exception:   # noqa: BLE001 - the MatMul step's own error is reported by check
        return
    prod = g.shape(g.outputs[0])
    want(res.dims == prod.dims, f"(C3) FusedMatMulResidual residual must have the product's "
                                f"shape {prod.dims_text()} (a full tensor, not a broadcast "
                                f"bias), got {res.dims_text()}")


register_fused(
    "FusedMatMulResidual", F.matmul_residual, None, ("lhs", "rhs", "residual"),
    "`MatMul(lhs, rhs) + residual`: the product, then Binary Add of a residual (skip) "
    "tensor of the product's full shape. RLX's unfuse is exactly MatMul then Binary Add; "
    "all MatMul layouts and batch broadcasts apply to lhs and rhs.",
    ("C1: three operands: lhs, rhs, residual.",
     "C2: one dtype, f32 or f64.",
     "C3: lhs and rhs obey MatMul's rules; residual has the product's shape."),
    _samples("matmul_residual"), FLOATS, caps=Caps.BLAS | Caps.FUSION_BOUNDARY,
    rules=_residual_rules, payload="unit",
    notes="Caps as RLX's capability.rs: BLAS and FUSION_BOUNDARY, not FUSED (though RLX "
          "unfuses it on every backend but Metal). RLX's doc says the output is `[m, n]` and the residual a full `[m, n]` "
          "activation; with batched MatMul operands the same rule holds per batch (the "
          "residual has the product's shape). RLX emits it only for Metal and unfuses it "
          "everywhere else; a residual that merely broadcasts is rejected here (the fused "
          "epilogue reads a full tensor).")


# ── FusedConvBiasAct ──────────────────────────────────────────────────────

@dataclass(frozen=True)
class FusedConvBiasActAttrs:
    kernel_size: tuple = attr(_LIST, doc="as Conv: [kH, kW] (rank-3 input: [1, kL])")
    stride: tuple = attr(_LIST, (1, 1), doc="as Conv")
    padding: tuple = attr(_LIST, (0, 0), doc="as Conv (symmetric)")
    dilation: tuple = attr(_LIST, (1, 1), doc="as Conv")
    groups: int = attr(USIZE, 1, doc="as Conv")
    activation: str | None = attr(Optional(ACTIVATION_ENUM), None,
                                  doc="the epilogue Activation (None = identity)")
    has_residual: bool = attr(BOOL, False, doc="a 4th operand `residual` is added before "
                                               "the activation")


def _conv_names(a):
    return ("x", "w", "bias", "residual") if a.has_residual else ("x", "w", "bias")


def _conv_rules(shapes, a):
    b = shapes[2]
    want(b.rank == 1, f"(C3) FusedConvBiasAct bias must be rank 1 [C_out], got {b}")


register_fused(
    "FusedConvBiasAct", F.conv_bias_act, FusedConvBiasActAttrs, _conv_names,
    "`act(Conv(x, w) + bias[c] [+ residual])`: Conv with the payload's geometry, the "
    "rank-1 `bias [C_out]` reshaped to `[1, C_out, 1, ...]` and Expanded to the conv's "
    "dims, Binary Add, then (with `has_residual`) Binary Add of the full-size `residual`, "
    "then the Activation when `activation` is set.",
    ("C1: three operands (x, w, bias), four with has_residual (+ residual).",
     "C2: one dtype, f32 or f64.",
     "C3: bias is rank 1 with C_out elements.",
     "C4: x and w obey Conv's rules; residual broadcasts to the conv output."),
    _samples("conv_bias_act"), FLOATS, caps=BLAS_FUSED, rules=_conv_rules,
    input_names=("x", "w", "bias", "residual"),
    notes="RLX infers no shape for this kind (the fusion pass declares it); here the "
          "conv's own shape rule gives it. The decomposition is RLX's documented "
          "`Conv → Reshape(bias → [1, C, 1, 1]) → Expand → Add → [Activation]` with the "
          "residual added after the bias (cuDNN's `act(conv + bias + z)`).")


# ── FusedResidualLN / FusedResidualRmsNorm ────────────────────────────────

@dataclass(frozen=True)
class FusedResidualNormAttrs(_Eps):
    has_bias: bool = attr(BOOL, doc="a bias operand follows residual")
    eps: float = attr(F32, doc="the norm's epsilon")


def _res_names(a):
    return ("x", "residual", "bias", "gamma", "beta") if a.has_bias else \
        ("x", "residual", "gamma", "beta")


def _res_rules(kind):
    def rules(shapes, a):
        x, r = shapes[0], shapes[1]
        want(r.dims == x.dims, f"(C3) {kind} residual must have x's shape {x}, got {r}")
    return rules


for _kind, _form, _norm in (("FusedResidualLN", F.residual_ln, "LayerNorm"),
                            ("FusedResidualRmsNorm", F.residual_rms, "RmsNorm")):
    register_fused(
        _kind, _form, FusedResidualNormAttrs, _res_names,
        f"`{_norm}(x + residual [+ Expand(bias)], gamma, beta)` over the last axis with "
        f"`eps`: Binary Add of x and residual, with `has_bias` a Binary Add of the bias "
        f"Expanded to x's dims, then {_norm} (axis -1).",
        ("C1: four operands (x, residual, gamma, beta), five with has_bias (x, residual, "
         "bias, gamma, beta).",
         "C2: one dtype, f32 or f64.",
         "C3: residual has x's shape.",
         f"C4: bias broadcasts to x; gamma and beta obey {_norm}'s rules on axis -1."),
        _samples("residual_norm_" + _norm), FLOATS, rules=_res_rules(_kind),
        input_names=("x", "residual", "bias", "gamma", "beta"),
        notes="RLX's shape rule is x's shape; residual with another (broadcasting) shape "
              "is rejected here, where RLX's CPU kernel would read past it.")


# ── FusedSwiGLU ───────────────────────────────────────────────────────────

@dataclass(frozen=True)
class FusedSwiGLUAttrs:
    cast_to: DType | None = attr(Optional(DTYPE), None, doc="cast the result to this dtype")
    gate_first: bool = attr(BOOL, False, doc="gate in the low half, up in the high half")


def _swiglu_rules(shapes, a):
    p = shapes[0]
    want(p.rank >= 1, f"(C3) FusedSwiGLU needs a rank >= 1 packed input, got {p}")
    last = p.dims[-1]
    want(not isinstance(last, int) or last % 2 == 0,
         f"(C3) FusedSwiGLU splits the last axis in halves; it must be even, got {p}")


register_fused(
    "FusedSwiGLU", F.swiglu, FusedSwiGLUAttrs, ("packed",),
    "`silu(gate) · up` from one packed `[..., 2N]` input: the low half `[..., :N]` is up "
    "and the high half gate (`gate_first` swaps them); Narrow ×2, Activation Silu, Binary "
    "Mul, then a Cast to `cast_to` when set. Output `[..., N]`.",
    ("C1: one operand, packed.",
     "C2: f32 or f64.",
     "C3: rank >= 1 with an even last dim.",
     "C4: cast_to (when set) is a dtype Cast accepts."),
    _samples("swiglu"), FLOATS, rules=_swiglu_rules,
    notes="RLX's unfuse ignores `gate_first` (always up = low half); its op doc, builder "
          "and backends (e.g. MPS) swap the halves when it is set, which is followed here.")


# ── FusedAttentionBlock ───────────────────────────────────────────────────

@dataclass(frozen=True)
class FusedAttentionBlockAttrs:
    num_heads: int = attr(USIZE, doc="heads H")
    head_dim: int = attr(USIZE, doc="per-head width D")
    has_bias: bool = attr(BOOL, False, doc="qkv_b and out_b follow mask")
    has_rope: bool = attr(BOOL, False, doc="rope_cos and rope_sin come last")


def _fab_names(a):
    return ("hidden", "qkv_w", "out_w", "mask") + (("qkv_b", "out_b") if a.has_bias else ()) \
        + (("rope_cos", "rope_sin") if a.has_rope else ())


def _block_rules(kind):
    def rules(shapes, a):
        want(a.num_heads > 0 and a.head_dim > 0, f"(C3) {kind} num_heads and head_dim "
                                                 "must be non-zero")
        want(shapes[0].rank == 3, f"(C3) {kind} hidden must be [B, S, D], got {shapes[0]}")
    return rules


register_fused(
    "FusedAttentionBlock", F.attention_block, FusedAttentionBlockAttrs, _fab_names,
    "QKV projection → split → [RoPE] → attention → output projection, as RLX's "
    "`expand_attention_block`: `qkv = hidden @ qkv_w [+ qkv_b]` (`[B, S, 3·H·D]`), Narrow "
    "into Q, K, V (`[B, S, H·D]` each, in that order), Reshape `[B, S, H, D]` and "
    "Transpose to `[B, H, S, D]`, with `has_rope` Rope NeoX (n_rot = D) on Q and K with "
    "rope_cos/rope_sin, Attention with mask_kind Custom (mask `[B, S]`), Transpose and "
    "Reshape back to `[B, S, H·D]`, `@ out_w [+ out_b]`.",
    ("C1: operands hidden, qkv_w, out_w, mask, then qkv_b, out_b with has_bias, then "
     "rope_cos, rope_sin with has_rope.",
     "C2: one dtype, f32 or f64 (mask: any float or bool).",
     "C3: num_heads and head_dim are non-zero; hidden is [B, S, D].",
     "C4: every step obeys its kind's rules (qkv_w [D, 3·H·D], out_w [H·D, D_out], "
     "mask [B, S], biases broadcast, Rope tables)."),
    _samples("attention_block"), FLOATS, rules=_block_rules("FusedAttentionBlock"),
    input_names=("hidden", "qkv_w", "out_w", "mask", "qkv_b", "out_b", "rope_cos",
                 "rope_sin"))


# ── FusedTransformerLayer ─────────────────────────────────────────────────

@dataclass(frozen=True)
class FusedTransformerLayerAttrs(_Eps):
    EPS = ("eps1", "eps2")
    num_heads: int = attr(USIZE, doc="heads H")
    head_dim: int = attr(USIZE, doc="per-head width D")
    intermediate_size: int = attr(USIZE, doc="FFN width")
    eps1: float = attr(F32, doc="epsilon of the attention LayerNorm")
    eps2: float = attr(F32, doc="epsilon of the FFN LayerNorm")
    activation: str = attr(ACTIVATION_ENUM, doc="the FFN activation")
    has_bias: bool = attr(BOOL, doc="biases and LayerNorm betas are operands")


def _ftl_names(a):
    if a.has_bias:
        return ("hidden", "qkv_w", "qkv_b", "out_w", "out_b", "ln1_g", "ln1_b", "fc1_w",
                "fc1_b", "fc2_w", "fc2_b", "ln2_g", "ln2_b", "mask")
    return ("hidden", "qkv_w", "out_w", "ln1_g", "fc1_w", "fc2_w", "ln2_g", "mask")


def _ftl_rules(shapes, a):
    _block_rules("FusedTransformerLayer")(shapes, a)
    inter = shapes[_ftl_names(a).index("fc1_w")]
    want(inter.dims[-1] in (a.intermediate_size,) or not isinstance(inter.dims[-1], int),
         f"(C3) FusedTransformerLayer fc1_w must end in intermediate_size "
         f"{a.intermediate_size}, got {inter}")


register_fused(
    "FusedTransformerLayer", F.transformer_layer, FusedTransformerLayerAttrs, _ftl_names,
    "A post-norm (BERT) layer: `a = AttentionBlock(hidden)` (as FusedAttentionBlock, no "
    "RoPE, mask Custom), `h1 = LayerNorm(a + hidden, ln1_g, ln1_b, eps1)`, "
    "`f = act(h1 @ fc1_w [+ fc1_b]) @ fc2_w [+ fc2_b]`, "
    "`out = LayerNorm(f + h1, ln2_g, ln2_b, eps2)`. Without `has_bias` the biases are "
    "absent and both LayerNorm betas are zero.",
    ("C1: with has_bias 14 operands (hidden, qkv_w, qkv_b, out_w, out_b, ln1_g, ln1_b, "
     "fc1_w, fc1_b, fc2_w, fc2_b, ln2_g, ln2_b, mask); without, 8 (hidden, qkv_w, out_w, "
     "ln1_g, fc1_w, fc2_w, ln2_g, mask).",
     "C2: one dtype, f32 or f64 (mask: any float or bool).",
     "C3: num_heads, head_dim non-zero; hidden is [B, S, D]; fc1_w ends in "
     "intermediate_size.",
     "C4: every step obeys its kind's rules (out_w and fc2_w map back to D, gammas [D])."),
    _samples("transformer_layer"), FLOATS, rules=_ftl_rules,
    input_names=("hidden", "qkv_w", "qkv_b", "out_w", "out_b", "ln1_g", "ln1_b", "fc1_w",
                 "fc1_b", "fc2_w", "fc2_b", "ln2_g", "ln2_b", "mask"),
    notes="RLX contradicts itself on the bias-free operand list: `Op::num_inputs` says 10 "
          "(with ln1_b and ln2_b), while `unfuse_fused_transformer_layer` (the CPU "
          "executor's path: FusedTransformerLayer is a CPU Nop expanded by it) and RLX's "
          "parity test read 8 and synthesize zero betas. The executor's 8 is followed.")


from . import _fused_dit  # noqa: E402,F401  (registers the DiT modulation kinds)
