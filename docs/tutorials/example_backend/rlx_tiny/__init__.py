"""rlx_tiny: a small third-party rlx_ref backend, written from the backend contract.

It claims the three leaf kinds (every graph has Inputs), Softmax and the arithmetic
functions of Binary in f32, and runs each node with its own numpy code, one node at a time.
"""
from __future__ import annotations

import numpy as np

from rlx_ref.backends.base import Backend, Executable, UnsupportedOp
from rlx_ref.ir.dtype import DType
from rlx_ref.runtime.session import CompiledGraph

F32 = frozenset({DType.F32})
# Binary functions this backend has kernels for. RLX's Max and Min ignore a NaN operand
# (fmax/fmin, not maximum/minimum). Mod and the bit operations have no kernel: compile
# raises UnsupportedOp for them, and the ledger (expectations.toml) declares it.
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
          "Max": np.fmax, "Min": np.fmin, "Pow": np.power, "Atan2": np.arctan2}


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """Max-subtracted softmax along ``axis`` (a row of -inf gives NaN, as exp(-inf - -inf))."""
    if x.size == 0:
        return x.copy()
    with np.errstate(all="ignore"):          # inf - inf is NaN, as the oracle has it
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - m)
        return e / np.sum(e, axis=axis, keepdims=True)


class TinyExecutable(CompiledGraph, Executable):
    """Checked I/O from CompiledGraph; ``_execute`` walks the nodes with numpy."""

    _uses_interpreter = False

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        vals = []
        for node in self.graph.nodes:
            args = [vals[i] for i in node.inputs]
            vals.append(self._node(node, args, inputs, params))
        return [vals[i] for i in self.graph.outputs]

    def _node(self, node, args, inputs, params):
        np_dtype = node.shape.dtype.np
        if node.kind == "Input":
            return inputs[node.attrs.name]
        if node.kind == "Param":
            return params[node.attrs.name]
        if node.kind == "Constant":
            data = np.frombuffer(bytes(node.attrs.data), np_dtype)
            return data.reshape(node.shape.dims).copy()
        if node.kind == "Softmax":
            return softmax(args[0], node.attrs.axis).astype(np_dtype)
        if node.kind == "Binary":
            with np.errstate(all="ignore"):
                return BINARY[node.attrs.op](args[0], args[1]).astype(np_dtype)
        raise AssertionError(f"unclaimed kind {node.kind}")   # compile() refused it


class TinyBackend(Backend):
    """Leaves, Softmax and six Binary functions in f32, in plain numpy."""

    name = "tiny"
    device = "numpy (CPU)"

    def supported_ops(self) -> dict:
        leaves = {k: frozenset(DType) for k in ("Input", "Param", "Constant")}
        return {**leaves, "Softmax": F32, "Binary": F32}

    def compile(self, graph, options=None) -> TinyExecutable:
        from rlx_ref.ir.verify import verify_or_raise

        verify_or_raise(graph)
        self.check_supported(graph)            # kinds and dtypes outside the claim
        bad = [f"@{graph.name} %{n.id} Binary {n.attrs.op}: no tiny kernel"
               for n in graph.nodes if n.kind == "Binary" and n.attrs.op not in BINARY]
        if bad:
            raise UnsupportedOp(self.name, bad)
        return TinyExecutable(graph)
