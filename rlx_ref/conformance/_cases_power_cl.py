"""Targeted cases for the planted faults of OpenCL's CPU-style kernels
(``backends/fault_catalogue/opencl_cpu.py``) that the generic cases miss.

Attention keys in three blocks of eight (the CPU kernel's vector exp width) whose scores
grow along the sequence, so a later block raises a row's running max and the online
softmax must rescale what it has summed; f64 one-element operands with bits below f32's
precision (the generic f64 cases are f32 samples re-emitted, exact in f32). All are
tagged ``power``.
"""
from __future__ import annotations

import numpy as np

from .rng import CounterRNG

F32 = np.float32


def _attention(seed: int) -> list:
    from ..ops.attention import AttentionAttrs
    from .cases import Spec

    r = CounterRNG(seed, "power-cl:Attention")
    q = r.standard_normal((1, 5, 8)).astype(F32)
    grow = np.linspace(0.5, 3.0, 24)[None, :, None]       # later keys score larger
    k = (r.standard_normal((1, 24, 8)) * grow).astype(F32)
    v = r.standard_normal((1, 24, 8)).astype(F32)
    return [Spec("Attention", AttentionAttrs(2, 4), (q, k, v), ("power", "key-blocks"),
                 source="power:attention-key-blocks")]


def _binary(seed: int) -> list:
    from ..ops._elementwise_binary import BinaryAttrs
    from .cases import Spec

    x = CounterRNG(seed, "power-cl:Binary").standard_normal((5, 7))
    third = np.array(1.0 / 3.0)                     # 0-d f64, not exact in f32
    return [Spec("Binary", BinaryAttrs(op), (x, third), ("power", "scalar-f64"),
                 source=f"power:f64-scalar-{op}") for op in ("Mul", "Add")]


BY_KIND = {"Attention": _attention, "Binary": _binary}
