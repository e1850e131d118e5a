"""Targeted cases that reach the kernel paths and bug classes the generic cases miss.

Each exists because a planted fault (``backends/fault_catalogue/``) passed the suite
without it: a parallel elementwise loop (≥ 2^15 elements), a fused chain of three or more
steps, a broadcast over a middle size-1 axis, a LayerNorm with a large common offset, a
transpose large enough for the tiled kernel (≥ 256 KiB), rows long enough for OpenCL's
segmented reduction and scan (K ≥ 65,536) and numba-cpu's chunked parallel reduction
(K ≥ 262,144), an all-negative Max and a variance near eps. All are tagged ``power``.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .rng import CounterRNG

F32 = np.float32


def _rng(seed: int, kind: str):
    return CounterRNG(seed, f"power:{kind}")


def _activation(seed: int) -> list:
    from ..ops.elementwise import ActivationAttrs
    from .cases import Spec

    x = _rng(seed, "Activation").standard_normal(40_000).astype(F32)
    return [Spec("Activation", ActivationAttrs(op), (x,), ("power", "parallel"),
                 source=f"power:{op}-parallel") for op in ("Sigmoid", "Exp")]


def _binary(seed: int) -> list:
    from ..ops._elementwise_binary import BinaryAttrs
    from .cases import Spec

    r = _rng(seed, "Binary")
    out = []
    for a, b in (((3, 1, 4), (3, 2, 4)), ((2, 1, 3, 5), (2, 4, 3, 5)),
                 ((4, 1, 1, 6), (4, 3, 2, 6))):
        x = r.standard_normal(a).astype(F32)
        y = r.standard_normal(b).astype(F32)
        out.append(Spec("Binary", BinaryAttrs("Add"), (x, y), ("power", "broadcast",
                                                               "middle-size-1"),
                        source=f"power:middle-broadcast{a}"))
    return out


def _region(seed: int) -> list:
    from ..ops.region import Input, Step, activation, binary, encode_region
    from .cases import Spec

    r = _rng(seed, "ElementwiseRegion")
    x, y, z = (r.standard_normal((3, 5)).astype(F32) for _ in range(3))
    chain = [binary("Add", Input(0), Input(1)),          # s0
             binary("Mul", Step(0), Input(2)),           # s1
             activation("Tanh", Step(1)),                # s2 reads s1
             binary("Sub", Step(2), Step(0)),            # s3 reads s2 and s0
             binary("Mul", Step(3), Step(1))]            # s4 reads s3 and s1
    shapes = [Shape((3, 5), DType.F32)] * 3
    out = []
    for n in (3, 5):
        attrs = encode_region(chain[:n], shapes)
        out.append(Spec("ElementwiseRegion", attrs, (x, y, z), ("power", "chain"),
                        source=f"power:chain-{n}"))
    # 16-bit steps: (x + y) - x with y far below x's half ulp only survives if the sum
    # is rounded to half before the subtraction reads it
    big = (1 + r.random((4, 33))).astype(np.float16)
    small = (1e-4 * (1 + r.random((4, 33)))).astype(np.float16)
    cancel = [binary("Add", Input(0), Input(1)), binary("Sub", Step(0), Input(0))]
    attrs = encode_region(cancel, [Shape((4, 33), DType.F16)] * 2)
    out.append(Spec("ElementwiseRegion", attrs, (big, small), ("power", "f16-steps"),
                    source="power:f16-steps"))
    return out


def _layernorm(seed: int) -> list:
    from ..ops.normalization import AxisNormAttrs
    from .cases import Spec

    r = _rng(seed, "LayerNorm")
    x = (1e4 + r.standard_normal((4, 256))).astype(F32)
    g, b = r.standard_normal(256).astype(F32), r.standard_normal(256).astype(F32)
    tiny = (3.0 + 1e-3 * r.standard_normal((4, 64))).astype(F32)
    gt, bt = np.ones(64, F32), np.zeros(64, F32)
    cols = (1e4 + r.standard_normal((2, 256, 9))).astype(F32)
    return [Spec("LayerNorm", AxisNormAttrs(-1, 1e-5), (x, g, b), ("power", "offset"),
                 source="power:large-offset"),
            Spec("LayerNorm", AxisNormAttrs(1, 1e-5), (cols, g, b), ("power", "offset"),
                 source="power:large-offset-middle-axis"),
            Spec("LayerNorm", AxisNormAttrs(-1, 1e-5), (tiny, gt, bt), ("power", "tiny-var"),
                 source="power:variance-near-eps")]


def _transpose(seed: int) -> list:
    from ..ops.movement import TransposeAttrs
    from .cases import Spec

    r = _rng(seed, "Transpose")
    x = r.standard_normal((320, 260)).astype(F32)
    y = r.standard_normal((64, 32, 40)).astype(F32)          # inner axis stays contiguous
    return [Spec("Transpose", TransposeAttrs((1, 0)), (x,), ("power", "above-tile", "tiled"),
                 source="power:tiled-transpose"),
            Spec("Transpose", TransposeAttrs((1, 0, 2)), (y,), ("power", "above-tile", "parallel"),
                 source="power:parallel-move")]


def _reduce(seed: int) -> list:
    from ..ops.reduction import ReduceAttrs
    from .cases import Spec

    r = _rng(seed, "Reduce")
    # a mean of 1: a dropped row or segment moves the sum by thousands, which zero-mean
    # noise would not (the reduction contract allows c·eps·K·Σ|x|)
    x = (1 + r.standard_normal((2, 70_001))).astype(F32)
    neg = -np.abs(r.standard_normal((3, 5))).astype(F32) - 0.5
    # the mass sits in the last 64 Ki chunk: a dropped last partial is far outside the
    # reduction contract's c·eps·K·Σ|x| (which a dropped partial of noise stays within)
    long = r.standard_normal((1, 270_001))
    long[0, 4 << 16:] += 100.0
    long = long.astype(F32)
    return [Spec("Reduce", ReduceAttrs("Sum", (1,), False), (x,), ("power", "segmented"),
                 source="power:segmented-sum"),
            Spec("Reduce", ReduceAttrs("Sum", (1,), False), (long,), ("power", "chunked"),
                 source="power:chunked-sum"),
            Spec("Reduce", ReduceAttrs("Max", (1,), False), (neg,), ("power", "negative"),
                 source="power:all-negative-max")]


def _cumsum(seed: int) -> list:
    from ..ops.reduction import CumAttrs
    from .cases import Spec

    x = _rng(seed, "Cumsum").standard_normal((1, 70_001)).astype(F32)
    return [Spec("Cumsum", CumAttrs(1, False), (x,), ("power", "segmented"),
                 source="power:segmented-scan")]


BY_KIND = {"Activation": _activation, "Binary": _binary, "ElementwiseRegion": _region,
           "LayerNorm": _layernorm, "Transpose": _transpose, "Reduce": _reduce,
           "Cumsum": _cumsum}


@functools.lru_cache(maxsize=None)
def _tables() -> tuple:
    """``BY_KIND`` here and of every ``_cases_power_*`` module (one per kernel family), in
    module-name order."""
    from . import __path__ as here

    names = sorted(m.name for m in pkgutil.iter_modules(here)
                   if m.name.startswith("_cases_power_"))
    return (BY_KIND, *(importlib.import_module(f"{__package__}.{n}").BY_KIND for n in names))


def _generators(kind: str) -> list:
    return [t[kind] for t in _tables() if kind in t]


def power_cases(kind: str, seed: int) -> list:
    """The targeted Cases of ``kind`` (empty for kinds without any); 16-bit chains are held
    bit-exactly to the oracle's per-step rounding."""
    import dataclasses

    from .accuracy import exact
    from .cases import spec_case

    out = []
    for spec in (s for make in _generators(kind) for s in make(seed)):
        case = spec_case(spec, seed)
        if "f16-steps" in spec.tags:
            case = dataclasses.replace(case, accuracy=exact(
                per_step=True, reason="each 16-bit step rounds to its dtype, as the spec"))
        out.append(case)
    return out
