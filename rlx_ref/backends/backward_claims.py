"""Which backward (training) kinds a kernel backend claims through their decompositions,
and for which dtypes: those whose decomposed products every kernel backend lowers natively
(``passes/decompose_backward_*``; ``tests/test_ops_backward_nn.py`` checks each backend)."""
from __future__ import annotations

from ..ir.dtype import DType

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)

# kind -> dtypes; the reason names what the decomposition runs instead of a kernel
DECOMPOSED = {
    "RopeBackward": (FLOATS, "Rope with the sin table negated"),
    "CumsumBackward": (FLOATS + (DType.I32, DType.I64), "Reverse, Cumsum, Reverse"),
    "GatherBackward": (FLOATS + INTS, "Transpose and Reshape around a ScatterAdd"),
    "MaxPool2dBackward": (FLOATS, "Pool Max, first-maximum masks per tap, one ScatterAdd"),
    "Conv2dBackwardInput": (FLOATS, "ConvTranspose2d with the forward geometry"),
    "Conv2dBackwardWeight": (FLOATS, "Conv of x and dy over the batch, per group"),
    "SoftmaxCrossEntropyWithLogits": (FLOATS, "Reduce log-sum-exp minus the label's logit"),
    "SoftmaxCrossEntropy": (FLOATS, "Reduce log-sum-exp minus Σ targets·logits"),
    "SoftmaxCrossEntropyBackward": (FLOATS, "Softmax minus a Compare-built one-hot"),
    "AttentionBackward": (FLOATS, "recomputed scores: MatMul, Where mask, Softmax, MatMul"),
    "AttentionBackwardAll": (FLOATS, "AttentionBackward's primitives, once for dQ, dK, dV"),
}


def claim(table) -> None:
    """Declare every kind of ``DECOMPOSED`` on ``table`` as decomposed."""
    for kind, (dtypes, how) in DECOMPOSED.items():
        table.decomposed((kind,), dtypes, f"no kernel: decomposed into {how}")
