"""VJP rules of the fake-quantization kinds, as RLX's autodiff emits them: straight-through
estimators, not derivatives (the rounding's derivative is zero almost everywhere).

- FakeQuantize: ``dx = dy`` for ``ste = Identity``, else ``FakeQuantizeBackward(x, dy)``
  with the forward's bits, axis and ste. The EMA/Fixed state gets no gradient (RLX
  returns none for it): asking for one is an error, never a silent zero.
- FakeQuantizeLSQ: ``FakeQuantizeLSQBackwardX(x, scale, dy)`` for x and
  ``FakeQuantizeLSQBackwardScale(x, scale, dy)`` (scale's shape) for the scale.

Forward mode uses the rule derived from these (``jvp.derived``).
"""
from __future__ import annotations

from .vjp import vjp_rule


@vjp_rule("FakeQuantize")
def vjp_fake_quantize(ctx, dy):
    a = ctx.attrs
    if len(ctx.x) > 1 and ctx.needs(1):
        raise ctx.fail("no gradient with respect to FakeQuantize's scale state (operand 1); "
                       "RLX's rule treats it as a running statistic, not a parameter")
    if a.ste == "Identity":
        dx = dy
    else:
        dx = ctx.g.op("FakeQuantizeBackward", (ctx.x[0], dy), bits=a.bits, axis=a.axis,
                      ste=a.ste)
    return [dx] + [None] * (len(ctx.x) - 1)


@vjp_rule("FakeQuantizeLSQ")
def vjp_fake_quantize_lsq(ctx, dy):
    g, (x, scale), a = ctx.g, ctx.x, ctx.attrs
    ops = (x, scale, dy)
    dx = g.op("FakeQuantizeLSQBackwardX", ops, bits=a.bits, axis=a.axis) \
        if ctx.needs(0) else None
    dscale = g.op("FakeQuantizeLSQBackwardScale", ops, bits=a.bits, axis=a.axis) \
        if ctx.needs(1) else None
    return [dx, dscale]
