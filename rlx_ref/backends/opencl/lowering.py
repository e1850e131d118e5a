"""How each op kind becomes a Step of the OpenCL plan.

A family file registers ``@lowers("Kind", dtypes=...)`` functions
``lower(node, ins: list[Shape], ctx: LowerCtx) -> Step``. Lowering happens before the
program is built: a lowering asks ``ctx.kernel(source, name)`` for a kernel handle, and its
Step's ``bind(out, *ins)`` runs after the build with the node's device arrays, returning
the zero-argument launcher a run calls (buffers are fixed per plan, so kernel arguments are
set once). The declared op table is what is registered here, for the device's dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...ir.dtype import DType
from ..lowering_table import LoweringTable, register_leaves

INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)
BASE_DTYPES = (DType.F32,) + INTS + (DType.BOOL,)
FLOAT_DTYPES = (DType.F32, DType.F64)
SIXTEEN = (DType.F16, DType.BF16)     # stored as half/ushort, computed in float

C_TYPE = {DType.F32: "float", DType.F64: "double", DType.I8: "char", DType.I16: "short",
          DType.I32: "int", DType.I64: "long", DType.U8: "uchar", DType.U32: "uint",
          DType.BOOL: "uchar"}

# error codes a kernel writes to the plan's error word (code = node slot * 8 + reason)
ERR_INDEX, ERR_DIV0, ERR_NEG_POW, ERR_NAN_SORT = 1, 2, 3, 4
ERR_TEXT = {ERR_INDEX: "index out of range",
            ERR_DIV0: "integer division or modulo by zero",
            ERR_NEG_POW: "integer Pow with a negative exponent",
            ERR_NAN_SORT: "NaN logits or probabilities reach a sort (RLX's sort panics on NaN)"}

TABLE = LoweringTable("opencl", __package__, (
    "lower_elementwise",
    "lower_reduce",
    "lower_norm",
    "lower_linalg",
    "lower_attention",
    "lower_conv",
    "lower_movement",
    "lower_index",
    "lower_control",
    "lower_backward_norm",
    "lower_backward_nn",
    "lower_backward_scan",
    "lower_fake_quant",
    "lower_fused",
    "lower_quant",
    "lower_quant_int",
    "lower_random",
    "lower_sort",
    "lower_kv",
    "lower_conv3d",
    "lower_sequence",
    "lower_fft",
    "lower_host",           # last: declares every kind still without a kernel
))
LOWERINGS = TABLE.entries


def lowers(kind: str, dtypes=BASE_DTYPES + (DType.F64,), path: str = "native",
           reason: str = ""):
    """Register the lowering of ``kind`` for ``dtypes`` (f64 is claimed only on devices
    with cl_khr_fp64: the backend filters the table by device)."""
    return TABLE.lowers(kind, dtypes, path, reason)


def accumulates(kind: str, dtypes, in_: str = "f64", ops=(), when: str = "",
                reason: str = ""):
    """Promise that ``kind`` accumulates ``dtypes`` in ``in_`` (``LoweringTable.accumulates``)."""
    return TABLE.accumulates(kind, dtypes, in_, ops, when, reason)


@dataclass
class Step:
    """``bind(out, *ins) -> launcher``: called once per plan with the node's device
    arrays; the launcher enqueues the node's work on each run."""

    bind: Callable
    note: str = ""


@dataclass
class LowerCtx:
    """What a lowering may use: node, graph, device, options, kernels and sub-plans."""

    node: object
    graph: object
    device: object                  # DeviceInfo
    program: object                 # ProgramBuilder of the graph
    options: object = None
    errors: object = None           # the executable's ErrorWord
    err_code: int = 0               # this node's slot in the error word (times 8)
    compile_body: Callable | None = None    # graph -> SubPlan (control flow)
    queue: object = None

    def kernel(self, source: str, name: str):
        """A handle to kernel ``name`` of ``source``, usable once the program is built."""
        return self.program.add(source, name)

    def ctype(self, dt: DType) -> str:
        return C_TYPE[dt]


@dataclass
class Launch:
    """A bound kernel: enqueue it over ``gsize``/``lsize`` (run time)."""

    kernel: object
    gsize: tuple
    lsize: tuple | None = None
    extra: list = field(default_factory=list)


register_leaves(TABLE)
