"""Run-time NaN/inf localization on the oracle (RLX's ``RLX_DEBUG_NANS`` and
``numeric_check``): the first node of a run whose output holds a NaN or an inf is named,
with the first bad index and whether the node made it (its operands were finite: the
culprit, with RLX's fix hint for the op) or only passed it on (the operand that already
held one).

``RLX_DEBUG_NANS``: unset, ``0`` or empty — off; ``1`` / ``warn`` — print the report to
stderr and keep running; ``abort`` — raise ``NanCheckError`` at the node (RLX panics).
Input and Param nodes are not checked, as in RLX: a NaN fed in shows as "propagated" at
its first user. Only float and complex outputs are scanned. Each run reports once: a body
run by a node (If, While, Scan) shares the report of the run around it, so a NaN made in
step 3 of a Scan is named once, inside the body, not again at the Scan.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import numpy as np

from .env_registry import get

FIX_HINTS = {   # RLX's numeric_check::fix_hint, keyed by our short op text
    "Rsqrt": "rsqrt/sqrt of a negative or zero — norm variance underflow; raise eps or "
             "clamp input ≥ 0",
    "Log": "log of ≤ 0 — clamp the input to a small positive floor (e.g. 1e-12) or add eps",
    "Exp": "exp overflow → +inf — subtract the row max before exp (unstable softmax?)",
    "Div": "division by zero — guard the denominator with eps, or mask with "
           "where(denom != 0, …)",
    "Pow": "pow of a negative base or huge exponent — check base sign / exponent magnitude",
    "Softmax": "all-masked row or -inf logits — use a finite mask fill (-1e9), not f32 -inf",
    "Constant": "a Constant already holds NaN/inf — likely baked by constant-folding; run "
                "with RLX_LINT_NUMERICS to name the source op",
}
FIX_HINTS["Sqrt"] = FIX_HINTS["Rsqrt"]


_TLS = threading.local()     # the report state of the run whose node is executing


class NanCheckError(RuntimeError):
    """``RLX_DEBUG_NANS=abort``: a node produced a NaN or inf (``report`` says which)."""

    def __init__(self, report):
        super().__init__(f"rlx-ref nan-check [reference]: NaN/Inf localized — aborting\n"
                         f"{report}")
        self.report = report


@dataclass(frozen=True)
class NanReport:
    """Where the first NaN or inf of a run appeared (RLX's ``NanReport``)."""

    graph: str
    node: int
    label: str
    op: str
    kind: str                   # "NaN", "+inf" or "-inf"
    index: int
    source_input: int | None    # an operand already non-finite: this node only propagated
    fix: str | None

    def __str__(self) -> str:
        text = (f"{self.kind} at index {self.index} of %{self.node} {self.op} "
                f"\"{self.label}\" in @{self.graph}")
        if self.source_input is not None:
            return text + (f"\n  → propagated: input %{self.source_input} was already "
                           "non-finite (look upstream)")
        text += "\n  → inputs finite, this op produced it"
        return text + (f"\n  fix: {self.fix}" if self.fix else "")


def mode() -> str:
    """``off``, ``warn`` or ``abort`` from ``RLX_DEBUG_NANS``."""
    v = get("RLX_DEBUG_NANS")
    if v in (None, "0", "off", "false", "no"):
        return "off"
    return "abort" if v == "abort" else "warn"


def first_bad(a) -> tuple | None:
    """``(kind, flat index)`` of the first NaN or inf in ``a``; None when all finite."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc" or a.size == 0:
        return None
    bad = ~np.isfinite(a.reshape(-1))
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    v = a.reshape(-1)[i]
    if np.iscomplexobj(v):
        v = v.real if not np.isfinite(v.real) else v.imag
    return ("NaN" if np.isnan(v) else "+inf" if v > 0 else "-inf"), i


def op_short(node) -> str:
    """The activation or binary op name, else the kind (RLX's ``op_short``)."""
    if node.kind in ("Activation", "Binary"):
        return str(node.attrs.op)
    return node.kind


def check_node(graph, node, out, args) -> NanReport | None:
    """A report when ``out`` holds a NaN or inf; ``args`` are the operand arrays."""
    hit = first_bad(out)
    if hit is None:
        return None
    source = next((i for i, a in zip(node.inputs, args) if first_bad(a) is not None), None)
    short = op_short(node)
    return NanReport(graph.name, node.id, node.name or f"%{node.id}", short, hit[0], hit[1],
                     source, FIX_HINTS.get(short) if source is None else None)


def wrap_steps(graph, fns: list, how: str) -> list:
    """The interpreter's step functions with a check after every non-leaf node."""
    state = getattr(_TLS, "state", None) or {"reported": False}

    def checked(node, fn):
        def step(*args):
            outer, _TLS.state = getattr(_TLS, "state", None), state
            try:
                out = fn(*args)         # a body this node runs wraps with the same state
            finally:
                _TLS.state = outer
            if not state["reported"]:
                report = check_node(graph, node, out, args)
                if report is not None:
                    state["reported"] = True
                    if how == "abort":
                        raise NanCheckError(report)
                    print(f"rlx-ref nan-check [reference]: {report}", file=sys.stderr)
            return out
        return step

    return [fn if n.kind in ("Input", "Param") else checked(n, fn)
            for n, fn in zip(graph.nodes, fns)]


__all__ = ["NanCheckError", "NanReport", "check_node", "first_bad", "mode", "wrap_steps"]
