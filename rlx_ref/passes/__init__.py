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
| ``common_subexpression_elimination`` | merges identical nodes (cse)                       |
| ``unroll_scans`` (unroll_scans)      | short / small Scans into body copies               |
| ``lower_control_flow`` (lower_...)   | If → Where, While → masked unroll                  |
| ``auto_mixed_precision`` (mixed_...) | RLX's AutoMixedPrecision policies                  |
| ``legalize_broadcast`` (legalize_...)| non-trailing Binary broadcasts → explicit Expand   |
| ``split_param_invariant`` (param_...)| weight-only closure split off to run once          |
| ``bind_params`` (param_invariant)    | RLX's param_bindings: Params → Constants           |
| ``lint_numerics`` (numeric_lint)     | provable NaN/inf constants (analysis only)         |
| ``plan_memory`` (memory_plan)        | liveness arena offsets and views (analysis only)   |
| ``check_graph`` (check_graph)        | RLX's static checker: shape, dispatch, fusion, NaN |
| ``fuse_patterns`` (fuse_patterns)    | RLX's pattern fusions a backend claims natively    |
| ``fuse_<pattern>`` (fuse_<pattern>)  | one RLX pattern pass each (matmul_bias_act, ...)   |
| ``lower_fma`` (lower_fma)            | RLX's LowerFma: Fma as Mul + Add                   |

``pass_by_name`` (pass_registry) finds a pass by RLX's name; ``run_passes`` applies a list.
"""
from ._rewrite import PassLog, PassVerifyError, SupportTable
from .check_graph import CheckReport, Diagnostic, check_graph
from .cse import common_subexpression_elimination
from .dce import dead_code_elimination
from .decompose import DECOMPOSITIONS, Decomposition, decompose
from .fold_constants import fold_constants
from .fuse_elementwise import fuse_elementwise
from .fuse_patterns import fuse_patterns
from .legalize import LegalizeError, Offender, find_unsupported, format_legalize_error, legalize
from .legalize_broadcast import legalize_broadcast
from .lower_control_flow import lower_control_flow
from .memory_plan import MemoryPlan, plan_memory
from .mixed_precision import POLICIES, auto_mixed_precision
from .numeric_lint import lint_numerics
from .param_invariant import HoistSplit, bind_params, split_param_invariant
from .pass_registry import PASS_BY_NAME, pass_by_name, run_passes
from .pipeline import PASSES, compile_pipeline
from .unfuse import unfuse_elementwise
from .unroll_scans import unroll_scans

__all__ = [
    "CheckReport",
    "DECOMPOSITIONS",
    "PASSES",
    "POLICIES",
    "PASS_BY_NAME",
    "Decomposition",
    "HoistSplit",
    "MemoryPlan",
    "Diagnostic",
    "LegalizeError",
    "Offender",
    "PassLog",
    "PassVerifyError",
    "SupportTable",
    "auto_mixed_precision",
    "bind_params",
    "check_graph",
    "common_subexpression_elimination",
    "compile_pipeline",
    "dead_code_elimination",
    "decompose",
    "find_unsupported",
    "fold_constants",
    "format_legalize_error",
    "fuse_elementwise",
    "fuse_patterns",
    "legalize",
    "legalize_broadcast",
    "lint_numerics",
    "lower_control_flow",
    "plan_memory",
    "split_param_invariant",
    "pass_by_name",
    "run_passes",
    "unfuse_elementwise",
    "unroll_scans",
]
