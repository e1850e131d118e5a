"""Scan unrolling: which Scans unroll (length, budget, checkpoints, claim) and the exact
graph an unrolled Scan becomes, written by hand."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import ScanAttrs
from rlx_ref.passes import PassLog, SupportTable
from rlx_ref.passes.unroll_scans import unroll_scans

F32 = DType.F32
S2 = Shape((2,), F32)


def add_body():
    """carry + x_t (RLX's test body)."""
    return make_body("body", [S2, S2], lambda b, c, x: b.add(c, x), names=["c", "x"])


def scan_graph(length, save=False, checkpoints=0, body=None):
    g = Graph("main")
    init, xs = g.input("init", [2]), g.input("xs", [length, 2])
    a = ScanAttrs(body or add_body(), length, save_trajectory=save, num_xs=1,
                  num_checkpoints=checkpoints)
    g.set_outputs([g.op("Scan", (init, xs), a)])
    return g


def test_short_scan_becomes_narrow_reshape_and_body_per_step():
    want = Graph("main")
    init, xs = want.input("init", [2]), want.input("xs", [3, 2])
    carry = init
    for t in range(3):
        x_t = want.reshape(want.op("Narrow", (xs,), axis=0, start=t, len=1), (2,))
        carry = want.add(carry, x_t)
    want.set_outputs([carry])
    log = PassLog()
    got = unroll_scans(scan_graph(3), log=log)
    assert got == want, got.to_text()
    assert log.rewritten == {"Scan": "unrolled into its body's ops"}
    feeds = {"init": np.float32([1, 2]), "xs": np.arange(6, dtype=np.float32).reshape(3, 2)}
    np.testing.assert_array_equal(interpret(got, feeds)[0], np.float32([7, 11]))


def test_trajectory_rows_are_reshaped_and_concatenated():
    want = Graph("main")
    init, xs = want.input("init", [2]), want.input("xs", [2, 2])
    carry, rows = init, []
    for t in range(2):
        x_t = want.reshape(want.op("Narrow", (xs,), axis=0, start=t, len=1), (2,))
        carry = want.add(carry, x_t)
        rows.append(carry)
    want.set_outputs([want.concat([want.reshape(r, (1, 2)) for r in rows], 0)])
    assert unroll_scans(scan_graph(2, save=True)) == want
    # num_checkpoints == length is a full trajectory: unrolled the same way
    assert unroll_scans(scan_graph(2, save=True, checkpoints=2)) == want


def test_max_length_and_budget_rules():
    """RLX's case: with max 64 the length-4 Scan unrolls and the length-128 one (128 × 3
    body nodes = 384 > budget 100) stays; the budget alone unrolls length × nodes <= it."""
    g = Graph("two")
    init = g.input("init", [2])
    xs4, xs128 = g.input("xs_s", [4, 2]), g.input("xs_l", [128, 2])
    short = g.op("Scan", (init, xs4), ScanAttrs(add_body(), 4, num_xs=1))
    g.set_outputs([g.op("Scan", (short, xs128), ScanAttrs(add_body(), 128, num_xs=1))])
    out = unroll_scans(g, max_length=64, budget=100)
    assert [n.attrs.length for n in out.nodes if n.kind == "Scan"] == [128]
    # 128 × 3 body nodes = 384: inside a budget of 384, outside 383
    assert not any(n.kind == "Scan" for n in unroll_scans(g, max_length=0, budget=384))
    kept = unroll_scans(g, max_length=0, budget=383)
    assert [n.attrs.length for n in kept.nodes if n.kind == "Scan"] == [128]
    assert unroll_scans(g, max_length=0, budget=0) is g


@pytest.mark.parametrize("length,save,k", [(4, True, 2), (0, False, 0)])
def test_partial_checkpoints_and_empty_scans_stay(length, save, k):
    g = scan_graph(length, save=save, checkpoints=k)
    assert unroll_scans(g, max_length=64) is g
    # not even for a backend without Scan: legalization names it instead
    assert unroll_scans(g, max_length=0, budget=0, supported=SupportTable({"Add": "all"})) is g


def test_backend_without_scan_gets_every_scan_unrolled():
    g = scan_graph(100)
    assert unroll_scans(g, max_length=0, budget=0, supported=SupportTable({"Scan": "all"})) is g
    out = unroll_scans(g, max_length=0, budget=0, supported=SupportTable({"Binary": "all"}))
    assert sum(n.kind == "Binary" for n in out.nodes) == 100
    feeds = {"init": np.float32([0, 0]), "xs": np.ones((100, 2), np.float32)}
    np.testing.assert_array_equal(interpret(out, feeds)[0], interpret(g, feeds)[0])


def test_broadcast_operands_reach_every_step():
    """carry * w + x_t with w a broadcast operand."""
    body = make_body("body", [S2, S2, S2], lambda b, c, w, x: b.add(b.mul(c, w), x),
                     names=["c", "w", "x"])
    g = Graph("main")
    init, w, xs = g.input("init", [2]), g.input("w", [2]), g.input("xs", [2, 2])
    g.set_outputs([g.op("Scan", (init, w, xs), ScanAttrs(body, 2, num_bcast=1, num_xs=1))])
    want = Graph("main")
    init, w, xs = want.input("init", [2]), want.input("w", [2]), want.input("xs", [2, 2])
    carry = init
    for t in range(2):
        x_t = want.reshape(want.op("Narrow", (xs,), axis=0, start=t, len=1), (2,))
        carry = want.add(want.mul(carry, w), x_t)
    want.set_outputs([carry])
    assert unroll_scans(g) == want
