"""Samples of the control family, with small bodies built from elementwise ops and leaves."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ._control_bodies import add, binary, constant, make_body
from .control import CustomFnAttrs, IfAttrs, ScanAttrs, WhileAttrs
from .opdef import Sample, get

F, D = DType.F32, DType.F64


def _vec(*v, dt=np.float32):
    return np.array(v, dt)


def _pair_branches(dt=F, n=3):
    s = Shape([n], dt)
    then = make_body("then", [s, s], lambda g, x, y: binary(g, "Add", x, y))
    other = make_body("else", [s, s], lambda g, x, y: binary(g, "Mul", x, y))
    return IfAttrs(then, other)


def cumsum_scan(length: int, dt=F, n=3, trajectory=True, checkpoints=0) -> ScanAttrs:
    """Scan attrs whose body adds the step row to the carry (a cumulative sum)."""
    s = Shape([n], dt)
    body = make_body("step", [s, s], lambda g, c, x: binary(g, "Add", c, x))
    return ScanAttrs(body, length, trajectory, 0, 1, checkpoints)


def if_samples(rng):
    A = _pair_branches()
    x, y = _vec(1, 2, 3), _vec(4, 5, 6)
    e = Shape([0, 3], F)
    empty = IfAttrs(make_body("then", [e], lambda g, a: binary(g, "Add", a, a)),
                    make_body("else", [e], lambda g, a: binary(g, "Mul", a, a)))
    consts = IfAttrs(make_body("then", [], lambda g: constant(g, [1.5, 2.5])),
                     make_body("else", [], lambda g: constant(g, [-1.0, 0.0])))
    # nested: then = cumulative-sum Scan over the captured rows; else = the init unchanged
    s3, s43 = Shape([3], F), Shape([4, 3], F)
    inner = cumsum_scan(4, trajectory=False)
    nested = IfAttrs(
        make_body("then", [s3, s43], lambda g, c, xs: add(g, "Scan", inner, c, xs)),
        make_body("else", [s3, s43], lambda g, c, xs: c))
    rows = np.arange(-6, 6, dtype=np.float32).reshape(4, 3) / 4   # exact sums
    return [
        Sample((np.bool_(True), x, y), A, tags=("0-d", "bool"), expect=x + y),
        Sample((_vec(0.0), x, y), A, tags=("size-1",), expect=x * y),
        Sample((np.float32(np.nan), x, y), A, tags=("nan",), expect=x + y),
        Sample((np.float32(-0.0), x, y), A, tags=("±0",), expect=x * y),
        Sample((np.int32(-2), x, y), A, tags=("int",), expect=x + y),
        Sample((np.bool_(False), np.zeros((0, 3), np.float32)), empty, tags=("empty",),
               expect=np.zeros((0, 3), np.float32)),
        Sample((np.bool_(False),), consts, tags=("no-captures",), expect=_vec(-1.0, 0.0)),
        Sample((np.bool_(True), _vec(1, 1, 1), rows), nested, tags=("nested",),
               expect=1 + rows[0] + rows[1] + rows[2] + rows[3]),
        Sample((np.bool_(False), _vec(1, 1, 1), rows), nested, tags=("nested",),
               expect=_vec(1, 1, 1)),
        Sample((np.bool_(True), rng.standard_normal(3), rng.standard_normal(3)),
               _pair_branches(D), tags=("f64",)),
    ]


def doubling_loop(dt=F, max_iterations=None, limit=5.0) -> WhileAttrs:
    """Carried (acc [3], i []): while i < limit: acc *= 2, i += 1."""
    sa, si = Shape([3], dt), Shape([], dt)
    lt = get("Compare").attrs("Lt")
    cond = make_body("cond", [sa, si],
                     lambda g, acc, i: add(g, "Compare", lt, i, constant(g, limit, dt)))
    body = make_body("body", [sa, si], lambda g, acc, i: [
        binary(g, "Mul", acc, constant(g, 2.0, dt)), binary(g, "Add", i, constant(g, 1.0, dt))])
    return WhileAttrs(cond, body, max_iterations)


def while_samples(rng):
    acc = _vec(1, -2, 0.5)
    si = Shape([], F)
    lt = get("Compare").attrs("Lt")
    count = WhileAttrs(
        make_body("cond", [si], lambda g, i: add(g, "Compare", lt, i, constant(g, 5.0))),
        make_body("body", [si], lambda g, i: binary(g, "Add", i, constant(g, 1.0))), None)
    return [
        Sample((acc, np.float32(0)), doubling_loop(), tags=("loop",), expect=acc * 32),
        Sample((acc, np.float32(0)), doubling_loop(max_iterations=3), tags=("max-iterations",),
               expect=acc * 8),
        Sample((acc, np.float32(0)), doubling_loop(max_iterations=5), tags=("max-iterations",),
               expect=acc * 32),
        Sample((acc, np.float32(7)), doubling_loop(), tags=("zero-iterations",), expect=acc),
        Sample((acc, np.float32(0)), doubling_loop(max_iterations=0), tags=("zero-iterations",),
               expect=acc),
        Sample((np.float32(0.5),), count, tags=("0-d", "counting"), expect=np.float32(5.5)),
        Sample((rng.standard_normal(3), np.float64(1)), doubling_loop(D), tags=("f64",)),
    ]


def scan_samples(rng):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    x5 = np.round(rng.standard_normal((5, 3)) * 8).astype(np.float32) / 8   # exact sums
    init = _vec(1, 0, -1)
    s3 = Shape([3], F)
    fma = make_body("fma", [s3, s3, s3],
                    lambda g, c, b, t: binary(g, "Add", binary(g, "Mul", c, b), t))
    b = _vec(0.5, -1, 2)
    fma_expect = init.copy()
    for t in range(4):
        fma_expect = fma_expect * b + x[t]
    s0 = Shape([], F)
    double = ScanAttrs(make_body("dbl", [s0], lambda g, c: binary(g, "Add", c, c)), 3, False,
                       0, 0, 0)
    return [
        Sample((init, x), cumsum_scan(4), tags=("trajectory",), expect=init + np.cumsum(x, 0)),
        Sample((init, x), cumsum_scan(4, trajectory=False), expect=init + x.sum(0)),
        Sample((init, b, x), ScanAttrs(fma, 4, False, 1, 1, 0), tags=("broadcast",),
               expect=fma_expect),
        Sample((init, x5), cumsum_scan(5, checkpoints=2), tags=("checkpoints",),
               expect=(init + np.cumsum(x5, 0))[[0, 2]]),
        Sample((init, x5), cumsum_scan(5, checkpoints=5), tags=("checkpoints",),
               expect=init + np.cumsum(x5, 0)),
        Sample((init, np.zeros((0, 3), np.float32)), cumsum_scan(0), tags=("empty",),
               expect=np.zeros((0, 3), np.float32)),
        Sample((init, np.zeros((0, 3), np.float32)), cumsum_scan(0, trajectory=False),
               tags=("empty",), expect=init),
        Sample((np.float32(1.5),), double, tags=("0-d", "no-xs"), expect=np.float32(12)),
        Sample((rng.standard_normal(3), rng.standard_normal((3, 3))), cumsum_scan(3, D),
               tags=("f64",)),
    ]


def custom_fn_samples(rng):
    s3 = Shape([3], F)
    fwd = make_body("fwd", [s3, s3],
                    lambda g, a, b: binary(g, "Add", binary(g, "Mul", a, b), a))
    # d(ab + a)/da = b + 1, d/db = a
    vjp = make_body("vjp", [s3] * 4, lambda g, a, b, y, d: [
        binary(g, "Mul", d, binary(g, "Add", b, constant(g, 1.0))), binary(g, "Mul", d, a)],
        names=["a", "b", "primal_output", "d_output"])
    s0 = Shape([], F)
    sq = make_body("fwd", [s0], lambda g, a: binary(g, "Mul", a, a))
    sq_jvp = make_body("jvp", [s0, s0], lambda g, a, t: binary(
        g, "Mul", binary(g, "Add", a, a), t), names=["a", "tangent_0"])
    a, b = _vec(1, 2, 3), _vec(-1, 0.5, 4)
    fwd64 = make_body("fwd", [Shape([2], D)], lambda g, v: binary(g, "Sub", v, v))
    return [
        Sample((a, b), CustomFnAttrs(fwd, vjp, None, 2), tags=("vjp",), expect=a * b + a),
        Sample((a, b), CustomFnAttrs(fwd, None, None, 2), expect=a * b + a),
        Sample((np.float32(-3),), CustomFnAttrs(sq, None, sq_jvp, 1), tags=("0-d", "jvp"),
               expect=np.float32(9)),
        Sample((rng.standard_normal(2),), CustomFnAttrs(fwd64, None, None, 1), tags=("f64",),
               expect=np.zeros(2)),
    ]
