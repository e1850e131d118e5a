"""Compile passes, one per file; each takes a Graph and returns a new one (append-only
SSA: a pass builds a fresh Graph and remaps ids, never edits in place), recursing into
nested bodies. ``compile_pipeline`` runs them in order for a backend.

| pass (file)                          | what it does                                       |
|--------------------------------------|----------------------------------------------------|
| ``dead_code_elimination`` (dce)      | drops nodes no output reads                        |
| ``fold_constants`` (fold_constants)  | evaluates pure nodes of Constants on the oracle    |
| ``decompose`` (decompose)            | rewrites unclaimed kinds into other kinds          |
| ``legalize`` (legalize)              | fails listing every node the backend cannot run    |
| ``fuse_elementwise`` (fuse_...)      | RLX's MarkElementwiseRegions                       |
| ``unfuse_elementwise`` (unfuse)      | ElementwiseRegion back to its steps                |
| ``fuse_patterns`` (fuse_patterns)    | RLX's pattern fusions a backend claims natively    |
| ``fuse_<pattern>`` (fuse_<pattern>)  | one RLX pattern pass each (matmul_bias_act, ...)   |
| ``lower_fma`` (lower_fma)            | RLX's LowerFma: Fma as Mul + Add                   |

``pass_by_name`` (pass_registry) finds a pass by RLX's name; ``run_passes`` applies a list.
"""
from ._rewrite import PassLog, PassVerifyError, SupportTable
from .dce import dead_code_elimination
from .decompose import DECOMPOSITIONS, Decomposition, decompose
from .fold_constants import fold_constants
from .fuse_elementwise import fuse_elementwise
from .fuse_patterns import fuse_patterns
from .legalize import LegalizeError, Offender, find_unsupported, format_legalize_error, legalize
from .pass_registry import PASS_BY_NAME, pass_by_name, run_passes
from .pipeline import PASSES, compile_pipeline
from .unfuse import unfuse_elementwise

__all__ = [
    "DECOMPOSITIONS",
    "PASSES",
    "PASS_BY_NAME",
    "Decomposition",
    "LegalizeError",
    "Offender",
    "PassLog",
    "PassVerifyError",
    "SupportTable",
    "compile_pipeline",
    "dead_code_elimination",
    "decompose",
    "find_unsupported",
    "fold_constants",
    "format_legalize_error",
    "fuse_elementwise",
    "fuse_patterns",
    "legalize",
    "pass_by_name",
    "run_passes",
    "unfuse_elementwise",
]
