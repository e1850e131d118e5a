"""ScanBackward and ScanBackwardXs: claimed through their decomposition into a reversed Scan
over body_vjp (``passes/decompose_backward_scan.py``), whose top-level products (Scan,
Reverse, Concat, Narrow, Reshape, Expand, Cast, Constant) this backend lowers natively;
the bodies' own kinds are lowered on their own."""
from __future__ import annotations

from ...ir.dtype import DType
from .lowering import TABLE

TABLE.decomposed(("ScanBackward", "ScanBackwardXs"), (DType.F32, DType.F64),
                 "no kernel: decomposed into a reversed Scan whose body inlines body_vjp")
