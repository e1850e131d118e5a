"""``fuse_patterns``: RLX's pattern fusions in RLX's pipeline order, each included only
when the backend's table claims the fused kind it creates natively (RLX's
``fusion_passes_for_supported``), so a backend that claims a fused kind gets it and one
that does not keeps the primitives.

Order (RLX's): FuseMatMulBiasAct, FuseConvBiasAct, FuseConvAffineAct, FuseAttentionBlock (reads
FusedMatMulBiasAct), FuseResidualLN, FuseResidualRmsNorm, FuseAdaLayerNorm,
FuseGatedResidual, FuseTransformerLayer (reads the block and FusedResidualLN; opt-in with
``RLX_ENABLE_FUSE_TRANSFORMER_LAYER=1``, as in RLX), FuseSwiGLUDualMatmul, FuseSwiGLU.

rlx_ref extension: on the CPU backends named in ``CPU_CONV_FUSION``,
``fuse_conv_affine_act_cpu`` (the CPU gate: 1×1 and depthwise convs, conv bias before a
folded BatchNorm, MobileNetV3's activations) runs just before FuseConvBiasAct.
"""
from __future__ import annotations


from ..ir.graph import Graph
from ..env_registry import flag as env_flag
from ._rewrite import PassLog, SupportTable, graph_pass
from .pass_registry import pass_by_name

# (pass name, the kinds the backend must claim for it to run)
FUSIONS = (
    ("fuse_matmul_bias_act", ("FusedMatMulBiasAct",)),
    ("fuse_conv_bias_act", ("FusedConvBiasAct",)),
    ("fuse_conv_affine_act", ("FusedConvBiasAct",)),
    ("fuse_attention_block", ("FusedAttentionBlock",)),
    ("fuse_residual_ln", ("FusedResidualLN",)),
    ("fuse_residual_rms_norm", ("FusedResidualRmsNorm",)),
    ("fuse_ada_layer_norm", ("AdaLayerNorm",)),
    ("fuse_gated_residual", ("GatedResidual",)),
    ("fuse_transformer_layer", ("FusedTransformerLayer", "FusedAttentionBlock")),
    ("fuse_swiglu_dual_matmul", ("FusedSwiGLU",)),
    ("fuse_swiglu", ("FusedSwiGLU",)),
)
OPT_IN = {"fuse_transformer_layer": "RLX_ENABLE_FUSE_TRANSFORMER_LAYER"}
# rlx_ref's CPU conv fusion: the backends (by name) that get it, and where it goes
CPU_CONV_FUSION = frozenset({"numba-cpu"})
CPU_CONV_PASS = ("fuse_conv_affine_act_cpu", ("FusedConvBiasAct",))


def fusions_for(table: SupportTable) -> list:
    """The pass names that run for ``table``, in order."""
    names = []
    fusions = FUSIONS
    if table.name in CPU_CONV_FUSION:
        at = [n for n, _ in FUSIONS].index("fuse_conv_bias_act")
        fusions = FUSIONS[:at] + (CPU_CONV_PASS,) + FUSIONS[at:]
    for name, kinds in fusions:
        flag = OPT_IN.get(name)
        if flag is not None and not env_flag(flag):
            continue
        if all(table.claims_kind(k) for k in kinds):
            names.append(name)
    return names


@graph_pass("fuse_patterns")
def fuse_patterns(graph: Graph, supported: SupportTable | None = None,
                  log: PassLog | None = None) -> Graph:
    """``graph`` after every pattern fusion ``supported`` allows (the same object when
    none fired); each pass also checks the claimed dtype of every node it creates."""
    table = supported if supported is not None else SupportTable(None)
    for name in fusions_for(table):
        graph = pass_by_name(name)(graph, table, log)
    return graph


__all__ = ["CPU_CONV_FUSION", "CPU_CONV_PASS", "FUSIONS", "OPT_IN", "fuse_patterns", "fusions_for"]
