"""Region family, FKL-style closed fusions: TransformRegion (a chain of memory transforms)
and BatchElementwiseRegion (one ElementwiseRegion chain over several batch slices).

Both mean what RLX's ``DecomposeFusionRegions`` lowers them to (``_fused_forms``):
ResizeNearest2x nodes, and per slice a one-input ElementwiseRegion joined by a Concat on
axis 0. The chain codec, checks and step semantics are ElementwiseRegion's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import chain_accuracy
from ..ir.dtype import DType
from ..ir.shape import Shape
from . import _fused_forms as F
from ._fused_def import FUSED, register_fused
from .codec import U32, Enum, ListOf, TupleOf, attr
from .opdef import Caps, OpError, Sample, want
from .region import (CHAIN_STEP, MAX_INPUTS, OPERAND, PROLOGUE, ElementwiseRegionAttrs,
                     Input, activation, binary, cast, encode_region, step_op)

FLOATS = (DType.F32, DType.F64)
TRANSFORM_STEP = Enum("TransformStep", data={"ResizeNearest2x": OPERAND})


# ── TransformRegion ───────────────────────────────────────────────────────

@dataclass(frozen=True)
class TransformRegionAttrs:
    steps: tuple = attr(ListOf(TRANSFORM_STEP), doc="the transforms, applied in order")
    num_inputs: int = attr(U32, 1, doc="number of region inputs (operands)")


def _transform_rules(shapes, a):
    want(a.num_inputs == len(shapes), f"(C1) TransformRegion declares num_inputs="
                                      f"{a.num_inputs} but has {len(shapes)} operand(s)")
    want(len(a.steps) >= 1, "(C2) TransformRegion needs at least one step")
    for k, step in enumerate(a.steps):
        ok = isinstance(step, tuple) and len(step) == 2 and step[0] == "ResizeNearest2x"
        want(ok and step[1] == ("Input", 0),
             f"(C2) step {k} is {step!r}; RLX's only transform is ResizeNearest2x(Input(0)) "
             "(each step reads the previous step's result)")
    want(shapes[0].rank == 4, f"(C3) ResizeNearest2x needs an NCHW (rank 4) input, got "
                              f"{shapes[0]}")


register_fused(
    "TransformRegion", F.transform_region, TransformRegionAttrs, ("x",),
    "A fused chain of memory transforms on one NCHW input. RLX's only step is "
    "`ResizeNearest2x(Input(0))`, 2x nearest upsampling `out[n, c, y, x] = in[n, c, y // 2, "
    "x // 2]`; the steps apply in order, each to the previous step's result (k steps: "
    "`[N, C, 2^k·H, 2^k·W]`), as the fusion pass that builds it (from k chained "
    "ResizeNearest2x) and `DecomposeFusionRegions` read it.",
    ("C1: num_inputs is 1 and equals the operand count.",
     "C2: at least one step; every step is ResizeNearest2x(Input(0)).",
     "C3: the input is rank 4 (NCHW)."),
    lambda rng: _transform_samples(rng), FLOATS, caps=Caps.TRANSFORM | FUSED,
    rules=_transform_rules, family="region", loose=(), floats=False,
    notes="Every step names Input(0) although it reads the previous result: RLX's shape "
          "rule and decomposition ignore the operand, and its fusion pass always writes "
          "Input(0); other operands are rejected rather than guessed.")


def _transform_samples(rng):
    a1 = TransformRegionAttrs((("ResizeNearest2x", ("Input", 0)),), 1)
    a2 = TransformRegionAttrs((("ResizeNearest2x", ("Input", 0)),) * 2, 1)
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    up = x.repeat(2, 2).repeat(2, 3)
    return [
        Sample((x,), a1, expect=up, tags=("hand",)),
        Sample((x,), a2, expect=up.repeat(2, 2).repeat(2, 3), tags=("chain",)),
        Sample((rng.standard_normal((2, 3, 1, 3)).astype(np.float32),), a1, tags=("odd",)),
        Sample((np.arange(6, dtype=np.int32).reshape(1, 2, 3, 1),), a1, tags=("int",)),
        Sample((np.zeros((0, 2, 2, 2), np.float32),), a1, tags=("empty",)),
    ]


# ── BatchElementwiseRegion ────────────────────────────────────────────────

@dataclass(frozen=True)
class BatchElementwiseRegionAttrs:
    chain: tuple = attr(ListOf(CHAIN_STEP), doc="the steps, run on every slice")
    num_batch_inputs: int = attr(U32, doc="number of batch slices (operands)")
    scalar_input_mask: int = attr(U32, 0, doc="as ElementwiseRegion, for each slice")
    input_modulus: tuple = attr(TupleOf(*[U32] * MAX_INPUTS), (0,) * MAX_INPUTS,
                                doc="as ElementwiseRegion, for each slice")
    prologue: str = attr(PROLOGUE, "None", doc="transform applied to each slice first")
    prologue_input: int = attr(U32, 0, doc="always 0 (each slice is input 0 of its chain)")


def _batch_names(a):
    return tuple(f"slice{i}" for i in range(a.num_batch_inputs))


def _batch_rules(shapes, a):
    want(a.num_batch_inputs >= 1, "(C1) BatchElementwiseRegion needs at least one slice")
    want(a.prologue_input == 0, f"(C3) prologue_input must be 0 (each slice is its chain's "
                                f"input 0), got {a.prologue_input}")
    first = shapes[0]
    for i, s in enumerate(shapes):
        want(s.rank >= 1 and s.dims[1:] == first.dims[1:] and s.dtype == first.dtype,
             f"(C2) slice {i} {s} must match slice 0 {first} in every dim but axis 0 "
             "(the slices are joined on axis 0)")


def _batch_attrs(chain, xs, prologue="None"):
    """Attrs for ``chain`` on every slice of ``xs`` (mask and moduli from slice 0)."""
    inner = encode_region(chain, [Shape(xs[0].shape, DType.of(xs[0]))], prologue=prologue)
    return BatchElementwiseRegionAttrs(tuple(chain), len(xs), inner.scalar_input_mask,
                                       inner.input_modulus, prologue, 0)


def batch_samples(rng):
    f = np.float32
    relu = [activation("Relu", Input(0))]
    mixed = [binary("Mul", Input(0), Input(0)), activation("Tanh", Input(0)),
             binary("Add", ("Step", 0), ("Step", 1))]
    s = [rng.standard_normal((1, 2, 2, 3)).astype(f) for _ in range(3)]
    two = [np.array([[-1.0, 2.0]], f), np.array([[3.0, -4.0]], f)]
    uneven = [rng.standard_normal((2, 5)).astype(f), np.ones((1, 5), f)]
    to16 = [activation("Relu", Input(0)), cast(DType.F16, ("Step", 0))]
    return [
        Sample(tuple(two), _batch_attrs(relu, two), expect=np.array([[0, 2], [3, 0]], f),
               tags=("hand",)),
        Sample(tuple(s), _batch_attrs(mixed, s), tags=("three-slices",)),
        Sample(tuple(s[:2]), _batch_attrs(relu, s[:2], "ResizeNearest2x"),
               tags=("prologue",)),
        Sample(tuple(s[:2]), _batch_attrs(to16, s[:2]), tags=("cast", "f16")),
        Sample(tuple(uneven), _batch_attrs(relu, uneven), tags=("uneven-slices",)),
    ]


def _check_inner(shapes, a):
    """Each slice's region obeys ElementwiseRegion's rules (C4)."""
    from .opdef import get

    inner = ElementwiseRegionAttrs(a.chain, 1, a.scalar_input_mask, a.input_modulus,
                                   a.prologue, 0)
    try:
        get("ElementwiseRegion").check([shapes[0]], inner, None)
    except OpError as e:
        raise OpError(f"(C4) the slices' chain: {e}") from None


register_fused(
    "BatchElementwiseRegion", F.batch_region, BatchElementwiseRegionAttrs, _batch_names,
    "One ElementwiseRegion chain applied to each of `num_batch_inputs` batch slices "
    "(horizontal fusion), the results joined on axis 0: `Concat_0(region(slice_0), ..., "
    "region(slice_{n-1}))`. Each slice is input 0 of a one-input region with this "
    "payload's chain, `scalar_input_mask` and `input_modulus`; with prologue "
    "ResizeNearest2x each slice is 2x nearest-upsampled first. Step semantics are "
    "ElementwiseRegion's.",
    ("C1: at least one slice; num_batch_inputs equals the operand count.",
     "C2: the slices share one dtype and every dim but axis 0.",
     "C3: prologue_input is 0.",
     "C4: the chain with the mask and moduli is a valid one-input ElementwiseRegion "
     "(ElementwiseRegion C1-C8) on each slice."),
    batch_samples, FLOATS, caps=Caps.ELEMENTWISE | FUSED, family="region",
    rules=lambda s, a: (_batch_rules(s, a), _check_inner(s, a)), loose=(),
    floats=False, input_names=("slice",),
    # every output element is one chain evaluation on one slice: ElementwiseRegion's contract
    accuracy=lambda a, s, dt: chain_accuracy([step_op(st)[:2] for st in a.chain], dt),
    notes="RLX's decomposition declares every slice result `[1, C, H, W]` (its fusion "
          "pass builds slices of one batch row); slices of any rank and length along "
          "axis 0 are accepted here, each region keeping its slice's shape.")
