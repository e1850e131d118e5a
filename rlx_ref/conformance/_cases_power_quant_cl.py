"""Targeted cases for the kernel paths of OpenCL's dequantizing products that the samples
(at most 3 x rows) miss, and for the schemes those kernels leave to the host.

More than 4 x rows take the tiled kernels (GPU style) or, on a CPU where not one x panel
fits the scratch share, the GEMV kernels over groups of 4 rows (``rows>4``); 200 rows beside
a narrow weight give the CPU tiled kernel room for its panels (``panels``); an expert run
of 7 tokens takes those paths through the token permutation. GGUF NVFP4 has no OpenCL
decoder: its cases check the declared host path. All are tagged ``power``.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .rng import CounterRNG

F32 = np.float32


def _rng(seed: int, kind: str):
    return CounterRNG(seed, f"power-quant-cl:{kind}")


def _packed(r, name: str, n: int, k: int, experts: int = 1) -> np.ndarray:
    from ..quant import quantize

    return quantize(r.standard_normal((experts, n, k)).astype(F32), name)


def _out(*dims) -> Shape:
    return Shape(dims, DType.F32)


def _dequant_matmul(seed: int) -> list:
    from ..ops.quant_matmul import SchemeAttrs
    from .cases import Spec

    r = _rng(seed, "DequantMatMul")
    out = []
    for rlx, name, m, k, n, tag in (("GgufQ4_0", "Q4_0", 9, 64, 5, "rows>4"),
                                    ("GgufQ4K", "Q4_K", 9, 256, 3, "rows>4"),
                                    ("GgufQ4_0", "Q4_0", 200, 32, 32, "panels"),
                                    ("GgufQ4K", "Q4_K", 200, 256, 8, "panels"),
                                    ("GgufNVFP4", "NVFP4", 2, 64, 3, "host-scheme")):
        x = r.standard_normal((m, k)).astype(F32)
        out.append(Spec("DequantMatMul", SchemeAttrs(rlx), (x, _packed(r, name, n, k)),
                        ("power", tag, rlx), _out(m, n), source=f"power:{name}-{m}x{k}x{n}"))
    return out


def _dequant_grouped(seed: int) -> list:
    from ..ops.quant_matmul import SchemeAttrs
    from .cases import Spec

    r = _rng(seed, "DequantGroupedMatMul")
    ids = F32([1, 1, 0, 1, 1, 1, 0, 1, 1])            # expert 1: a run of 7 tokens
    out = []
    for rlx, name, k, tag in (("GgufQ4_0", "Q4_0", 32, "rows>4"),
                              ("GgufNVFP4", "NVFP4", 64, "host-scheme")):
        x = r.standard_normal((ids.size, k)).astype(F32)
        out.append(Spec("DequantGroupedMatMul", SchemeAttrs(rlx),
                        (x, _packed(r, name, 5, k, experts=2), ids), ("power", tag, rlx),
                        _out(ids.size, 5), source=f"power:{name}-grouped"))
    return out


def _moe_weights(seed: int) -> list:
    from ..ops.quant_matmul import SchemeAttrs
    from .cases import Spec

    r = _rng(seed, "DequantMoEWeights")
    return [Spec("DequantMoEWeights", SchemeAttrs("GgufNVFP4"),
                 (_packed(r, "NVFP4", 3, 64, experts=2),), ("power", "host-scheme",
                                                            "GgufNVFP4"),
                 _out(2, 64, 3), source="power:NVFP4-moe-weights")]


BY_KIND = {"DequantMatMul": _dequant_matmul, "DequantGroupedMatMul": _dequant_grouped,
           "DequantMoEWeights": _moe_weights}
