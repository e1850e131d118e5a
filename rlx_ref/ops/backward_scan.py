"""Backward scan family: ScanBackward and ScanBackwardXs, the reverse-mode companions of Scan.

Both take RLX's operands ``[init, trajectory, upstream, xs_0..]`` and walk the forward
loop backwards through ``body_vjp`` (the body's gradient with respect to ``[carry, x_t..]``,
plus an Input named ``d_output``); ScanBackward returns ``dinit``, ScanBackwardXs the
stacked ``dxs_{xs_idx}``. With ``0 < num_checkpoints = K < length`` the trajectory holds
only the forward Scan's K checkpoint rows and each step's input carry is recomputed with
``forward_body`` from the nearest saved row, one segment at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import nested
from ..ir.graph import Graph
from ..ir.shape import Dyn
from . import _control_bodies as B
from .codec import BOOL, GRAPH, U32, Optional, attr
from .control import scan_kept_steps
from .opdef import Caps, OpDef, register, want

SEED = "d_output"       # the name of body_vjp's cotangent Input (RLX binds it by name)


@dataclass(frozen=True)
class ScanBackwardAttrs:
    body_vjp: Graph = attr(GRAPH, doc="(carry, x_t..., d_output) -> (dcarry, dx_t...)")
    length: int = attr(U32, doc="number of forward steps (u32)")
    save_trajectory: bool = attr(BOOL, False, doc="upstream is per trajectory row, not final")
    num_xs: int = attr(U32, 0, doc="per-step operands after upstream")
    num_checkpoints: int = attr(U32, 0, doc="the forward Scan's K (0 < K < length: recompute)")
    forward_body: Graph | None = attr(Optional(GRAPH), None,
                                      doc="the forward body, to recompute between checkpoints")


@dataclass(frozen=True)
class ScanBackwardXsAttrs:
    body_vjp: Graph = attr(GRAPH, doc="(carry, x_t..., d_output) -> (dcarry, dx_t...)")
    length: int = attr(U32, doc="number of forward steps (u32)")
    save_trajectory: bool = attr(BOOL, False, doc="upstream is per trajectory row, not final")
    num_xs: int = attr(U32, 0, doc="per-step operands after upstream")
    xs_idx: int = attr(U32, 0, doc="which xs gradient to stack (body_vjp output 1 + xs_idx)")
    num_checkpoints: int = attr(U32, 0, doc="the forward Scan's K (0 < K < length: recompute)")
    forward_body: Graph | None = attr(Optional(GRAPH), None,
                                      doc="the forward body, to recompute between checkpoints")


def checkpointed(a) -> bool:
    """Whether the trajectory holds only K < length checkpoint rows (recompute needed)."""
    return 0 < a.num_checkpoints < a.length


def vjp_inputs(body_vjp: Graph) -> tuple[list, list]:
    """body_vjp's primal Inputs (node order: carry, x_t...) and its ``d_output`` Inputs."""
    ins = body_vjp.input_nodes()
    return ([n for n in ins if n.attrs.name != SEED], [n for n in ins if n.attrs.name == SEED])


def _lead_ok(dim, n: int) -> bool:
    return isinstance(dim, Dyn) or dim == n


# ── verifier ───────────────────────────────────────────────────────────────

def _check_common(shapes, a):
    """C1-C7; returns (init, per-step xs shapes)."""
    nx = a.num_xs
    want(len(shapes) == 3 + nx, f"(C1) takes [init, trajectory, upstream] + {nx} xs = "
                                f"{3 + nx} operands, got {len(shapes)}")
    init, traj, up, xs = shapes[0], shapes[1], shapes[2], list(shapes[3:])
    for i, x in enumerate(xs):
        want(x.rank >= 1 and _lead_ok(x.dims[0], a.length),
             f"(C5) xs #{i} is {x}: its leading dim must be length {a.length}")
    steps = [x.with_dims(x.dims[1:]) for x in xs]
    primal, seeds = vjp_inputs(a.body_vjp)
    want(len(primal) + len(seeds) == 2 + nx and len(seeds) == 1,
         f"(C2) body_vjp must declare {2 + nx} Op::Inputs (carry + {nx} x_t + one named "
         f"{SEED!r}), got {len(primal)} plus {len(seeds)} named {SEED!r}")
    for i, (n, s) in enumerate(zip(primal, [init] + steps)):
        want(n.shape == s, f"(C3) body_vjp input #{i} is declared {n.shape} but is bound to {s}")
    want(seeds[0].shape == init, f"(C3) body_vjp's {SEED!r} is {seeds[0].shape} but the carry "
                                 f"is {init}")
    outs = B.body_outputs(a.body_vjp)
    if outs is not None:
        want(len(outs) == 1 + nx, f"(C4) body_vjp must produce 1 + {nx} outputs (dcarry, "
                                  f"dx_t...), got {len(outs)}")
        for i, (o, s) in enumerate(zip(outs, [init] + steps)):
            want(o == s, f"(C4) body_vjp output #{i} is {o}, expected {s}")
    rows = a.num_checkpoints if checkpointed(a) else a.length
    want(traj.rank == init.rank + 1 and _lead_ok(traj.dims[0], rows)
         and traj.with_dims(traj.dims[1:]) == init,
         f"(C5) trajectory is {traj}, expected [{rows}, *carry] with carry {init}")
    expect_up = traj if a.save_trajectory else init
    want(up == expect_up, f"(C5) upstream is {up}, expected {expect_up} "
                          f"(save_trajectory={a.save_trajectory})")
    k = a.num_checkpoints
    want(k <= a.length, f"(C6) num_checkpoints ({k}) exceeds length ({a.length})")
    want(not checkpointed(a) or (a.save_trajectory and a.forward_body is not None),
         f"(C6) num_checkpoints={k} < length={a.length} needs save_trajectory and a "
         "forward_body")
    if a.forward_body is not None:
        fins = B.body_inputs(a.forward_body)
        want(fins == [init] + steps, f"(C7) forward_body declares Inputs {fins}, expected "
                                     f"{[init] + steps} (carry, x_t...)")
        fouts = B.body_outputs(a.forward_body)
        want(fouts is None or fouts == [init], f"(C7) forward_body must produce one output "
                                               f"with the carry's shape {init}, got {fouts}")
    return init, steps


def _check_dinit(shapes, a, out):
    _check_common(shapes, a)


def _check_dxs(shapes, a, out):
    _check_common(shapes, a)
    want(a.xs_idx < a.num_xs, f"(C8) xs_idx ({a.xs_idx}) must be < num_xs ({a.num_xs})")


def _infer_dxs(shapes, a):
    want(a.xs_idx < a.num_xs and 3 + a.xs_idx < len(shapes),
         f"(C8) xs_idx ({a.xs_idx}) must be < num_xs ({a.num_xs})")
    return shapes[3 + a.xs_idx]


# ── oracle ─────────────────────────────────────────────────────────────────

def input_carries(ctx, init, traj, xs):
    """``(t, carry entering step t)`` for t = length-1 .. 0. Checkpointed: segment by
    segment from the last, each recomputed with forward_body from its saved row (row r is
    the carry after step kept[r] + 1), so at most one segment's carries are held."""
    a, n = ctx.attrs, ctx.attrs.length
    if not checkpointed(a):
        for t in reversed(range(n)):
            yield t, init if t == 0 else traj[t - 1]
        return
    starts = [0] + [s + 1 for s in scan_kept_steps(a)]        # every start is < length
    anchors = [init] + [traj[r] for r in range(a.num_checkpoints)]
    ends = starts[1:] + [n]
    for j in reversed(range(len(starts))):
        seg = [anchors[j]]
        for t in range(starts[j], ends[j] - 1):
            seg.append(ctx.run_body(a.forward_body, [seg[-1]] + [x[t] for x in xs])[0])
        for t in reversed(range(starts[j], ends[j])):
            yield t, seg[t - starts[j]]


def _sweep(ctx, init, traj, up, xs, keep: int | None):
    """The reverse loop; returns dinit, or the stacked dx of xs ``keep``."""
    a = ctx.attrs
    row_of = {t: r for r, t in enumerate(scan_kept_steps(a))} if a.save_trajectory else {}
    dcarry = np.zeros_like(init) if a.save_trajectory else up
    dxs = None if keep is None else np.zeros_like(xs[keep])
    primal, _ = vjp_inputs(a.body_vjp)
    for t, carry in input_carries(ctx, init, traj, xs):
        if t in row_of:
            dcarry = dcarry + up[row_of[t]]
        vals = iter([carry] + [x[t] for x in xs])
        args = [dcarry if n.attrs.name == SEED else next(vals)
                for n in a.body_vjp.input_nodes()]
        outs = ctx.run_body(a.body_vjp, args)
        dcarry = outs[0]
        if dxs is not None:
            dxs[t] = outs[1 + keep]
    return dcarry if keep is None else dxs


def _ref_dinit(ctx, init, traj, up, *xs):
    return _sweep(ctx, init, traj, up, xs, None)


def _ref_dxs(ctx, init, traj, up, *xs):
    return _sweep(ctx, init, traj, up, xs, ctx.attrs.xs_idx)


# ── records ────────────────────────────────────────────────────────────────

_COMMON = (
    "C1: the node has 3 + num_xs operands: [init, trajectory, upstream, xs_0, ...].",
    f"C2: body_vjp declares 2 + num_xs Inputs: exactly one named `{SEED}`, and the others "
    "bind [carry, x_t_0, ...] in node order.",
    f"C3: those Inputs have the shapes of [init, xs_i[t]...]; `{SEED}` has init's shape.",
    "C4: body_vjp has 1 + num_xs outputs: dcarry (init's shape), then dx_t_i (xs_i[t]'s).",
    "C5: trajectory is [rows, *init] (rows = K when 0 < K < length, else length); upstream "
    "has the trajectory's shape with save_trajectory, else init's; every xs_i has leading "
    "dim length.",
    "C6: num_checkpoints <= length; 0 < K < length needs save_trajectory and forward_body.",
    "C7: forward_body, when present, declares Inputs of the shapes [init, xs_i[t]...] and "
    "has one output with init's shape.",
)
_WALK = (
    "Walks the forward Scan backwards: `d = upstream` (without save_trajectory) or zeros; "
    "for t = length-1 .. 0: with save_trajectory, `d += upstream[r]` when trajectory row r "
    "holds the carry after step t+1; then `(d, dx_t...) = body_vjp(carry_t, x_t..., "
    f"{SEED}=d)`, where carry_t is the carry entering step t (init for t = 0, else "
    "trajectory row t-1). With `0 < num_checkpoints = K < length` the trajectory holds the "
    "forward Scan's K rows (row r is the carry after step floor(r·length/K)+1): the steps "
    "are cut into segments that start at init or after a saved row, and each segment's "
    "carries are recomputed with `forward_body` from its start before it is walked, so "
    "O(K + length/K) carries are live. `body_vjp` is the body's gradient with respect to "
    f"[carry, x_t...] (rlx_ref's `grad`): Inputs (carry, x_t..., `{SEED}`), outputs "
    "(dcarry, dx_t...). Operands: `[init, trajectory, upstream, xs_0..]`. ")
_NOTES = (
    "RLX's CPU executor recomputes from checkpoints t_k = ceil((k+1)·length/K) - 1 "
    "(Griewank bisection), and its pre-pass hands it a [length, *carry] upstream even when "
    "checkpointed; rlx_ref follows the forward Scan's doc (rows floor(r·length/K)) so the "
    "upstream is the [K, *carry] gradient of the Scan's own value. Each backward kind runs "
    "its own sweep, as RLX.")

register(OpDef(
    kind="ScanBackward", family="backward", attrs=ScanBackwardAttrs, payload="struct",
    arity=None, min_arity=3, caps=Caps.NESTED_BODY,
    input_names=("init", "trajectory", "upstream", "xs..."),
    check=_check_dinit, infer=lambda s, a: s[0] if s else None, reference=_ref_dinit,
    subgraphs=lambda a: [b for b in (a.body_vjp, a.forward_body) if b is not None],
    doc=_WALK + "The value is the final d: the gradient of the Scan's value with respect "
                "to init, shape init's.",
    constraints=_COMMON + ("C8: the node has init's shape.",),
    samples=lambda rng: _samples("scan_backward_samples", rng),
    accuracy=nested(lambda a: a.length), notes=_NOTES,
))

register(OpDef(
    kind="ScanBackwardXs", family="backward", attrs=ScanBackwardXsAttrs,
    payload="struct", arity=None, min_arity=3, caps=Caps.NESTED_BODY,
    input_names=("init", "trajectory", "upstream", "xs..."),
    check=_check_dxs, infer=_infer_dxs, reference=_ref_dxs,
    subgraphs=lambda a: [b for b in (a.body_vjp, a.forward_body) if b is not None],
    doc=_WALK + "The value stacks body_vjp's output 1 + xs_idx over the steps: row t is "
                "dx_t of xs_{xs_idx}, shape xs_{xs_idx}'s.",
    constraints=_COMMON + ("C8: xs_idx < num_xs; the node has xs_{xs_idx}'s shape.",),
    samples=lambda rng: _samples("scan_backward_xs_samples", rng),
    accuracy=nested(lambda a: a.length), notes=_NOTES,
))


def _samples(name: str, rng):
    """Samples live in ``_backward_scan_samples`` (it builds bodies with the registry)."""
    from . import _backward_scan_samples

    return getattr(_backward_scan_samples, name)(rng)
