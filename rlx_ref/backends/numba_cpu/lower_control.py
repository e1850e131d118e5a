"""Lowering of the control kinds (If, While, Scan, CustomFn) and the Custom host path.

Each body is compiled once, when the node is lowered, into a SubPlan (its own kernels and
planned buffers) wrapped in a BodyLoop; the step drives it from the host: If picks a
branch, While and Scan loop over the compiled body with the state held in numpy arrays
(no re-planning per iteration). A body's outputs are fresh arrays on every run, so the
steps return them as the node's value; an operand that would be returned unchanged (zero
trips) is copied, because the caller's buffer may be reused by a later node.
"""
from __future__ import annotations

from collections import namedtuple
from operator import itemgetter

import numpy as np

from ...ir.dtype import DType
from ...ops.opdef import RefCtx, get
from .lowering import Step, lowers

LEAVES = ("Input", "Param", "Constant")
Source = namedtuple("Source", "name source")      # a body's kernel, for kernel_sources()
ANY = tuple(DType)
BODY_NOTE = "the node drives its compiled bodies from the host; their kinds are lowered " \
            "on their own"


class BodyLoop:
    """A body compiled once (``ctx.compile_body``) and run by a host loop.

    ``run(args)`` does what ``SubPlan.run`` does (inputs bound in node order, planned
    buffers, fresh outputs, errors naming the body's node) with a list environment and
    the per-run lookups done once, so a Scan step costs little more than its kernels.
    """

    def __init__(self, ctx, body):
        from .executable import NumbaRunError

        self.error = NumbaRunError
        plan = ctx.compile_body(body).plan
        g = self.graph = plan.graph
        if g.param_nodes():
            raise ValueError(f"body @{g.name} reads Params, which bodies cannot bind")
        self.template = [None] * len(g.nodes)
        for i, a in plan.const.items():
            self.template[i] = a
        self.inputs = [n.id for n in g.input_nodes()]
        self.ops = [(node.id, step.fn, step.returns, _getter(ins), plan.buffer.get(node.id),
                     tuple(node.shape.dims), node.shape.dtype.np)
                    for node, step, ins in plan.steps]
        self.outputs = [(o, g.nodes[o].kind in LEAVES) for o in plan.outputs]
        self.kernels = [Source(n, src) for n, src in plan.kernels.items()]

    def run(self, args) -> list:
        """All outputs of the body for ``args``."""
        env = self._exec(args)
        return [env[o].copy() if leaf else env[o] for o, leaf in self.outputs]

    def first(self, args) -> np.ndarray:
        """The first output (the node's value) for ``args``."""
        env = self._exec(args)
        o, leaf = self.outputs[0]
        return env[o].copy() if leaf else env[o]

    def _exec(self, args) -> list:
        env = self.template.copy()
        for i, a in zip(self.inputs, args):
            env[i] = a
        k = 0
        try:
            for k, (nid, fn, returns, gather, buf, dims, dt) in enumerate(self.ops):
                if returns:
                    env[nid] = fn(*gather(env))
                else:
                    out = np.empty(dims, dt) if buf is None else buf
                    fn(out, *gather(env))
                    env[nid] = out
        except Exception as e:
            node = self.graph.nodes[self.ops[k][0]]
            raise self.error(f"at %{node.id} in @{self.graph.name}: {e}\n"
                             f"  while running: {node}") from e
        return env


def _getter(ids):
    """env -> the tuple of env[i] for i in ids (itemgetter, the fastest way to collect them)."""
    if len(ids) == 1:
        one = ids[0]
        return lambda env: (env[one],)
    return itemgetter(*ids) if ids else (lambda env: ())


def _truthy(pred: np.ndarray) -> bool:
    """A one-element predicate is true when non-zero (NaN is true), as the oracle."""
    return bool(pred.reshape(-1)[0] != 0)


@lowers("If", ANY, reason=BODY_NOTE)
def _if(node, ins, ctx):
    then = BodyLoop(ctx, node.attrs.then_branch)
    other = BodyLoop(ctx, node.attrs.else_branch)

    def run(pred, *captures):
        return (then if _truthy(pred) else other).first(captures)
    return Step(run, then.kernels + other.kernels, returns=True, note="host branch")


@lowers("While", ANY, reason=BODY_NOTE)
def _while(node, ins, ctx):
    cond, body = BodyLoop(ctx, node.attrs.cond), BodyLoop(ctx, node.attrs.body)
    cap = node.attrs.max_iterations

    def run(*carried):
        state, steps = list(carried), 0
        while cap is None or steps < cap:
            if not _truthy(cond.first(state)):
                break
            state = body.run(state)
            steps += 1
        return state[0] if steps else state[0].copy()
    return Step(run, cond.kernels + body.kernels, returns=True, note="host loop")


@lowers("Scan", ANY, reason=BODY_NOTE)
def _scan(node, ins, ctx):
    a = node.attrs
    body = BodyLoop(ctx, a.body)
    length, nb = a.length, a.num_bcast
    keep = list(range(length))
    if 0 < a.num_checkpoints < length:
        keep = [t * length // a.num_checkpoints for t in range(a.num_checkpoints)]
    row_of = {t: r for r, t in enumerate(keep)}
    dims, dtype = tuple(node.shape.dims), node.shape.dtype.np

    def run(init, *rest):
        bcasts, xs = list(rest[:nb]), rest[nb:]
        for i, x in enumerate(xs):
            if x.shape[0] != length:
                raise ValueError(f"Scan xs #{i} has {x.shape[0]} rows, expected length "
                                 f"{length}")
        traj = np.empty(dims, dtype) if a.save_trajectory else None
        carry = init
        for t in range(length):
            carry = body.first([carry, *bcasts, *[x[t, ...] for x in xs]])
            if traj is not None and t in row_of:
                traj[row_of[t]] = carry
        if traj is not None:
            return traj
        return carry if length else init.copy()
    return Step(run, body.kernels, returns=True, note="host loop")


@lowers("CustomFn", ANY, reason=BODY_NOTE)
def _custom_fn(node, ins, ctx):
    fwd = BodyLoop(ctx, node.attrs.fwd_body)
    return Step(lambda *xs: fwd.first(xs), fwd.kernels, returns=True, note="forward body")


@lowers("Custom", ANY, path="host",
        reason="user-registered custom ops have only a reference implementation")
def _custom(node, ins, ctx):
    ref, shape = get("Custom").reference, node.shape
    dt, dims = shape.dtype.np, tuple(shape.dims)

    def run(*xs):
        y = np.asarray(ref(RefCtx(node.attrs, shape, node=node), *xs))
        if y.shape != dims:
            raise ValueError(f"custom op {node.attrs.name!r} returned shape {list(y.shape)}, "
                             f"declared {list(dims)}")
        if y.dtype != dt or not y.flags.c_contiguous or \
                any(np.may_share_memory(y, x) for x in xs):
            y = np.array(y, dt, order="C")      # a view of an operand would be clobbered
        return y
    return Step(run, [], returns=True, note="host reference")
