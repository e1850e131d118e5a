"""A compiled CUDA graph: a plan of Steps over preallocated, flat device buffers.

Planning happens once per set of input shapes. With the memory plan off, every
intermediate gets a device buffer, reused by liveness (a buffer whose last reader has run
goes to the next node of the same dtype and element count); outputs keep their own. A
run uploads each input once, runs every step on device-resident arrays, reads the error
word (only when some kernel can fail) and downloads each output once. Constants are
uploaded once, params at ``set_param``. Control flow drives its compiled bodies
(``SubPlan``) from the host. A plan (buffers, error word, bodies) serves one run at a
time: concurrent runs each get one from the executable's ``PlanPool``.

With the memory plan on (the default; ``CompileOptions.memory_plan``), a top-level plan's
intermediates are views of one device array (the arena) at the offsets
``passes/memory_plan.py`` gives them (``memory.py``: a byte slice viewed as the tensor's
device dtype, offsets aligned to 256 bytes or ``CompileOptions.arena_alignment``). No
views of other tensors (a Reshape still runs its copy). Outputs, the results of control
flow (fresh arrays from their bodies) and the bodies' own tensors keep buffers of their
own.

The weight-only prefix of the graph (``split_param_invariant``, ``backends/hoist.py``)
runs once per params snapshot in a plan of its own; its results (device copies of that
plan's outputs, which its next run overwrites) are bound to the per-run plans' Inputs as
params are: no transfer per run.
"""
from __future__ import annotations

import threading
from operator import itemgetter

import numpy as np

from ... import hotpaths
from ...ir.graph import Graph
from ...ir.shape import Dyn
from ...ops.opdef import RefCtx, get
from ...runtime.session import CompiledGraph
from ..base import Executable
from ..hoist import HoistedPrefix
from ..planning import PlanPool, specialize
from .device import ERR_CLEAR, copy_device
from .ew_render import ERROR_TEXT
from .lowering import LOWERINGS, ErrorWord, LowerCtx, load_families
from .memory import arena_buffers

_LEAVES = ("Input", "Param", "Constant")


class CudaRunError(RuntimeError):
    """A step or kernel failed at run time; the message names the node in text form."""


def lower_graph(graph: Graph, options, err: ErrorWord, compile_body) -> list:
    """(node, Step) for every non-leaf node; renders kernels, touches no device."""
    load_families()
    steps = []
    for node in graph.nodes:
        if not node.shape.is_static:
            raise CudaRunError(f"at %{node.id} in @{graph.name}: dynamic shape {node.shape} "
                               "after binding")
        if node.kind in _LEAVES:
            continue
        ctx = LowerCtx(node, graph, options, err, compile_body)
        ins = [graph.nodes[i].shape for i in node.inputs]
        try:
            steps.append((node, LOWERINGS[node.kind].fn(node, ins, ctx)))
        except Exception as e:
            raise CudaRunError(f"at %{node.id} in @{graph.name}: cannot lower {node.kind}: "
                               f"{e}\n  node: {node}") from e
    return steps


class Plan:
    """Steps over device buffers for one graph with static shapes.

    ``fresh_outputs``: body plans hand out new output arrays on every run (a loop feeds
    them back as the next run's inputs, so they must not be the body's own buffers).
    """

    def __init__(self, graph: Graph, device, options=None, fresh_outputs: bool = False):
        self.graph, self.device, self.options = graph, device, options
        self.fresh_outputs = fresh_outputs
        # bodies (fresh_outputs) keep a buffer per tensor: their drivers rebind them
        self.use_arena = not fresh_outputs and getattr(options, "memory_plan", True)
        self.alignment = getattr(options, "arena_alignment", 64)
        self.memory = self.arena = None     # the MemoryPlan and its device array, when used
        self.err = ErrorWord()
        self.steps = lower_graph(graph, options, self.err,
                                 lambda body: SubPlan(body, device, options))
        self.fallible = any(step.fallible for _, step in self.steps)
        self.outputs = list(graph.outputs)
        self._ready = False

    def launches(self) -> list:
        """Every (kernel, argument types) this plan launches, bodies included."""
        return [ln for _, step in self.steps for ln in step.launches]

    def kernel_sources(self) -> dict:
        return {ln.kernel.name: ln.kernel.source for ln in self.launches()}

    def _assign_buffers(self) -> dict:
        """Node id → (dtype, numel) slot; dead slots are reused by later nodes (the memory
        plan off, and bodies)."""
        keep = set(self.outputs)
        ins = [tuple(node.inputs) for node, _ in self.steps]
        frees = hotpaths.core.last_uses(len(self.steps), ins, keep)
        pool: dict = {}
        buffers = {}
        for (node, step), dead in zip(self.steps, frees):
            if not step.returns and not (self.fresh_outputs and node.id in keep):
                key = (node.shape.dtype, node.shape.numel)
                free = pool.get(key)
                buffers[node.id] = free.pop() if free else self.device.empty(*key[::-1])
            for v in dead:
                if v in buffers and v not in keep:
                    nv = self.graph.nodes[v]
                    pool.setdefault((nv.shape.dtype, nv.shape.numel), []).append(buffers[v])
        return buffers

    def _prepare(self) -> None:
        """Allocate buffers and upload constants (first run only), build the run loop."""
        nodes = self.graph.nodes
        env = [None] * len(nodes)
        self._host_const = {}
        for n in nodes:
            if n.kind == "Constant":
                host = np.asarray(get("Constant").reference(RefCtx(n.attrs, n.shape)))
                self._host_const[n.id] = host
                env[n.id] = self.device.upload(host, n.shape.dtype)
        if self.use_arena:
            self.memory, self.arena, self.buffers = arena_buffers(
                self.graph, self.steps, self.device, self.alignment)
        else:
            self.buffers = self._assign_buffers()
        for i, b in self.buffers.items():
            env[i] = b
        self._template = env
        self._inputs = [(n.id, n.attrs.name, n.shape.dtype) for n in nodes if n.kind == "Input"]
        self._params = [(n.id, n.attrs.name) for n in nodes if n.kind == "Param"]
        self._ops = []
        for node, step in self.steps:
            getter = _getter(tuple(node.inputs))
            out = self.buffers.get(node.id)
            fresh = None if out is not None or step.returns else node.shape
            self._ops.append((step.fn, getter, step.returns, node.id, out, fresh))
        self._ready = True

    def execute(self, env: list) -> None:
        """Run every step over ``env`` (leaves bound); errors name the failing node."""
        nid = None
        try:
            for fn, gather, returns, nid, out, fresh in self._ops:
                if returns:
                    env[nid] = fn(*gather(env))
                    continue
                if fresh is not None:
                    out = self.device.empty(fresh.numel, fresh.dtype)
                    env[nid] = out
                fn(out, *gather(env))
        except CudaRunError:
            raise
        except Exception as e:      # re-raised naming the node
            raise self._node_error(nid, str(e)) from e
        if self.fallible:
            self._check_error_word()

    def _node_error(self, nid: int, what: str) -> CudaRunError:
        node = self.graph.nodes[nid]
        return CudaRunError(f"at %{node.id} in @{self.graph.name}: {what}\n"
                            f"  while running: {node}")

    def _check_error_word(self) -> None:
        word = self.err.get()
        value = int(word.copy_to_host()[0])
        if value != ERR_CLEAR:
            word.copy_to_device(np.array([ERR_CLEAR], np.int32))
            nid, code = divmod(value, 8)
            raise self._node_error(nid, ERROR_TEXT.get(code, f"kernel error {code}"))

    def bind(self, inputs: dict, params: dict) -> list:
        """The run environment with inputs uploaded (one transfer each) and params bound."""
        if not self._ready:
            self._prepare()
        env = self._template.copy()
        for i, name, dt in self._inputs:
            value = inputs[name]            # a prepared tensor is bound as it is
            env[i] = value if _on_device(value) else self.device.upload(value, dt)
        for i, name in self._params:
            env[i] = params[name]
        return env

    def run(self, inputs: dict, params: dict) -> list:
        """Host outputs for host ``inputs`` (device params)."""
        env = self.bind(inputs, params)
        self.execute(env)
        nodes, outs = self.graph.nodes, []
        by_name = {i: name for i, name, _ in self._inputs}
        for o in self.outputs:
            node = nodes[o]
            if o in by_name and _on_device(inputs[by_name[o]]):     # a prepared tensor
                outs.append(self.device.download(inputs[by_name[o]], node.shape.dtype,
                                                 node.shape.dims))
            elif o in by_name:                       # the caller's own array, copied
                outs.append(np.array(inputs[by_name[o]], node.shape.dtype.np))
            elif o in self._host_const:
                outs.append(self._host_const[o].astype(node.shape.dtype.np, copy=True))
            else:
                outs.append(self.device.download(env[o], node.shape.dtype, node.shape.dims))
        return outs


def _on_device(value) -> bool:
    """Whether ``value`` is a device array (numba's, or the simulator's)."""
    return hasattr(value, "copy_to_host")


def _getter(ids):
    if len(ids) == 1:
        one = ids[0]
        return lambda env: (env[one],)
    return itemgetter(*ids) if ids else (lambda env: ())


class SubPlan:
    """A nested body compiled once; ``run(args)`` binds its Inputs (device arrays, in node
    order) and returns fresh device arrays, one per body output."""

    def __init__(self, body: Graph, device, options=None):
        self.body = body
        self.plan = Plan(body, device, options, fresh_outputs=True)
        self.device = device

    def launches(self) -> list:
        return self.plan.launches()

    def run(self, args) -> list:
        plan = self.plan
        if not plan._ready:
            plan._prepare()
        env = plan._template.copy()
        for (i, _, _), a in zip(plan._inputs, args):
            env[i] = a
        if plan._params:
            raise CudaRunError(f"body @{self.body.name} reads Params, which bodies cannot bind")
        plan.execute(env)
        leaves = {i for i, _, _ in plan._inputs} | set(plan._host_const)
        outs = []
        for o in plan.outputs:
            outs.append(copy_device(env[o]) if o in leaves else env[o])
        return outs

    def first(self, args):
        return self.run(args)[0]


class CudaExecutable(CompiledGraph, Executable):
    """CompiledGraph I/O checks + a Plan per distinct binding of dynamic dims."""

    _uses_interpreter = False

    def __init__(self, graph: Graph, device, options=None, label: str = "cuda"):
        super().__init__(graph)
        self.device = label
        self.gpu = device
        self.options = options
        # the weight-only prefix runs once per params (a plan of its own); the rest per run
        # the prefix is off here (split_for is not asked): under threads, a run racing
        # set_param mixed old and new params in the simulator
        split = None
        self.hoisted, self._prep_plan, run_graph = None, None, graph
        if split is not None:
            self._prep_plan = Plan(split.prepare, device, options)
            self._prep_lock = threading.Lock()
            self.hoisted = HoistedPrefix(split, self._prepare)
            run_graph = split.main
        self._pool = PlanPool(
            lambda key: Plan(specialize(run_graph, dict(key)), device, options))
        if not any(isinstance(d, Dyn) for n in run_graph.nodes for d in n.shape.dims):
            self._pool.add((), Plan(run_graph, device, options))

    @property
    def _plans(self) -> dict:
        """The first plan of each binding (what kernel sources describe)."""
        return self._pool.first

    def _bind_param(self, name: str, arr: np.ndarray):
        """Params live on the device, uploaded once per ``set_param``."""
        with self.gpu.active():
            return self.gpu.upload(arr, self._params_decl[name].dtype)

    def _prepare(self, params: dict) -> list:
        """The weight-only prefix's results for ``params``: device arrays of their own."""
        with self._prep_lock:
            plan = self._prep_plan
            env = plan.bind({}, params)
            plan.execute(env)
            return [copy_device(env[o]) for o in plan.outputs]

    def _all_plans(self) -> list:
        return self._pool.plans() + ([self._prep_plan] if self._prep_plan else [])

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        key = tuple(sorted(bindings.items()))
        with self.gpu.active():
            if self.hoisted is not None:
                inputs = {**inputs, **self.hoisted.feeds(params)}
            plan = self._pool.acquire(key)
            try:
                return plan.run(inputs, params)
            finally:
                self._pool.release(key, plan)

    def capabilities(self):
        # gpu_handles stays off: outputs come back as host arrays
        return CompiledGraph.capabilities(self)

    def memory_plans(self) -> list:
        """The MemoryPlan of each plan that uses an arena (the weight-only prefix's
        last), or []."""
        return [p.memory for p in self._all_plans() if p.memory]

    def kernel_sources(self) -> dict:
        out = {}
        for plan in self._all_plans():
            out.update(plan.kernel_sources())
        return out
