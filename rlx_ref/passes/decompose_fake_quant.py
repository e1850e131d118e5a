"""Decompositions of the fake-quantization kinds (FakeQuantize in every scale mode,
FakeQuantizeBackward, FakeQuantizeLSQ and its two backward kinds) into Activation, Binary,
Compare, Where, Reduce, Reshape and Constant nodes, so every backend runs them and a
gradient graph holding them can be differentiated again (``autodiff.prepare``).

Each kind's formula lives once, in ``ops/_fake_quant_math``, written against a math
namespace; ``FqGraph`` evaluates it on graph nodes, emitting the kinds whose references
the numpy namespace calls, in the same order: on the oracle a decomposition computes bit
for bit what the op computes. That includes RLX's rounding, half away from zero, built
from Floor (Activation Round rounds half to even), and its NaN-keeping clamp, built from
Compare and Where (Clamp's max/min would turn NaN into the bound).

RLX's own LowerFakeQuantize covers PerBatch only (EMA and Fixed keep a native path for
their in-place state update, which a pure graph does not make) and rounds half to even.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ops import _fake_quant_math as fq
from .decompose import decomposes
from .decompose_backward_norm import GraphMath, Node


class FqGraph(GraphMath):
    """``m`` for the decompositions: the graph counterpart of ``_fake_quant_math.NUMPY``."""

    @staticmethod
    def cmp(op: str, a: Node, b) -> Node:
        return Node(a.g, a.g.op("Compare", (a.id, a.lift(b).id), op=op))

    @staticmethod
    def maximum(a: Node, b) -> Node:
        return a._bin("Max", b)

    @staticmethod
    def where(cond: Node, a, b, like: Node | None = None) -> Node:
        """Where; a Python number becomes a constant of the dtype of the node beside it
        (or ``like``'s)."""
        ref = next(v for v in (a, b, like) if isinstance(v, Node))
        a, b = ref.lift(a), ref.lift(b)
        return Node(ref.g, ref.g.op("Where", (cond.id, a.id, b.id)))

    @staticmethod
    def reduce_max(t: Node, axes) -> Node:
        if not axes:
            return t
        return Node(t.g, t.g.op("Reduce", (t.id,), op="Max", axes=tuple(sorted(axes)),
                                keep_dim=True))


FQ_GRAPH = FqGraph()
KINDS = ("FakeQuantize", "FakeQuantizeBackward", "FakeQuantizeLSQ",
         "FakeQuantizeLSQBackwardX", "FakeQuantizeLSQBackwardScale")
PRODUCES = ("Activation", "Binary", "Compare", "Where", "Reduce", "Reshape", "Constant")
DTYPES = (DType.F32,)
REASON = ("no kernel: rewritten into Activation (Abs, Floor, Neg, Tanh), Binary, Compare, "
          "Where, Reduce Max/Sum and Reshape, rounding half away from zero as RLX's kernels")
RULES = {"FakeQuantize": fq.fake_quantize, "FakeQuantizeBackward": fq.fake_quantize_backward,
         "FakeQuantizeLSQ": fq.lsq, "FakeQuantizeLSQBackwardX": fq.lsq_backward_x,
         "FakeQuantizeLSQBackwardScale": fq.lsq_backward_scale}


def _lowering(kind: str):
    rule = RULES[kind]

    def lower(g, node, ins):
        if not all(g.shape(i).is_static for i in ins) or not node.shape.is_static:
            return None
        out = rule(FQ_GRAPH, node.attrs, *[Node(g, i) for i in ins])
        return FQ_GRAPH.reshape(out, node.shape.dims).id
    lower.__name__ = f"lower_{kind}"
    lower.__doc__ = f"{kind}'s formula (ops/_fake_quant_math) on graph nodes."
    return decomposes(kind, PRODUCES)(lower)


for _kind in KINDS:
    _lowering(_kind)

__all__ = ["DTYPES", "FQ_GRAPH", "FqGraph", "KINDS", "REASON"]
