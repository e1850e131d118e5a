"""The reverse-mode rules table: one entry per op kind (the JAX pattern).

A rule is ``rule(ctx, dy) -> sequence``: given the cotangent ``dy`` of a node's output (a
node id in the graph being built), it appends nodes to ``ctx.g`` and returns, for each
operand, the id of that operand's cotangent contribution, or None where no gradient
flows (an index operand, a predicate, a non-differentiable op). Rules read the forward
values through ``ctx.x`` (the operands, mirrored into the gradient graph) and ``ctx.y``
(the node's own value), and payloads through ``ctx.attrs``.

Adding an op's rule is one entry: ``@vjp_rule("Kind")`` in one of the ``rules_*``
modules of this package. A kind with no rule is an ``AutodiffError`` naming the node and
kind, never a silent zero; ``NON_DIFFERENTIABLE`` kinds send no gradient to any operand.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir.graph import Graph, Node
from ._build import AutodiffError, NodeRuleContext, load_rule_modules

VJP: dict[str, Callable] = {}

# kinds whose outputs are piecewise constant or integer-valued: no operand gets a gradient
# (ArgSort and Sample return indices; the Rng kinds read only their operand's shape;
# Histogram returns counts, non-differentiable in RLX too)
NON_DIFFERENTIABLE = frozenset({"Compare", "ArgMax", "ArgMin", "TopK", "StopGradient",
                                "ArgSort", "Sample", "RngNormal", "RngUniform",
                                "Histogram"})


# operands RLX's backward kinds treat as constants: their rules refuse a gradient for them
# by name, and the gradient checks do not differentiate them (index operands never are)
CONSTANT_OPERANDS = {"Rope": ("cos", "sin"), "Attention": ("mask",),
                     "DequantMatMul": ("scale", "zp"), "FakeQuantize": ("state",),
                     "LogMel": ("filters",)}

# kinds whose rule is a straight-through estimator (RLX's QAT rules), not their derivative:
# finite differences cannot check them (tests/test_ops_fake_quant.py checks the formulas)
STRAIGHT_THROUGH_KINDS = frozenset({"FakeQuantize", "FakeQuantizeLSQ"})


def vjp_rule(*kinds: str):
    """Register the decorated function as the VJP rule of ``kinds``."""
    def deco(fn):
        for k in kinds:
            if k in VJP:
                raise ValueError(f"two VJP rules for {k}")
            VJP[k] = fn
        return fn
    return deco


@dataclass
class VjpContext(NodeRuleContext):
    """What a rule sees: the gradient graph, the forward node and its mirrored values."""

    g: Graph
    node: Node
    x: tuple            # operand ids in ``g``
    y: int              # the node's own value in ``g``
    in_shapes: tuple    # operand shapes
    where: str          # "at %N (Kind)" for messages
    path: frozenset = frozenset()   # forward ids that depend on a wrt and reach the loss

    def needs(self, i: int) -> bool:
        """Whether operand ``i`` needs a cotangent (it lies between a wrt and the loss)."""
        return self.node.inputs[i] in self.path


def rule_for(kind: str, where: str) -> Callable:
    """The VJP rule of ``kind``; AutodiffError naming the node when there is none."""
    _load_rules()
    if kind in NON_DIFFERENTIABLE:
        return _no_gradient
    try:
        return VJP[kind]
    except KeyError:
        raise AutodiffError(
            f"{where}: no VJP rule for {kind}; add one with @vjp_rule({kind!r}) in "
            "rlx_ref/autodiff/rules_*.py, or wrap the computation in a CustomFn with a "
            "vjp_body") from None


def _no_gradient(ctx: VjpContext, dy: int):
    return [None] * len(ctx.x)


def _load_rules() -> None:
    load_rule_modules("rules_")


# kinds the pre-pass rewrites into their loop form (a Scan): differentiated through it
LOOP_FORM_KINDS = frozenset({"SelectiveScan", "Mamba2", "GatedDeltaNet", "Lstm", "Gru", "Rnn"})


def rule_kinds() -> list[str]:
    """Every kind the transform differentiates: a VJP rule, no gradient by definition
    (non-differentiable kinds), or the loop form the pre-pass rewrites it into."""
    _load_rules()
    return sorted(set(VJP) | NON_DIFFERENTIABLE | LOOP_FORM_KINDS)
