"""ONNX's loss ops as gathers and reductions: NegativeLogLikelihoodLoss, SoftmaxCrossEntropy."""
from __future__ import annotations

from . import converts
from .reduce import log_softmax_of


def nll(ctx, x, t, w, attrs):
    """-x[n, t[n, ...], ...]·weight[t], reduced as ONNX's ``reduction`` says."""
    red = attrs.only("reduction", ("mean", "sum", "none"), "mean")
    ignore = attrs.get("ignore_index")
    tdims = ctx.dims(t)
    weff = None
    if ignore is not None:
        keep = ctx.cmp("Ne", t, ctx.like(ignore, t))
        t = ctx.where(keep, t, ctx.like(0, t))      # an ignored label may be out of range
        weff = ctx.cast(keep, ctx.dt(x))
    idx = ctx.reshape(t, (tdims[0], 1) + tuple(tdims[1:]))
    picked = ctx.reshape(ctx.op("GatherElements", (x, idx), axis=1), tdims)
    loss = ctx.act("Neg", picked)
    if w is not None:
        wt = ctx.op("Gather", (w, t), axis=0)
        weff = wt if weff is None else ctx.bin("Mul", wt, weff)
    if weff is not None:
        loss = ctx.bin("Mul", loss, weff)
    every = tuple(range(len(tdims)))
    if red == "none":
        return loss
    total = ctx.op("Reduce", (loss,), op="Sum", axes=every, keep_dim=False)
    if red == "sum":
        return total
    if weff is None:
        return ctx.op("Reduce", (loss,), op="Mean", axes=every, keep_dim=False)
    den = ctx.op("Reduce", (weff,), op="Sum", axes=every, keep_dim=False)
    return ctx.bin("Div", total, den)


def _weight(ctx, ins):
    return ctx.id(ins[2]) if len(ins) > 2 and ins[2] else None


@converts("NegativeLogLikelihoodLoss")
def nll_loss(ctx, node, ins, attrs):
    return [nll(ctx, ctx.id(ins[0]), ctx.id(ins[1]), _weight(ctx, ins), attrs)]


@converts("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(ctx, node, ins, attrs):
    logp = log_softmax_of(ctx, ctx.id(ins[0]), 1)
    return [nll(ctx, logp, ctx.id(ins[1]), _weight(ctx, ins), attrs), logp]
