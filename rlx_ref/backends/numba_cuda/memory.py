"""The memory plan's arena on a CUDA device: one uint8 device array, each planned tensor a
flat view of the tensor's device dtype at its planned offset.

Offsets are aligned to the larger of CUDA's allocation alignment (``CUDA_ALIGNMENT``: what
kernels may assume of a fresh array) and the plan's own (``CompileOptions.arena_alignment``).
"""
from __future__ import annotations

import numpy as np

from .device import device_dtype

CUDA_ALIGNMENT = 256        # cudaMalloc's alignment: the arena's offsets keep it


def arena_buffers(graph, steps: list, device, alignment: int):
    """(MemoryPlan, arena device array or None, ``{node id: flat device array}``) for
    ``steps`` ((node, Step) in run order): planned tensors are views of the arena, outputs
    get arrays of their own, and steps that return their own arrays (control flow) none."""
    from ...passes.memory_plan import plan_memory

    returns = {node.id for node, step in steps if step.returns}
    mp = plan_memory(graph, [node for node, _ in steps], returns,
                     alignment=max(CUDA_ALIGNMENT, alignment), views=False)
    buffers = {}
    for i in mp.outside:
        if i not in returns:
            shape = graph.nodes[i].shape
            buffers[i] = device.empty(shape.numel, shape.dtype)
    arena = device.cuda.device_array(max(mp.arena_bytes, 1), np.uint8) if mp.slots else None
    for i, slot in mp.slots.items():
        shape = graph.nodes[i].shape
        dt = device_dtype(shape.dtype)
        nbytes = shape.numel * dt.itemsize          # the slot's size is rounded up
        if not nbytes or nbytes > slot.nbytes:      # empty (no kernel touches it), or packed
            buffers[i] = device.empty(shape.numel, shape.dtype)
            continue
        buffers[i] = arena[slot.offset:slot.offset + nbytes].view(dt)
    return mp, arena, buffers
