"""A compiled Numba CPU graph: a plan of Steps over preallocated buffers.

Planning happens once per set of input shapes: every non-output intermediate gets a
buffer, reused by liveness (a buffer whose last reader has run is handed to the next node
of the same dtype and shape). Outputs are fresh arrays each run, so results stay valid.
Constants are decoded once; params are bound by ``set_param``.
"""
from __future__ import annotations

import numpy as np

from ... import hotpaths
from ...ir.graph import Graph
from ...ir.shape import Dyn
from ...ops.opdef import RefCtx, get
from ...runtime.session import CompiledGraph
from ..base import Executable
from .lowering import LOWERINGS, LowerCtx


def contiguous(x) -> np.ndarray:
    """``x`` as a C-contiguous array of the same shape (0-d stays 0-d, unlike numpy's)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)


class NumbaRunError(RuntimeError):
    """A step failed at run time; the message names the node in text form."""


def specialize(graph: Graph, bindings: dict) -> Graph:
    """A copy of ``graph`` with dynamic dims replaced by their bound sizes (bodies too)."""
    if not bindings:
        return graph
    g = graph.copy()
    for n in g.nodes:
        n.shape = n.shape.bind(bindings)
    return g


class Plan:
    """Steps over buffers for one graph with static shapes."""

    def __init__(self, graph: Graph, options=None):
        self.graph = graph
        self.steps = []          # (node, step, input ids)
        self.kernels = {}
        n = len(graph.nodes)
        self.const = {}
        for node in graph.nodes:
            if not node.shape.is_static:
                raise NumbaRunError(f"%{node.id} has dynamic shape {node.shape} after binding")
            if node.kind == "Constant":
                ctx = RefCtx(node.attrs, node.shape)
                self.const[node.id] = contiguous(get("Constant").reference(ctx))
            elif node.kind not in ("Input", "Param"):
                low = LOWERINGS[node.kind]
                ctx = LowerCtx(node, graph, options, compile_body=lambda body: SubPlan(body,
                                                                                     options))
                step = low.fn(node, [graph.nodes[i].shape for i in node.inputs], ctx)
                for k in step.kernels:
                    self.kernels[k.name] = k.source
                self.steps.append((node, step, node.inputs))
        self.outputs = list(graph.outputs)
        self._assign_buffers(n)

    def _assign_buffers(self, n: int) -> None:
        """Give every intermediate a buffer, reusing dead ones of the same dtype and shape."""
        keep = set(self.outputs)
        step_inputs = [tuple(ins) for _, _, ins in self.steps]
        frees = hotpaths.core.last_uses(len(self.steps), step_inputs, keep)
        pool: dict = {}
        self.buffer = {}
        for (node, step, _), dead in zip(self.steps, frees):
            if node.id not in keep and not step.returns:
                key = (node.shape.dtype, node.shape.dims)
                free = pool.get(key)
                self.buffer[node.id] = free.pop() if free else np.empty(
                    node.shape.dims, node.shape.dtype.np)
            for v in dead:
                if v in self.buffer:
                    node_v = self.graph.nodes[v]
                    pool.setdefault((node_v.shape.dtype, node_v.shape.dims), []).append(
                        self.buffer[v])
        self.frees = frees

    def run(self, feeds: dict, params: dict) -> list:
        env: dict = dict(self.const)
        for node in self.graph.nodes:
            if node.kind == "Input":
                env[node.id] = contiguous(feeds[node.attrs.name])
            elif node.kind == "Param":
                env[node.id] = params[node.attrs.name]
        for (node, step, ins), dead in zip(self.steps, self.frees):
            args = [env[i] for i in ins]
            try:
                if step.returns:
                    env[node.id] = step.fn(*args)
                else:
                    out = self.buffer.get(node.id)
                    if out is None:
                        out = np.empty(node.shape.dims, node.shape.dtype.np)
                    step.fn(out, *args)
                    env[node.id] = out
            except Exception as e:  # noqa: BLE001 - re-raised naming the node
                raise NumbaRunError(f"at %{node.id} in @{self.graph.name}: {e}\n"
                                    f"  while running: {node}") from e
        # leaves are shared across runs (constants) or belong to the caller (inputs)
        return [env[o].copy() if self.graph.nodes[o].kind in _LEAVES else env[o]
                for o in self.outputs]


_LEAVES = ("Input", "Param", "Constant")


class SubPlan:
    """A nested body compiled once: ``run(args)`` binds its Inputs in node order."""

    def __init__(self, body: Graph, options=None):
        self.body = body
        self.plan = Plan(body, options)
        self.names = [n.attrs.name for n in body.input_nodes()]

    def run(self, args: list, params: dict | None = None) -> list:
        return self.plan.run(dict(zip(self.names, args)), params or {})


class NumbaExecutable(CompiledGraph, Executable):
    """CompiledGraph I/O checks + a Plan per distinct binding of dynamic dims."""

    _uses_interpreter = False

    def __init__(self, graph: Graph, options=None):
        super().__init__(graph)
        self.device = "numba-cpu"
        self.options = options
        self._plans: dict = {}
        if not any(isinstance(d, Dyn) for n in graph.nodes for d in n.shape.dims):
            self._plans[()] = Plan(graph, options)

    def _plan(self, bindings: dict) -> Plan:
        key = tuple(sorted(bindings.items()))
        if key not in self._plans:
            self._plans[key] = Plan(specialize(self.graph, bindings), self.options)
        return self._plans[key]

    def set_param(self, name: str, data) -> None:
        super().set_param(name, data)
        self._params[name] = contiguous(self._params[name])

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        return self._plan(bindings).run(inputs, params)

    def kernel_sources(self) -> dict:
        out = {}
        for plan in self._plans.values():
            out.update(plan.kernels)
        return out
