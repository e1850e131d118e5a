"""Targeted cases for the indexing, selection and loop kernels the generic cases miss.

Each exists because a planted fault (``backends/fault_catalogue/numba_cpu_index.py``)
passed the suite without it: TopK past the candidate buffer (k > 32, so the row is
sorted) over a row full of ties, which only a stable sort orders as the oracle, and a
While over 16-bit values (which compiled loops cannot hold, so the host drives it) whose
predicate is a negative number, which counts as true like any non-zero value. All are
tagged ``power``.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .rng import CounterRNG


def _topk(seed: int) -> list:
    from ..ops.opdef import get
    from .cases import Spec

    r = CounterRNG(seed, "power:TopK")
    # 48 values from 6 levels: every rank past the first few is a tie broken by index
    x = np.floor(r.random((2, 48)) * 6).astype(np.float32)
    return [Spec("TopK", get("TopK").attrs(40), (x,), ("power", "ties", "sort"),
                 Shape((2, 40), DType.F32), source="power:topk-sorted-ties")]


def _signed_countdown(dt: DType, limit: float):
    """While attrs over (acc [3], i []): while i - limit (non-zero, negative until the
    end): acc *= 2, i += 1."""
    from ..ops._control_bodies import binary, constant, make_body
    from ..ops.control import WhileAttrs

    sa, si = Shape([3], dt), Shape([], dt)
    cond = make_body("cond", [sa, si],
                     lambda g, acc, i: binary(g, "Sub", i, constant(g, limit, dt)))
    body = make_body("body", [sa, si], lambda g, acc, i: [
        binary(g, "Mul", acc, constant(g, 2.0, dt)), binary(g, "Add", i, constant(g, 1.0, dt))])
    return WhileAttrs(cond, body, None)


def _while(seed: int) -> list:
    from .cases import Spec

    acc = np.array([1, -2, 0.5], np.float16)
    out = []
    for start, limit in ((0.0, 4.0), (-2.0, 3.0)):
        attrs = _signed_countdown(DType.F16, limit)
        out.append(Spec("While", attrs, (acc, np.float16(start)),
                        ("power", "host-loop", "signed-predicate"),
                        source=f"power:while-signed-predicate-{start:g}-{limit:g}"))
    return out


BY_KIND = {"TopK": _topk, "While": _while}
