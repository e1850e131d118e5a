"""Generated ElementwiseRegion chains: 3 steps up to the caps (32 steps, 16 inputs).

Step k > 0 reads the previous step first, so every step reaches the output and a wrong
value anywhere shows; a binary step's other operand follows a schedule that covers every
pattern: ``first`` (Step(0)), ``earlier`` (a step before the previous one), ``input`` (a
full-size input), ``scalar`` (a one-element input) and ``bcast`` (a trailing-block input
read at ``gid % numel``). Each input is read at least once. Ops are chosen so magnitudes
stay bounded (no overflow, no cancellation of huge terms). The 16-bit chains use only
operations that numpy and the kernels round correctly, so they are compared bit for bit
with the per-step-rounded oracle (``exact(per_step=True)``); i32 chains use the same
operations (no division) on small integers.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ..ops.region import (MAX_INPUTS, MAX_STEPS, Input, Step, activation, binary, compare,
                          encode_region, step_op, where)
from .accuracy import exact
from .cases import Spec
from .rng import CounterRNG

F32, F64, F16, BF16 = DType.F32, DType.F64, DType.F16, DType.BF16
PATTERNS = ("prev", "first", "earlier", "input", "scalar", "bcast")
LIMIT = 16.0                      # magnitude bound every step keeps
UNARY = ("Tanh", "Sigmoid", "Relu", "Abs", "Neg", "Sin", "Atan")
UNARY_EXACT = ("Relu", "Abs", "Neg")   # correctly rounded in every dtype: bit-exact
STEP_COUNTS = (3, 4, 5, 8, 12, 16, 24, 31, MAX_STEPS)
EXACT16 = exact(per_step=True, reason="16-bit steps round to their dtype one by one")


def _rng(seed, *parts) -> CounterRNG:
    return CounterRNG(seed, "/".join(str(p) for p in parts))


# ── inputs ───────────────────────────────────────────────────────────────────

def bcast_shapes(out: tuple) -> list[tuple]:
    """Trailing blocks of ``out`` (leading 1s in every count): what a region may modulo-read."""
    shapes = []
    for k in range(1, len(out)):
        core = tuple(out[k:])
        shapes += [core, (1,) * k + core]
    return [s for s in dict.fromkeys(shapes) if int(np.prod(s)) < int(np.prod(out))]


def region_inputs(rng, roles, out: tuple, dt: DType) -> list[np.ndarray]:
    """One array per role: ``full`` in [-2, 2], ``scalar`` in [0.5, 1.5] (a safe divisor),
    ``bcast`` a trailing block in [-2, 2]; rounded to ``dt`` once (integers: -4..4, 1..2)."""
    blocks, arrays = bcast_shapes(out), []
    for i, role in enumerate(roles):
        if not dt.is_float:                 # small integers: products stay in range
            shape = () if role == "scalar" else blocks[i % len(blocks)] if role == "bcast" \
                else out
            x = rng.integers(1, 3, shape) if role == "scalar" else rng.integers(-4, 5, shape)
        elif role == "scalar":
            shape = ((), (1,), (1,) * len(out))[i % 3]
            x = rng.uniform(0.5, 1.5, shape)
        elif role == "bcast":
            x = rng.uniform(-2.0, 2.0, blocks[i % len(blocks)])
        else:
            x = rng.uniform(-2.0, 2.0, out)
        arrays.append(np.asarray(x).astype(dt.np))
    return arrays


# ── the chain ────────────────────────────────────────────────────────────────

class ChainBuilder:
    """Builds one chain over ``roles`` with bounded magnitudes; records operand patterns."""

    def __init__(self, rng, roles, bounds, exact_ops: bool):
        self.rng, self.roles, self.exact_ops = rng, list(roles), exact_ops
        self.in_bound = list(bounds)
        self.ints = False                   # integer chains: no Div (it truncates)
        self.steps, self.bound, self.patterns = [], [], set()

    def _pick(self, options):
        return options[int(self.rng.integers(0, len(options)))]

    def operand(self, slot) -> tuple:
        """(operand, its magnitude bound) of a scheduled slot; records the pattern."""
        k = len(self.steps)
        if slot[0] == "first":
            j = 0
        elif slot[0] == "earlier":
            values = [i for i in range(1, k - 1) if self.bound[i] is not None]
            j = self._pick(values) if values else 0
        else:
            self.patterns.add(self.roles[slot[1]] if self.roles[slot[1]] != "full" else "input")
            return Input(slot[1]), self.in_bound[slot[1]]
        self.patterns.add("first" if j == 0 else "earlier")
        return Step(j), self.bound[j]

    def add(self, step, bound: float | None) -> None:
        self.steps.append(step)
        self.bound.append(bound)

    def binary_step(self, a, ba, b, bb) -> None:
        ops = [("Max", max(ba, bb)), ("Min", max(ba, bb))]
        if ba + bb <= LIMIT:
            ops += [("Add", ba + bb), ("Sub", ba + bb)]
        if ba * bb <= LIMIT:
            ops.append(("Mul", ba * bb))
        if b[0] == "Input" and self.roles[b[1]] == "scalar" and 2 * ba <= LIMIT \
                and not self.ints:
            ops.append(("Div", 2 * ba))
        op, bound = self._pick(ops)
        self.add(binary(op, a, b), bound)

    def unary_step(self) -> None:
        k, b = len(self.steps) - 1, self.bound[-1]
        ops = UNARY_EXACT if self.exact_ops else UNARY
        op = "Tanh" if b > LIMIT / 2 and not self.exact_ops else self._pick(ops)
        bound = {"Tanh": 1.0, "Sigmoid": 1.0, "Sin": 1.0, "Atan": 1.6}.get(op, b)
        self.add(activation(op, Step(k)), bound)

    def select_pair(self, b, bb) -> None:
        """Compare(Gt, prev, b) then Where(that, prev, b): the Where reads an earlier step."""
        k = len(self.steps) - 1
        self.add(compare("Gt", Step(k), b), None)        # bool: never an operand again
        self.add(where(Step(k + 1), Step(k), b), max(self.bound[k], bb))
        self.patterns.add("earlier")


def _shuffled(rng, items: list) -> list:
    return [items[int(i)] for i in rng.permutation(len(items))]


def _placed(entry, pos: int) -> bool:
    """Whether ``entry`` may be step ``pos + 1``: Step(0) is read from step 2 on (at step 1
    it is the previous step), a strictly earlier step from step 3 on."""
    if entry[0] != "bin" or entry[1][0] not in ("first", "earlier"):
        return True
    return pos >= (1 if entry[1][0] == "first" else 2)


def _schedule(rng, n_steps: int, roles, prev_only: bool = False) -> list:
    """Step kinds for steps 1..n-1: ("bin", slot) or ("un",); the slots read every input not
    read by step 0, then (where steps remain) Step(0) and a strictly earlier step."""
    ins, free = [("in", i) for i in range(2, len(roles))], n_steps - 1
    if len(ins) > free:
        raise ValueError(f"a {n_steps}-step chain cannot read {len(roles)} inputs; use at "
                         f"most {n_steps + 1}")
    must = ins + ([] if prev_only else [("first",), ("earlier",)][:free - len(ins)])
    extra = free - len(must)
    fill = [("in", int(rng.integers(0, len(roles)))) for _ in range(extra // 2)]
    slots = _shuffled(rng, must + fill)
    kinds = _shuffled(rng, [("bin", s) for s in slots] + [("un",)] * (extra - len(fill)))
    for p in range(len(kinds)):
        if not _placed(kinds[p], p):
            q = next((q for q in range(max(p + 1, 2), len(kinds))
                      if _placed(kinds[q], p)), None)
            if q is not None:
                kinds[p], kinds[q] = kinds[q], kinds[p]
    return kinds


def build_chain(rng, n_steps: int, roles, arrays, exact_ops: bool = False,
                prev_only: bool = False):
    """(chain, patterns used) over inputs of ``roles`` (input 0 and 1 read by step 0);
    ``prev_only``: steps read only the previous step and inputs (what fusion can form)."""
    bounds = [float(np.max(np.abs(a.astype(np.float64)))) for a in arrays]
    cb = ChainBuilder(rng, roles, bounds, exact_ops)
    cb.ints = not DType.of(arrays[0]).is_float
    cb.binary_step(Input(0), bounds[0], Input(1), bounds[1])
    cb.patterns.add("input")
    cb.patterns.add(roles[1] if roles[1] != "full" else "input")
    plan = _schedule(rng, n_steps, roles, prev_only)
    for i, kd in enumerate(plan):
        if kd[0] == "skip":
            continue
        if kd[0] == "un":
            cb.unary_step()
            continue
        cb.patterns.add("prev")
        slot = kd[1]
        b, bb = cb.operand(slot)
        room = len(cb.steps) + 2 <= n_steps and i + 1 < len(plan) and plan[i + 1][0] == "un"
        if room and not prev_only and rng.integers(0, 4) == 0 and not (slot[0] == "in" and
                                                      roles[slot[1]] == "scalar"):
            cb.select_pair(b, bb)
            plan[i + 1] = ("skip",)
        else:
            cb.binary_step(Step(len(cb.steps) - 1), cb.bound[-1], b, bb)
    assert len(cb.steps) == n_steps, (len(cb.steps), n_steps)
    return cb.steps, cb.patterns


def chain_patterns(chain, roles) -> set:
    """The operand patterns a chain uses (for tests): see the module docstring."""
    out = set()
    for k, step in enumerate(chain):
        for src, i in step_op(step)[2]:
            if src == "Step":
                out.add("prev" if i == k - 1 else "first" if i == 0 else "earlier")
            else:
                out.add({"full": "input"}.get(roles[i], roles[i]))
    return out


# ── the cases ────────────────────────────────────────────────────────────────

def _roles(n_inputs: int) -> list[str]:
    """Two full inputs first, then scalar / bcast / full in turn."""
    cycle = ("scalar", "bcast", "full")
    return ["full", "full"] + [cycle[i % 3] for i in range(n_inputs - 2)]


def chain_spec(seed: int, n_steps: int, n_inputs: int, out: tuple, dt: DType,
               exact_ops: bool = False, tags=(), name: str = "chain") -> Spec:
    """One region case: a chain of ``n_steps`` over ``n_inputs`` inputs into ``out``."""
    n_inputs = max(2, n_inputs)             # step 0 reads two inputs
    rng = _rng(seed, "ElementwiseRegion", name, n_steps, n_inputs, out, dt)
    roles = _roles(n_inputs)
    arrays = region_inputs(rng, roles, out, dt)
    chain, _ = build_chain(rng, n_steps, roles, arrays, exact_ops)
    shapes = [Shape(a.shape, dt) for a in arrays]
    attrs = encode_region(chain, shapes)
    tags = ("chain", f"steps-{len(chain)}", f"inputs-{n_inputs}") + tuple(tags)
    acc = EXACT16 if exact_ops and dt.is_float else None
    return Spec("ElementwiseRegion", attrs, tuple(arrays), tags, source=name, accuracy=acc)


def first_step_spec(seed: int) -> Spec:
    """A chain whose later steps read Step(0) (and Step(1)) again: a kernel that substitutes
    the previous step for an earlier one gets a different value."""
    rng = _rng(seed, "ElementwiseRegion", "reads-first")
    x, y = (rng.uniform(-2.0, 2.0, (3, 37)).astype(np.float32) for _ in range(2))
    s = np.float32(0.75)
    chain = [binary("Mul", Input(0), Input(1)),           # 0
             activation("Tanh", Step(0)),                  # 1
             binary("Add", Step(1), Input(2)),             # 2
             binary("Sub", Step(2), Step(0)),              # 3: the first step again
             binary("Mul", Step(3), Step(1)),              # 4: and step 1
             binary("Max", Step(4), Step(0))]              # 5
    attrs = encode_region(chain, [Shape(a.shape, DType.of(a)) for a in (x, y, s)])
    return Spec("ElementwiseRegion", attrs, (x, y, s), ("chain", "reads-first", "steps-6"),
                source="reads-first")


def chain_specs(seed: int) -> list[Spec]:
    """Every generated region chain: f32 at every step count (rank 2 to 5 outputs), the caps,
    f64, and bit-exact f16/bf16 chains."""
    outs = ((3, 37), (2, 3, 17), (2, 2, 3, 5), (2, 1, 3, 2, 5))
    out = [first_step_spec(seed)]
    for i, n in enumerate(STEP_COUNTS):
        k = min(MAX_INPUTS, max(2, n - 2), 2 + i)
        out.append(chain_spec(seed, n, k, outs[i % len(outs)], F32))
    out.append(chain_spec(seed, MAX_STEPS, MAX_INPUTS, (4, 33), F32, tags=("caps",)))
    out.append(chain_spec(seed, MAX_STEPS, MAX_INPUTS, (2, 3, 4, 5), F32, tags=("caps",),
                          name="caps-rank4"))
    for n in (3, 16, MAX_STEPS):
        out.append(chain_spec(seed, n, min(MAX_INPUTS, n - 2), (3, 37), F64))
    for dt in (F16, BF16):
        for n, k, shape in ((3, 3, (5, 31)), (8, 5, (2, 3, 17)), (16, 8, (4, 33)),
                            (MAX_STEPS, MAX_INPUTS, (2, 2, 3, 11))):
            out.append(chain_spec(seed, n, k, shape, dt, True, ("fp16-exact",)))
    for n, k in ((12, 6), (MAX_STEPS, MAX_INPUTS)):
        out.append(chain_spec(seed, n, k, (3, 37), DType.I32, True, ("int",)))
    return out


__all__ = ["PATTERNS", "bcast_shapes", "build_chain", "chain_patterns", "chain_spec",
           "chain_specs", "region_inputs"]
