"""What every kernel backend's plan does the same way: bind dynamic dims, and give each
intermediate a buffer, reusing a dead one of the same dtype and shape (liveness)."""
from __future__ import annotations

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


def assign_buffers(graph: Graph, steps: list, keep: set, needs: Callable,
                   alloc: Callable) -> dict:
    """``{node id: buffer}`` for the step nodes (in run order) with ``needs(node)``; nodes
    in ``keep`` (the outputs) get buffers of their own, the rest share by liveness: when
    a node's last reader has run, its buffer goes to the next node of the same dtype and
    shape. ``alloc(dtype, dims)`` makes a buffer."""
    frees = hotpaths.core.last_uses(len(steps), [tuple(n.inputs) for n in steps], keep)
    pool: dict = {}
    buffers: dict = {}
    for node, dead in zip(steps, frees):
        if needs(node):
            key = (node.shape.dtype, tuple(node.shape.dims))
            free = pool.get(key) if node.id not in keep else None
            buffers[node.id] = free.pop() if free else alloc(*key)
        for v in dead:
            if v in buffers and v not in keep:
                nv = graph.nodes[v]
                pool.setdefault((nv.shape.dtype, tuple(nv.shape.dims)), []).append(
                    buffers[v])
    return buffers
