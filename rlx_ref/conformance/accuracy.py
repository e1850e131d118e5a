"""Accuracy contracts: how far a backend's output may be from the float64 oracle.

Three kinds (DESIGN.md §5: budgets come from an error model, not one global rtol):

- ``exact()``: bit-for-bit (NaN == NaN) against the float64 oracle rounded to the case
  dtype. Integer and bool outputs are always exact, whatever the contract says.
- ``ulp(n, floor)``: elementwise float ops. Budget per element
  ``n·ulp(|oracle|) + floor·eps_w·min(max|finite inputs|, cap)``: n ULPs of the case dtype,
  plus an absolute floor on the scale of the inputs for formulas that cancel (sin near π,
  1 + erf(x) for x << 0, x + 3 in HardSwish). The input scale saturates at ``cap`` (64):
  past it those functions are saturated or must be accurate anyway, and a floor ∝ 1e38
  would accept anything. ``n`` is for f32/f64; f16/bf16 are computed in f32 and rounded
  once, so they get ``n16`` (1) ULP whatever the f32 figure.
- ``reduction(c, K, scale)``: ``ulps·ulp(|oracle|) + c·eps_w·K·scale``, K the number of
  terms one output combines, ``scale`` the signal norm (``SCALES``). Sums use
  ``max(‖t‖₂, |Σt|)``: with cancelling terms ``K·‖t‖₂ >= √K·Σ|t|`` covers any summation
  order yet still shows one dropped term at K = 4096 (the rigorous ``K·Σ|t|`` would hide
  it); with same-sign terms ``|Σt| = Σ|t|`` covers the K² drift of a sequential sum.

``eps_w`` is the working precision's epsilon: f32 for f16/bf16 (RLX accumulates them in f32),
else the case dtype's; ``work="case"`` uses the case dtype (composites whose intermediates
are stored in it). Results below the smallest normal may be off by it (``ftz``: OpenCL and
CUDA fast-math flush subnormals) except under exact contracts.

An OpDef declares its contract in ``OpDef.accuracy``: an Accuracy, a callable
``(attrs, input_shapes, dtype) -> Accuracy`` (``per_op`` tables), or ``nested(trips)``.
When it is None, ``accuracy_for`` applies defaults: leaves, movement and indexing are exact
(signed zeros); NESTED_BODY ops are the composite of their bodies; other ELEMENTWISE ops get
``ulp(4, floor=4)``; anything else a reduction over "all" with K = its largest input.
A graph (``multi:`` cases, bodies) gets ``composite``: one reduction with K = the sum of
its nodes' worst-case error growth in eps of the case dtype, times the trip count, on the
output's max |value|. ``apply_override`` widens a contract from a ledger entry;
``case_accuracy`` does all of it for a conformance Case.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..ir.dtype import DType

EXACT, ULP, REDUCTION = "exact", "ulp", "reduction"

# The signal norm a reduction budget is relative to. The first three read only the oracle;
# the last three need the case inputs (``bind``) and fall back to "all" without them.
SCALES = {
    "value": "|oracle| of the element itself (relative error: products)",
    "row": "max |oracle| over `axes` (softmax, norms: the row's largest value)",
    "all": "max |oracle| over the whole output (composites)",
    "rss": "max(root-sum-square of the terms (oracle on squared operands), |oracle|)",
    "abs": "float64 oracle on |operands|: the sum of |terms| (attention: Σ p·|v|)",
    "solve": "κ∞(A)·max|x| per matrix (linear solves)",
}
WHILE_TRIPS = 16          # assumed body runs of a While without max_iterations
_DYN_K = 64               # K when a dim is dynamic and the contract needs it
_LOW = (DType.F16, DType.BF16)
_BITS = {DType.F16: (10, -14), DType.BF16: (7, -126), DType.F32: (23, -126),
         DType.F64: (52, -1022), DType.C64: (23, -126), DType.C128: (52, -1022)}


@dataclass(frozen=True)
class Accuracy:
    """One op's accuracy contract; build with ``exact``, ``ulp`` or ``reduction``."""

    kind: str = EXACT
    ulps: float = 0.0              # ULPs of the case dtype for f32/f64 (and complex)
    ulps_16: float = 0.0           # ULPs for f16/bf16
    floor: float = 0.0             # ulp: absolute floor, in eps_w · min(max|inputs|, cap)
    floor_cap: float = 64.0        # ulp: where the floor's input scale saturates
    floor_min: float = 0.0         # ulp: the floor's input scale is at least this
    c: float = 0.0                 # reduction: the constant
    k: Any = 1                     # reduction: K, or a callable (attrs, shapes) -> K
    scale: str = "all"             # reduction: a key of SCALES
    axes: Any = ()                 # "row": axes (negative ok), or callable (attrs, shapes)
    operands: tuple | None = None  # rss/abs: the operands that are terms (None: float ones)
    mean: bool = False             # rss of a mean: terms are x/K
    work: str | None = None        # None: f32 for 16-bit, else the case dtype; "case"
    signed_zeros: bool = False     # exact: -0 and +0 differ
    per_step: bool = False         # exact: against the oracle run in the case dtype
    ftz: bool = False              # a result below the smallest normal may be off by it
    reason: str = ""
    scale_array: Any = field(default=None, compare=False, repr=False)  # bound "rss"...
    scale_unit: float = field(default=1.0, compare=False, repr=False)  # its unit (no overflow)
    inscale: Any = field(default=None, compare=False, repr=False)      # bound max|inputs|

    def describe(self) -> str:
        """Short form for messages: ``ulp(4, floor 2)``, ``reduction(c=2, K=16, rss)``."""
        if self.kind == EXACT:
            return "exact" + (" (signed zeros)" if self.signed_zeros else "") + (
                " (per-step rounding)" if self.per_step else "")
        if self.kind == ULP:
            fl = f", floor {self.floor:g}" if self.floor else ""
            return f"ulp({self.ulps:g}; f16/bf16 {self.ulps_16:g}{fl})"
        k = "K(attrs)" if callable(self.k) else f"{self.k:g}"
        return (f"reduction(c={self.c:g}, K={k}, {self.scale}"
                f"{', mean' if self.mean else ''}, +{self.ulps:g} ulp)")


def exact(signed_zeros: bool = False, reason: str = "", per_step: bool = False) -> Accuracy:
    """Bit-exact results (NaN == NaN; ±0 equal unless ``signed_zeros``); ``per_step``: equal
    to the oracle run in the case dtype (every step rounded as the spec rounds it), not to
    the float64 oracle rounded once."""
    return Accuracy(EXACT, signed_zeros=signed_zeros, reason=reason, per_step=per_step)


def ulp(n: float, floor: float = 0.0, n16: float = 1.0, cap: float = 64.0,
        reason: str = "", at_least: float = 0.0) -> Accuracy:
    """n ULPs (f32/f64; n16 for f16/bf16) plus ``floor``·eps_w·clip(max|inputs|, at_least,
    cap); ``at_least`` = 1 for formulas that cancel against a constant (e^x - 1)."""
    return Accuracy(ULP, ulps=n, ulps_16=n16, floor=floor, floor_cap=cap, ftz=True,
                    reason=reason, floor_min=at_least)


def reduction(c: float, k, scale: str = "rss", axes=(), operands=None, mean=False,
              ulps: float = 1.0, reason: str = "") -> Accuracy:
    """``ulps``·ulp(|oracle|) + c·eps_w·K·scale; K an int or ``(attrs, shapes) -> int``."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    return Accuracy(REDUCTION, ulps=ulps, ulps_16=ulps, c=c, k=k, scale=scale, axes=axes,
                    operands=operands, mean=mean, ftz=True, reason=reason)


def per_op(table: dict, key: str = "op") -> Callable:
    """A contract chosen by one payload field (Activation's ``op``, Pool's ``kind``...)."""
    def choose(attrs, shapes, dtype):
        sub = getattr(attrs, key)
        if sub not in table:
            raise KeyError(f"no accuracy contract for {key}={sub!r}; add it to the table")
        return table[sub]
    return choose


@dataclass(frozen=True)
class nested:  # noqa: N801 - reads as a constructor in OpDef records
    """Control flow: the composite of the op's bodies, run ``trips(attrs)`` times."""

    trips: Callable | int = 1


# ── choosing a contract ────────────────────────────────────────────────────

def _default(opdef) -> Any:
    from ..ops.opdef import Caps

    if opdef.caps & Caps.LEAF or opdef.family in ("leaves", "movement", "indexing"):
        return exact(signed_zeros=True, reason="data movement copies values")
    if opdef.caps & Caps.NESTED_BODY:
        return nested()
    if opdef.caps & Caps.ELEMENTWISE:
        return ulp(4, floor=4, reason="generic elementwise default")
    # Unknown non-elementwise ops: every input element may feed every output.
    return reduction(2, lambda a, s: max([1] + [x.numel or _DYN_K for x in s]), "all",
                     reason="generic default: K = the largest input")


def accuracy_for(opdef, attrs, input_shapes, dtype: DType) -> Accuracy:
    """The resolved contract of one node (K and axes evaluated on the input shapes)."""
    spec = opdef.accuracy if getattr(opdef, "accuracy", None) is not None else _default(opdef)
    if isinstance(spec, nested):
        trips = spec.trips(attrs) if callable(spec.trips) else spec.trips
        return composite([graph_work(b, dtype) for b in opdef.bodies(attrs)], trips,
                         f"{opdef.kind} bodies")
    if callable(spec):
        spec = spec(attrs, input_shapes, dtype)
    return _resolve(spec, attrs, input_shapes)


def _resolve(acc: Accuracy, attrs, shapes) -> Accuracy:
    k, axes = acc.k, acc.axes
    try:
        k = float(k(attrs, shapes) if callable(k) else k)
    except Exception:  # noqa: BLE001 - dynamic or empty dims: K is unknowable or moot
        k = float(_DYN_K)
    if callable(axes):
        axes = axes(attrs, shapes)
    return dataclasses.replace(acc, k=max(k, 1.0), axes=tuple(axes))


def graph_work(graph, dtype: DType) -> float:
    """A graph's error in units of the case dtype's eps: Σ over nodes of each contract's
    worst-case growth (ulps, floor, c·K, scaled to eps_case)."""
    from ..ops.opdef import get

    total = 0.0
    for node in graph.nodes:
        if node.kind in ("Input", "Param", "Constant") or not _is_float(node.shape.dtype):
            continue
        shapes = [graph.shape(i) for i in node.inputs]
        acc = accuracy_for(get(node.kind), node.attrs, shapes, node.shape.dtype)
        total += _work(acc, node.shape.dtype)
    return total


def _work(acc: Accuracy, dt: DType) -> float:
    if acc.kind == EXACT:
        return 0.0
    ratio = eps(work_dtype(acc, dt)) / eps(dt)
    extra = acc.floor if acc.kind == ULP else acc.c * acc.k
    return ulps_for(acc, dt) + extra * ratio


def composite(works, trips: float = 1, what: str = "graph") -> Accuracy:
    """Σ work × trips as one reduction on the output's max |value| (eps of the case dtype:
    intermediates are stored in it); exact when every node is exact."""
    k = sum(works) * max(trips, 1)
    if k == 0:
        return exact(reason=f"{what}: every node is exact")
    return Accuracy(REDUCTION, ulps=1.0, ulps_16=1.0, c=2.0, k=k, scale="all", work="case",
                    ftz=True, reason=f"{what}: composite of its nodes' contracts")


def graph_accuracy(graph, dtype: DType) -> Accuracy:
    """The contract of a multi-op graph (``multi:`` cases)."""
    return composite([graph_work(graph, dtype)], 1, f"@{graph.name}")


def chain_accuracy(steps, dtype: DType) -> Accuracy:
    """ElementwiseRegion: the steps' ULPs add up; the rounding of every step but the last
    (half an ulp of the step dtype each, on the scale of the inputs) and every floor add
    up to the floor. Steps round to the step dtype, so 16-bit floors use its eps."""
    from ..ops.opdef import get

    accs = [accuracy_for(get(kind), attrs, [], dtype) for kind, attrs in steps]
    live = [a for a in accs if a.kind != EXACT]
    if not live:
        return exact(reason="every step is exact")
    early = [a for a in accs[:-1] if a.kind != EXACT]
    low = dtype in _LOW
    floor = sum(a.floor for a in live) * (eps(DType.F32) / eps(dtype) if low else 1.0)
    floor += 0.5 * sum(ulps_for(a, dtype) for a in early)
    acc = ulp(sum(a.ulps for a in live), floor=floor, n16=sum(a.ulps_16 for a in live),
              reason="sum of the chain's steps")
    return dataclasses.replace(acc, work="case" if low else None)


# ── overrides from the ledger ──────────────────────────────────────────────

OVERRIDE_KEYS = ("ulps", "c", "floor", "ftz")


def apply_override(acc: Accuracy, override: dict | None) -> Accuracy:
    """A widened contract from a ledger ``[[tolerance]]`` entry (``{ulps = 8}``, ``{c = 4}``).

    ``ulps`` sets the ULPs for every dtype (an exact contract becomes ``ulp(n)``); ``c``
    sets a reduction's constant; ``floor`` an elementwise floor; ``ftz`` allows flushed
    subnormal results."""
    if not override:
        return acc
    bad = sorted(set(override) - set(OVERRIDE_KEYS))
    if bad:
        raise ValueError(f"unknown tolerance override {bad}; expected {OVERRIDE_KEYS}")
    changes: dict = {}
    if "ulps" in override:
        n = float(override["ulps"])
        changes.update(ulps=n, ulps_16=n)
        if acc.kind == EXACT:
            changes["kind"] = ULP
    if "c" in override:
        if acc.kind != REDUCTION:
            raise ValueError(f"override c={override['c']} needs a reduction contract; this "
                             f"one is {acc.describe()}: override `ulps` instead")
        changes["c"] = float(override["c"])
    if "floor" in override:
        changes["floor"] = float(override["floor"])
    if "ftz" in override:
        changes["ftz"] = bool(override["ftz"])
    note = ", ".join(f"{k}={v}" for k, v in override.items())
    return dataclasses.replace(acc, reason=f"{acc.reason} [override {note}]".strip(), **changes)


# ── numbers of a dtype ─────────────────────────────────────────────────────

def _is_float(dt: DType) -> bool:
    return dt.is_float or dt.is_complex


def eps(dt: DType) -> float:
    """Machine epsilon (the spacing at 1.0) of a float or complex dtype."""
    return 2.0 ** -_BITS[dt][0]


def tiny(dt: DType) -> float:
    """The smallest normal number of a float or complex dtype."""
    return 2.0 ** _BITS[dt][1]


def ulp_of(mag: np.ndarray, dt: DType) -> np.ndarray:
    """The spacing of ``dt`` at each magnitude (float64 in, float64 out; exact powers of 2).
    Subnormals and 0 get the smallest subnormal spacing."""
    nmant, minexp = _BITS[dt]
    mag = np.abs(np.asarray(mag, np.float64))
    _, e = np.frexp(np.where(np.isfinite(mag), mag, 1.0))
    e = np.where(mag == 0, minexp, np.maximum(e - 1, minexp))
    return np.ldexp(1.0, (e - nmant).astype(np.int32))


def work_dtype(acc: Accuracy, dt: DType) -> DType:
    if acc.work == "case" or dt not in _LOW:
        return dt
    return DType.F32


def ulps_for(acc: Accuracy, dt: DType) -> float:
    return acc.ulps_16 if dt in _LOW else acc.ulps


# ── the budget of each element ─────────────────────────────────────────────

def budget(acc: Accuracy, oracle64: np.ndarray, dt: DType) -> np.ndarray:
    """Allowed |error| per element of an output of dtype ``dt`` (0 for exact contracts;
    +inf where the signal scale is not finite, leaving those elements to the NaN/inf rule)."""
    mag = np.abs(np.asarray(oracle64)).astype(np.float64)
    if acc.kind == EXACT:
        return np.zeros(mag.shape)
    finite_mag = np.where(np.isfinite(mag), mag, 0.0)
    out = ulps_for(acc, dt) * ulp_of(finite_mag, dt)
    ew = eps(work_dtype(acc, dt))
    with np.errstate(invalid="ignore", over="ignore"):
        if acc.kind == ULP:
            ins = finite_mag if acc.inscale is None else acc.inscale
            scale = np.clip(_as_scale(ins, mag.shape), acc.floor_min, acc.floor_cap)
            out = out + acc.floor * ew * scale
        else:
            # the bound scale is in units of scale_unit: multiplying those first keeps
            # f64 extremes finite
            unit = acc.scale_unit if acc.scale_array is not None else 1.0
            out = out + (acc.c * ew * float(acc.k) * unit) * _scale(acc, finite_mag)
    if acc.ftz:   # OpenCL and CUDA fast-math may flush subnormal results (to ±0)
        out = np.where(finite_mag < tiny(dt), np.maximum(out, tiny(dt)), out)
    return np.where(np.isnan(out), np.inf, out)


def _scale(acc: Accuracy, mag: np.ndarray) -> np.ndarray:
    if acc.scale == "value":
        return mag
    if acc.scale == "row" and mag.ndim:
        axes = tuple(sorted({a % mag.ndim for a in acc.axes}))
        if mag.size == 0:
            return mag
        return np.broadcast_to(mag.max(axis=axes, keepdims=True), mag.shape)
    if acc.scale == "rss" and acc.scale_array is not None:
        return np.maximum(_as_scale(acc.scale_array, mag.shape), mag / acc.scale_unit)
    if acc.scale in ("abs", "solve") and acc.scale_array is not None:
        return _as_scale(acc.scale_array, mag.shape)
    return np.full(mag.shape, mag.max() if mag.size else 0.0)


def _as_scale(s, shape) -> np.ndarray:
    s = np.abs(np.asarray(s, np.float64))
    s = np.where(np.isnan(s), np.inf, s)
    try:
        return np.broadcast_to(s, shape)
    except ValueError:
        return np.full(shape, np.max(s) if s.size else 0.0)


# ── binding a contract to a case's inputs ──────────────────────────────────

def case_accuracy(case, overrides: dict | None = None) -> Accuracy:
    """The contract of a conformance case, bound to its inputs, with ledger overrides.

    ``case.accuracy`` wins when set; ``multi:`` cases get ``graph_accuracy``; one-op cases
    get ``accuracy_for`` on the op node, with input-derived scales computed by ``bind``."""
    from ..ops.opdef import get

    dt = DType.parse(case.dtype)
    if case.op.startswith("multi:"):
        acc = case.accuracy or graph_accuracy(case.graph, dt)
    else:
        node = next(n for n in reversed(case.graph.nodes) if n.kind == case.op)
        if case.accuracy is not None:
            acc = case.accuracy
        else:
            shapes = [_operand_shape(case, i) for i in node.inputs]
            acc = accuracy_for(get(case.op), node.attrs, shapes, dt)
        acc = bind(acc, case, node)
    return apply_override(acc, overrides)


def _operand(case, nid: int):
    n = case.graph.nodes[nid]
    table = {"Input": case.inputs, "Param": case.params}.get(n.kind)
    if table is None or n.attrs.name not in table:
        return None
    return np.asarray(table[n.attrs.name])


def _operand_shape(case, nid: int):
    from ..ir.shape import Shape

    v, s = _operand(case, nid), case.graph.shape(nid)
    return s if v is None else Shape(v.shape, s.dtype)


def bind(acc: Accuracy, case, node) -> Accuracy:
    """Compute the input-derived scales of a one-op case: the ulp floor's max|inputs|, and
    "rss"/"abs"/"solve" by running the float64 oracle on transformed inputs. A contract
    that cannot be bound keeps the output-derived fallback (documented in SCALES)."""
    values = [_operand(case, i) for i in node.inputs]
    try:
        with np.errstate(all="ignore"):
            if acc.kind == ULP and acc.floor:
                return dataclasses.replace(acc, inscale=_max_abs_broadcast(values))
            if acc.kind == REDUCTION and acc.scale in ("rss", "abs"):
                arr, unit = _terms_scale(acc, case, node, values)
                return dataclasses.replace(acc, scale_array=arr, scale_unit=unit)
            if acc.kind == REDUCTION and acc.scale == "solve":
                return dataclasses.replace(
                    acc, scale_array=_solve_scale(values[0], _run64(case, {}, node)))
    except Exception:  # noqa: BLE001 - e.g. a transformed input the op rejects: fall back
        return acc
    return acc


def _terms_scale(acc: Accuracy, case, node, values) -> tuple:
    """(array, unit): rss sqrt(oracle(x²)) (÷√K for a mean), abs oracle(|x|), on the term
    operands. A single term operand is divided by its max first and the max returned as
    the unit (the op is homogeneous in it), so squaring f64 extremes cannot overflow."""
    pick = acc.operands if acc.operands is not None else range(len(values))
    pick = [i for i in pick if values[i] is not None and values[i].dtype.kind in "fcV"]
    power = 2 if acc.scale == "rss" else 1
    changed, unit = {}, 1.0
    for i in pick:
        wide = np.complex128 if values[i].dtype.kind == "c" else np.float64
        t = np.abs(values[i].astype(wide))
        if len(pick) == 1:
            unit = float(np.max(t, where=np.isfinite(t), initial=0.0)) or 1.0
        changed[node.inputs[i]] = ((t / unit) ** power).astype(wide)
    out = np.abs(_run64(case, changed, node))
    if acc.scale == "rss":
        out = np.sqrt(out / acc.k) if acc.mean else np.sqrt(out)
    return out, unit


def _run64(case, replace: dict, node) -> np.ndarray:
    """The float64 oracle's output of ``node`` with some operands replaced (by node id)."""
    from ..interpret import Interpreter

    inputs, params = dict(case.inputs), dict(case.params)
    for nid, v in replace.items():
        n = case.graph.nodes[nid]
        (inputs if n.kind == "Input" else params)[n.attrs.name] = v
    with np.errstate(all="ignore"):
        outs = Interpreter(case.graph, float64=True).run(inputs, params)
    return np.asarray(outs[list(case.graph.outputs).index(node.id)])


def _max_abs_broadcast(values) -> np.ndarray:
    """max |finite operand| per output element (operands broadcast), or the overall max.
    Infinite operands count as 0: the NaN/inf rule and the ULPs judge those elements."""
    mags = [np.abs(v.astype(np.complex128 if v.dtype.kind == "c" else np.float64))
            for v in values if v is not None and v.dtype.kind in "fcV"]
    mags = [np.where(np.isfinite(m), m, 0.0) for m in mags]
    if not mags:
        return np.zeros(())
    try:
        return np.maximum.reduce(np.broadcast_arrays(*mags)) if len(mags) > 1 else mags[0]
    except ValueError:
        return np.asarray(max((m.max() if m.size else 0.0) for m in mags))


def _solve_scale(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """κ∞(A)·max|x| per matrix of A [N, N] or [B, N, N], shaped to broadcast over x."""
    a = np.asarray(a, np.float64)
    if a.size == 0 or x.size == 0:
        return np.zeros(())
    batched = a.ndim == 3
    mats = a if batched else a[None]
    xs = x if batched else x[None]
    with np.errstate(all="ignore"):
        cond = np.array([np.linalg.cond(m, np.inf) for m in mats])
        xmax = np.abs(xs).reshape(len(mats), -1).max(axis=1)
    s = cond * xmax
    return s.reshape((-1,) + (1,) * (x.ndim - 1)) if batched else np.asarray(s[0])
