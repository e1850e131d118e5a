"""Lowering of the control kinds (If, While, Scan, CustomFn).

Each body is compiled once into a SubPlan (its own kernels and device buffers); the step
drives it from the host while every array stays on the device. Only the scalar
predicates of If and While travel to the host (one element per decision). Body outputs
are fresh device arrays, so a loop can feed them back as the next iteration's inputs.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ...ops.control import scan_kept_steps
from .device import copy_device, device_dtype
from .lowering import Step, lowers

ANY = tuple(DType)
BODY_NOTE = "the node drives its compiled bodies from the host over device arrays; " \
            "their kinds are lowered on their own"


def _body(ctx, body):
    sub = ctx.compile_body(body)
    if sub.body.param_nodes():
        raise ValueError(f"body @{sub.body.name} reads Params, which bodies cannot bind")
    return sub


def _truthy(pred) -> bool:
    """A one-element device predicate is true when non-zero (NaN is true), as the oracle."""
    value = pred[:1].copy_to_host()[0]
    return bool(value != 0)


@lowers("If", ANY, reason=BODY_NOTE)
def _if(node, ins, ctx):
    then, other = _body(ctx, node.attrs.then_branch), _body(ctx, node.attrs.else_branch)

    def run(pred, *captures):
        return (then if _truthy(pred) else other).first(captures)
    return Step(run, then.launches() + other.launches(), returns=True, note="host branch")


@lowers("While", ANY, reason=BODY_NOTE)
def _while(node, ins, ctx):
    cond, body = _body(ctx, node.attrs.cond), _body(ctx, node.attrs.body)
    cap = node.attrs.max_iterations

    def run(*carried):
        state, steps = list(carried), 0
        while cap is None or steps < cap:
            if not _truthy(cond.first(state)):
                break
            state = body.run(state)
            steps += 1
        return state[0] if steps else copy_device(state[0])
    return Step(run, cond.launches() + body.launches(), returns=True, note="host loop")


@lowers("Scan", ANY, reason=BODY_NOTE)
def _scan(node, ins, ctx):
    a = node.attrs
    body = _body(ctx, a.body)
    length, nb = a.length, a.num_bcast
    row_of = {t: r for r, t in enumerate(scan_kept_steps(a))}
    out_numel = node.shape.numel
    row_sizes = [ins[1 + nb + i].numel // max(length, 1) for i in range(len(ins) - 1 - nb)]
    dtype = device_dtype(node.shape.dtype)

    def run(init, *rest):
        from .device import import_cuda

        bcasts, xs = list(rest[:nb]), rest[nb:]
        traj = import_cuda().device_array(out_numel, dtype) if a.save_trajectory else None
        args = [init, *bcasts, *xs]             # slot 0: the carry; then bcasts, rows
        carry, rows = init, range(1 + nb, len(args))
        for t in range(length):
            args[0] = carry
            for j, x, size in zip(rows, xs, row_sizes):
                args[j] = x[t * size:(t + 1) * size]       # a flat view of row t
            carry = body.first(args)
            if traj is not None and t in row_of:
                r, size = row_of[t], carry.size
                traj[r * size:(r + 1) * size].copy_to_device(carry)
        if traj is not None:
            return traj
        return carry if length else copy_device(init)
    return Step(run, body.launches(), returns=True, note="host loop")


@lowers("CustomFn", ANY, reason=BODY_NOTE)
def _custom_fn(node, ins, ctx):
    fwd = _body(ctx, node.attrs.fwd_body)
    return Step(lambda *xs: fwd.first(xs), fwd.launches(), returns=True, note="forward body")

