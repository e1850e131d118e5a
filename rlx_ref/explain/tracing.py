"""Watch a graph run on the oracle: one record per node, nested bodies per iteration.

``trace(graph, inputs, params)`` runs the oracle interpreter with a recording
``run_node`` (the interpreter's override point), so a run without tracing keeps its speed.
A body run by If/While/Scan/CustomFn (through ``RefCtx.run_body``) is traced once per call,
up to ``max_iterations`` calls per body and node; later calls run untraced and one record
says how many were elided.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..interpret import InterpretError, Interpreter
from ..ir.graph import Graph
from .summary import ValueSummary, doc_line, summarize

MAX_ITERATIONS = 3


class TraceInputError(ValueError):
    """Inputs or params the graph declares were not given (the message lists them)."""


@dataclass
class TraceRecord:
    """One node's run: where it sits, what it read and produced, and what the op means.

    ``path`` locates the node: ``%4`` at top level, ``%4/@body[1]/%2`` for node 2 of the
    body of ``%4`` on that body's second call. An ``elided`` record stands for body calls
    that were run but not traced; an ``error`` record is the node that failed.
    """

    path: str
    depth: int
    node_id: int
    kind: str
    text: str
    inputs: list = field(default_factory=list)      # (dims text, dtype text) per operand
    out_shape: str = ""
    out_dtype: str = ""
    summary: ValueSummary | None = None
    doc: str = ""
    body: str | None = None          # the body's name for a nested node
    iteration: int | None = None     # the body call it ran in (0-based)
    elided: int = 0                  # body calls not traced (an elision record)
    error: str | None = None


@dataclass
class Trace:
    """The records of one run, the graph's outputs (None if the run failed) and its error."""

    graph: Graph
    records: list
    outputs: list | None = None
    error: str | None = None

    def __iter__(self):
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i):
        return self.records[i]

    def top(self) -> list:
        """The records of the top-level graph's nodes only."""
        return [r for r in self.records if r.depth == 0 and not r.elided]


def _shape_of(arr) -> tuple:
    a = np.asarray(arr)
    return (str(list(a.shape)), str(_dtype_name(a)))


def _dtype_name(a) -> str:
    from ..ir.dtype import DType

    try:
        return str(DType.of(a))
    except TypeError:
        return str(a.dtype)


class TracingInterpreter(Interpreter):
    """The oracle interpreter, appending a TraceRecord to ``sink`` for every node it runs."""

    def __init__(self, graph: Graph, float64: bool = False, core=None, verify: bool = True,
                 *, sink: list | None = None, prefix: str = "", depth: int = 0,
                 max_iterations: int = MAX_ITERATIONS, body: str | None = None,
                 iteration: int | None = None):
        super().__init__(graph, float64, core, verify)
        self.sink = [] if sink is None else sink
        self.prefix, self.depth, self.max_iterations = prefix, depth, max_iterations
        self.body, self.iteration = body, iteration
        self._node = None
        self._calls: dict = {}         # id(body) -> (name, calls made, calls elided)

    def _record(self, node, args) -> TraceRecord:
        rec = TraceRecord(f"{self.prefix}%{node.id}", self.depth, node.id, node.kind,
                          str(node), [_shape_of(a) for a in args], node.shape.dims_text(),
                          str(node.shape.dtype), doc=doc_line(node.kind, node.attrs),
                          body=self.body, iteration=self.iteration)
        self.sink.append(rec)
        return rec

    def _feed(self, node, ctx, table, what):
        rec = self._record(node, [])
        try:
            out = super()._feed(node, ctx, table, what)
        except Exception as e:
            rec.error = str(e)
            raise
        rec.summary = summarize(out)
        return out

    def run_node(self, node, args, ctx):
        """Run the node as the oracle does, recording its operands, result and bodies."""
        rec = self._record(node, args)
        self._node, self._calls = node, {}
        try:
            out = super().run_node(node, args, ctx)
        except Exception as e:
            rec.error = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise
        finally:
            self._note_elided(node)
        rec.summary = summarize(out)
        return out

    def _note_elided(self, node) -> None:
        for name, calls, elided in self._calls.values():
            if elided:
                self.sink.append(TraceRecord(
                    f"{self.prefix}%{node.id}/@{name}", self.depth + 1, node.id, node.kind,
                    f"... {elided} more call(s) of @{name} not traced "
                    f"({calls} in all; --max-iterations raises the bound)",
                    body=name, elided=elided))
        self._calls = {}

    def _run_body(self, body: Graph, args: list, params: dict | None = None) -> list:
        _, calls, elided = self._calls.get(id(body), (body.name, 0, 0))
        self._calls[id(body)] = (body.name, calls + 1, elided + (calls >= self.max_iterations))
        params = getattr(self._local, "params", None) if params is None else params
        ins = body.input_nodes()
        if len(ins) != len(args):
            raise InterpretError(
                f"body @{body.name} has {len(ins)} inputs, was given {len(args)} values")
        feeds = {n.attrs.name: a for n, a in zip(ins, args)}
        if calls >= self.max_iterations:         # past the bound: run as the oracle does
            return Interpreter(body, self.float64, self.core, verify=False).run(feeds, params)
        node = self._node
        sub = TracingInterpreter(
            body, self.float64, self.core, verify=False, sink=self.sink,
            prefix=f"{self.prefix}%{node.id}/@{body.name}[{calls}]/", depth=self.depth + 1,
            max_iterations=self.max_iterations, body=body.name, iteration=calls)
        return sub.run(feeds, params)


def missing_feeds(graph: Graph, inputs: dict, params: dict) -> list[str]:
    """``input 'x' [4, 8] f32`` for each declared input or param that was not given."""
    out = [f"input {n.attrs.name!r} {n.shape}" for n in graph.input_nodes()
           if n.attrs.name not in inputs]
    return out + [f"param {n.attrs.name!r} {n.shape}" for n in graph.param_nodes()
                  if n.attrs.name not in params]


def trace(graph: Graph, inputs: dict | None = None, params: dict | None = None, *,
          max_iterations: int = MAX_ITERATIONS, float64: bool = False,
          raise_errors: bool = True) -> Trace:
    """Run ``graph`` on the oracle and return one ``TraceRecord`` per node run.

    Records come in execution order; a node's nested body records follow it. Missing inputs
    or params raise ``TraceInputError`` naming each with its expected shape and dtype. A
    node that fails raises ``InterpretError`` (its record carries the error); with
    ``raise_errors=False`` the partial ``Trace`` is returned with ``error`` set instead.
    """
    inputs, params = dict(inputs or {}), dict(params or {})
    missing = missing_feeds(graph, inputs, params)
    if missing:
        raise TraceInputError(f"graph @{graph.name} needs {', '.join(missing)}; pass them "
                              f"(or fill every input from a seed: --random-inputs SEED)")
    if max_iterations < 0:
        raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
    sink: list = []
    interp = TracingInterpreter(graph, float64, sink=sink, max_iterations=max_iterations)
    try:
        outs = interp.run(inputs, params)
    except InterpretError as e:
        if raise_errors:
            raise
        return Trace(graph, sink, None, str(e))
    return Trace(graph, sink, outs)
