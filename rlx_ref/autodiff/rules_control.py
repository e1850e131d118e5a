"""VJP rules of the control kinds that survive the pre-pass: CustomFn with a ``vjp_body``.

(If and While are rewritten, and a CustomFn without a ``vjp_body`` is inlined, before the
reverse walk; see ``prepare.py``.)
"""
from __future__ import annotations

from .prepare import inline
from .vjp import vjp_rule


@vjp_rule("CustomFn")
def vjp_custom_fn(ctx, dy):
    """The ``vjp_body`` inlined: its primal Inputs (node order) bind to the operands, the
    Inputs named ``primal_output`` and ``d_output`` to the node's value and cotangent; its
    outputs are the operands' cotangents, in order."""
    body = ctx.attrs.vjp_body
    if body is None:
        raise ctx.fail("a CustomFn without vjp_body should have been inlined by the "
                       "pre-pass (prepare_for_ad)")
    return inline(ctx.g, body, ctx.x, {"primal_output": ctx.y, "d_output": dy})
