"""How each op kind becomes a Step of the Numba CPU plan.

A family file registers ``@lowers("Kind", dtypes=...)`` functions
``lower(node, ins: list[Shape], ctx: LowerCtx) -> Step``. A Step runs compiled kernels on
input arrays and writes the node's preallocated output buffer. The declared op table of
the backend is exactly what is registered here (kind → dtypes), with the path and reason
for anything not run natively.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...ir.dtype import DType
from ..lowering_table import LoweringTable, register_leaves

NUMERIC = tuple(d for d in DType if d.is_float or d.is_int) + (DType.BOOL,)
FLOATS = (DType.F32, DType.F64)
KERNEL_DTYPES = (DType.F32, DType.F64, DType.I8, DType.I16, DType.I32, DType.I64, DType.U8,
                 DType.U32, DType.BOOL)


TABLE = LoweringTable("numba-cpu", __package__, (
    "lower_elementwise",
    "lower_linalg",
    "lower_linalg_decomp",
    "lower_attention",
    "lower_conv",
    "lower_conv3d",
    "lower_movement",
    "lower_reduce",
    "lower_norm",
    "lower_index",
    "lower_control",
    "lower_backward_norm",
    "lower_backward_nn",
    "lower_backward_scan",
    "lower_fake_quant",
    "lower_fused",
    "lower_fused_conv",
    "lower_quant",
    "lower_quant_mlx",
    "lower_quant_int",
    "lower_spd",
    "lower_sort",
    "lower_random",
    "lower_splat",
    "lower_sequence",
    "lower_spectral",
    "lower_kv_histogram",
    "lower_spline",
    "lower_synth",
))
LOWERINGS = TABLE.entries


def lowers(kind: str, dtypes=KERNEL_DTYPES, path: str = "native", reason: str = ""):
    """Register the lowering of ``kind`` for node output dtypes ``dtypes``."""
    return TABLE.lowers(kind, dtypes, path, reason)


def accumulates(kind: str, dtypes, in_: str = "f64", ops=(), when: str = "",
                reason: str = ""):
    """Promise that ``kind`` accumulates ``dtypes`` in ``in_`` (``LoweringTable.accumulates``)."""
    return TABLE.accumulates(kind, dtypes, in_, ops, when, reason)


@dataclass(frozen=True)
class JitCall:
    """How compiled code (a loop driver, ``loop_driver.py``) runs a step without Python.

    The call is ``fn(<args>, <consts>)``: ``fn`` an ``njit`` function, ``args`` source
    templates over ``{out}`` (the node's output) and ``{0}``, ``{1}``, ... (its operands),
    all C-contiguous arrays of the node's static shapes; ``consts`` values fixed at
    lowering (passed as arguments), appended after ``args`` unless ``tail`` is False, when
    the templates place them as ``{c0}``, ``{c1}``, ... Only steps whose host ``fn`` does
    exactly this (no conversion, copy or check left on the host) declare one.
    """

    fn: Callable
    args: tuple
    consts: tuple = ()
    tail: bool = True


@dataclass
class Step:
    """Run ``fn(out, *inputs)``; ``kernels`` are the compiled kernels it uses (for sources).

    ``fn`` writes the output buffer in place. When ``returns`` is True it instead returns
    the output array (host steps whose size is only known at run time). ``jit``, when set,
    is the same work as calls from compiled code (one JitCall, or a tuple run in order).
    """

    fn: Callable
    kernels: list = field(default_factory=list)
    returns: bool = False
    note: str = ""
    jit: JitCall | tuple | None = None


@dataclass
class LowerCtx:
    """What a lowering may use: the node, the graph, options and a body compiler."""

    node: object
    graph: object
    options: object = None
    compile_body: Callable | None = None    # graph -> a runnable plan (control flow)


def load_families() -> dict:
    """Import the lowering family files (each registers its kinds)."""
    return TABLE.load()


register_leaves(TABLE)
