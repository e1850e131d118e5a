"""RLX's ``pass_by_name``: the passes a fixture (or a user) names by string, under the
names RLX's passes report, and ``run_passes`` applying a list of them in order.

Every pass takes ``(graph, supported=None, log=None)``: ``supported`` is the backend's
claim table (``SupportTable``; None claims everything, as RLX's passes assume), so a
fusion pass creates a fused kind only where the table claims it natively.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ._rewrite import PassLog, SupportTable
from .fuse_ada_layer_norm import fuse_ada_layer_norm
from .fuse_attention import fuse_attention_block, fuse_transformer_layer
from .fuse_conv_bias_act import (fuse_conv_affine_act, fuse_conv_affine_act_cpu,
                                 fuse_conv_bias_act)
from .fuse_elementwise import fuse_elementwise
from .fuse_fk_regions import (fuse_batch_preprocess, fuse_region_prologue,
                              mark_batch_slice_regions, mark_transform_regions)
from .fuse_gated_residual import fuse_gated_residual
from .fuse_matmul_bias_act import fuse_matmul_bias_act
from .fuse_residual_norm import fuse_residual_ln, fuse_residual_rms_norm
from .fuse_swiglu import fuse_swiglu, fuse_swiglu_dual_matmul
from .lower_fma import lower_fma


def _mark_regions(graph: Graph, supported=None, log=None) -> Graph:
    return fuse_elementwise(graph, None, supported, log)


PASS_BY_NAME = {
    "lower_fma": lower_fma,
    "fuse_ada_layer_norm": fuse_ada_layer_norm,
    "fuse_attention_block": fuse_attention_block,
    "fuse_conv_affine_act": fuse_conv_affine_act,
    "fuse_conv_affine_act_cpu": fuse_conv_affine_act_cpu,
    "fuse_conv_bias_act": fuse_conv_bias_act,
    "fuse_gated_residual": fuse_gated_residual,
    "fuse_matmul_bias_act": fuse_matmul_bias_act,
    "fuse_residual_ln": fuse_residual_ln,
    "fuse_residual_rms_norm": fuse_residual_rms_norm,
    "fuse_swiglu": fuse_swiglu,
    "fuse_swiglu_dual_matmul": fuse_swiglu_dual_matmul,
    "fuse_transformer_layer": fuse_transformer_layer,
    "mark_elementwise_regions": _mark_regions,
    "mark_transform_regions": mark_transform_regions,
    "fuse_region_prologue": fuse_region_prologue,
    "mark_batch_slice_regions": mark_batch_slice_regions,
    "fuse_batch_preprocess": fuse_batch_preprocess,
}

def pass_by_name(name: str):
    """The pass RLX names ``name``; KeyError listing the known names otherwise."""
    try:
        return PASS_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown pass {name!r}; known: {', '.join(sorted(PASS_BY_NAME))}") \
            from None


def run_passes(graph: Graph, names, supported: SupportTable | None = None,
               log: PassLog | None = None) -> Graph:
    """``graph`` after each named pass, in order."""
    for name in names:
        graph = pass_by_name(name)(graph, supported, log)
    return graph


__all__ = ["PASS_BY_NAME", "pass_by_name", "run_passes"]
