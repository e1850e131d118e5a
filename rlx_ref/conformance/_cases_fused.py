"""Multi-op elementwise graphs that the fusion pass turns into regions (``multi:chain-*``).

Each graph is a run of elementwise ops, each reading the previous one once, plus full,
scalar and trailing-block inputs: exactly what ``MarkElementwiseRegions`` fuses. Lengths
reach the caps (32 steps, 16 inputs) and pass them by one, where the pass must cut the
chain; 16-bit graphs are compared bit for bit with the per-step-rounded oracle. The
``multi:bcast-chain-*`` graphs put a middle-axis broadcast (``[2, 1, 4]`` over
``[2, 3, 4]``), which a region cannot read, in the middle of a fusable run.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph, Op
from ..ops.opdef import get
from ..ops.region import MAX_INPUTS, MAX_STEPS, step_op
from ._cases_chains import EXACT16, _rng, _roles, build_chain, region_inputs
from .cases import make_case
from .model import Case

F32, F16, BF16 = DType.F32, DType.F16, DType.BF16

# (name, steps, inputs, output dims, dtype): the pass forms one region of ``steps`` steps
# when both are within the caps, else cuts the run where a cap is reached
FUSED_CHAINS = (
    ("chain-3", 3, 3, (3, 37), F32),
    ("chain-8", 8, 6, (2, 3, 17), F32),
    (f"chain-{MAX_STEPS}", MAX_STEPS, 12, (4, 33), F32),
    (f"chain-{MAX_STEPS + 1}", MAX_STEPS + 1, 12, (4, 33), F32),
    ("chain-40", 40, 10, (2, 2, 3, 5), F32),
    (f"chain-inputs-{MAX_INPUTS}", 24, MAX_INPUTS, (3, 37), F32),
    (f"chain-inputs-{MAX_INPUTS + 1}", 24, MAX_INPUTS + 1, (3, 37), F32),
    ("chain-f16-16", 16, 8, (4, 33), F16),
    ("chain-bf16-16", 16, 8, (4, 33), BF16),
    (f"chain-f16-{MAX_STEPS}", MAX_STEPS, MAX_INPUTS, (2, 3, 11), F16),
)


def chain_graph(name: str, chain, arrays) -> tuple[Graph, dict]:
    """The chain as separate ops over Inputs ``x0, x1, ...`` (what a user's graph holds)."""
    g = Graph(name.replace("-", "_"))
    ids = [g.input(f"x{i}", list(a.shape), DType.of(a)) for i, a in enumerate(arrays)]
    steps = []
    for step in chain:
        kind, payload, operands = step_op(step)
        args = [ids[i] if src == "Input" else steps[i] for src, i in operands]
        shape = get(kind).infer([g.shape(x) for x in args], payload)
        steps.append(g.add_node(Op(kind, payload), args, shape))
    g.set_outputs([steps[-1]])
    return g, {f"x{i}": a for i, a in enumerate(arrays)}


def fused_chain_case(seed: int, name: str, n_steps: int, n_inputs: int, out: tuple,
                     dt: DType) -> Case:
    rng = _rng(seed, f"multi:{name}")
    roles = _roles(n_inputs)
    arrays = region_inputs(rng, roles, out, dt)
    exact16 = dt in (F16, BF16)
    chain, _ = build_chain(rng, n_steps, roles, arrays, exact16, prev_only=True)
    g, feeds = chain_graph(name, chain, arrays)
    tags = ("multi-op", "chain", "fusion", f"steps-{n_steps}", f"inputs-{n_inputs}")
    if n_steps > MAX_STEPS or n_inputs > MAX_INPUTS:
        tags += ("over-caps",)
    elif n_steps == MAX_STEPS or n_inputs == MAX_INPUTS:
        tags += ("caps",)
    if exact16:
        tags += ("fp16-exact",)
    case = make_case(f"multi:{name}", dt.display, g, feeds, tags, None, (), seed, "multi")
    case.accuracy = EXACT16 if exact16 else None
    return case


# ── middle-axis broadcasts inside a fusable run ──────────────────────────────

def _middle_ones(dims: tuple) -> list[tuple]:
    """``dims`` with one inner axis set to 1, for every inner axis (not first, not last)."""
    return [dims[:p] + (1,) + dims[p + 1:] for p in range(1, len(dims) - 1)]


def bcast_chain_case(seed: int, dims: tuple, ones: tuple) -> Case:
    """tanh(x) · s + b (b broadcast along a middle axis) → relu → − c (a trailing block)."""
    name = f"bcast-chain-{'x'.join(map(str, ones))}"
    rng = _rng(seed, f"multi:{name}")
    g = Graph(name.replace("-", "_"))
    x = rng.uniform(-2.0, 2.0, dims).astype(np.float32)
    s = np.float32(0.75)
    b = rng.uniform(-2.0, 2.0, ones).astype(np.float32)
    c = rng.uniform(-2.0, 2.0, dims[-2:]).astype(np.float32)
    feeds = {"x": x, "s": s, "b": b, "c": c}
    ids = {k: g.input(k, list(np.shape(v)), F32) for k, v in feeds.items()}
    h = g.mul(g.activation("Tanh", ids["x"]), ids["s"])
    h = g.activation("Relu", g.add(h, ids["b"]))
    g.set_outputs([g.activation("Sigmoid", g.sub(h, ids["c"]))])
    tags = ("multi-op", "bcast", "fusion", f"rank-{len(dims)}", "middle-axis")
    return make_case(f"multi:{name}", F32.display, g, feeds, tags, None, (), seed, "multi")


def fused_cases(seed: int = 0) -> list[Case]:
    """Every ``multi:chain-*`` and ``multi:bcast-chain-*`` case."""
    out = [fused_chain_case(seed, *row) for row in FUSED_CHAINS]
    for dims in ((2, 3, 4), (2, 3, 2, 5), (2, 3, 2, 3, 4)):
        out += [bcast_chain_case(seed, dims, ones) for ones in _middle_ones(dims)]
    return out
