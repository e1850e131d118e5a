"""Lowering of the control kinds (If, While, Scan, CustomFn), driven from the host.

Each body is planned once, when the node is lowered, as a Plan on the executable's
runtime (its kernels join the one program; its buffers are its own). Values stay on the
device: the host reads only what decides control, If's predicate and While's condition
(one element per decision, read together with the error word so a failing body stops
the loop). Scan feeds each step's rows to the body with device copies at byte offsets
and stacks the trajectory on the device. Custom (user-registered) ops keep the declared
host path.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops.control import scan_kept_steps
from . import memory
from .lowering import Step, lowers
from .variant_table import use

ANY = tuple(DType)
BODY_NOTE = "the node drives its compiled bodies from the host; their kinds are lowered " \
            "on their own"


def _body(ctx, graph):
    """``graph`` planned once on this executable's runtime."""
    plan = ctx.compile_body(graph)
    if plan.params:
        raise ValueError(f"at %{ctx.node.id} ({ctx.node.kind}): body @{graph.name} reads "
                         "Params, which bodies cannot bind; pass them in as operands")
    return plan


def _copy(queue, dst, src, nbytes: int, dst_off: int = 0, src_off: int = 0) -> None:
    """Device-to-device copy of ``nbytes`` (nothing for 0: OpenCL refuses empty copies)."""
    import pyopencl as cl

    if nbytes:
        cl.enqueue_copy(queue, dst.buf, src.buf, byte_count=nbytes, dst_offset=dst_off,
                        src_offset=src_off)


class _Decider:
    """Reads one-element predicates (true when non-zero, NaN too, as the oracle)."""

    def __init__(self, ctx):
        self.queue, self.errors = ctx.queue, ctx.errors
        self.err = np.zeros(1, np.int32)

    def truthy(self, pred, check_errors: bool = False) -> bool:
        import pyopencl as cl

        if check_errors:        # in-order queue: one wait covers both reads
            cl.enqueue_copy(self.queue, self.err, self.errors.array.buf, is_blocking=False)
        host = np.empty(1, pred.dtype)
        cl.enqueue_copy(self.queue, host, pred.buf, is_blocking=True)
        if check_errors and self.err[0]:
            self.errors.check()
        return bool(host[0] != 0)


@lowers("If", ANY, reason=BODY_NOTE)
def _if(node, ins, ctx):
    then, other = _body(ctx, node.attrs.then_branch), _body(ctx, node.attrs.else_branch)
    decide, q = _Decider(ctx), ctx.queue

    def bind(out, pred, *captures):
        then.finalize()
        other.finalize()

        def launch():
            branch = then if decide.truthy(pred) else other
            out.copy_from(q, branch.run_device(list(captures))[0])
        return launch
    return Step(bind, note="host branch")


@lowers("While", ANY, reason=BODY_NOTE)
def _while(node, ins, ctx):
    cond, body = _body(ctx, node.attrs.cond), _body(ctx, node.attrs.body)
    cap = node.attrs.max_iterations
    decide, q = _Decider(ctx), ctx.queue

    def bind(out, *carried):
        cond.finalize()
        body.finalize()
        # the loop state lives in buffers of its own: a body may return its inputs swapped
        state = [out] + [memory.empty(ctx.program.context, c.shape, c.dtype)
                         for c in carried[1:]]

        def launch():
            for s, c in zip(state, carried):
                s.copy_from(q, c)
            steps = 0
            while cap is None or steps < cap:
                if not decide.truthy(cond.run_device(state)[0], check_errors=True):
                    break
                for s, o in zip(state, body.run_device(state)):
                    s.copy_from(q, o)
                steps += 1
        launch.keep = state
        return launch
    use("loop.host")
    return Step(bind, note="host loop")


def _scan_rows(a) -> dict:
    """Trajectory row of each kept step (every step unless checkpointed)."""
    return {t: r for r, t in enumerate(scan_kept_steps(a))}


@lowers("Scan", ANY, reason=BODY_NOTE)
def _scan(node, ins, ctx):
    a = node.attrs
    body = _body(ctx, a.body)
    length, nb, q = a.length, a.num_bcast, ctx.queue
    row_of = _scan_rows(a) if a.save_trajectory else {}
    for i, x in enumerate(ins[1 + nb:]):
        if x.dims[0] != length:
            raise ValueError(f"Scan xs #{i} has {x.dims[0]} rows, expected length {length}")

    def bind(out, init, *rest):
        body.finalize()
        slots = [body.env[n.id] for n in body.inputs]     # [carry, bcasts..., x_t...]
        result = body.env[body.outputs[0]]
        in_place = body.outputs[0] == body.inputs[0].id    # the body returns its carry
        bcasts, xs = rest[:nb], rest[nb:]
        carry_bytes = slots[0].nbytes

        def launch():
            if length == 0:
                if not a.save_trajectory:
                    out.copy_from(q, init)
                return
            slots[0].copy_from(q, init)
            for slot, b in zip(slots[1:1 + nb], bcasts):
                slot.copy_from(q, b)
            for t in range(length):
                for slot, x in zip(slots[1 + nb:], xs):
                    _copy(q, slot, x, slot.nbytes, src_off=t * slot.nbytes)
                body.enqueue()
                if t in row_of:
                    _copy(q, out, result, carry_bytes, dst_off=row_of[t] * carry_bytes)
                if t + 1 < length and not in_place:
                    slots[0].copy_from(q, result)
            if not a.save_trajectory:
                out.copy_from(q, result)
        return launch
    use("loop.host")
    return Step(bind, note="host loop")


@lowers("CustomFn", ANY, reason=BODY_NOTE)
def _custom_fn(node, ins, ctx):
    fwd, q = _body(ctx, node.attrs.fwd_body), ctx.queue

    def bind(out, *xs):
        fwd.finalize()

        def launch():
            out.copy_from(q, fwd.run_device(list(xs))[0])
        return launch
    return Step(bind, note="forward body")
