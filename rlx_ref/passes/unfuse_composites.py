"""RLX's ``unfuse`` of the fused composites (``unfuse_fused_for_autodiff``,
``unfuse_attention_block``, ``unfuse_dit_modulation``) and its ``DecomposeFusionRegions``:
each fused kind rewritten into the primitive kinds its program emits.

The programs live once, in ``ops/_fused_forms``; the fused kinds' oracles run the same
programs on arrays, so a decomposition computes bit for bit what the op computes. A
backend claims these kinds with ``table.decomposed(KINDS, DTYPES, REASON)``.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ops import _fused_forms as F
from ..ops._fused_emit import GraphEmitter
from .decompose import decomposes

_NORM = ("Binary", "Expand", "LayerNorm", "RmsNorm")
_BLOCK = ("MatMul", "Binary", "Expand", "Narrow", "Reshape", "Transpose", "Rope",
          "Attention")
FORMS = {
    "FusedMatMulBiasAct": (F.matmul_bias_act, ("MatMul", "Expand", "Binary", "Activation")),
    "FusedMatMulResidual": (F.matmul_residual, ("MatMul", "Binary")),
    "FusedConvBiasAct": (F.conv_bias_act, ("Conv", "Reshape", "Expand", "Binary",
                                           "Activation")),
    "FusedResidualLN": (F.residual_ln, _NORM),
    "FusedResidualRmsNorm": (F.residual_rms, _NORM),
    "FusedSwiGLU": (F.swiglu, ("Narrow", "Activation", "Binary", "Cast")),
    "FusedAttentionBlock": (F.attention_block, _BLOCK),
    "FusedTransformerLayer": (F.transformer_layer, _BLOCK + ("LayerNorm", "Activation",
                                                             "Constant")),
    "AdaLayerNorm": (F.ada_layer_norm, ("LayerNorm", "RmsNorm", "Binary", "Constant")),
    "AdaLayerNormBackward": (F.ada_layer_norm_backward,
                             ("LayerNorm", "RmsNorm", "Binary", "Constant", "Reduce",
                              "Reshape", "Concat", "LayerNormBackwardInput",
                              "RmsNormBackwardInput")),
    "GatedResidual": (F.gated_residual, ("Binary",)),
    "GatedResidualBackward": (F.gated_residual_backward, ("Binary", "Reduce", "Reshape",
                                                          "Concat")),
    "TransformRegion": (F.transform_region, ("ResizeNearest2x",)),
    "BatchElementwiseRegion": (F.batch_region, ("ResizeNearest2x", "ElementwiseRegion",
                                                "Concat")),
}
KINDS = tuple(FORMS)
DTYPES = (DType.F32, DType.F64)
# output dtypes a backend claims per kind: a Cast (cast_to, a chain's Cast step) may make
# the output 16-bit while the work stays in the operands' dtype
CLAIM_DTYPES = {k: DTYPES for k in KINDS}
CLAIM_DTYPES.update(FusedSwiGLU=DTYPES + (DType.F16, DType.BF16),
                    BatchElementwiseRegion=DTYPES + (DType.F16, DType.BF16),
                    TransformRegion=DTYPES + (DType.F16, DType.BF16, DType.I32, DType.I64,
                                              DType.U8, DType.BOOL))
REASON = ("no fused kernel: unfused into its RLX decomposition (MatMul, Conv, Binary, "
          "LayerNorm/RmsNorm, Attention, Rope, ElementwiseRegion, ...), which this backend "
          "runs natively")


def _register(kind: str, form, produces) -> None:
    def lower(g, node, ins):
        if not all(g.shape(i).is_static for i in ins):
            return None
        return form(GraphEmitter(g), node.attrs, *ins)
    lower.__name__ = f"unfuse_{kind}"
    lower.__doc__ = f"{kind} → its program in ops/_fused_forms.{form.__name__}."
    decomposes(kind, produces, note="RLX's unfuse program; the oracle runs the same "
                                    "program")(lower)


for _kind, (_form, _produces) in FORMS.items():
    _register(_kind, _form, _produces)

__all__ = ["CLAIM_DTYPES", "DTYPES", "FORMS", "KINDS", "REASON"]
