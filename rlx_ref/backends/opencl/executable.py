"""A compiled OpenCL graph: a plan of launches over device buffers on one in-order queue.

Planning lowers every node (collecting kernel sources into one program), then allocates
device buffers once, reusing a dead intermediate's buffer for the next node of the same
dtype and shape, and binds every kernel's arguments. A run uploads each input once,
enqueues every launch without waiting, reads back only the outputs, and then checks the
plan's error word: a kernel that met a bad index or an integer division by zero wrote
its node's code there, and the run fails naming that node.

With the memory plan on (the default; ``CompileOptions.memory_plan``), a top-level plan's
intermediates are sub-buffers of one arena buffer at the offsets ``passes/memory_plan.py``
gives them (no views: a Reshape still runs its kernel), aligned to the larger of
``CompileOptions.arena_alignment`` and the device's base-address alignment; outputs keep
buffers of their own. An arena larger than the device's largest buffer falls back to a
buffer per tensor, shared by liveness as without the plan. Control-flow bodies keep
buffers per tensor (their drivers copy into and out of them).

The weight-only prefix of the graph (``split_param_invariant``, ``backends/hoist.py``)
runs once per params snapshot in a plan of its own; its results stay on the device
(copied out of that plan's buffers, so a later prepare cannot overwrite them) and the
per-run plans take them as Inputs bound like params: copied device to device when the
snapshot changes, never uploaded from the host.

A plan (buffers, bound kernels, error word, queue) serves one run at a time: concurrent
runs each get one from the executable's ``PlanPool``; the first plan uses the device's
shared queue, each further one a queue of its own, so runs neither wait for nor read each
other's work.
"""
from __future__ import annotations

import threading

import numpy as np

from ...ir.graph import Graph
from ...ir.shape import Dyn
from ...ops.opdef import RefCtx, get
from ...runtime.session import CompiledGraph
from ...runtime.options import CompileOptions
from ..base import Executable
from ..hoist import HoistedPrefix, split_for
from ..planning import PlanPool, assign_buffers, contiguous, planning, specialize
from .. import variants
from . import memory
from .lowering import ERR_TEXT, LOWERINGS, LowerCtx
from .program import ProgramBuilder


class OpenCLRunError(RuntimeError):
    """A node failed on the device; the message names it in text form."""


class ErrorWord:
    """The int32 every checking kernel of one executable writes a failure code into."""

    def __init__(self, context, queue):
        self.queue = queue
        self.array = memory.upload(context, queue, np.zeros(1, np.int32))
        self.nodes: list = []          # slot -> (graph, node)

    def slot(self, graph, node) -> int:
        """The error code base (slot * 8) of ``node``; kernels add the reason (1..7)."""
        self.nodes.append((graph, node))
        return len(self.nodes) * 8

    def read_async(self) -> np.ndarray:
        """Enqueue a read of the word; valid after the queue's next finish."""
        import pyopencl as cl

        host = np.zeros(1, np.int32)
        cl.enqueue_copy(self.queue, host, self.array.buf, is_blocking=False)
        return host

    def check(self, host: np.ndarray | None = None) -> None:
        """Raise naming the failing node if a kernel wrote a code (``host``: a finished
        ``read_async``; without it, a blocking read)."""
        code = int((self.array.get(self.queue) if host is None else host)[0])
        if code:
            self.array.set(self.queue, np.zeros(1, np.int32), blocking=True)
            graph, node = self.nodes[code // 8 - 1]
            why = ERR_TEXT.get(code % 8, f"error code {code % 8}")
            raise OpenCLRunError(f"at %{node.id} in @{graph.name}: {why}\n"
                                 f"  while running: {node}")


class Plan:
    """Launchers over device buffers for one graph with static shapes."""

    def __init__(self, graph: Graph, rt, options=None, arena: bool = True):
        self.graph, self.rt = graph, rt
        self.use_arena = arena and getattr(options, "memory_plan", True)
        self.alignment = getattr(options, "arena_alignment", 64)
        self.memory = self.arena = None     # the MemoryPlan and its buffer, when used
        self.steps = []
        self.const = {}
        with variants.lowering(options) as chosen:
            self._lower(graph, rt, options)
        self.variants = frozenset(chosen)     # kernel variants the steps run
        self.outputs = list(graph.outputs)
        self.inputs = [n for n in graph.nodes if n.kind == "Input"]
        self.params = [n for n in graph.nodes if n.kind == "Param"]
        self._launchers = None
        self._loaded_params = None     # the params snapshot on the device (held: no id reuse)
        self._resident = {}            # Input id -> the DevArray last copied in (held)

    def _lower(self, graph: Graph, rt, options) -> None:
        """Lower every node to a step (constants uploaded once)."""
        for node in graph.nodes:
            if not node.shape.is_static:
                raise OpenCLRunError(f"%{node.id} has dynamic shape {node.shape} after "
                                     "binding")
            if node.kind == "Constant":
                host = contiguous(get("Constant").reference(
                    RefCtx(node.attrs, node.shape)))
                self.const[node.id] = memory.upload(rt.context, rt.queue, host)
            elif node.kind not in ("Input", "Param"):
                ctx = LowerCtx(node, graph, rt.device, rt.program, options, rt.errors,
                               err_code=rt.errors.slot(graph, node),
                               compile_body=lambda body: Plan(body, rt, options, False),
                               queue=rt.queue)
                ins = [graph.nodes[i].shape for i in node.inputs]
                with planning("opencl", node, rt.max_alloc, "the device's largest buffer "
                              "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)", _cl_errors()):
                    self.steps.append((node, LOWERINGS[node.kind].fn(node, ins, ctx)))

    def finalize(self) -> None:
        """Allocate buffers (liveness reuse) and bind every step (builds the program)."""
        if self._launchers is not None:
            return
        rt = self.rt
        env = dict(self.const)
        for n in self.inputs + self.params:
            with planning("opencl", n, rt.max_alloc, "the device's largest buffer "
                          "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)", _cl_errors()):
                env[n.id] = memory.empty(rt.context, n.shape.dims, n.shape.dtype.np)
        keep = set(self.outputs)
        nodes_run = [n for n, _ in self.steps]
        planned = self._plan_arena(nodes_run) if self.use_arena else None
        env.update(planned if planned is not None else assign_buffers(
            self.graph, nodes_run, keep, lambda n: True,
            lambda dt, dims: memory.empty(rt.context, dims, dt.np), "opencl", _cl_errors()))
        launchers = []
        for node, step in self.steps:
            with planning("opencl", node, errors=_cl_errors()):     # builds the program
                launchers.append((node, step.bind(env[node.id],
                                                  *[env[i] for i in node.inputs])))
        self.env = env
        self._launchers = launchers

    def _plan_arena(self, nodes_run: list):
        """The steps' buffers in one arena (``memory.plan_arena``), or None."""
        rt = self.rt
        planned = memory.plan_arena(self.graph, nodes_run, rt.context, rt.max_alloc,
                                    self.alignment, _cl_errors())
        if planned is None:
            return None
        self.memory, self.arena, out = planned
        return out

    def load(self, feeds: dict, params: dict) -> None:
        """Upload inputs (by name), and params unless this plan already holds this
        snapshot of them (set_param makes a new one: params cross the bus once). An input
        fed as a DevArray (a prepared tensor) is copied on the device, and only when it
        is not the one this plan copied last."""
        q = self.rt.queue
        for n in self.inputs:
            value = feeds[n.attrs.name]
            if not isinstance(value, memory.DevArray):
                self.env[n.id].set(q, value)
            elif self._resident.get(n.id) is not value:
                self.env[n.id].copy_from(q, value)
                self._resident[n.id] = value
        if params is self._loaded_params:
            return
        self._loaded_params = params
        for n in self.params:
            p = params[n.attrs.name]
            if isinstance(p, memory.DevArray):
                self.env[n.id].copy_from(q, p)
            else:
                self.env[n.id].set(q, p)

    def enqueue(self) -> None:
        """Enqueue every step; errors raised on the host name the node."""
        for node, launch in self._launchers:
            try:
                launch()
            except OpenCLRunError:
                raise
            except Exception as e:
                raise OpenCLRunError(f"at %{node.id} in @{self.graph.name}: {e}\n"
                                     f"  while running: {node}") from e

    def run(self, feeds: dict, params: dict) -> list:
        self.finalize()
        self.load(feeds, params)
        self.enqueue()
        import pyopencl as cl

        q = self.rt.queue
        outs = []
        for o in self.outputs:          # every read-back and the error word: one finish
            arr = self.env[o]
            host = np.empty(arr.shape, arr.dtype)
            if arr.size:
                cl.enqueue_copy(q, host, arr.buf, is_blocking=False)
            outs.append(host)
        err = self.rt.errors.read_async()
        q.finish()
        self.rt.errors.check(err)
        return outs

    # bodies of control flow: device arrays in, device arrays out
    def run_device(self, args: list, params: dict | None = None) -> list:
        """Copy ``args`` (DevArrays, one per Input in node order) in, run, and return the
        output DevArrays (the plan's own buffers: valid until the next run)."""
        self.finalize()
        q = self.rt.queue
        for n, a in zip(self.inputs, args):
            self.env[n.id].copy_from(q, a)
        for n in self.params:
            self.env[n.id].copy_from(q, (params or {})[n.attrs.name])
        self.enqueue()
        return [self.env[o] for o in self.outputs]

    def kernel_sources(self) -> dict:
        return dict(self.rt.program.sources)


class Runtime:
    """What all plans of one executable share: device, context, queue, program, errors."""

    def __init__(self, device, context, queue, build_options=()):
        self.device, self.context, self.queue = device, context, queue
        self.program = ProgramBuilder(context, device, build_options)
        self.errors = ErrorWord(context, queue)
        # OpenCL refuses any one buffer past this (INVALID_BUFFER_SIZE); checked per node
        self.max_alloc = min(d.max_mem_alloc_size for d in context.devices)


def _cl_errors() -> tuple:
    """The driver's errors a buffer allocation raises (size refused, device memory out)."""
    import pyopencl as cl

    return (cl.Error,)


class OpenCLExecutable(CompiledGraph, Executable):
    """CompiledGraph I/O checks + a Plan per distinct binding of dynamic dims."""

    _uses_interpreter = False

    def __init__(self, graph: Graph, device_info, context, queue, options=None):
        super().__init__(graph)
        self.device = f"opencl:{device_info.index[0]}:{device_info.index[1]}"
        self.device_info = device_info
        self.options = options
        self._context, self._queue = context, queue
        # the weight-only prefix runs once per params (a plan of its own); the rest per run
        split = split_for(graph, CompileOptions.coerce(options))
        self.hoisted, self._prep_plan, self._run_graph = None, None, graph
        if split is not None:
            import pyopencl as cl

            self._prep_plan = self._new_plan(split.prepare, cl.CommandQueue(context,
                                                                            queue.device))
            self._prep_lock = threading.Lock()
            self.hoisted = HoistedPrefix(split, self._prepare)
            self._run_graph = split.main
        self._pool = PlanPool(self._build_plan)
        run_graph = self._run_graph
        if not any(isinstance(d, Dyn) for n in run_graph.nodes for d in n.shape.dims):
            self._pool.add((), self._new_plan(run_graph, queue))

    @property
    def _plans(self) -> dict:
        """The first plan of each binding (what kernel sources describe)."""
        return self._pool.first

    def _build_plan(self, key: tuple) -> Plan:
        """A plan for ``key``: on the shared queue when it is the key's first, else on a
        queue of its own (a run beside another)."""
        import pyopencl as cl

        queue = self._queue if key not in self._pool.first else \
            cl.CommandQueue(self._context, self._queue.device)
        return self._new_plan(specialize(self._run_graph, dict(key)), queue)

    def _new_plan(self, graph: Graph, queue) -> Plan:
        plan = Plan(graph, Runtime(self.device_info, self._context, queue), self.options)
        plan.finalize()
        return plan

    def _prepare(self, params: dict) -> list:
        """The weight-only prefix's results for ``params``: DevArrays of their own."""
        with self._prep_lock:
            plan = self._prep_plan
            plan.load({}, params)
            plan.enqueue()
            q, outs = plan.rt.queue, []
            for o in plan.outputs:
                src = plan.env[o]
                outs.append(memory.empty(self._context, src.shape, src.dtype))
                outs[-1].copy_from(q, src)
            err = plan.rt.errors.read_async()
            q.finish()
            plan.rt.errors.check(err)
            return outs

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        if self.hoisted is not None:
            inputs = {**inputs, **self.hoisted.feeds(params)}
        return self._pool.run(tuple(sorted(bindings.items())), inputs, params)

    def variants_run(self) -> list:
        """The kernel variants (``opencl:...``) of the runs so far, sorted."""
        ran = set(self._pool.ran)
        if self.hoisted is not None and self.hoisted.runs:
            ran |= self._prep_plan.variants
        return sorted(ran)

    def rerun(self) -> None:
        """Run again on the inputs already on the device and wait (no transfers): what a
        benchmark of device time measures. Needs one ``run`` first, and repeats the first
        plan's (a single-threaded caller's) work: not for use beside concurrent runs."""
        plans = self._pool.plans()
        if len(plans) != 1 or plans[0]._loaded_params is None:
            raise RuntimeError("rerun() needs exactly one earlier run() to repeat")
        plan = plans[0]
        plan.enqueue()
        plan.rt.queue.finish()
        plan.rt.errors.check()

    def _all_plans(self) -> list:
        return self._pool.plans() + ([self._prep_plan] if self._prep_plan else [])

    def memory_plans(self) -> list:
        """The MemoryPlan of each plan that uses an arena (the weight-only prefix's
        last), or []."""
        return [p.memory for p in self._all_plans() if p.memory]

    def kernel_sources(self) -> dict:
        out = {}
        for plan in self._all_plans():
            out.update(plan.kernel_sources())
        return out

    def capabilities(self):
        return super().capabilities().replace(gpu_handles=not self.device_info.is_cpu)
