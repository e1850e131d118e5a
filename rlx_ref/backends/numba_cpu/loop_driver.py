"""Loop drivers: a Scan over a compiled body run as one generated ``njit`` function.

The host loop of ``lower_control`` pays Python for every step of every iteration (binding
the body's environment, one call per kernel): about 10 µs per iteration, more than the
kernels of a small recurrent cell take. When every step of the body declares a
``JitCall`` (its whole work as one call from compiled code), the loop itself is generated
as Python source and compiled: the body's kernels are called in node order over the
same planned buffers, the carry ping-pongs between two arrays, and the trajectory rows
are written in place. Nothing else changes: the kernels, their rounding and their
checks are the body plan's own, so results are bit-identical to the host loop.

A kernel that raises (an integer division by zero, say) stops the driver; the step then
replays the loop on the host, whose error names the body node that failed.

    driver = scan_driver(sub, length, num_bcast)   # None: some step has no JitCall
    carry = driver(init, bcasts, xs, traj, rows)
"""
from __future__ import annotations

import numpy as np

from .kernels import compile_kernel
from .lower_linalg import blas_serial


def _callee(fn) -> str:
    """Source expression of an ``njit`` function defined by a kernel module."""
    py = getattr(fn, "py_func", None)
    if py is None:
        raise TypeError(f"{fn!r} is not an njit function")
    return f'sys.modules["{py.__module__}"].{py.__name__}'


def body_calls(plan) -> str | None:
    """Why ``plan`` cannot run inside a driver (a reason), or None when it can."""
    if not plan.outputs or plan.outputs[0] not in {node.id for node, _, _ in plan.steps}:
        return "the body's result is one of its inputs or constants"
    if plan.graph.param_nodes():
        return "the body reads Params"
    for node, step, _ in plan.steps:
        if step.jit is None:
            return f"%{node.id} ({node.kind}) runs host code"
    return None


def scan_driver(sub, length: int, num_bcast: int):
    """A compiled Scan loop over SubPlan ``sub``, or None when a step needs the host.

    Returns ``drive(init, bcasts, xs, traj, rows) -> carry``: ``rows[t]`` is the
    trajectory row of iteration ``t`` (-1: not kept), ``traj`` a buffer of those rows.
    """
    plan = sub.plan
    if body_calls(plan) is not None:
        return None
    ids = plan._input_ids
    nx = len(ids) - 1 - num_bcast
    out0 = plan.outputs[0]                          # a Scan body has this one output
    fixed = {**plan.const, **plan.buffer}           # node id -> array bound once
    params = ["carry", "nxt", "traj", "rows"] + [f"b{i}" for i in range(num_bcast)] + \
        [f"x{j}" for j in range(nx)]
    args_fixed = []
    for i, a in sorted(fixed.items()):
        params.append(f"v{i}")
        args_fixed.append(a)
    head, calls, consts = [], [], []
    for j, (node, step, ins) in enumerate(plan.steps):
        jc = step.jit
        head.append(f"_k{j} = {_callee(jc.fn)}")
        names = [f"c{j}_{c}" for c in range(len(jc.consts))]
        params += names
        consts += list(jc.consts)
        exprs = [t.format(*(f"v{i}" for i in ins), out=f"v{node.id}") for t in jc.args]
        calls.append(f"        _k{j}({', '.join(exprs + names)})  # %{node.id} {node.kind}")
    bind = [f"        v{ids[0]} = carry", f"        v{out0} = nxt"]
    bind += [f"        v{ids[1 + j + num_bcast]} = x{j}[t]" for j in range(nx)]
    pre = [f"    v{ids[1 + i]} = b{i}" for i in range(num_bcast)]
    src = "\n".join(
        ["import sys", "", *head, "", "",
         "@njit(cache=True, nogil=True)",
         f"def scan_loop({', '.join(params)}):",
         *pre,
         f"    for t in range({length}):",
         *bind, *calls,
         "        carry, nxt = nxt, carry",
         "        r = rows[t]",
         "        if r >= 0:",
         "            for i in range(carry.size):",      # (a slice assignment compiles 3 s)
         "                traj[r, i] = carry[i]",
         "    return carry"])
    kernel = compile_kernel("scan_loop", src)
    fn, tail = kernel.fn, tuple(args_fixed) + tuple(consts)
    dims, dt = tuple(plan.graph.nodes[out0].shape.dims), plan.graph.nodes[out0].shape.dtype.np

    size = int(np.prod(dims))

    def drive(init, bcasts, xs, traj, rows):
        # every operand flat (the calls reshape to the node shapes): 0-d values and rows
        # of 1-D sequences stay arrays inside the loop
        carry = np.array(init, dt, order="C").reshape(size)
        nxt = np.empty(size, dt)
        xs = [_rows(x, length) for x in xs]
        bcasts = [np.ascontiguousarray(b).reshape(b.size) for b in bcasts]
        carry = blas_serial(fn, carry, nxt, _rows(traj, traj.shape[0]), rows, *bcasts, *xs,
                            *tail)
        return carry.reshape(dims)
    drive.kernel = kernel
    return drive


def _rows(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` as a C-contiguous [n, rest] matrix (a view when it already is contiguous)."""
    return np.ascontiguousarray(x).reshape(n, x.size // n if n else 0)
