"""The oracle interpreter: runs a verified graph node by node from the registry.

``Interpreter(graph).run(inputs, params)`` returns the output arrays; runs keep their
state (inputs, params, values) per call, so threads may share one interpreter. Each node's
reference sees its input arrays and a ``RefCtx`` (payload, declared output shape,
a callback to run nested bodies). With ``float64=True`` every float tensor is held
in float64 (the conformance suite's high-precision oracle). Errors name the node in
text form; ``run_node`` is the one method to override for tracing or patching.
"""
from __future__ import annotations

import threading

import numpy as np

from . import hotpaths
from .ir.dtype import DType
from .ir.graph import Graph, Node
from .ir.shape import Dyn
from . import nan_check
from .ops.opdef import RefCtx, get


class InterpretError(RuntimeError):
    """A node failed while running; the message names the node and the cause."""


class Interpreter:
    """Runs one graph on numpy. Reusable: ``run`` may be called many times."""

    def __init__(self, graph: Graph, float64: bool = False, core=None, verify: bool = True):
        if verify:
            from .ir.verify import verify_or_raise

            verify_or_raise(graph)
        self.graph = graph
        self.float64 = float64
        self.core = core or hotpaths.core
        self._plan = None
        self._local = threading.local()     # the params of this thread's run (for bodies)

    # ── the overridable step ───────────────────────────────────────────────
    def run_node(self, node: Node, args: list, ctx: RefCtx):
        """Evaluate one node from its OpDef reference; checks the result's shape and dtype."""
        d = get(node.kind)
        out = d.reference(ctx, *args)
        return self._conform(node, ctx, out)

    def _conform(self, node: Node, ctx: RefCtx, out):
        out = np.asarray(out)
        want = ctx.out_np
        dims = tuple(ctx.out.dims)
        if out.shape != dims and not _dyn_match(ctx.out.dims, out.shape):
            raise InterpretError(
                f"reference of {node.kind} returned shape {list(out.shape)}, "
                f"declared {ctx.out.dims_text()}")
        if out.dtype != want:
            if out.dtype.kind != want.kind and not (
                    out.dtype.kind in "fcV" and want.kind in "fcV"):
                raise InterpretError(
                    f"reference of {node.kind} returned dtype {out.dtype}, declared "
                    f"{node.shape.dtype}")
            out = out.astype(want)
        return out

    # ── planning and running ───────────────────────────────────────────────
    def _build_plan(self):
        g = self.graph
        # the run's input and param tables sit in two env slots past the nodes, read by
        # the Input and Param steps: run state lives in the call, never on self
        tables = {"Input": (len(g.nodes),), "Param": (len(g.nodes) + 1,)}
        fns, step_inputs, outs = [], [], []
        for node in g.nodes:
            ctx = RefCtx(node.attrs, node.shape, self.float64, self._run_body, node)
            fns.append(self._bind(node, ctx))
            step_inputs.append(tables.get(node.kind, tuple(node.inputs)))
            outs.append(node.id)
        frees = self.core.last_uses(len(g.nodes), step_inputs, set(g.outputs))
        self._plan = (fns, step_inputs, outs, frees)

    def _bind(self, node: Node, ctx: RefCtx):
        if node.kind == "Input":
            return lambda table: self._feed(node, ctx, table, "input")
        if node.kind == "Param":
            return lambda table: self._feed(node, ctx, table, "param")
        if type(self).run_node is not Interpreter.run_node:
            run = self.run_node
            return lambda *args: run(node, list(args), ctx)
        ref, conform = get(node.kind).reference, self._conform
        dims, want = tuple(node.shape.dims), ctx.out_np

        def step(*args):
            out = ref(ctx, *args)
            if type(out) is np.ndarray and out.shape == dims and out.dtype == want:
                return out
            return conform(node, ctx, out)
        return step

    def _feed(self, node: Node, ctx: RefCtx, table: dict, what: str):
        name = node.attrs.name
        if name not in table:
            raise InterpretError(f"missing {what} {name!r} (declared {node.shape})")
        arr = np.asarray(table[name])
        expect = node.shape.dtype
        if DType.of(arr) != expect and not (self.float64 and arr.dtype == ctx.out_np):
            raise InterpretError(f"{what} {name!r} has dtype {arr.dtype}, expected {expect}")
        if not _dyn_match(node.shape.dims, arr.shape):
            raise InterpretError(
                f"{what} {name!r} has shape {list(arr.shape)}, expected {node.shape.dims_text()}")
        return arr.astype(ctx.out_np, copy=False)

    def run(self, inputs: dict | None = None, params: dict | None = None) -> list:
        """Outputs of the graph for the named inputs and params."""
        if self._plan is None:
            self._build_plan()
        params = dict(params or {})
        fns, step_inputs, outs, frees = self._plan
        how = nan_check.mode()      # RLX_DEBUG_NANS, read once per run as RLX does
        if how != "off":
            fns = nan_check.wrap_steps(self.graph, fns, how)
        env = [None] * len(self.graph.nodes) + [dict(inputs or {}), params]
        local = self._local
        outer = getattr(local, "params", None)      # a body run by this thread's own run
        local.params = params
        try:
            # IEEE results (inf, NaN) are the semantics, not warnings: silence numpy once
            # per run rather than per node.
            with np.errstate(all="ignore"):
                self.core.run_steps(fns, step_inputs, outs, frees, env)
        except self.core.StepFailure as f:
            node = self.graph.nodes[f.index]
            cause = f.__cause__
            raise InterpretError(
                f"at %{node.id} in @{self.graph.name}: {cause}\n  while running: {node}"
            ) from cause
        finally:
            local.params = outer
        return [env[o] for o in self.graph.outputs]

    def _run_body(self, body: Graph, args: list, params: dict | None = None) -> list:
        """Run a nested body: its Input nodes bind ``args`` in node order."""
        ins = body.input_nodes()
        if len(ins) != len(args):
            raise InterpretError(
                f"body @{body.name} has {len(ins)} inputs, was given {len(args)} values")
        sub = type(self)(body, self.float64, self.core, verify=False)
        return sub.run({n.attrs.name: a for n, a in zip(ins, args)},
                       getattr(self._local, "params", None) if params is None else params)


def _dyn_match(dims, shape) -> bool:
    if len(dims) != len(shape):
        return False
    return all(isinstance(d, Dyn) or d == s for d, s in zip(dims, shape))


def interpret(graph: Graph, inputs: dict | None = None, params: dict | None = None,
              float64: bool = False) -> list:
    """Run ``graph`` once on the oracle; see ``Interpreter``."""
    return Interpreter(graph, float64).run(inputs, params)
