"""How each op kind becomes a Step of the CUDA plan.

A family file registers ``@lowers("Kind", dtypes=..., path=..., reason=...)`` functions
``lower(node, ins: list[Shape], ctx: LowerCtx) -> Step``. Lowering only renders and
records: a Step holds the launches it will make (kernel + argument types, for the PTX
check) and a host function ``fn(out, *ins)`` over flat device arrays that runs them.
Nothing here touches a GPU, so every kernel can be rendered and compiled to PTX without
one. The backend's declared op table is exactly what is registered here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...ir.dtype import DType
from ..lowering_table import LoweringTable, register_leaves

INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)
FLOATS = (DType.F32, DType.F64)
SIXTEEN = (DType.F16, DType.BF16)
KERNEL_DTYPES = FLOATS + INTS + (DType.BOOL,)
ALL_REAL = KERNEL_DTYPES + SIXTEEN
SIXTEEN_NOTE = "f16/bf16 stay 16-bit on the device and compute in f32/f64 inside kernels"

TABLE = LoweringTable("cuda", __package__, (
    "lower_elementwise",
    "lower_reduce",
    "lower_norm",
    "lower_select",
    "lower_linalg",
    "lower_attention",
    "lower_conv",
    "lower_index",
    "lower_scatter",
    "lower_movement",
    "lower_control",
    "lower_backward_norm",
    "lower_backward_nn",
    "lower_backward_scan",
    "lower_fake_quant",
    "lower_fused",
    "lower_quant",
    "lower_quant_dense",
    "lower_quant_int",
    "lower_random",
    "lower_sample",
    "lower_sort",
    "lower_kv",
    "lower_sequence",
    "lower_conv3d",
    "lower_spectral",
    "lower_mel",
    "lower_complex",
    "lower_host",
))
LOWERINGS = TABLE.entries


def lowers(kind: str, dtypes=ALL_REAL, path: str = "native", reason: str = ""):
    """Register the lowering of ``kind`` for node output dtypes ``dtypes``."""
    return TABLE.lowers(kind, dtypes, path, reason)


@dataclass
class Step:
    """``fn(out, *ins)`` writes the node's flat device buffer from its inputs' buffers.

    ``launches`` are the kernels it runs (with their argument types); ``fallible`` steps
    may set the plan's error word (bad index, integer division by zero). When ``returns``
    is True, ``fn(*ins)`` returns the output device array instead (control flow).
    """

    fn: Callable
    launches: list = field(default_factory=list)
    fallible: bool = False
    returns: bool = False
    note: str = ""


class ErrorWord:
    """The plan's device error word, allocated on first use (lowering needs no device)."""

    def __init__(self):
        self._dev = None

    def get(self):
        if self._dev is None:
            import numpy as np

            from .device import ERR_CLEAR, import_cuda

            self._dev = import_cuda().to_device(np.array([ERR_CLEAR], np.int32))
        return self._dev


@dataclass
class LowerCtx:
    """What a lowering may use: the node, its graph, options, the plan's error word and
    a body compiler (control flow)."""

    node: object
    graph: object
    options: object = None
    err: ErrorWord = field(default_factory=ErrorWord)
    compile_body: Callable | None = None

    @property
    def tag(self) -> int:
        """The number a failing kernel of this node writes (its node id)."""
        return self.node.id


def load_families() -> dict:
    return TABLE.load()


register_leaves(TABLE)
