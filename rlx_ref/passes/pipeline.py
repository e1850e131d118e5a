"""``compile_pipeline``: every compile pass, in order, for one backend.

1. unfuse_elementwise_regions — regions the backend does not claim (all of them with
   ``fusion_opts.unfuse_elementwise_regions``) become their steps;
2. constant_folding (``options.constant_folding``) — pure nodes of Constants become Constants;
3. dead_code_elimination (``options.dce``) — nodes no output reads go;
3b. fuse_patterns (``fusion_opts.enable``) — RLX's pattern fusions, each run only when the
   backend claims the fused kind it creates natively (``fuse_patterns``), then DCE again;
4. decompose — kinds the backend does not claim are rewritten into other kinds;
5. legalize — any node still unclaimed fails the compile (``LegalizeError``, listing all);
6. mark_elementwise_regions (``fusion_opts.enable`` and ElementwiseRegion claimed) —
   elementwise chains become regions.

With ``RLX_REF_VERIFY=1`` each pass verifies its result. The dispatch report is returned,
and printed to stderr when ``RLX_DISPATCH_REPORT=1``, ``RLX_VERBOSE=1`` or
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
from ..runtime.env import env
from ..runtime.options import CompileOptions
from ._rewrite import PassLog, SupportTable
from .dce import dead_code_elimination
from .decompose import decompose
from .fold_constants import fold_constants
from .fuse_elementwise import fuse_elementwise
from .fuse_patterns import fuse_patterns
from .legalize import LegalizeError, legalize
from .unfuse import unfuse_elementwise

PASSES = ("unfuse_elementwise_regions", "constant_folding", "dead_code_elimination",
          "fuse_patterns", "decompose", "legalize", "mark_elementwise_regions")


def _emit(report: DispatchReport, log: PassLog, options: CompileOptions) -> None:
    verbose = options.verbose or env().verbose
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
    g = unfuse_elementwise(graph, table, force=fusion.unfuse_elementwise_regions, log=log)
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
    report = dispatch_report(graph, g, backend, supported=table, log=log)
    _emit(report, log, options)
    return g, report


__all__ = ["PASSES", "compile_pipeline"]
