"""Generated edge cases of the elementwise kinds: Activation and Binary per sub-op, Compare,
Cast, Where, Clamp, Fma (tiling tails, special values, domain edges, broadcasts, strides)."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ops.elementwise import ACTIVATIONS, BINARIES, COMPARES
from ..ops.opdef import get
from ._cases_values import (
    ACTIVATION_EDGES,
    BINARY_EDGES,
    LENGTHS,
    SPECIAL_CLASSES,
    as_dtype,
    int_extremes,
    length_tags,
    special_values,
)
from .cases import Spec
from .rng import CounterRNG

F32 = DType.F32
LOWP_LENGTHS = (7, 257)           # tails re-run in the other float dtypes
NC = ("non-contiguous",)


def floats_of(kind: str) -> list:
    """The float dtypes an op lists (all four when it lists none)."""
    listed = [t for t in get(kind).dtypes if t.is_float]
    return listed or [F32, DType.F64, DType.F16, DType.BF16]


def tiling_plan(kind: str):
    """(dtype, length) pairs: every length in f32, a few in the other float dtypes."""
    plan = [(F32, n) for n in LENGTHS]
    return plan + [(dt, n) for dt in floats_of(kind) if dt is not F32 for n in LOWP_LENGTHS]


def _rng(seed, *parts) -> CounterRNG:
    return CounterRNG(seed, "/".join(str(p) for p in parts))


def _z(rng, shape, dt=F32, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(dt.np)


# ── Activation ───────────────────────────────────────────────────────────────

_POSITIVE = ("Log", "Sqrt", "Rsqrt")


def _act_input(op, rng, shape, dt=F32):
    z = rng.standard_normal(shape) * 2
    if op in _POSITIVE:
        z = np.abs(z) + 0.25
    return z.astype(dt.np)


def activation_edges(seed: int) -> list[Spec]:
    A, out = get("Activation").attrs, []
    for op in ACTIVATIONS:
        a = A(op)
        for dt, n in tiling_plan("Activation"):
            x = _act_input(op, _rng(seed, "Activation", op, "tiling", dt, n), n, dt)
            out.append(Spec("Activation", a, (x,), length_tags(n), source="tiling"))
        for dt in floats_of("Activation"):
            out += [Spec("Activation", a, (special_values(dt, c),), (c,), source="specials")
                    for c in SPECIAL_CLASSES]
            if op in ACTIVATION_EDGES:
                out.append(Spec("Activation", a, (as_dtype(ACTIVATION_EDGES[op], dt),),
                                ("domain-edge",), source="domain"))
        r = _rng(seed, "Activation", op, "shape")
        out.append(Spec("Activation", a, (_act_input(op, r, (1, 1)),), ("size-1",),
                        source="shape"))
        out.append(Spec("Activation", a, (_act_input(op, r, (3, 10)),), NC, None, ("x0",),
                        "shape"))
    return out


# ── Binary and Compare ───────────────────────────────────────────────────────

def _binary_operands(op, rng, sa, sb, dt=F32):
    a, b = rng.standard_normal(sa) * 2, rng.standard_normal(sb)
    if op in ("Div", "Mod"):
        b = np.where(b < 0, b - 0.5, b + 0.5)
    elif op == "Pow":
        a = np.abs(a) + 0.1
    elif op in ("Shl", "Shr"):
        a, b = np.round(a * 50), rng.integers(0, 9, sb).astype(np.float64)
    return a.astype(dt.np), b.astype(dt.np)


def _grid(values: np.ndarray, k: int = 2) -> tuple:
    """Every k-tuple of ``values`` as k flat arrays (so all pairs of specials meet)."""
    mesh = np.meshgrid(*([values] * k), indexing="ij")
    return tuple(m.reshape(-1).copy() for m in mesh)


def _pair_edges(kind: str, op: str, seed: int, int_ok: bool, edges=()) -> list[Spec]:
    a_, out = get(kind).attrs(op), []
    for dt, n in tiling_plan(kind):
        ab = _binary_operands(op, _rng(seed, kind, op, "tiling", dt, n), n, n, dt)
        out.append(Spec(kind, a_, ab, length_tags(n), source="tiling"))
    for dt in floats_of(kind):
        out += [Spec(kind, a_, _grid(special_values(dt, c)), (c,), source="specials")
                for c in SPECIAL_CLASSES]
        if edges:
            pairs = np.array(edges, np.float64)
            out.append(Spec(kind, a_, (as_dtype(pairs[:, 0], dt), as_dtype(pairs[:, 1], dt)),
                            ("domain-edge",), source="domain"))
    if int_ok:
        for dt in (DType.I32, DType.U8):
            out.append(Spec(kind, a_, _grid(int_extremes(dt)), ("extremes", "int"),
                            source="specials"))
    r = _rng(seed, kind, op, "shape")
    out += [
        Spec(kind, a_, _binary_operands(op, r, (4, 1), (1, 5)), ("broadcast", "size-1"),
             source="shape"),
        Spec(kind, a_, _binary_operands(op, r, (), (3,)), ("0-d", "broadcast"),
             source="shape"),
        Spec(kind, a_, _binary_operands(op, r, (3, 10), (3, 10)), NC, None, ("x0", "x1"),
             "shape"),
        Spec(kind, a_, _binary_operands(op, r, (3, 10), (10,)), NC + ("broadcast",), None,
             ("x0", "x1"), "shape"),
    ]
    return out


_INT_SKIP = ("Div", "Mod", "Pow")      # integer division by zero / negative powers raise


def binary_edges(seed: int) -> list[Spec]:
    out = []
    for op, (_, _, f_int) in BINARIES.items():
        edges = BINARY_EDGES.get(op) or (BINARY_EDGES["BitAnd"] if op.startswith("Bit")
                                         else ())
        out += _pair_edges("Binary", op, seed, f_int is not None and op not in _INT_SKIP,
                           edges)
    return out


def compare_edges(seed: int) -> list[Spec]:
    from ._cases_values import ZERO_SIGN_PAIRS

    out = []
    for op in COMPARES:
        out += _pair_edges("Compare", op, seed, True, ZERO_SIGN_PAIRS)
    return out


# ── Cast ─────────────────────────────────────────────────────────────────────

_CAST_INT_EDGES = [2.5, -2.5, 0.99999994, -0.99999994, -0.5, 255.5, 256.0, -129.0,
                   2147483520.0, 2147483648.0, -2147483904.0, 4294967296.0, 1e30, -1e30]
_CAST_FLOAT_EDGES = [65504.0, 65519.99, 65520.0, -65520.0, 5.96e-8, 2.98e-8, 1.00390625,
                     1.01171875, 3.3895314e38, 3.4e38]
_INT_CASTS = {
    DType.I64: (F32, DType.F64, DType.F16, DType.I32, DType.U8),
    DType.I32: (DType.F16, DType.BF16, DType.I8, DType.U32),
    DType.U32: (DType.I32, F32), DType.I8: (DType.U8, DType.I64),
}


def cast_edges(seed: int) -> list[Spec]:
    C, out = get("Cast").attrs, []
    for dt, n in tiling_plan("Cast"):
        x = _z(_rng(seed, "Cast", "tiling", dt, n), n, dt, 100.0)
        to = DType.I32 if dt is F32 else F32
        out.append(Spec("Cast", C(to), (x,), length_tags(n), source="tiling"))
    floats = floats_of("Cast")
    for src in floats:
        targets = [t for t in floats if t is not src] + [DType.I32, DType.U8, DType.BOOL]
        for cls in SPECIAL_CLASSES:
            out += [Spec("Cast", C(to), (special_values(src, cls),), (cls,),
                         source="specials") for to in targets]
    for src, targets in _INT_CASTS.items():
        out += [Spec("Cast", C(to), (int_extremes(src),), ("extremes", "int"),
                     source="specials") for to in targets]
    for to in (DType.I32, DType.U8, DType.U32, DType.I64):
        out.append(Spec("Cast", C(to), (as_dtype(_CAST_INT_EDGES, DType.F64),),
                        ("domain-edge",), source="domain"))
    for to in (DType.F16, DType.BF16):
        out.append(Spec("Cast", C(to), (as_dtype(_CAST_FLOAT_EDGES, F32),),
                        ("domain-edge",), source="domain"))
    r = _rng(seed, "Cast", "shape")
    out.append(Spec("Cast", C(DType.F16), (_z(r, (1, 1)),), ("size-1",), source="shape"))
    for to in (DType.I32, DType.F16):
        out.append(Spec("Cast", C(to), (_z(r, (3, 10), scale=50.0),), NC, None, ("x0",),
                        "shape"))
    return out


# ── Where, Clamp, Fma ────────────────────────────────────────────────────────

def _cond(rng, shape):
    return rng.integers(0, 2, shape).astype(bool)


def where_edges(seed: int) -> list[Spec]:
    out = []
    for dt, n in tiling_plan("Where"):
        r = _rng(seed, "Where", "tiling", dt, n)
        out.append(Spec("Where", None, (_cond(r, n), _z(r, n, dt), _z(r, n, dt)),
                        length_tags(n), source="tiling"))
    for dt in floats_of("Where"):
        for cls in SPECIAL_CLASSES:
            v = special_values(dt, cls)
            cond = np.arange(v.size) % 2 == 0
            out.append(Spec("Where", None, (cond, v, v[::-1].copy()), (cls,),
                            source="specials"))
    numeric = as_dtype([np.nan, -0.0, 0.0, 1e-45, -np.inf, 2.0], F32)
    ones, zeros = np.ones(6, np.float32), np.zeros(6, np.float32)
    out.append(Spec("Where", None, (numeric, ones, zeros), ("domain-edge", "nan", "±0"),
                    source="domain"))
    r = _rng(seed, "Where", "shape")
    out += [
        Spec("Where", None, (_cond(r, (3, 1)), _z(r, (1, 4)), np.float32(-1.0)),
             ("broadcast", "size-1", "0-d"), source="shape"),
        Spec("Where", None, (_cond(r, (3, 10)), _z(r, (3, 10)), _z(r, (3, 10))), NC, None,
             ("x0", "x1", "x2"), "shape"),
    ]
    return out


def clamp_edges(seed: int) -> list[Spec]:
    C, out = get("Clamp").attrs, []
    for dt, n in tiling_plan("Clamp"):
        x = _z(_rng(seed, "Clamp", "tiling", dt, n), n, dt, 2.0)
        out.append(Spec("Clamp", C(-1.0, 1.0), (x,), length_tags(n), source="tiling"))
    for dt in floats_of("Clamp"):
        out += [Spec("Clamp", C(-1.0, 2.0), (special_values(dt, c),), (c,),
                     source="specials") for c in SPECIAL_CLASSES]
        zeros = as_dtype([-0.0, 0.0, np.nan, -1.0, 1.0], dt)
        out += [Spec("Clamp", C(lo, 0.0), (zeros,), ("domain-edge", "±0"), source="domain")
                for lo in (0.0, -0.0)]
    for lo, hi in ((-1.5, 2.5), (-3e9, 3e9)):
        out.append(Spec("Clamp", C(lo, hi), (int_extremes(DType.I32),), ("extremes", "int"),
                        source="specials"))
    out += _nonfinite_bound_specs(C)
    r = _rng(seed, "Clamp", "shape")
    out.append(Spec("Clamp", C(-0.5, 0.5), (_z(r, (1,)),), ("size-1",), source="shape"))
    out.append(Spec("Clamp", C(-0.5, 0.5), (_z(r, (3, 10)),), NC, None, ("x0",), "shape"))
    return out


# (lo, hi, tags): the text form prints NaN and ±inf alike (null), so tags keep ids apart
_NONFINITE_BOUNDS = (
    (-np.inf, np.inf, ("inf-bound",)),
    (np.nan, 1.0, ("nan-bound",)),
    (-1.5, np.nan, ("nan-bound", "upper")),
    (np.inf, -np.inf, ("inf-bound", "lo>hi")),
)


def _nonfinite_bound_specs(C) -> list[Spec]:
    """Clamp with non-finite bounds over specials (floats) and extremes (integers)."""
    out = []
    for dt in floats_of("Clamp"):
        x = np.concatenate([special_values(dt, c) for c in ("inf", "nan", "±0")])
        out += [Spec("Clamp", C(lo, hi), (x,), tags, source="specials")
                for lo, hi, tags in _NONFINITE_BOUNDS]
    for dt in (DType.I32, DType.I64, DType.U8):
        out += [Spec("Clamp", C(lo, hi), (int_extremes(dt),), ("extremes", "int") + tags,
                     source="specials") for lo, hi, tags in _NONFINITE_BOUNDS]
    return out


def fma_edges(seed: int) -> list[Spec]:
    out = []
    for dt, n in tiling_plan("Fma"):
        r = _rng(seed, "Fma", "tiling", dt, n)
        out.append(Spec("Fma", None, (_z(r, n, dt), _z(r, n, dt), _z(r, n, dt)),
                        length_tags(n), source="tiling"))
    for dt in floats_of("Fma"):
        for c in SPECIAL_CLASSES:
            v = special_values(dt, c)
            a, b = _grid(v)                     # every product pair, addend cycling
            out.append(Spec("Fma", None, (a, b, np.resize(v[::-1], a.size)), (c,),
                            source="specials"))
    r = _rng(seed, "Fma", "shape")
    out += [
        Spec("Fma", None, (_z(r, (3, 1)), _z(r, (1, 4)), _z(r, (4,))), ("broadcast", "size-1"),
             source="shape"),
        Spec("Fma", None, (_z(r, (3, 10)), _z(r, (3, 10)), _z(r, (3, 10))), NC, None,
             ("x0", "x1", "x2"), "shape"),
    ]
    return out


EDGES = {"Activation": activation_edges, "Binary": binary_edges, "Compare": compare_edges,
         "Cast": cast_edges, "Where": where_edges, "Clamp": clamp_edges, "Fma": fma_edges}
