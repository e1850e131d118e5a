"""A compiled Numba CPU graph: a plan of Steps over preallocated buffers.

Planning happens once per set of input shapes. With the memory plan on (the default,
``CompileOptions.memory_plan``), every non-output intermediate is a slice of one arena at
the offset ``passes/memory_plan.py`` gives it, and Reshape / same-dtype Cast / axis-0
Narrow of a contiguous value are views instead of kernels. Nested bodies (If, While,
Scan, CustomFn) keep their own buffers: their loop drivers bind them by shape. With the
plan off, every intermediate gets a buffer, reused by liveness (a buffer whose last
reader has run is handed to the next node of the same dtype and element count). Outputs
are new arrays unless the caller has dropped the previous run's: that one is written
again (nothing else references it), which spares the page faults of a fresh large array
(~5 ms per 64 MiB, more than many kernels take). Constants are decoded once; params are
copied by ``set_param``. A plan serves one run at a time: concurrent runs each get one
from the executable's ``PlanPool`` (so each has an arena of its own). The weight-only
prefix of the graph (``split_param_invariant``) runs once per set of params
(``backends/hoist.py``); the plans run the rest.
"""
from __future__ import annotations

import sys
import threading
from operator import itemgetter

import numpy as np
from numba.np.ufunc import parallel as _numba_parallel

from ...ir.graph import Graph
from ...ir.shape import Dyn
from ...ops.opdef import RefCtx, get
from ...runtime.session import CompiledGraph
from ..base import Executable
from ..hoist import HoistedPrefix, split_for
from ..planning import (PlanError, PlanPool, assign_buffers, contiguous, host_memory_bytes,
                        planning, specialize)
from ...passes.memory_plan import plan_memory
from ...runtime.options import CompileOptions
from .. import variants
from .lowering import LOWERINGS, LowerCtx


class NumbaRunError(RuntimeError):
    """A step failed at run time; the message names the node in text form."""


class Plan:
    """Steps over buffers for one graph with static shapes."""

    def __init__(self, graph: Graph, options=None, arena: bool = True):
        self.graph = graph
        self.steps = []          # (node, step, input ids)
        self.kernels = {}
        self.const = {}
        with variants.lowering(options) as chosen:
            self._lower(graph, options)
        self.variants = frozenset(chosen)     # kernel variants the steps run
        self.outputs = list(graph.outputs)
        self._spare: dict = {}      # node id -> its output array of the last run
        self.memory = None          # the MemoryPlan, when the arena is used
        self.views: dict = {}       # node id -> View (no kernel runs for these)
        opts = CompileOptions.coerce(options)
        if arena and opts.memory_plan:
            self._plan_arena(opts.arena_alignment)
        else:
            self._assign_buffers()
        self.prepare()

    def _lower(self, graph: Graph, options) -> None:
        """Lower every node to a step (constants evaluated once)."""
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
                with planning("numba-cpu", node, host_memory_bytes(), "this machine's memory"):
                    step = low.fn(node, [graph.nodes[i].shape for i in node.inputs], ctx)
                for k in step.kernels:
                    self.kernels[k.name] = k.source
                self.steps.append((node, step, node.inputs))

    def _assign_buffers(self) -> None:
        """Give every intermediate a buffer, reusing dead ones of the same dtype and shape;
        outputs and steps that return their array get none."""
        keep = set(self.outputs)
        returns = {node.id for node, step, _ in self.steps if step.returns}
        self.buffer = assign_buffers(
            self.graph, [node for node, _, _ in self.steps], keep,
            lambda n: n.id not in keep and n.id not in returns,
            lambda dt, dims: np.empty(dims, dt.np), "numba-cpu", reshape=_view)

    def _plan_arena(self, alignment: int) -> None:
        """One arena per plan (a plan serves one run at a time), sliced per the memory
        plan; the allocation is over-sized so its first byte can sit on ``alignment``."""
        returns = {node.id for node, step, _ in self.steps if step.returns}
        mp = plan_memory(self.graph, [node for node, _, _ in self.steps], returns,
                         alignment)
        try:
            raw = np.empty(mp.arena_bytes + alignment, np.uint8)
        except MemoryError as e:
            raise PlanError(f"numba-cpu: cannot allocate the {mp.arena_bytes} B arena of "
                            f"@{self.graph.name}: {e}") from e
        start = -raw.ctypes.data % alignment
        self.arena = raw[start:start + mp.arena_bytes]
        self.memory, self.views, self.buffer = mp, mp.views, {}
        for i, s in mp.slots.items():
            shape = self.graph.nodes[i].shape
            part = self.arena[s.offset:s.offset + s.nbytes]
            self.buffer[i] = part.view(shape.dtype.np).reshape(tuple(shape.dims))

    def prepare(self) -> None:
        """Precompute the run loop: a list environment indexed by node id, with constants
        and planned buffers already in place, and per step (fn, argument getter, kind,
        node id, out) so a run does no dict lookups and no per-step setup."""
        nodes = self.graph.nodes
        env = [None] * len(nodes)
        for i, a in self.const.items():
            env[i] = a
        for i, b in self.buffer.items():
            env[i] = b                  # a planned buffer is its node's value on every run
        self._template = env
        self._inputs = [(n.id, n.attrs.name) for n in nodes if n.kind == "Input"]
        self._params = [(n.id, n.attrs.name) for n in nodes if n.kind == "Param"]
        self._input_ids = [i for i, _ in self._inputs]
        ops = []
        for node, step, ins in self.steps:
            buf = self.buffer.get(node.id)
            if node.id in self.views:
                view = _view_fn(self.views[node.id], tuple(node.shape.dims))
                src = env[ins[0]]
                if src is not None:     # a slot or constant: the view is fixed, no step
                    env[node.id] = view(src)
                else:                   # an input's or param's: made on every run
                    ops.append((view, _getter(ins), _RETURNS, node.id, None))
                continue
            if step.returns:
                kind, out = _RETURNS, None
            elif buf is not None:
                kind, out = _PLANNED, buf
            else:
                kind, out = _FRESH, (tuple(node.shape.dims), node.shape.dtype.np)
            ops.append((step.fn, _getter(ins), kind, node.id, out))
        self._ops = ops
        self._outputs = [(o, nodes[o].kind in _LEAVES) for o in self.outputs]

    def run(self, feeds: dict, params: dict) -> list:
        env = self._template.copy()
        for i, name in self._inputs:
            env[i] = contiguous(feeds[name])
        for i, name in self._params:
            env[i] = params[name]
        self._exec(env)
        # leaves are shared across runs (constants) or belong to the caller (inputs)
        return [env[o].copy() if leaf else env[o] for o, leaf in self._outputs]

    def _exec(self, env: list) -> None:
        """Run every step over ``env`` (inputs bound); errors name the failing node."""
        nid = None
        spare, getrefcount = self._spare, sys.getrefcount
        try:
            for fn, gather, kind, nid, out in self._ops:
                if not kind:                            # _PLANNED: write its buffer
                    fn(out, *gather(env))
                elif kind == 1:                         # _RETURNS: a new array
                    env[nid] = fn(*gather(env))
                else:                                   # _FRESH: an output's buffer
                    # pop: two concurrent runs never get the same array; 2 references
                    # (``buf`` and getrefcount's argument) mean the caller let go of it
                    buf = spare.pop(nid, None)
                    if buf is None or getrefcount(buf) > 2:
                        buf = np.empty(*out)
                    fn(buf, *gather(env))
                    env[nid] = spare[nid] = buf
        except Exception as e:      # re-raised naming the node
            node = self.graph.nodes[nid]
            raise NumbaRunError(f"at %{node.id} in @{self.graph.name}: {e}\n"
                                f"  while running: {node}") from e


def _view_fn(view, dims: tuple):
    """source array -> the view's array (what runs instead of the node's kernel)."""
    if view.how == "reshape":
        return lambda x: x.reshape(dims)
    if view.how == "rows":
        lo, hi = view.start, view.start + view.length
        return lambda x: x[lo:hi]
    return lambda x: x


def _view(buf: np.ndarray, dims: tuple) -> np.ndarray:
    """A planned buffer as ``dims`` (the same array when the shape already matches)."""
    return buf if buf.shape == dims else buf.reshape(dims)


_LEAVES = ("Input", "Param", "Constant")
_PLANNED, _RETURNS, _FRESH = 0, 1, 2


def _getter(ids):
    """env -> the tuple of env[i] for i in ids (itemgetter: the fastest way to collect)."""
    if len(ids) == 1:
        one = ids[0]
        return lambda env: (env[one],)
    return itemgetter(*ids) if ids else (lambda env: ())


class SubPlan:
    """A nested body compiled once: ``run(args)`` binds its Inputs in node order.

    Runs reuse the plan's precomputed loop, so a host loop over a body (Scan, While)
    costs little more than the body's kernels. Outputs are fresh arrays on every run.
    """

    def __init__(self, body: Graph, options=None):
        self.body = body
        self.plan = Plan(body, options, arena=False)
        self.names = [n.attrs.name for n in body.input_nodes()]
        self.kernels = self.plan.kernels            # name -> source

    def _bind(self, args, params) -> list:
        plan = self.plan
        env = plan._template.copy()
        for i, a in zip(plan._input_ids, args):
            env[i] = a
        for i, name in plan._params:
            env[i] = (params or {})[name]
        plan._exec(env)
        return env

    def run(self, args, params: dict | None = None) -> list:
        """All outputs of the body for ``args`` (one array per Input, in node order)."""
        env = self._bind(args, params)
        return [env[o].copy() if leaf else env[o] for o, leaf in self.plan._outputs]

    def first(self, args, params: dict | None = None) -> np.ndarray:
        """The body's first output for ``args`` (what If, Scan and CustomFn return)."""
        env = self._bind(args, params)
        o, leaf = self.plan._outputs[0]
        return env[o].copy() if leaf else env[o]


# Numba's workqueue threading layer (the one left where neither TBB nor OpenMP is
# installed) terminates the process when two threads enter parallel kernels at once:
# there, runs take turns.
_WORKQUEUE_TURNS = threading.RLock()   # re-entered by a run nested in a run
_LAYER_SAFE: list = []


def _turns():
    """The lock runs take turns with, or None once Numba's threading layer is known to
    take parallel kernels from many threads. Until a parallel kernel has started it, the
    layer is unknown (starting it here would start a thread pool a fork could inherit),
    so runs take turns."""
    if _LAYER_SAFE:
        return None if _LAYER_SAFE[0] else _WORKQUEUE_TURNS
    if not _numba_parallel._is_initialized:
        return _WORKQUEUE_TURNS
    import numba

    _LAYER_SAFE.append(numba.threading_layer() != "workqueue")
    return _turns()


class NumbaExecutable(CompiledGraph, Executable):
    """CompiledGraph I/O checks + Plans per distinct binding of dynamic dims (one per
    concurrent run, from a ``PlanPool``)."""

    _uses_interpreter = False

    def __init__(self, graph: Graph, options=None):
        super().__init__(graph)
        self.device = "numba-cpu"
        self.options = options
        # the weight-only prefix runs once per params (its own plans); the rest per run
        split = split_for(graph, CompileOptions.coerce(options))
        self.hoisted = None
        run_graph = graph
        if split is not None:
            prep = PlanPool(lambda key: Plan(split.prepare, options))
            prep.add((), Plan(split.prepare, options))
            self._prep_pool = prep
            self.hoisted = HoistedPrefix(split, lambda params: prep.run((), {}, params))
            run_graph = split.main
        self._pool = PlanPool(lambda key: Plan(specialize(run_graph, dict(key)), options))
        if not any(isinstance(d, Dyn) for n in run_graph.nodes for d in n.shape.dims):
            self._pool.add((), Plan(run_graph, options))

    @property
    def _plans(self) -> dict:
        """The first plan of each binding (what sources and notes describe)."""
        return self._pool.first

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        turns = _turns()
        if turns is not None:
            with turns:
                return self._run_plan(inputs, params, bindings)
        return self._run_plan(inputs, params, bindings)

    def _run_plan(self, inputs: dict, params: dict, bindings: dict) -> list:
        if self.hoisted is not None:
            inputs = {**inputs, **self.hoisted.feeds(params)}
        return self._pool.run(tuple(sorted(bindings.items())), inputs, params)

    def _pools(self) -> list:
        return [self._pool] + ([self._prep_pool] if self.hoisted is not None else [])

    def variants_run(self) -> list:
        """The kernel variants (``numba-cpu:...``) of the runs so far, sorted."""
        return sorted(set().union(*(pool.ran for pool in self._pools())))

    def memory_plans(self) -> list:
        """The MemoryPlan of each first plan (the weight-only prefix's last), or []."""
        return [p.memory for pool in self._pools() for p in pool.plans() if p.memory]

    def kernel_sources(self) -> dict:
        out = {}
        for plan in (p for pool in self._pools() for p in pool.plans()):
            out.update(plan.kernels)
        return out

    def step_notes(self) -> list:
        """(node id, kind, note) of every planned step that says how it runs beyond its
        kernels: "compiled loop" or "host loop (why)" for loops, host copies, ..."""
        return [(node.id, node.kind, step.note) for pool in self._pools()
                for plan in pool.plans() for node, step, _ in plan.steps if step.note]
