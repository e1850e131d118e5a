"""``compile_pipeline``: every compile pass, in order, for one backend.

0. param_bindings (``options.param_bindings``) — bound Params become Constants;
1. lower_control_flow (``options.lower_control_flow``) — If / While the backend does not
   claim become Where over inlined bodies (RLX's LowerControlFlow, first as in RLX);
2. unroll_scans (``scan_unroll_max_length``, ``scan_unroll_budget``) — short or small Scans,
   and every Scan on a backend without Scan, become body copies (RLX unrolls after
   legalization, which is equivalent for a backend that claims Scan; here it comes first
   so that a backend without Scan never sees one);
3. auto_mixed_precision (``options.policy``) — float nodes relabelled per RLX's policy with
   Casts between (RLX runs it last, after legalization; here before, so legalization sees
   the f16/bf16 dtypes the backend must claim);
4. unfuse_elementwise_regions — regions the backend does not claim (all of them with
   ``fusion_opts.unfuse_elementwise_regions``) become their steps;
5. constant_folding (``options.constant_folding``) — pure nodes of Constants become Constants;
6. dead_code_elimination (``options.dce``) — nodes no output reads go;
6b. fuse_patterns (``fusion_opts.enable``) — RLX's pattern fusions, each run only when the
    backend claims the fused kind it creates natively (``fuse_patterns``), then DCE again;
7. decompose — kinds the backend does not claim are rewritten into other kinds;
8. common_subexpression_elimination (``options.cse``) — identical nodes merge (RLX runs it
   in its post-fusion cleanup; before fusion here so a region never computes a value twice);
9. legalize_broadcast (``options.legalize_broadcast``) — Binary operands broadcast other
   than trailing get an explicit Expand (before legalization, which then checks Expand);
10. legalize — any node still unclaimed fails the compile (``LegalizeError``, listing all);
11. mark_elementwise_regions (``fusion_opts.enable`` and ElementwiseRegion claimed) —
    elementwise chains become regions.

With ``options.lint_numerics`` or ``RLX_LINT_NUMERICS=1`` the compiled graph's provable
NaN/inf constants are printed to stderr (``rlx numeric-lint: ...``, as RLX), after
legalization. With ``RLX_REF_VERIFY=1`` each pass verifies its result. The dispatch report
is returned, and printed to stderr when ``RLX_DISPATCH_REPORT=1``, ``RLX_VERBOSE=1`` or
``options.verbose`` (the latter two also print the pass log), also when legalization
fails, before the error is raised.

The pipeline runs once, front to back, so it cannot loop: a fused kind is created only
where the table claims it natively, which the decompose step then leaves alone, and a
fused kind already in the input that the backend does not claim is unfused by decompose,
after the fusions have run.
"""
from __future__ import annotations

import sys

from ..ir.graph import Graph
from ..ir.verify import verify_or_raise
from ..runtime.dispatch import DispatchReport, dispatch_report, maybe_print_report
from ..env_registry import flag
from ..runtime.options import CompileOptions
from ._rewrite import PassLog, SupportTable
from .cse import common_subexpression_elimination
from .dce import dead_code_elimination
from .decompose import decompose
from .fold_constants import fold_constants
from .fuse_elementwise import fuse_elementwise
from .fuse_patterns import fuse_patterns
from .legalize import LegalizeError, legalize
from .legalize_broadcast import legalize_broadcast
from .lower_control_flow import lower_control_flow
from .mixed_precision import auto_mixed_precision
from .numeric_lint import lint_numerics
from .param_invariant import bind_params
from .unfuse import unfuse_elementwise
from .unroll_scans import unroll_scans

PASSES = ("param_bindings", "lower_control_flow", "unroll_scans", "auto_mixed_precision",
          "unfuse_elementwise_regions",
          "constant_folding", "dead_code_elimination", "fuse_patterns", "decompose",
          "common_subexpression_elimination", "legalize_broadcast", "legalize",
          "mark_elementwise_regions")


def _emit(report: DispatchReport, log: PassLog, options: CompileOptions) -> None:
    verbose = options.verbose or flag("RLX_VERBOSE")
    maybe_print_report(report, verbose=verbose)
    if verbose and log.lines:
        print("rlx-ref passes:\n  " + "\n  ".join(log.lines), file=sys.stderr)


def compile_pipeline(graph: Graph, backend=None, options=None,
                     log: PassLog | None = None) -> tuple[Graph, DispatchReport]:
    """Run the compile passes on ``graph`` for ``backend`` and return the rewritten graph
    and its dispatch report.

    ``backend`` is a Backend (its ``supported_ops()`` is the claim; ``options.supported_ops``
    overrides it) or None (no claim: nothing is decomposed or refused). ``options`` is a
    CompileOptions, a dict of its fields, or None. The input graph is verified first and
    is never modified. Raises ``LegalizeError`` (an ``UnsupportedOp``) listing every node
    the backend cannot run.
    """
    options = CompileOptions.coerce(options)
    log = log if log is not None else PassLog()
    table = SupportTable.of(backend, options)
    fusion = options.fusion_opts
    verify_or_raise(graph)
    g = bind_params(graph, options.param_bindings, log=log)
    g = lower_control_flow(g, table, options.lower_control_flow, log=log)
    g = unroll_scans(g, options.scan_unroll_max_length, options.scan_unroll_budget, table,
                     log=log)
    if options.policy is not None:
        g = auto_mixed_precision(g, options.policy, log=log)
    g = unfuse_elementwise(g, table, force=fusion.unfuse_elementwise_regions, log=log)
    if options.constant_folding:
        g = fold_constants(g, options.constant_fold_max_elements, log=log)
    if options.dce:
        g = dead_code_elimination(g, log=log)
    if fusion.enable:
        fused = fuse_patterns(g, table, log=log)
        if fused is not g and options.dce:
            fused = dead_code_elimination(fused, log=log)
        g = fused
    g = decompose(g, table, log=log)
    if options.cse:
        g = common_subexpression_elimination(g, log=log)
    if options.legalize_broadcast:
        g = legalize_broadcast(g, log=log)
    try:
        legalize(g, table, log=log)
    except LegalizeError as err:
        report = dispatch_report(graph, g, backend, supported=table, log=log)
        err.attach_report(report)
        _emit(report, log, options)
        raise
    if fusion.enable and not fusion.unfuse_elementwise_regions \
            and table.claims_kind("ElementwiseRegion"):
        g = fuse_elementwise(g, fusion, table, log=log)
    if options.lint_numerics or flag("RLX_LINT_NUMERICS"):
        for lint in lint_numerics(g):
            print(f"rlx numeric-lint: {lint}", file=sys.stderr)
    report = dispatch_report(graph, g, backend, supported=table, log=log)
    _emit(report, log, options)
    return g, report


__all__ = ["PASSES", "compile_pipeline"]
