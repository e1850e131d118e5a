"""What every kernel backend's plan does the same way: bind dynamic dims, give each
intermediate a buffer, reusing a dead one of the same dtype and shape (liveness), and
lend each run a plan of its own (``PlanPool``) so concurrent runs share no buffers."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable

import numpy as np

from .. import hotpaths
from ..ir.graph import Graph


def contiguous(x) -> np.ndarray:
    """``x`` as a C-contiguous array of the same shape (0-d stays 0-d, unlike numpy's)."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)


def specialize(graph: Graph, bindings: dict) -> Graph:
    """A copy of ``graph`` with dynamic dims replaced by their bound sizes (bodies too)."""
    if not bindings:
        return graph
    g = graph.copy()
    for n in g.nodes:
        n.shape = n.shape.bind(bindings)
    return g


class PlanError(RuntimeError):
    """A node could not be planned: its size is past what the backend can hold, or its
    lowering or buffer allocation failed; the message names the node, op and size."""


def size_text(shape) -> str:
    """``[4294967296] f32: 4294967296 elements, 16.0 GiB``."""
    n = shape.numel
    if n is None:
        return f"{shape}"
    return f"{shape}: {n} elements, {n * shape.dtype.size_bytes / 2**30:.1f} GiB"


def host_memory_bytes() -> int | None:
    """Physical memory of this machine (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@contextmanager
def planning(backend: str, node, limit_bytes: int | None = None, what: str = "memory",
             errors: tuple = ()):
    """Plan ``node`` inside: first refuse an output larger than ``limit_bytes`` (``what``
    says whose limit), then turn MemoryError, IndexError, OverflowError and ``errors`` (a
    driver's allocation errors) into a PlanError naming the node, op and size, so a huge
    Pad/Expand/Tile fails with its node rather than with numpy's or the driver's words."""
    where = f"{backend}: cannot plan %{node.id} {node.kind} ({size_text(node.shape)})"
    nbytes = node.shape.size_bytes
    if limit_bytes is not None and nbytes is not None and nbytes > limit_bytes:
        raise PlanError(f"{where}: more than the {limit_bytes / 2**30:.1f} GiB of {what}")
    try:
        yield
    except PlanError:
        raise
    except (MemoryError, IndexError, OverflowError) + tuple(errors) as e:
        raise PlanError(f"{where}: {type(e).__name__}: {e}") from e


def assign_buffers(graph: Graph, steps: list, keep: set, needs: Callable,
                   alloc: Callable, backend: str = "", alloc_errors: tuple = (),
                   reshape: Callable | None = None) -> dict:
    """``{node id: buffer}`` for the step nodes (in run order) with ``needs(node)``; nodes
    in ``keep`` (the outputs) get buffers of their own, the rest share by liveness: when
    a node's last reader has run, its buffer goes to the next node of the same dtype and
    shape. ``alloc(dtype, dims)`` makes a buffer; its failures (MemoryError and
    ``alloc_errors``) become PlanErrors naming the node. With ``reshape(buffer, dims)``
    (a view of another shape) buffers are shared by element count instead of shape: a
    backward graph's [B, S, D] and [B·S, D] share one (a transformer step's buffers
    went from 78 to 48 MiB)."""
    frees = hotpaths.core.last_uses(len(steps), [tuple(n.inputs) for n in steps], keep)

    def key(shape):
        return (shape.dtype, shape.numel if reshape else tuple(shape.dims))
    pool: dict = {}
    buffers: dict = {}
    for node, dead in zip(steps, frees):
        if needs(node):
            dims = tuple(node.shape.dims)
            free = pool.get(key(node.shape)) if node.id not in keep else None
            if free:
                buf = free.pop()
                buffers[node.id] = buf if not reshape else reshape(buf, dims)
            else:
                with planning(backend, node, errors=alloc_errors):
                    buffers[node.id] = alloc(node.shape.dtype, dims)
        for v in dead:
            if v in buffers and v not in keep:
                pool.setdefault(key(graph.nodes[v].shape), []).append(buffers[v])
    return buffers


class PlanPool:
    """The plans of one executable, by binding key (a tuple of dynamic dim sizes).

    A plan is a run's workspace: its planned buffers, kernel scratch, bound kernel
    arguments, error word and nested bodies' plans. ``acquire`` lends an idle plan to one
    run and ``release`` takes it back, so two runs at once never share intermediates; a
    run that finds no idle plan has ``build(key)`` make another (kernels come from the
    process caches, so this is planning only). The pool grows to the most runs that were
    ever concurrent; one thread reuses one plan, as before.
    """

    def __init__(self, build: Callable):
        self._build = build
        # list.pop/append and dict.setdefault are atomic (under the GIL, and per object
        # in free-threaded builds): the hot path takes no lock of its own
        self._idle: dict = {}        # key -> idle plans
        self.first: dict = {}        # key -> the first plan built (sources, notes, tests)
        self.ran: set = set()        # kernel variants of every plan that has run

    def add(self, key: tuple, plan) -> None:
        """Put a plan built ahead of any run (a static graph's, at compile) in the pool."""
        self.first.setdefault(key, plan)
        self._idle.setdefault(key, []).append(plan)

    def acquire(self, key: tuple):
        """An idle plan for ``key`` for one run (built when none is idle)."""
        try:
            return self._idle[key].pop()
        except (KeyError, IndexError):
            plan = self._build(key)
            self.first.setdefault(key, plan)
            return plan

    def release(self, key: tuple, plan) -> None:
        """Give back a plan after its run (finished or failed)."""
        self._idle.setdefault(key, []).append(plan)

    def run(self, key: tuple, inputs: dict, params: dict) -> list:
        """One run on a plan lent for ``key``; the plan's kernel variants join ``ran``."""
        plan = self.acquire(key)
        if not self.ran.issuperset(plan.variants):
            self.ran.update(plan.variants)      # idempotent: racing runs agree
        try:
            return plan.run(inputs, params)
        finally:
            self.release(key, plan)

    def plans(self) -> list:
        """The first plan of every key, for kernel sources and notes."""
        return list(self.first.values())
