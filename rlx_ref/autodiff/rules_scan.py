"""The VJP rule of Scan (RLX's ``Op::Scan`` arm): the body's gradient, walked backwards.

After the pre-pass (``prepare_scan.py``) every Scan keeps its trajectory and takes only
carry + xs operands. The rule differentiates the body once with respect to all of its
Inputs (``body_vjp``: Inputs ``carry, x_t..., d_output``; outputs ``dcarry, dx_t...``)
and emits ``ScanBackward`` for the init and one ``ScanBackwardXs`` per float xs, each
reading ``[init, trajectory, upstream, xs...]``. A checkpointed Scan hands its body to
them as ``forward_body`` so they recompute the carries between saved rows.
"""
from __future__ import annotations

from ..ir.graph import Graph, Op
from ..ops.backward_scan import SEED, checkpointed
from ._build import zeros
from .vjp import vjp_rule


def _differentiable(shape) -> bool:
    return shape.dtype.is_float or shape.dtype.is_complex


def body_gradient(body: Graph) -> Graph:
    """``grad`` of ``body`` with respect to every Input (node order); an Input of an
    integer or bool dtype gets a zero gradient, so outputs match Inputs one to one."""
    from .reverse import grad

    g = body.copy()
    for n in g.input_nodes():   # grad names its seed d_output; a body's label gives way
        if n.attrs.name == SEED:
            n.op = Op("Input", type(n.attrs)(f"{SEED}_primal"))
    ins = g.input_nodes()
    wrt = [n.id for n in ins if _differentiable(n.shape)]
    out = grad(g, wrt)
    grads = iter(out.outputs)
    out.set_outputs([next(grads) if _differentiable(n.shape) else zeros(out, n.shape)
                     for n in ins])
    out.name = f"{body.name}_vjp"
    return out


@vjp_rule("Scan")
def vjp_scan(ctx, dy):
    """``[dinit, dxs...]`` from ScanBackward and ScanBackwardXs (None for an operand off
    the path to a wrt, and for integer xs)."""
    a = ctx.attrs
    if a.num_bcast or not a.save_trajectory:
        raise ctx.fail("a Scan without trajectory or with broadcast operands should have "
                       "been rewritten by the pre-pass (prepare_for_ad)")
    body_vjp = body_gradient(a.body)
    fields = dict(body_vjp=body_vjp, length=a.length, save_trajectory=True,
                  num_xs=a.num_xs, num_checkpoints=a.num_checkpoints,
                  forward_body=a.body if checkpointed(a) else None)
    operands = (ctx.x[0], ctx.y, dy) + tuple(ctx.x[1:])
    # each backward kind is a sweep of its own: emit only those a wrt needs
    dinit = ctx.g.op("ScanBackward", operands, **fields) if ctx.needs(0) else None
    dxs = [ctx.g.op("ScanBackwardXs", operands, xs_idx=i, **fields)
           if ctx.needs(1 + i) and _differentiable(ctx.in_shapes[1 + i]) else None
           for i in range(a.num_xs)]
    return [dinit] + dxs
