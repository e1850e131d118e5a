"""Cases that reach every declared kernel variant.

Two sets. ``lowered_cases``: copies of default cases of every kind a threshold-selected
variant serves, tagged ``lowered-thresholds``; the runner compiles them with every
threshold at its floor, so small inputs take the parallel, tiled, chunked and segmented
kernels (the same selection logic, at CI cost). ``large_cases``: a few cases per
threshold above its real default value, tagged ``large`` (``--tier full`` only).
"""
from __future__ import annotations

import numpy as np

from ..backends import variants
from .rng import CounterRNG

LARGE_TAG = "large"
PER_KIND = 6            # lowered copies per kind (distinct shapes and attributes first)
PER_EW_KIND = 3         # ... per elementwise kind (one threshold, no shape-led choice)
_EW = {"Activation", "Binary", "Compare", "Cast", "StopGradient", "Where", "Fma", "Clamp"}


def gated_kinds() -> set:
    """Kinds some backend picks a variant for by a size threshold."""
    return {k for b in variants.backends() for v in variants.declared(b).values()
            if v.threshold for k in v.kinds}


def _signature(case) -> tuple:
    g = case.graph
    node = g.nodes[g.outputs[0]]
    return (tuple(tuple(x.shape) for x in case.inputs.values()), repr(node.attrs))


def lowered_cases(cases: list, kinds=None) -> list:
    """Copies (tagged ``lowered-thresholds``) of up to PER_KIND default cases per gated
    kind, f32 first, distinct shapes and attributes first; error cases are left out."""
    from .cases import make_case

    gated = gated_kinds() if kinds is None else set(kinds)
    by_kind: dict = {}
    for c in cases:
        if c.op in gated and not c.expect_error and variants.LOWERED_TAG not in c.tags:
            by_kind.setdefault(c.op, []).append(c)
    out = []
    for op, group in by_kind.items():
        cap = PER_EW_KIND if op in _EW else PER_KIND
        group = sorted(group, key=lambda c: c.dtype != "f32")     # stable: f32 first
        picked, seen = [], set()
        for c in group:
            sig = _signature(c)
            if sig not in seen:
                seen.add(sig)
                picked.append(c)
        picked += [c for c in group if c not in picked]
        for c in picked[:cap]:
            copy = make_case(c.op, c.dtype, c.graph, c.inputs, c.tags + (variants.LOWERED_TAG,),
                             c.params, c.noncontiguous, c.seed, c.source + "+lowered")
            copy.accuracy = c.accuracy
            out.append(copy)
    return out


def _reach_specs(rng) -> list:
    """(kind, attrs, inputs, declared output, lowered too) for variants no sample's shape
    reaches: Convs with 8 channels per group and 1×1, TopK past both backends' candidate buffers,
    an integer product, and rows long enough to split (OpenCL's segments are whole
    32-element vector blocks, so rows of at most 32 never split)."""
    from ..ir.dtype import DType
    from ..ir.shape import Shape
    from ..ops.opdef import get

    ints = lambda *s: np.round(rng.standard_normal(s) * 3).astype(np.int32)
    conv = (_f32(rng, 1, 8, 5, 5), _f32(rng, 4, 8, 3, 3))
    one = (_f32(rng, 1, 3, 4, 4), _f32(rng, 5, 3, 1, 1))
    return [("Conv", get("Conv").attrs((3, 3)), conv, None, True),
            ("Conv", get("Conv").attrs((1, 1)), one, None, True),
            ("TopK", get("TopK").attrs(70), (_f32(rng, 3, 80),), Shape((3, 70), DType.F32),
             False),
            ("MatMul", None, (ints(4, 5), ints(5, 3)), None, True),
            ("Reduce", get("Reduce").attrs("Sum", (1,), False), (_f32(rng, 2, 100),), None,
             True),
            ("Cumsum", get("Cumsum").attrs(1, False), (_f32(rng, 2, 100),), None, True)]


def reach_cases(seed: int = 0, kinds=None) -> list:
    """Small cases for the shape-selected variants the samples miss (``_reach_specs``),
    plain and, where a threshold also selects, as ``lowered-thresholds`` copies."""
    from .cases import Spec, spec_case

    out = []
    for kind, attrs, inputs, decl, lowered in _reach_specs(CounterRNG(seed, "variants")):
        if kinds is not None and kind not in kinds:
            continue
        for tags in [("variants",)] + ([("variants", variants.LOWERED_TAG)] if lowered else []):
            out.append(spec_case(Spec(kind, attrs, tuple(inputs), tags, decl, (),
                                      "variants"), seed))
    return out


def _f32(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _large_specs(rng) -> list:
    """(kind, attrs, inputs): each past a default threshold of numba-cpu or opencl."""
    from ..ops.opdef import get

    a = lambda kind, *f: get(kind).attrs(*f)
    x = _f32(rng, 256, 384)                                     # 384 KiB, 98k elements
    return [
        ("Transpose", a("Transpose", (1, 0)), (x,)),             # tiled transpose
        ("Slice", a("Slice", 1, 0, 192, 2), (_f32(rng, 512, 384),)),  # parallel move
        ("Concat", a("Concat", 0), (x, x)),
        ("Binary", a("Binary", "Add"), (x, _f32(rng, 384))),     # parallel elementwise
        ("Reduce", a("Reduce", "Sum", (1,), False), (x,)),       # parallel rows
        ("Reduce", a("Reduce", "Sum", (0,), False), (x,)),       # parallel columns
        ("Reduce", a("Reduce", "Sum", (1,), False), (_f32(rng, 1, 1 << 19),)),  # chunked
        ("Cumsum", a("Cumsum", 1, False), (_f32(rng, 1, 1 << 17),)),  # segments
        ("Softmax", a("Softmax", -1), (x,)),
        ("LayerNorm", a("LayerNorm", -1, 1e-5), (x, _f32(rng, 384), _f32(rng, 384))),
        ("ArgMax", a("ArgMax", 1, False), (x,)),
        ("MatMul", None, (_f32(rng, 160, 128), _f32(rng, 128, 144))),  # BLAS row blocks
        ("Gather", a("Gather", 0), (x, rng.integers(0, 256, 200).astype(np.float32))),
    ]


def large_cases(seed: int = 0, kinds=None) -> list:
    """Cases tagged ``large`` above the real thresholds (those of ``kinds`` if given);
    ones whose attributes a kind does not accept are skipped with the oracle's verdict."""
    from .cases import Spec, oracle_accepts, spec_case

    rng = CounterRNG(seed, "large")
    out = []
    for kind, attrs, inputs in _large_specs(rng):
        if kinds is not None and kind not in kinds:
            continue
        case = spec_case(Spec(kind, attrs, tuple(inputs), (LARGE_TAG,), None, (),
                              "large"), seed)
        if oracle_accepts(case):
            out.append(case)
    return out
