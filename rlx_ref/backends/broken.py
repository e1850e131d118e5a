"""A deliberately broken backend that proves the conformance suite catches each failure
class. It runs the oracle with planted defects:

- wrong reduction: Reduce Sum/Mean skip the last element of the first reduced axis;
- missing tail: Activation leaves elements past the last full block of 8 at zero (so
  tiny outputs come back all zero, the MISSING status);
- swapped broadcast: Binary aligns operand dims from the left instead of the right;
- a crashing kernel: Cumsum raises;
- a wrapping gather: Gather reads a negative index from the end instead of raising (its
  value cases pass; only the error cases catch it);
- undeclared ops: Attention is not claimed at all, Softmax not for f16.

Two more defects kill or hang the process running the backend, so they are planted only in
``broken-faults`` (``FaultyBrokenBackend``), never in ``broken``:

- an aborting kernel: Tile calls ``os.abort()`` (SIGABRT, like a native compiler's assert);
- a hanging kernel: Expand sleeps forever.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ..interpret import Interpreter
from ..ir.dtype import DType
from ..ops.opdef import get
from .base import ALL
from .reference import ReferenceBackend, ReferenceExecutable

BLOCK = 8
ABORTS_ON, HANGS_ON = "Tile", "Expand"      # the kinds that trigger the process faults


class BrokenInterpreter(Interpreter):
    """The oracle with the planted defects listed in the module docstring."""

    faults = False

    def run_node(self, node, args, ctx):
        kind = node.kind
        if self.faults and kind == ABORTS_ON:
            os.abort()                              # SIGABRT: the process dies here
        if self.faults and kind == HANGS_ON:
            threading.Event().wait()                # never set: the kernel never returns
        if kind == "Cumsum":
            raise RuntimeError("kernel launch failed (planted defect)")
        if kind == "Gather":
            table, idx = args
            with np.errstate(invalid="ignore"):       # NaN/inf become garbage: unchecked
                i = np.asarray(idx).astype(np.int64) % max(table.shape[ctx.attrs.axis], 1)
            return self._conform(node, ctx, np.take(table, i, axis=ctx.attrs.axis))
        if kind == "Reduce" and ctx.attrs.op in ("Sum", "Mean") and args[0].size:
            axis = min(ctx.attrs.axes) if ctx.attrs.axes else None
            x = args[0]
            if axis is not None and axis < x.ndim and x.shape[axis] > 1:
                x = np.delete(x, -1, axis=axis)            # drop the last element
                if ctx.attrs.op == "Mean":                 # ...but divide by the full length
                    x = np.concatenate([x, np.zeros_like(np.take(x, [0], axis))], axis)
                args = [x]
        if kind == "Binary" and args[0].shape != args[1].shape:
            a, b = args
            rank = max(a.ndim, b.ndim)
            a = a.reshape(a.shape + (1,) * (rank - a.ndim))   # left-aligned: wrong
            b = b.reshape(b.shape + (1,) * (rank - b.ndim))
            args = [a, b]
            out = get(kind).reference(ctx, *args)
            return self._conform(node, ctx, np.broadcast_to(out, ctx.out.dims).copy()
                                 if np.size(out) == 1 else out)
        out = super().run_node(node, args, ctx)
        if kind == "Activation":
            flat = out.reshape(-1).copy()
            flat[(flat.size // BLOCK) * BLOCK:] = 0
            out = flat.reshape(out.shape)
        return out


class BrokenExecutable(ReferenceExecutable):
    def __init__(self, graph, float64: bool = False, faults: bool = False):
        super().__init__(graph, float64)
        self._interp = BrokenInterpreter(graph, float64, verify=False)
        self._interp.faults = faults


class BrokenBackend(ReferenceBackend):
    name = "broken"
    test_only = True
    faults = False
    device = "numpy oracle with planted defects (tests only)"

    def supported_ops(self) -> dict:
        table = super().supported_ops()
        del table["Attention"]
        table["Softmax"] = frozenset(d for d in DType if d is not DType.F16)
        return {k: v for k, v in table.items()} | {"Reduce": ALL}

    def compile(self, graph, options=None):
        from ..ir.verify import verify_or_raise

        verify_or_raise(graph)
        self.check_supported(graph)
        return BrokenExecutable(graph, faults=self.faults)


class FaultyBrokenBackend(BrokenBackend):
    """``broken`` plus the process-killing faults: Tile aborts, Expand hangs."""

    name = "broken-faults"
    faults = True
