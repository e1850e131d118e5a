"""Loop drivers: a Scan or While over compiled bodies run as one generated ``njit`` function.

The host loop of ``lower_control`` pays Python for every step of every iteration (binding
the body's environment, one call per kernel): about 10 µs per iteration, more than the
kernels of a small recurrent cell take. When every step of the body declares a
``JitCall`` (its whole work as one call from compiled code), the loop itself is generated
as Python source and compiled: the body's kernels are called in node order over the
same planned buffers, every carried value ping-pongs between two arrays (a body result
that is not computed by one of its own steps, such as a passed-through Input, is
copied), a Scan's trajectory rows are written in place and a While reads its predicate
from a one-element buffer (non-zero or NaN continues, as the oracle). Nothing else
changes: the kernels, their rounding and their checks are the body plans' own, so
results are bit-identical to the host loop.

A kernel that raises (an integer division by zero, say) stops the driver; the step then
replays the loop on the host, whose error names the body node that failed.

    drive = scan_driver(sub, length, num_bcast)     # None: some step has no JitCall
    carry = drive(init, bcasts, xs, traj, rows)
    drive = while_driver(cond, body, max_iterations)
    first = drive(carried)
"""
from __future__ import annotations

import numpy as np

from .kernels import compile_kernel
from .lower_linalg import blas_serial
from .lowering import KERNEL_DTYPES


def _callee(fn) -> str:
    """Source expression of an ``njit`` function defined by a kernel module."""
    py = getattr(fn, "py_func", None)
    if py is None:
        raise TypeError(f"{fn!r} is not an njit function")
    return f'sys.modules["{py.__module__}"].{py.__name__}'


def host_reason(plan) -> str | None:
    """Why ``plan`` cannot run inside a driver, or None when it can."""
    if plan.graph.param_nodes():
        return "the body reads Params"
    for node in plan.graph.nodes:
        if node.shape.dtype not in KERNEL_DTYPES:
            return f"%{node.id} is {node.shape.dtype}, which compiled code cannot hold"
    for node, step, _ in plan.steps:
        if step.jit is None:
            return f"%{node.id} ({node.kind}) runs host code"
    return None


class _Part:
    """One body's share of a driver: arrays bound once (its constants, planned buffers
    and the calls' constants, as parameters) and its calls as source lines. Its nodes are
    variables ``<tag><id>``."""

    def __init__(self, plan, tag: str):
        self.plan, self.tag = plan, tag
        self.params, self.args, self.head, self.calls = [], [], [], []
        for i, a in sorted({**plan.const, **plan.buffer}.items()):
            self.params.append(self.var(i))
            self.args.append(a)
        self.steps = {node.id for node, _, _ in plan.steps}
        n = 0
        for node, step, ins in plan.steps:
            calls = step.jit if isinstance(step.jit, tuple) else (step.jit,)
            for jc in calls:
                k = f"_{tag}k{n}"
                self.head.append(f"{k} = {_callee(jc.fn)}")
                names = [f"{tag}c{n}_{c}" for c in range(len(jc.consts))]
                n += 1
                self.params += names
                self.args += list(jc.consts)
                exprs = [t.format(*(self.var(i) for i in ins), out=self.var(node.id),
                                  **{f"c{c}": v for c, v in enumerate(names)})
                         for t in jc.args]
                if jc.tail:
                    exprs += names
                self.calls.append(f"{k}({', '.join(exprs)})  "
                                  f"# %{node.id} {node.kind} of @{plan.graph.name}")

    def var(self, i: int) -> str:
        return f"{self.tag}{i}"

    def run(self, inputs: list, targets: list) -> list:
        """Lines that bind the body's Inputs to ``inputs`` and leave output ``j`` in the
        array ``targets[j]``: a step's result is written there directly, anything else
        (an Input, a Constant, a node already written) is copied after the calls."""
        lines = [f"{self.var(i)} = {v}" for i, v in zip(self.plan._input_ids, inputs)]
        post, owned = [], set()
        for o, t in zip(self.plan.outputs, targets):
            if o in self.steps and o not in owned:
                owned.add(o)
                lines.append(f"{self.var(o)} = {t}")
            else:
                post.append(f"_copy({t}, {self.var(o)})")
        return lines + self.calls + post


_COPY = """
@njit(inline="always", cache=True, nogil=True)
def _copy(dst, src):
    d = dst.reshape(-1)
    s = src.reshape(-1)
    for i in range(d.size):
        d[i] = s[i]
"""


def _source(name: str, parts, params: list, lines: list) -> str:
    head = [h for p in parts for h in p.head]
    return "\n".join(["import sys", "", *head, _COPY, "",
                      "@njit(cache=True, nogil=True)",
                      f"def {name}({', '.join(params + [q for p in parts for q in p.params])}):",
                      *lines])


def _indent(lines: list, n: int) -> list:
    return [" " * n + ln for ln in lines]


def _flat(x, dt=None) -> np.ndarray:
    """A fresh C-contiguous flat copy of ``x`` (in dtype ``dt``)."""
    return np.array(x, dt, order="C").reshape(-1)


def scan_driver(sub, length: int, num_bcast: int):
    """A compiled Scan loop over SubPlan ``sub``, or None when a step needs the host.

    Returns ``drive(init, bcasts, xs, traj, rows) -> carry``: ``rows[t]`` is the
    trajectory row of iteration ``t`` (-1: not kept), ``traj`` a buffer of those rows.
    """
    plan = sub.plan
    if host_reason(plan) is not None:
        return None
    part = _Part(plan, "v")
    nx = len(plan._input_ids) - 1 - num_bcast
    bs, xs = [f"b{i}" for i in range(num_bcast)], [f"x{j}" for j in range(nx)]
    lines = [f"    for t in range({length}):",
             *_indent(part.run(["carry", *bs, *(f"{x}[t]" for x in xs)], ["nxt"]), 8),
             "        carry, nxt = nxt, carry",
             "        r = rows[t]",
             "        if r >= 0:",
             "            for i in range(carry.size):",   # (a slice assignment compiles 3 s)
             "                traj[r, i] = carry[i]",
             "    return carry"]
    kernel = compile_kernel("scan_loop", _source("scan_loop", [part],
                                                 ["carry", "nxt", "traj", "rows", *bs, *xs],
                                                 lines))
    fn, tail = kernel.fn, tuple(part.args)
    out = plan.graph.nodes[plan.outputs[0]].shape
    dims, dt = tuple(out.dims), out.dtype.np

    def drive(init, bcasts, xs, traj, rows):
        # every operand flat (the calls reshape to the node shapes): 0-d values and rows
        # of 1-D sequences stay arrays inside the loop
        carry = _flat(init, dt)
        xs = [_rows(x, length) for x in xs]
        bcasts = [np.ascontiguousarray(b).reshape(-1) for b in bcasts]
        carry = blas_serial(fn, carry, np.empty_like(carry), _rows(traj, traj.shape[0]),
                            rows, *bcasts, *xs, *tail)
        return carry.reshape(dims)
    drive.kernel = kernel
    return drive


def while_driver(cond, body, max_iterations):
    """A compiled While loop over SubPlans ``cond`` and ``body``, or None when a step of
    either needs the host. Returns ``drive(carried) -> the first carried value``."""
    if host_reason(cond.plan) is not None or host_reason(body.plan) is not None:
        return None
    pc, pb = _Part(cond.plan, "c"), _Part(body.plan, "v")
    n = len(body.plan._input_ids)
    cur, nxt = [f"s{i}" for i in range(n)], [f"n{i}" for i in range(n)]
    swap = f"{', '.join(cur + nxt)} = {', '.join(nxt + cur)}"
    lines = ["    steps = 0",
             "    while cap < 0 or steps < cap:",
             *_indent(pc.run(cur, ["pred"]), 8),
             "        if not pred[0] != 0:",             # NaN continues, as the oracle
             "            break",
             *_indent(pb.run(cur, nxt), 8),
             f"        {swap}",
             "        steps += 1",
             "    return s0"]
    params = [q for pair in zip(cur, nxt) for q in pair] + ["pred", "cap"]
    kernel = compile_kernel("while_loop", _source("while_loop", [pc, pb], params, lines))
    fn, tail = kernel.fn, tuple(pc.args) + tuple(pb.args)
    shapes = [body.plan.graph.nodes[i].shape for i in body.plan._input_ids]
    pred_dt = cond.plan.graph.nodes[cond.plan.outputs[0]].shape.dtype.np
    cap = -1 if max_iterations is None else int(max_iterations)

    def drive(carried):
        state = []
        for x, s in zip(carried, shapes):
            a = _flat(x, s.dtype.np)
            state += [a, np.empty_like(a)]
        first = blas_serial(fn, *state, np.empty(1, pred_dt), cap, *tail)
        return first.reshape(tuple(shapes[0].dims))
    drive.kernel = kernel
    return drive


def _rows(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` as a C-contiguous [n, rest] matrix (a view when it already is contiguous)."""
    return np.ascontiguousarray(x).reshape(n, x.size // n if n else 0)
