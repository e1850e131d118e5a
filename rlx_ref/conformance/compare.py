"""The comparator: one backend output against the float64 oracle under an accuracy contract.

Rules (DESIGN.md §5): the shape and dtype must be the declared ones; both sides are upcast
to float64 (complex128); NaN positions and ±inf positions (with sign) must match the
float64 oracle rounded to the case dtype (or the case-dtype oracle: no worse than it);
integer and bool outputs are exact; a float element passes when
``|got - oracle64| <= max(budget, |oracle_case - oracle64|)``, except under a backend's
accumulation promise (``accuracy.promised``), which claims better than the case-dtype
oracle's own accumulation: there the budget alone decides. A failing output whose
values are all ``|v| < 1e-6`` while the oracle's are not is MISSING (the kernel wrote
nothing), otherwise MISMATCH with the worst element's errors and index.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import accuracy as A
from .model import ERROR, MISMATCH, MISSING, OK

MISSING_BELOW = 1e-6
_RANK = {OK: 0, MISSING: 1, MISMATCH: 2, ERROR: 3}


@dataclass
class Verdict:
    """The outcome of one comparison (fields as CaseResult's)."""

    status: str
    message: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    worst_index: list | None = None
    budget_ratio: float | None = None   # worst error / allowed error (<= 1 passes)

    @property
    def ok(self) -> bool:
        return self.status == OK


def compare(got, oracle64, oracle_case, declared: Shape, acc: A.Accuracy) -> Verdict:
    """Judge one backend output ``got`` against the oracle (see the module docstring).

    ``oracle_case`` may be None (no "no worse than the oracle" fallback)."""
    got, o64 = np.asarray(got), np.asarray(oracle64)
    oc = None if oracle_case is None else np.asarray(oracle_case)
    dt = declared.dtype
    problem = _oracle_problem(o64, oc, declared)
    if problem:
        return Verdict(ERROR, f"comparator input is inconsistent: {problem}")
    if not _dims_match(declared, got.shape) or got.shape != o64.shape:
        return Verdict(MISMATCH, f"shape mismatch: the backend returned {list(got.shape)}, "
                                 f"declared {declared.dims_text()} (oracle "
                                 f"{list(o64.shape)})")
    if got.dtype != dt.np:
        return Verdict(MISMATCH, f"dtype mismatch: the backend returned {got.dtype}, declared "
                                 f"{dt} ({dt.np})")
    if got.size == 0:
        return Verdict(OK, "", 0.0, 0.0, 0.0, None, 0.0)
    if not (dt.is_float or dt.is_complex):
        return _compare_exact_ints(got, o64)
    return _compare_floats(got, o64, oc, dt, acc)


def _oracle_problem(o64, oc, declared: Shape) -> str:
    want = declared.dtype.np
    twin = {"f": np.dtype(np.float64), "V": np.dtype(np.float64),
            "c": np.dtype(np.complex128)}.get(want.kind, want)
    if not _dims_match(declared, o64.shape):
        return f"oracle64 has shape {list(o64.shape)}, declared {declared.dims_text()}"
    if o64.dtype not in (want, twin):
        return f"oracle64 has dtype {o64.dtype}, expected {want} or {twin}"
    if oc is not None and (oc.shape != o64.shape or oc.dtype != want):
        return (f"oracle_case is {oc.dtype}{list(oc.shape)}, expected {want}"
                f"{list(o64.shape)}")
    return ""


def _dims_match(declared: Shape, shape) -> bool:
    return len(declared.dims) == len(shape) and all(
        isinstance(d, Dyn) or d == s for d, s in zip(declared.dims, shape))


# ── integers and bools ─────────────────────────────────────────────────────

def _compare_exact_ints(got, o64) -> Verdict:
    bad = got != o64
    g, o = got.astype(np.float64), o64.astype(np.float64)
    err = np.abs(g - o)
    rel = _rel(err, np.abs(o))
    if not bad.any():
        return Verdict(OK, "", 0.0, 0.0, 0.0, None, 0.0)
    missing = _missing(g, o)
    if missing:
        return Verdict(MISSING, missing, float(err.max()), float(rel.max()), None,
                       _index(np.argmax(err), got.shape), np.inf)
    flat = int(np.argmax(np.where(bad, err, -1).ravel()))
    idx = _index(flat, got.shape)
    msg = (f"{int(bad.sum())} of {got.size} elements differ (integer/bool outputs are exact); "
           f"worst at {idx}: got {got.ravel()[flat]}, expected {o64.ravel()[flat]}")
    return Verdict(MISMATCH, msg, float(err.max()), float(rel.max()), None, idx, np.inf)


# ── floats and complex ─────────────────────────────────────────────────────

def _classes(x: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 -inf per element (complex: real·4 + imag)."""
    if x.dtype.kind == "c":
        return _classes(x.real) * 4 + _classes(x.imag)
    return np.select([np.isnan(x), x == np.inf, x == -np.inf], [1, 2, 3], 0)


def _compare_floats(got, o64, oc, dt: DType, acc: A.Accuracy) -> Verdict:
    wide = np.complex128 if dt.is_complex else np.float64
    with np.errstate(all="ignore"):
        g = got.astype(wide)
        o = o64.astype(wide)
        rounded = o64.astype(dt.np).astype(wide)     # the oracle as the case dtype holds it
        c = None if oc is None else oc.astype(wide)
    # per-step exact: the case-dtype oracle is the reference, with no allowance beside it
    stepwise = acc.kind == A.EXACT and acc.per_step and c is not None
    cls_g, cls_r = _classes(g), _classes(c if stepwise else rounded)
    special_bad = cls_g != cls_r
    if c is not None and not stepwise:
        special_bad &= cls_g != _classes(c)
    finite = (cls_g == 0) & (cls_r == 0)
    ref = c if stepwise else rounded if acc.kind == A.EXACT else o
    with np.errstate(all="ignore"):
        err = np.where(finite, np.abs(g - ref), 0.0)
        allowed = A.budget(acc, np.where(finite, np.abs(o), 0.0), dt)
        if c is not None and acc.accum is None and not stepwise:   # a promise or a
            # per-step exact contract outbids the case oracle
            own = np.where(finite & (_classes(c) == 0), np.abs(c - ref), 0.0)
            allowed = np.maximum(allowed, own)
        ratio = np.where(err == 0, 0.0, err / allowed)
    ratio = np.where(special_bad, np.inf, ratio)
    zero_bad = np.zeros(g.shape, bool)
    if acc.kind == A.EXACT and acc.signed_zeros and not dt.is_complex:
        zero_bad = finite & (g == 0) & (ref == 0) & (np.signbit(g) != np.signbit(ref))
        ratio = np.where(zero_bad, np.inf, ratio)
    mag = np.abs(np.where(finite, ref, 0.0))
    rel = _rel(err, mag)
    ulps = err / A.ulp_of(mag, dt)
    stats = (float(err.max()), float(rel.max()), float(ulps.max()))
    bad = special_bad | zero_bad | (ratio > 1)
    worst = int(np.argmax(ratio.ravel()))
    if not bad.any():
        return Verdict(OK, "", *stats, _index(worst, g.shape), float(ratio.max()))
    missing = _missing(np.abs(g), np.abs(o))
    if missing:
        return Verdict(MISSING, missing, *stats, _index(worst, g.shape), float(ratio.max()))
    idx = _index(worst, g.shape)
    gv, ov = g.ravel()[worst], (ref if acc.per_step else o).ravel()[worst]
    if special_bad.any() or zero_bad.any():
        what = "NaN/inf" if special_bad.ravel()[worst] else "signed-zero"
        n = int((special_bad | zero_bad).sum())
        msg = (f"{what} mismatch at {idx}: got {_fmt(gv)}, expected {_fmt(ov)} "
               f"({n} of {g.size} positions differ)")
    else:
        msg = (f"{int(bad.sum())} of {g.size} elements over budget; worst at {idx}: got "
               f"{_fmt(gv)}, expected {_fmt(ov)} (abs {err.ravel()[worst]:.3g}, rel "
               f"{rel.ravel()[worst]:.3g}, {ulps.ravel()[worst]:.3g} ulp {dt}), allowed "
               f"{allowed.ravel()[worst]:.3g} under {acc.describe()}")
    msg += f"; max abs {stats[0]:.3g}, max rel {stats[1]:.3g}, max ulp {stats[2]:.3g}"
    return Verdict(MISMATCH, msg, *stats, idx, float(ratio.max()))


def _rel(err: np.ndarray, mag: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(err == 0, 0.0, err / mag)


def _missing(g_abs: np.ndarray, o_abs: np.ndarray) -> str:
    """The MISSING message when every |got| < 1e-6 and the oracle is not all that small."""
    g_abs, o_abs = np.abs(g_abs), np.abs(o_abs)
    if g_abs.size == 0 or not (g_abs < MISSING_BELOW).all() or (o_abs < MISSING_BELOW).all():
        return ""
    big = np.where(np.isnan(o_abs), np.inf, o_abs)
    at = int(np.argmax(big.ravel()))
    return (f"all {g_abs.size} values are |v| < {MISSING_BELOW:g} but the oracle's are not "
            f"(|{_fmt(o_abs.ravel()[at])}| at {_index(at, g_abs.shape)}): was the output "
            f"written?")


def _index(flat: int, shape) -> list:
    return [int(i) for i in np.unravel_index(int(flat), shape)] if shape else []


def _fmt(v) -> str:
    return f"{v:.9g}"


# ── several outputs ────────────────────────────────────────────────────────

def compare_outputs(gots, oracles64, oracles_case, declared, acc) -> Verdict:
    """Compare every output of a graph; the worst status wins and its message names the
    output index. ``acc`` is one contract for all outputs or one per output;
    ``oracles_case`` may be None."""
    gots, oracles64, declared = list(gots), list(oracles64), list(declared)
    if len(gots) != len(declared):
        return Verdict(MISMATCH, f"the backend returned {len(gots)} outputs, the graph "
                                 f"declares {len(declared)}")
    cases = list(oracles_case) if oracles_case is not None else [None] * len(gots)
    accs = list(acc) if isinstance(acc, (list, tuple)) else [acc] * len(gots)
    verdicts = [compare(g, o, c, d, a) for g, o, c, d, a in
                zip(gots, oracles64, cases, declared, accs)]
    if len(verdicts) == 1:
        return verdicts[0]
    if not verdicts:
        return Verdict(OK, "no outputs")
    i = max(range(len(verdicts)), key=lambda j: (_RANK[verdicts[j].status],
                                                 verdicts[j].budget_ratio or 0.0))
    v = verdicts[i]
    prefix = f"output {i}: " if v.status != OK or v.message else ""
    return Verdict(v.status, prefix + v.message, v.max_abs, v.max_rel, v.max_ulp,
                   v.worst_index, v.budget_ratio)
