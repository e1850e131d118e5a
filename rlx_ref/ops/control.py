"""Control family: If, While, Scan, CustomFn — ops that carry nested body graphs.

A body is a Graph payload field; its Input nodes bind the values it receives positionally,
in node order (names are labels only). Bodies are verified recursively (``subgraphs``);
the checks here relate each body's inputs and outputs to the node's operands.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import WHILE_TRIPS, nested
from ..ir.graph import Graph
from ..ir.shape import Dyn
from . import _control_bodies as B
from .codec import BOOL, GRAPH, U32, USIZE, Optional, attr
from .opdef import Caps, OpDef, OpError, register, want

NESTED = Caps.NESTED_BODY


@dataclass(frozen=True)
class IfAttrs:
    then_branch: Graph = attr(GRAPH, doc="run when the predicate is non-zero")
    else_branch: Graph = attr(GRAPH, doc="run when the predicate is zero")


@dataclass(frozen=True)
class WhileAttrs:
    cond: Graph = attr(GRAPH, doc="carried values -> one-element predicate")
    body: Graph = attr(GRAPH, doc="carried values -> next carried values")
    max_iterations: int | None = attr(Optional(USIZE), None, doc="cap on body steps; null = none")


@dataclass(frozen=True)
class ScanAttrs:
    body: Graph = attr(GRAPH, doc="(carry, bcast..., x_t...) -> next carry")
    length: int = attr(U32, doc="number of steps (u32)")
    save_trajectory: bool = attr(BOOL, False, doc="stack every carry instead of the last")
    num_bcast: int = attr(U32, 0, doc="operands passed unchanged to every step")
    num_xs: int = attr(U32, 0, doc="operands sliced along axis 0, one row per step")
    num_checkpoints: int = attr(U32, 0, doc="K > 0: keep K evenly spaced trajectory rows")


@dataclass(frozen=True)
class CustomFnAttrs:
    fwd_body: Graph = attr(GRAPH, doc="the primal computation: num_inputs Inputs, one output")
    vjp_body: Graph | None = attr(Optional(GRAPH), doc="custom reverse rule (autodiff only)")
    jvp_body: Graph | None = attr(Optional(GRAPH), doc="custom forward rule (autodiff only)")
    num_inputs: int = attr(U32, doc="operand count (u32)")


def _out0(body: Graph):
    """First output shape of a body; None when its outputs are missing or invalid."""
    outs = B.body_outputs(body)
    return outs[0] if outs else None


# ── If ─────────────────────────────────────────────────────────────────────

def _check_if(shapes, a, out):
    pred, caps = shapes[0], list(shapes[1:])
    want(B.predicate_dtype_ok(pred.dtype), f"(C1) If predicate must be bool, int or float, "
                                           f"got {pred.dtype}")
    want(pred.numel in (None, 1), f"(C1) If predicate must hold exactly one element, got "
                                  f"{pred}")
    for role in ("then_branch", "else_branch"):
        B.check_binding(getattr(a, role), role, caps, "captures (operands after the predicate)")
    t, e = B.body_outputs(a.then_branch), B.body_outputs(a.else_branch)
    if t is None or e is None:
        return
    want(len(t) == len(e), f"(C4) If branches disagree on output count: then={len(t)} "
                           f"else={len(e)}")
    if t and e:
        want(t[0] == e[0], f"(C4) If branches disagree on the output shape: then gives {t[0]}, "
                           f"else gives {e[0]}")


def _ref_if(ctx, pred, *captures):
    taken = B.truthy(pred, "If predicate")
    branch = ctx.attrs.then_branch if taken else ctx.attrs.else_branch
    return ctx.run_body(branch, list(captures))[0]


register(OpDef(
    kind="If", family="control", attrs=IfAttrs, payload="struct", arity=None, min_arity=1,
    caps=NESTED, input_names=("predicate", "captures..."),
    check=_check_if, infer=lambda s, a: _out0(a.then_branch),
    reference=_ref_if, subgraphs=lambda a: [a.then_branch, a.else_branch],
    doc="Runs one of two bodies. Operands: `[predicate, capture_0, ...]`. The predicate holds "
        "one element; it is true when non-zero (NaN is true). The chosen branch receives the "
        "captures (not the predicate), bound to its Input nodes in node order, and the node's "
        "value is that branch's first output. Both branches take the same captures and give "
        "outputs of the same count and first-output shape.",
    constraints=(
        "C1: the predicate is bool, int or float with exactly one element.",
        "C2: each branch declares one Input per capture.",
        "C3: branch Input #i has capture #i's shape and dtype.",
        "C4: both branches have the same number of outputs (>= 1) and the same first-output "
        "shape, which is the node's shape.",
    ),
    samples=lambda rng: _samples("if_samples", rng),
    notes="RLX's If has num_inputs() = 1, so its generic arity check rejects any capture, and "
          "its infer_shape returns the predicate's shape. rlx_ref makes If variadic (at least "
          "the predicate) and infers the branches' output shape. RLX's inline lowering selects "
          "elementwise with a broadcast predicate while its dynamic path reads the first "
          "element; rlx_ref requires a one-element predicate so both agree.",
))


# ── While ──────────────────────────────────────────────────────────────────

def _check_while(shapes, a, out):
    carried = list(shapes)
    B.check_binding(a.cond, "While cond", carried, "loop-carried values")
    B.check_binding(a.body, "While body", carried, "loop-carried values")
    c = B.body_outputs(a.cond)
    if c is not None:
        want(len(c) == 1, f"(C4) While cond must produce exactly one Bool output, got {len(c)}")
        want(c[0].numel in (None, 1) and B.predicate_dtype_ok(c[0].dtype),
             f"(C4) While cond's output must be one bool/int/float element, got {c[0]}")
    b = B.body_outputs(a.body)
    if b is not None:
        want(len(b) == len(carried), f"(C5) While body must produce one value per loop-carried "
                                     f"input ({len(carried)} expected), got {len(b)}")
        for i, (got, want_s) in enumerate(zip(b, carried)):
            want(got == want_s, f"(C5) While body output #{i} is {got} but carried value #{i} "
                                f"is {want_s}")


def _ref_while(ctx, *carried):
    a, state, steps = ctx.attrs, list(carried), 0
    while a.max_iterations is None or steps < a.max_iterations:
        if not B.truthy(ctx.run_body(a.cond, state)[0], "While cond output"):
            break
        state = ctx.run_body(a.body, state)
        steps += 1
    return state[0]


register(OpDef(
    kind="While", family="control", attrs=WhileAttrs, payload="struct", arity=None,
    min_arity=1, caps=NESTED, input_names=("carried...",),
    check=_check_while, infer=lambda s, a: s[0], reference=_ref_while,
    subgraphs=lambda a: [a.cond, a.body],
    doc="Loops while `cond` is true: `state = operands; repeat: if cond(state) == 0: stop; "
        "state = body(state)`. `cond` and `body` each take the loop-carried values as their "
        "Inputs (node order); `cond` gives one one-element predicate (non-zero = continue), "
        "`body` gives the next value of every carried value with unchanged shapes. The cond "
        "runs before every step, so zero steps are possible. **Limit:** with "
        "`max_iterations = n`, at most n body steps run; when the n-th step finishes the loop "
        "stops without evaluating `cond` again and without error, and the result is the state "
        "after n steps (RLX's run_while and its unrolled lowering agree). `null` means no cap. "
        "The node's value is the first carried value.",
    constraints=(
        "C1: at least one loop-carried operand; the node has carried[0]'s shape.",
        "C2: cond and body each declare one Input per carried value.",
        "C3: their Input #i has carried value #i's shape and dtype.",
        "C4: cond has exactly one output, one bool/int/float element.",
        "C5: body has one output per carried value, each with that value's shape and dtype.",
    ),
    samples=lambda rng: _samples("while_samples", rng),
    accuracy=nested(lambda a: a.max_iterations or WHILE_TRIPS),
    notes="RLX's unrolling lowering needs max_iterations (it panics on null); the oracle runs "
          "an uncapped loop until cond is false. Only carried[0] is observable, as in RLX's "
          "single-output IR.",
))


# ── Scan ───────────────────────────────────────────────────────────────────

def _scan_rows(a) -> int:
    k, n = a.num_checkpoints, a.length
    return k if 0 < k < n else n


def scan_kept_steps(a) -> list:
    """The iterations whose carry a saved trajectory keeps, in row order: every step, or
    with ``0 < num_checkpoints = K < length`` the K steps ``t·length // K`` (C5)."""
    k, n = a.num_checkpoints, a.length
    return [t * n // k for t in range(k)] if 0 < k < n else list(range(n))


def _check_scan(shapes, a, out):
    nb, nx = a.num_bcast, a.num_xs
    n = 1 + nb + nx
    want(len(shapes) == n, f"(C1) Scan takes 1 carry + {nb} broadcast + {nx} per-step inputs "
                           f"= {n}, got {len(shapes)}")
    carry, bcasts, xs = shapes[0], list(shapes[1:1 + nb]), list(shapes[1 + nb:])
    for i, x in enumerate(xs):
        want(x.rank >= 1 and (isinstance(x.dims[0], Dyn) or x.dims[0] == a.length),
             f"(C3) Scan xs #{i} is {x}: its leading dim must be length {a.length}")
    steps = [x.with_dims(x.dims[1:]) for x in xs]
    ins = B.body_inputs(a.body)
    want(len(ins) == n, f"(C2) Scan body must declare {n} Op::Inputs (carry + {nb} broadcast "
                        f"+ {nx} per-step), got {len(ins)}")
    B.check_binding(a.body, "Scan body", [carry] + bcasts + steps, "values per step")
    outs = B.body_outputs(a.body)
    if outs is not None:
        want(len(outs) == 1, f"(C4) Scan body must produce exactly one output (the next "
                             f"carry), got {len(outs)}")
        want(outs[0] == carry, f"(C4) Scan body output is {outs[0]} but the carry is {carry}")
    k = a.num_checkpoints
    want(k <= a.length, f"(C5) Scan num_checkpoints ({k}) exceeds length ({a.length})")
    want(not (0 < k < a.length) or a.save_trajectory,
         f"(C5) Scan num_checkpoints={k} < length={a.length} needs save_trajectory")


def _infer_scan(shapes, a):
    carry = shapes[0]
    if not a.save_trajectory:
        return carry
    return carry.with_dims((_scan_rows(a),) + tuple(carry.dims))


def _ref_scan(ctx, init, *rest):
    a = ctx.attrs
    bcasts, xs = list(rest[:a.num_bcast]), list(rest[a.num_bcast:])
    for i, x in enumerate(xs):
        if x.shape[0] != a.length:
            raise OpError(f"Scan xs #{i} has {x.shape[0]} rows, expected length {a.length}")
    carry, trajectory = init, []
    for t in range(a.length):
        carry = ctx.run_body(a.body, [carry] + bcasts + [x[t] for x in xs])[0]
        trajectory.append(carry)
    if not a.save_trajectory:
        return carry
    if not trajectory:
        return np.zeros((0,) + np.shape(init), ctx.out_np)
    return np.stack([trajectory[r] for r in scan_kept_steps(a)])


register(OpDef(
    kind="Scan", family="control", attrs=ScanAttrs, payload="struct", arity=None,
    min_arity=1, caps=NESTED, input_names=("init", "bcast...", "xs..."),
    check=_check_scan, infer=_infer_scan, reference=_ref_scan,
    subgraphs=lambda a: [a.body],
    doc="A bounded loop with a fixed-shape carry (JAX's `lax.scan`, carry only). Operands: "
        "`[init, bcast_0..bcast_{B-1}, xs_0..xs_{X-1}]` (B = num_bcast, X = num_xs), each "
        "`xs_i` of shape `[length, ...]`. `c = init; for t in 0..length: c = body(c, "
        "*bcasts, *[x[t] for x in xs])`; the body's Inputs bind `[carry, bcasts..., "
        "x_t...]` in node order and its one output is the next carry. Without "
        "`save_trajectory` the value is the final carry; with it, `[length, *carry]` whose row "
        "t is the carry after step t+1 (the last row is the final carry). With "
        "`0 < num_checkpoints = K < length` only K rows are kept: row t is trajectory row "
        "`floor(t·length/K)`, shape `[K, *carry]`. `length = 0` returns init (or an empty "
        "trajectory).",
    constraints=(
        "C1: the node has 1 + num_bcast + num_xs operands.",
        "C2: the body declares 1 + num_bcast + num_xs Inputs.",
        "C3: body Inputs have the shapes of [carry, bcasts..., xs_i[t]...]; every xs_i has "
        "leading dim length.",
        "C4: the body has exactly one output, with the carry's shape and dtype.",
        "C5: num_checkpoints <= length; 0 < num_checkpoints < length needs save_trajectory.",
        "C6: the output is the carry's shape, or [rows, *carry] with a trajectory (rows = K "
        "when 0 < K < length, else length).",
    ),
    samples=lambda rng: _samples("scan_samples", rng),
    accuracy=nested(lambda a: a.length),
    notes="RLX's infer_shape and CPU host path ignore num_checkpoints (they always keep "
          "length rows); rlx_ref follows the Op doc ([K, *carry], rows floor(t·L/K)). The row "
          "mapping is rlx_ref's reading of that doc.",
))


# ── CustomFn ───────────────────────────────────────────────────────────────

def _check_custom_fn(shapes, a, out):
    n = a.num_inputs
    want(len(shapes) == n, f"(C1) CustomFn declares num_inputs={n} but has {len(shapes)} "
                           f"operand(s)")
    B.check_binding(a.fwd_body, "CustomFn fwd_body", list(shapes), "operands")
    outs = B.body_outputs(a.fwd_body)
    if outs is not None:
        want(len(outs) == 1, f"(C4) CustomFn fwd_body must produce exactly one output, got "
                             f"{len(outs)}")
    _check_rule_body(a.vjp_body, "vjp_body", (n + 2,), n)
    _check_rule_body(a.jvp_body, "jvp_body", (2 * n, 2 * n + 1), 1)


def _check_rule_body(body, role, n_inputs: tuple, n_outputs: int) -> None:
    """Autodiff rule bodies are carried untouched; only their input/output counts are checked."""
    if body is None:
        return
    k = len(body.input_nodes())
    want(k in n_inputs, f"(C5) CustomFn {role} declares {k} Op::Inputs, expected "
                        f"{' or '.join(map(str, n_inputs))}")
    outs = B.body_outputs(body)
    if outs is not None:
        want(len(outs) == n_outputs, f"(C5) CustomFn {role} must produce {n_outputs} "
                                     f"output(s), got {len(outs)}")


register(OpDef(
    kind="CustomFn", family="control", attrs=CustomFnAttrs, payload="struct", arity=None,
    caps=NESTED, input_names=("inputs...",),
    check=_check_custom_fn, infer=lambda s, a: _out0(a.fwd_body),
    reference=lambda ctx, *xs: ctx.run_body(ctx.attrs.fwd_body, list(xs))[0],
    subgraphs=lambda a: [b for b in (a.fwd_body, a.vjp_body, a.jvp_body) if b is not None],
    doc="A function with optional custom derivative rules. Forward semantics: run `fwd_body` "
        "with the operands bound to its Inputs in node order; its one output is the value. "
        "`vjp_body` (Inputs: the primals, then Inputs named `primal_output` and `d_output`; "
        "outputs: one gradient per primal) and `jvp_body` (Inputs: the primals, "
        "`tangent_0..tangent_{n-1}`, optionally `primal_output`; one output) are used only by "
        "autodiff and are carried through the payload untouched; null means autodiff "
        "differentiates `fwd_body` itself.",
    constraints=(
        "C1: the node has num_inputs operands.",
        "C2: fwd_body declares num_inputs Inputs.",
        "C3: fwd_body Input #i has operand #i's shape and dtype.",
        "C4: fwd_body has exactly one output, whose shape is the node's.",
        "C5: vjp_body (if any) declares num_inputs + 2 Inputs and num_inputs outputs; jvp_body "
        "(if any) declares 2·num_inputs Inputs (+1 with primal_output) and one output.",
    ),
    samples=lambda rng: _samples("custom_fn_samples", rng),
    notes="RLX's infer_shape returns None for CustomFn; rlx_ref infers fwd_body's output. "
          "With num_inputs = 0 RLX skips its arity check; rlx_ref always requires the count.",
))


def _samples(name: str, rng):
    """Samples live in ``_control_samples`` (it builds bodies with the registry)."""
    from . import _control_samples

    return getattr(_control_samples, name)(rng)
