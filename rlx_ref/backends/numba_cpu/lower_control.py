"""Lowering of the control kinds (If, While, Scan, CustomFn) and the Custom host path.

Each body is compiled once, when the node is lowered, into a SubPlan (its own kernels and
planned buffers); the step drives it from the host: If picks a branch, While and Scan
loop over the compiled body with the state held in numpy arrays (no re-planning per
iteration). A Scan or While whose bodies' steps all declare a ``JitCall`` runs as one
generated njit loop (``loop_driver.py``: no Python per iteration; note "compiled loop").
A body's outputs are fresh arrays on every run, so the
steps return them as the node's value; an operand that would be returned unchanged (zero
trips) is copied, because the caller's buffer may be reused by a later node.
"""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from ...ir.dtype import DType
from ...ops.control import scan_kept_steps
from ...ops.opdef import RefCtx, get
from .loop_driver import host_reason, scan_driver, while_driver
from .lowering import Step, lowers
from .variant_table import use

Source = namedtuple("Source", "name source")      # a body's kernel, for kernel_sources()
ANY = tuple(DType)
BODY_NOTE = "the node drives its compiled bodies from the host; their kinds are lowered " \
            "on their own"


def compile_body(ctx, body):
    """``body`` compiled once (``ctx.compile_body``) into a SubPlan and its kernel sources.

    ``SubPlan.run``/``first`` bind inputs in node order over planned buffers and return
    fresh outputs, with errors naming the body's node; the per-run setup is done once.
    """
    sub = ctx.compile_body(body)
    if sub.body.param_nodes():
        raise ValueError(f"body @{sub.body.name} reads Params, which bodies cannot bind")
    return sub, [Source(n, src) for n, src in sub.kernels.items()]


def _truthy(pred: np.ndarray) -> bool:
    """A one-element predicate is true when non-zero (NaN is true), as the oracle."""
    return bool(pred.reshape(-1)[0] != 0)


@lowers("If", ANY, reason=BODY_NOTE)
def _if(node, ins, ctx):
    (then, k_then), (other, k_other) = (compile_body(ctx, node.attrs.then_branch),
                                        compile_body(ctx, node.attrs.else_branch))

    def run(pred, *captures):
        return (then if _truthy(pred) else other).first(captures)
    return Step(run, k_then + k_other, returns=True, note="host branch")


@lowers("While", ANY, reason=BODY_NOTE)
def _while(node, ins, ctx):
    (cond, k_cond), (body, k_body) = (compile_body(ctx, node.attrs.cond),
                                      compile_body(ctx, node.attrs.body))
    cap = node.attrs.max_iterations

    def host_loop(carried):
        state, steps = list(carried), 0
        while cap is None or steps < cap:
            if not _truthy(cond.first(state)):
                break
            state = body.run(state)
            steps += 1
        return state[0] if steps else state[0].copy()
    drive = while_driver(cond, body, cap)
    loop = _guarded(node, drive, host_loop)
    return _loop_step(lambda *carried: loop(carried), k_cond + k_body, drive, (cond, body))


@lowers("Scan", ANY, reason=BODY_NOTE)
def _scan(node, ins, ctx):
    a = node.attrs
    body, kernels = compile_body(ctx, a.body)
    length, nb = a.length, a.num_bcast
    keep = scan_kept_steps(a)
    row_of = {t: r for r, t in enumerate(keep)}
    dims, dtype = tuple(node.shape.dims), node.shape.dtype.np

    def host_loop(init, bcasts, xs):
        traj = np.empty(dims, dtype) if a.save_trajectory else None
        args = [init, *bcasts, *xs]             # slot 0: the carry; then bcasts, rows
        carry, slots = init, range(1 + nb, len(args))
        for t in range(length):
            args[0] = carry
            for j, x in zip(slots, xs):
                args[j] = x[t, ...]
            carry = body.first(args)
            if traj is not None and t in row_of:
                traj[row_of[t]] = carry
        if traj is not None:
            return traj
        return carry if length else init.copy()

    drive = scan_driver(body, length, nb) if length else None
    compiled = None
    if drive is not None:
        rows = np.full(length, -1, np.int64)    # iteration -> trajectory row (-1: none)
        if a.save_trajectory:
            rows[keep] = np.arange(len(keep))
        carry_dims = tuple(a.body.nodes[a.body.outputs[0]].shape.dims)
        no_traj = np.empty((0, *carry_dims), dtype)

        def compiled(init, bcasts, xs):
            traj = np.empty(dims, dtype) if a.save_trajectory else no_traj
            carry = drive(init, bcasts, xs, traj, rows)
            return traj if a.save_trajectory else carry
    loop = _guarded(node, compiled, host_loop)

    def run(init, *rest):
        xs = rest[nb:]
        for i, x in enumerate(xs):
            if x.shape[0] != length:
                raise ValueError(f"Scan xs #{i} has {x.shape[0]} rows, expected length "
                                 f"{length}")
        return loop(init, list(rest[:nb]), xs)
    return _loop_step(run, kernels, drive, (body,))


def _guarded(node, compiled, host):
    """Run a loop compiled when possible. When ``compiled`` raises, ``host`` runs the
    same loop: its error is raised (it names the body node that failed); should the host
    loop succeed instead, the compiled loop is at fault: a warning says so and the host
    loop runs the node from then on (never a wrong or missing result)."""
    if compiled is None:
        return host
    use = [compiled]

    def loop(*args):
        if use[0] is host:
            return host(*args)
        try:
            return compiled(*args)
        except Exception as e:
            out = host(*args)
            use[0] = host
            warnings.warn(f"%{node.id} {node.kind}: the compiled loop failed "
                          f"({type(e).__name__}: {e}); the host loop runs it from now on",
                          RuntimeWarning, stacklevel=2)
            return out
    return loop


def _loop_step(run, kernels: list, drive, bodies=()) -> Step:
    """The Step of a loop: "compiled loop" with the driver's source, else "host loop" and
    why (the first body step without a compiled form, or a length of 0)."""
    if drive is None:
        use("loop.host")
        why = next((r for r in map(host_reason, (b.plan for b in bodies)) if r), None)
        return Step(run, kernels, returns=True,
                    note=f"host loop ({why})" if why else "host loop")
    use("loop.compiled")
    return Step(run, kernels + [Source(drive.kernel.name, drive.kernel.source)], returns=True,
                note="compiled loop")


@lowers("CustomFn", ANY, reason=BODY_NOTE)
def _custom_fn(node, ins, ctx):
    fwd, kernels = compile_body(ctx, node.attrs.fwd_body)
    return Step(lambda *xs: fwd.first(xs), kernels, returns=True, note="forward body")


@lowers("Custom", ANY, path="host",
        reason="user-registered custom ops have only a reference implementation")
def _custom(node, ins, ctx):
    ref, shape = get("Custom").reference, node.shape
    dt, dims = shape.dtype.np, tuple(shape.dims)

    def run(*xs):
        y = np.asarray(ref(RefCtx(node.attrs, shape, node=node), *xs))
        if y.shape != dims:
            raise ValueError(f"custom op {node.attrs.name!r} returned shape {list(y.shape)}, "
                             f"declared {list(dims)}")
        if y.dtype != dt or not y.flags.c_contiguous or \
                any(np.may_share_memory(y, x) for x in xs):
            y = np.array(y, dt, order="C")      # a view of an operand would be clobbered
        return y
    return Step(run, [], returns=True, note="host reference")
