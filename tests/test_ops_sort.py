"""Sort and ArgSort: stability, ties, ±0, NaN placement, axes, dtypes, checks."""
from __future__ import annotations

import numpy as np
import pytest

from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph
from rlx_ref.ops.opdef import get

F = np.float32


def _run(kind, x, axis, descending=False):
    x = np.asarray(x)
    g = Graph("s")
    g.set_outputs([g.op(kind, [g.input("x", x.shape, DType.of(x))], axis=axis,
                        descending=descending)])
    return interpret(g, {"x": x})[0]


def test_every_hand_sample_matches():
    for kind in ("Sort", "ArgSort"):
        for s in get(kind).samples(np.random.default_rng(0)):
            if s.expect is None:
                continue
            got = _run(kind, s.inputs[0], s.attrs.axis, s.attrs.descending)
            assert np.array_equal(got, s.expect, equal_nan=True), (kind, s.tags)
            if kind == "Sort":
                assert np.array_equal(np.signbit(got), np.signbit(s.expect)), s.tags


@pytest.mark.parametrize("descending", [False, True])
def test_stable_on_many_ties_along_every_axis(descending):
    x = np.random.default_rng(1).integers(0, 3, (4, 6, 5)).astype(F)
    for axis in range(3):
        order = _run("ArgSort", x, axis, descending).astype(np.int64)
        key = -x if descending else x
        assert np.array_equal(order, np.argsort(key, axis=axis, kind="stable"))
        vals = _run("Sort", x, axis, descending)
        assert np.array_equal(vals, np.take_along_axis(x, order, axis))
        # stability: among equal values the source indices increase
        lines = np.moveaxis(order, axis, -1).reshape(-1, x.shape[axis])
        vlines = np.moveaxis(vals, axis, -1).reshape(-1, x.shape[axis])
        for o, v in zip(lines, vlines):
            same = v[1:] == v[:-1]
            assert (o[1:][same] > o[:-1][same]).all()


def test_descending_is_not_the_reversed_ascending_order():
    x = F([1, 2, 1, 2])
    assert _run("ArgSort", x, 0, True).tolist() == [1, 3, 0, 2]
    assert _run("ArgSort", x, 0, False)[::-1].tolist() == [3, 1, 2, 0]


def test_nan_ranks_above_inf_in_input_order():
    x = F([np.nan, 1, np.inf, np.nan, -np.inf])
    assert _run("ArgSort", x, 0).tolist() == [4, 1, 2, 0, 3]
    assert _run("ArgSort", x, 0, True).tolist() == [0, 3, 2, 1, 4]
    s = _run("Sort", x.reshape(1, 5), 1, True)
    assert np.isnan(s[0, :2]).all() and s[0, 2:].tolist() == [np.inf, 1, -np.inf]


def test_integers_keep_their_dtype_and_extremes():
    x = np.array([0, -2**31, 2**31 - 1, 5, -2**31], np.int32)
    assert _run("Sort", x, 0).tolist() == sorted(x.tolist())
    assert _run("ArgSort", x, 0, True).tolist() == [2, 3, 0, 1, 4]
    assert _run("ArgSort", x, 0).dtype == np.int32


def test_f64_and_f16():
    x = np.random.default_rng(2).standard_normal((3, 9))
    assert np.array_equal(_run("Sort", x, 1), np.sort(x, axis=1))
    h = x.astype(np.float16)
    assert np.array_equal(_run("ArgSort", h, 1), np.argsort(h, 1, kind="stable").astype(h.dtype))


def test_checks():
    g = Graph("bad")
    x = g.input("x", [3, 4])
    with pytest.raises(Exception, match="C1"):
        g.op("Sort", [x], axis=2, descending=False)
    b = g.input("b", [3], "bool")
    with pytest.raises(Exception, match="C2"):
        g.op("ArgSort", [b], axis=0, descending=False)
    long16 = g.input("h", [3000], "f16")
    with pytest.raises(Exception, match="C3"):
        g.op("ArgSort", [long16], axis=0, descending=False)
    g.op("Sort", [long16], axis=0, descending=False)        # values need no exact index
