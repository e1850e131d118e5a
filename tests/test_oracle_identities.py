"""Oracle self-checks: identities between ops.

Control flow == the same ops inline (Scan unrolled, While as a Scan without xs, If as
Where), indexing identities (Gather / ScatterAdd round trips, ArgMax / ArgMin index the
Reduce Max / Min values, TopK gathers the sorted values) and movement round trips (Reshape,
Transpose, Reverse, Narrow of a Concat). Each check builds ONE graph holding every side
and runs it on the oracle; the shared helpers live in tests/_oracle_graphs.py.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rlx_ref
from rlx_ref import DType

from _oracle_graphs import FAST, RNG, agree, body_graph, f32, run, same_bits, shapes


# ── control flow == the same ops inline ───────────────────────────────────

def step_fn(g, c, b, x, y):
    """One loop step: tanh(c·b + x) - y/2 (non-linear, so step order matters)."""
    return (c * b + x).tanh() - y * 0.5


@pytest.mark.parametrize("length, trajectory, checkpoints",
                         [(5, False, 0), (5, True, 0), (7, True, 3), (1, True, 0), (0, False, 0)])
def test_scan_with_two_xs_and_a_bcast_is_the_unrolled_graph(length, trajectory, checkpoints):
    n = 3
    body = body_graph("s", step_fn, (n,), (n,), (n,), (n,))
    init, b, xs, ys = f32(n), f32(n, spread=0.7), f32(length, n), f32(length, n)

    def fn(g, init, b, xs, ys):
        scan = g.op("Scan", init, b, xs, ys, body=body, length=length,
                    save_trajectory=trajectory, num_bcast=1, num_xs=2,
                    num_checkpoints=checkpoints)
        c, rows = init, []
        for t in range(length):
            row = [s.narrow(axis=0, start=t, len=1).reshape(n) for s in (xs, ys)]
            c = step_fn(g, c, b, *row)
            rows.append(c.reshape(1, n))
        if checkpoints:
            rows = [rows[t * length // checkpoints] for t in range(checkpoints)]
        return [scan, g.concat(rows, axis=0) if trajectory else c]
    agree(fn, init, b, xs, ys, exact=True)


def sin_step(g, c):
    """A non-linear step: each extra iteration changes the value."""
    return (c * 0.75 + 1.0).sin()


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_while_with_a_counter_or_max_iterations_is_a_scan_without_xs(steps):
    n, f = 3, sin_step
    scan_body = body_graph("s", f, (n,))
    counted = body_graph("b", lambda g, c, i: [f(g, c), i + 1.0], (n,), ())
    below = body_graph("c", lambda g, c, i: i < float(steps), (n,), ())
    forever = body_graph("c", lambda g, c: g.scalar(True, DType.BOOL), (n,))
    capped = body_graph("b", f, (n,))

    def fn(g, init):
        zero = g.scalar(0.0, init.dtype)
        return [g.op("Scan", init, body=scan_body, length=steps, save_trajectory=False,
                     num_bcast=0, num_xs=0, num_checkpoints=0),
                g.op("While", init, zero, cond=below, body=counted, max_iterations=None),
                g.op("While", init, cond=forever, body=capped, max_iterations=steps)]
    for f64 in (False, True):
        scan, counted_loop, capped_loop = run(fn, f32(n), float64=f64)
        assert scan.tobytes() == counted_loop.tobytes() == capped_loop.tobytes()


@FAST
@given(hnp.arrays(np.float32, 3, elements=st.one_of(
    st.floats(-3, 3, width=32), st.sampled_from([0.0, -0.0, np.nan]))))
def test_if_picks_the_branch_where_would(x):
    y = np.float32([4, -5, 6])
    then = body_graph("t", lambda g, p, q: p - q, (3,), (3,))
    other = body_graph("e", lambda g, p, q: p * q, (3,), (3,))

    def fn(g, x, y):
        out = []
        for pred in (x.sum(0) > 0.0, x.sum(0), x.narrow(axis=0, start=0, len=1)):
            # a float predicate is true when non-zero, NaN included, as Where's cond
            out += [g.op("If", pred, x, y, then_branch=then, else_branch=other),
                    g.where_(pred, x - y, x * y)]
        return out
    outs = run(fn, x, y)
    for got, want in zip(outs[::2], outs[1::2]):
        assert same_bits(got, want)


# ── indexing identities ───────────────────────────────────────────────────

@FAST
@given(st.data())
def test_gather_of_scatter_add_and_scatter_of_gather_round_trip(data):
    out_dim, width = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 3))
    k = data.draw(st.integers(1, out_dim))
    perm = np.float32(data.draw(st.permutations(range(out_dim))))
    idx = perm[:k]                                           # unique row indices
    # dyadic updates: every sum below is exact, whatever order it is taken in
    upd = data.draw(hnp.arrays(np.float32, (k, width), elements=st.integers(-72, 72))) / 8
    table = RNG.standard_normal((out_dim, width)).astype(np.float32)

    def fn(g, upd, idx, table, perm):
        scattered = g.op("ScatterAdd", upd, idx, shape=rlx_ref.Shape([out_dim, width],
                                                                     DType.F32))
        # rows nobody wrote stay zero: Sum of the scatter == Sum of the updates
        return [scattered.gather(idx, axis=0), upd,
                g.op("ScatterAdd", table.gather(perm, axis=0), perm,
                     shape=rlx_ref.Shape([out_dim, width], DType.F32)), table,
                scattered.sum((0,)), upd.sum((0,))]
    for f64 in (False, True):
        outs = run(fn, upd, idx, table, perm, float64=f64)
        for got, want in zip(outs[::2], outs[1::2]):
            np.testing.assert_array_equal(got, want)


@FAST
@given(st.data())
def test_arg_max_and_min_index_the_reduce_max_and_min_values(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    # coarse values: many ties, NaN and ±inf
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.sampled_from(
        [-np.inf, -1.0, -0.0, 0.0, 0.5, 2.0, np.inf, np.nan])))

    def fn(g, x):
        out = []
        for arg, red in (("ArgMax", "Max"), ("ArgMin", "Min")):
            i = g.op(arg, x, axis=axis, keep_dim=True)
            out += [x.gather_elements(i, axis=axis), x.reduce(red, axis, True), i]
        return out
    gmax, rmax, imax, gmin, rmin, imin = run(fn, x)
    lead_nan = np.isnan(np.take(x, [0], axis=axis))
    for got, want, i in ((gmax, rmax, imax), (gmin, rmin, imin)):
        # documented (RLX's scan from element 0): a slice whose element 0 is NaN gives
        # index 0 (its NaN); otherwise the index holds the NaN-ignoring Reduce's value
        np.testing.assert_array_equal(np.where(lead_nan, want, got), want)
        assert (i[lead_nan] == 0).all()
        # ties (-0 and +0 included) pick the lowest index holding the value
        first = np.argmax(np.take_along_axis(x, i.astype(np.int64), axis) == x, axis=axis)
        np.testing.assert_array_equal(first, np.squeeze(i, axis))


@FAST
@given(st.data())
def test_topk_indices_gather_sorted_values_and_k1_is_reduce_max(data):
    shape = data.draw(shapes)
    k = data.draw(st.integers(1, shape[-1]))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.sampled_from(
        [-np.inf, -2.0, -0.5, 0.0, 1.0, 3.0, np.inf])))
    idx_shape = rlx_ref.Shape(shape[:-1] + (k,), DType.F32)
    one = rlx_ref.Shape(shape[:-1] + (1,), DType.F32)

    def fn(g, x):
        top = g.op("TopK", x, k=k, shape=idx_shape)
        first = g.op("TopK", x, k=1, shape=one)
        return [x.gather_elements(top, axis=-1), x.gather_elements(first, axis=-1),
                x.reduce("Max", len(shape) - 1, True), top]
    vals, v1, rmax, top = run(fn, x)
    np.testing.assert_array_equal(vals, -np.sort(-x, axis=-1)[..., :k])
    np.testing.assert_array_equal(v1, rmax)
    assert (np.sort(top, axis=-1)[..., 1:] != np.sort(top, axis=-1)[..., :-1]).all()


# ── movement identities ───────────────────────────────────────────────────

@FAST
@given(st.data())
def test_movement_round_trips_are_identities(data):
    shape = data.draw(shapes)
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(width=32)))
    perm = data.draw(st.permutations(range(len(shape))))
    inv = tuple(int(i) for i in np.argsort(perm))
    axes = tuple(data.draw(st.lists(st.integers(0, len(shape) - 1), max_size=3)))
    flat = (-1,) if data.draw(st.booleans()) else (math.prod(shape), 1)
    ax = data.draw(st.integers(0, len(shape) - 1))
    cut = data.draw(st.integers(0, shape[ax]))

    def fn(g, x):
        lo, hi = (x.narrow(axis=ax, start=s, len=n) for s, n in ((0, cut),
                                                                  (cut, shape[ax] - cut)))
        joined = g.concat([lo, hi, x], axis=ax)
        return [x.reshape(flat).reshape(shape), x.transpose(perm).transpose(inv),
                x.reverse(axes=axes).reverse(axes=axes), joined.narrow(axis=ax, start=0,
                                                                        len=shape[ax]),
                joined.narrow(axis=ax, start=shape[ax], len=shape[ax])]
    for out in run(fn, x, float64=True) + run(fn, x):
        assert out.dtype in (np.float32, np.float64) and out.shape == x.shape
        assert same_bits(out.astype(np.float32), x)
