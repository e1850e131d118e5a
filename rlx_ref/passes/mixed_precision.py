"""RLX's ``AutoMixedPrecision``: a ``PrecisionPolicy`` maps each op's category to f32, f16
or bf16; the pass relabels every float node to its category's precision and inserts a Cast
where an operand's precision differs (one Cast per source and precision, reused).

Categories and lists are RLX's (rlx-compile ``precision.rs``): Compute (MatMul, Conv,
Attention... and every kind not listed), Reduction (norms, Softmax, Reduce, Cumsum, RNNs),
Elementwise (Activation, Binary, Compare, Where, regions, quantize), DataMovement (Gather,
Narrow, Reshape, Transpose, Concat, Expand, Cast...), Boundary (Input, Param, Constant:
never relabelled). As in RLX: a Cast keeps its ``to``; integer, bool and f64 values are
never cast or relabelled (bit patterns, not AMP floats); the kinds RLX forces to f32
(``FORCE_F32``) get f32 operands; the scaled-matmul family is left as it is; every graph
output is Cast back to f32.

**f32 accumulation**: Reduce, MatMul and the other reducing kinds define f16/bf16 as
accumulating in f32 (their OpDefs; the oracle and the conformance contracts hold every
backend to it), so a Compute or Reduction node relabelled f16 keeps an f32 accumulator and
rounds once at the end, as RLX's kernels do.

Beyond RLX, to keep the graph valid in rlx_ref's verifier: a node whose kind would reject
the relabelled dtypes (an f32-only op such as RngNormal), and every node with a nested body
(If, While, Scan: RLX relabels them but leaves their bodies in f32), stays in f32 with f32
operands. Bodies are not rewritten. ``AlwaysF32`` returns the graph unchanged.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.graph import Graph, Op
from ..ops.opdef import OpError, get
from ..ir.shape import ShapeError
from ._rewrite import PassLog, graph_pass, has_bodies

F32, F16, BF16 = DType.F32, DType.F16, DType.BF16
AMP_FLOATS = (F32, F16, BF16)

COMPUTE, REDUCTION, ELEMENTWISE, MOVEMENT, BOUNDARY = (
    "Compute", "Reduction", "Elementwise", "DataMovement", "Boundary")

CATEGORY = {}
for _k in ("LayerNorm RmsNorm Softmax FusedResidualLN FusedResidualRmsNorm Reduce Cumsum "
           "Sample SelectiveScan GatedDeltaNet Lstm Gru Rnn Mamba2 SoftmaxCrossEntropy "
           "SoftmaxCrossEntropyWithLogits SoftmaxCrossEntropyBackward LayerNormBackwardInput "
           "LayerNormBackwardGamma GroupNorm AdaLayerNorm AdaLayerNormBackward").split():
    CATEGORY[_k] = REDUCTION
for _k in ("Activation Binary FusedSwiGLU Compare Where ElementwiseRegion Quantize "
           "ScaledQuantize ScaledQuantScale ScaledDequantize Dequantize FakeQuantize "
           "FakeQuantizeBackward FakeQuantizeLSQ FakeQuantizeLSQBackwardX "
           "FakeQuantizeLSQBackwardScale ReluBackward ActivationBackward ComplexNormSq "
           "ComplexNormSqBackward Conjugate GatedResidual GatedResidualBackward").split():
    CATEGORY[_k] = ELEMENTWISE
for _k in ("Gather Narrow Reshape Transpose Concat Expand Cast Rope Pool FusedAttentionBlock "
           "TopK ScatterAdd ScatterNd ScatterElements GatherNd GatherElements "
           "MaxPool2dBackward ResizeNearest2x AxialRope2d If While").split():
    CATEGORY[_k] = MOVEMENT
for _k in ("Input", "Param", "Constant"):
    CATEGORY[_k] = BOUNDARY

FORCE_F32 = frozenset((
    "GatedDeltaNet SelectiveScan Conv Conv3d ConvTranspose2d ConvTranspose3d Im2Col Pool "
    "QConv2d Conv2dBackwardInput Conv2dBackwardWeight Cumsum Sample Lstm Gru Rnn Mamba2 "
    "SoftmaxCrossEntropy SoftmaxCrossEntropyWithLogits SoftmaxCrossEntropyBackward "
    "LayerNorm2d LayerNormBackwardInput LayerNormBackwardGamma GroupNorm Attention "
    "AttentionBackward FusedAttentionBlock TopK ScatterAdd ScatterNd ScatterElements GatherNd "
    "GatherElements Expand MaxPool2dBackward ResizeNearest2x AxialRope2d BiMap ReEig LogEig "
    "SpdBatchNorm SpdKarcherMean SpdKarcherMeanWeighted SpdLogMap SpdExpMap "
    "SpdParallelTransport SpdMatrixFnBatch ReEigBackward LogEigBackward SpdBatchNormBackwardX "
    "SpdBatchNormBackwardG SpdLogMapBackward SpdExpMapBackward SpdParallelTransportBackward "
    "SpdMatrixFnBatchBackward Eigh EighBackward EighBatch EighBatchBackward DequantMatMul "
    "SynthMatMul").split())
SCALED = frozenset(("ScaledMatMul", "ScaledQuantize", "ScaledQuantScale", "ScaledDequantize"))

# RLX's PrecisionPolicy::precision_for: (Compute, Reduction, Elementwise, DataMovement)
POLICIES = {
    "AlwaysF32": (F32, F32, F32, F32),
    "AlwaysF16": (F16, F16, F16, F16),
    "AutoMixedConservative": (F32, F32, F16, F32),
    "AutoMixed": (F32, F16, F16, F32),
    "AutoMixedBf16": (BF16, BF16, BF16, BF16),
    "AutoMixedBf16Safe": (F32, BF16, BF16, F32),
}
_ORDER = (COMPUTE, REDUCTION, ELEMENTWISE, MOVEMENT)


def category(kind: str) -> str:
    """RLX's ``op_kind``: the policy category of ``kind`` (Compute when unlisted)."""
    return CATEGORY.get(kind, COMPUTE)


def precision_for(policy, cat: str) -> DType:
    """The dtype ``policy`` (a name in POLICIES, or a dict ``{category: dtype}`` as RLX's
    ``Custom``) gives category ``cat``; Boundary is always f32."""
    if cat == BOUNDARY:
        return F32
    if isinstance(policy, dict):
        v = policy.get(cat, F32)
        return v if isinstance(v, DType) else DType.parse(str(v))
    if policy not in POLICIES:
        raise ValueError(f"unknown precision policy {policy!r}; expected one of "
                         f"{', '.join(POLICIES)} or a dict {{category: dtype}}")
    return POLICIES[policy][_ORDER.index(cat)]


def _accepts(node, in_shapes, out) -> bool:
    """``node``'s kind accepts these operand shapes and result (its check and shape rule)."""
    d = get(node.kind)
    try:
        if d.check is not None:
            d.check(in_shapes, node.attrs, out)
        inferred = d.infer_shape(in_shapes, node.attrs)
    except (OpError, ShapeError, TypeError, ValueError):
        return False
    return inferred is None or inferred == out


class _Amp:
    def __init__(self, graph: Graph, policy, log):
        self.old, self.policy, self.log = graph, policy, log
        self.g = Graph(graph.name)
        self.ids: dict = {}
        self.casts: dict = {}

    def cast(self, src: int, to: DType) -> int:
        key = (src, to)
        if key not in self.casts:
            self.casts[key] = self.g.add_node(Op("Cast", get("Cast").make_attrs(to=to)),
                                              [src], self.g.shape(src).with_dtype(to))
        return self.casts[key]

    def operands(self, node, target: DType) -> list:
        out = []
        for i in node.inputs:
            src = self.ids[i]
            dt = self.g.shape(src).dtype
            out.append(src if dt not in AMP_FLOATS or dt == target else self.cast(src, target))
        return out

    def emit(self, node, ins, shape) -> None:
        self.ids[node.id] = self.g.add_node(node.op, ins, shape, node.name, node.origin)

    def node(self, node) -> None:
        kind, dt = node.kind, node.shape.dtype
        if kind in SCALED:
            return self.emit(node, self.operands(node, F32) if kind != "ScaledMatMul"
                             else [self.ids[i] for i in node.inputs], node.shape)
        cat = category(kind)
        if cat == BOUNDARY or (kind == "Cast" and node.attrs.to not in AMP_FLOATS):
            return self.emit(node, [self.ids[i] for i in node.inputs], node.shape)
        target = node.attrs.to if kind == "Cast" else precision_for(self.policy, cat)
        if kind in FORCE_F32 or has_bodies(node):
            target = F32
        shape = node.shape.with_dtype(target) if dt in AMP_FLOATS else node.shape
        ins = self.operands(node, target)
        if target != F32 and not _accepts(node, [self.g.shape(i) for i in ins], shape):
            target, shape = F32, node.shape.with_dtype(F32) if dt in AMP_FLOATS else node.shape
            ins = self.operands(node, F32)
            if self.log is not None:
                self.log.note("auto_mixed_precision", f"%{node.id} {kind} kept in f32: it "
                                                      "does not accept the policy's dtype")
        self.emit(node, ins, shape)

    def run(self) -> Graph:
        for n in self.old.nodes:
            self.node(n)
        outs = []
        for o in self.old.outputs:
            src = self.ids[o]
            dt = self.g.shape(src).dtype
            outs.append(self.cast(src, F32) if dt in (F16, BF16) else src)
        self.g.set_outputs(outs)
        return self.g


@graph_pass("auto_mixed_precision")
def auto_mixed_precision(graph: Graph, policy="AlwaysF32", log: PassLog | None = None) -> Graph:
    """``graph`` with each float node at the precision ``policy`` gives its category, Casts
    at the boundaries and f32 outputs (the same object for ``AlwaysF32``)."""
    if policy == "AlwaysF32":
        return graph
    precision_for(policy, COMPUTE)          # an unknown policy fails before any work
    out = _Amp(graph, policy, log).run()
    if log is not None:
        n = sum(1 for n in out.nodes if n.kind == "Cast") - \
            sum(1 for n in graph.nodes if n.kind == "Cast")
        log.note("auto_mixed_precision", f"@{graph.name} policy {policy}: {n} Cast(s) added")
    return out


__all__ = ["CATEGORY", "FORCE_F32", "POLICIES", "auto_mixed_precision", "category",
           "precision_for"]
