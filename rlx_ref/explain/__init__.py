"""Explain graphs: trace a run on the oracle node by node, diff a backend against it.

``trace(graph, inputs, params)`` returns one record per node run; ``diff(graph, inputs,
params, backend=NAME)`` names the first node where a backend departs from the oracle.
Both are also ``rlx-ref explain`` and ``rlx-ref diff``.
"""
from __future__ import annotations


def __getattr__(name):
    if name in ("trace", "Trace", "TraceRecord", "TraceInputError"):
        from . import tracing

        return getattr(tracing, name)
    if name in ("diff", "DiffReport", "NodeDiff"):
        from . import differ

        return getattr(differ, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["trace", "Trace", "TraceRecord", "TraceInputError", "diff", "DiffReport",
           "NodeDiff"]
