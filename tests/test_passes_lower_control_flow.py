"""LowerControlFlow: If → Where over both inlined branches, While → a masked unroll; the
expected graphs are written out by hand and both forms run on the oracle."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import IfAttrs, WhileAttrs
from rlx_ref.passes import PassLog, SupportTable
from rlx_ref.passes.lower_control_flow import UNBOUNDED_WHILE, lower_control_flow

F32 = DType.F32
S2, S1 = Shape((2,), F32), Shape((1,), F32)


def if_graph(pred_dtype="bool", pred_dims=(1,)):
    then_b = make_body("th", [S2], lambda b, c: b.activation("Relu", c), names=["c"])
    else_b = make_body("el", [S2], lambda b, c: b.activation("Sigmoid", c), names=["c"])
    g = Graph("main")
    x, p = g.input("x", [2]), g.input("p", list(pred_dims), pred_dtype)
    g.set_outputs([g.op("If", (p, x), IfAttrs(then_b, else_b))])
    return g


def test_if_becomes_where_over_both_branches():
    want = Graph("main")
    x, p = want.input("x", [2]), want.input("p", [1], "bool")
    relu, sig = want.activation("Relu", x), want.activation("Sigmoid", x)
    pred = want.op("Expand", (p,), target_shape=(2,))
    want.set_outputs([want.op("Where", (pred, relu, sig))])
    log = PassLog()
    got = lower_control_flow(if_graph(), log=log)
    assert got == want, got.to_text()
    assert log.rewritten == {"If": "inlined both branches under a Where"}
    for taken in (True, False):
        feeds = {"x": np.float32([-1, 2]), "p": np.array([taken])}
        np.testing.assert_array_equal(interpret(got, feeds)[0],
                                      interpret(if_graph(), feeds)[0])


def test_rank_0_predicate_is_reshaped_then_expanded():
    want = Graph("main")
    x, p = want.input("x", [2]), want.input("p", [], "f32")
    relu, sig = want.activation("Relu", x), want.activation("Sigmoid", x)
    pred = want.op("Expand", (want.reshape(p, (1,)),), target_shape=(2,))
    want.set_outputs([want.op("Where", (pred, relu, sig))])
    g = if_graph("f32", ())
    got = lower_control_flow(g)
    assert got == want, got.to_text()
    # NaN is a true predicate for If and for Where alike
    feeds = {"x": np.float32([-1, 2]), "p": np.float32(np.nan)}
    np.testing.assert_array_equal(interpret(got, feeds)[0], np.float32([0, 2]))
    np.testing.assert_array_equal(interpret(g, feeds)[0], np.float32([0, 2]))


def while_graph(max_iterations):
    """(v, s): while s < 3: v = v * v; s = s + 1 — the value is v."""
    def body(b, v, s):
        return [b.mul(v, v), b.add(s, b.constant(np.float32([1])))]

    def cond(b, v, s):
        return b.compare("Lt", s, b.constant(np.float32([3])))

    g = Graph("main")
    v, s = g.input("v", [2]), g.input("s", [1])
    a = WhileAttrs(make_body("cond", [S2, S1], cond, names=["v", "s"]),
                   make_body("body", [S2, S1], body, names=["v", "s"]), max_iterations)
    g.set_outputs([g.op("While", (v, s), a)])
    return g


def test_while_unrolls_to_max_iterations_under_masks():
    want = Graph("main")
    v, s = want.input("v", [2]), want.input("s", [1])
    active = want.constant(np.float32([1]))
    for _ in range(2):
        lt = want.compare("Lt", s, want.constant(np.float32([3])))
        mask = want.cast(want.cast(lt, "i32"), "f32")
        active = want.mul(active, mask)
        vv = want.mul(v, v)
        s1 = want.add(s, want.constant(np.float32([1])))
        v = want.op("Where", (want.op("Expand", (active,), target_shape=(2,)), vv, v))
        s = want.op("Where", (active, s1, s))
    want.set_outputs([v])
    got = lower_control_flow(while_graph(2))
    assert got == want, got.to_text()


@pytest.mark.parametrize("s0", [0.0, 1.0, 3.0, 7.0])
def test_unrolled_while_matches_the_loop(s0):
    """The cond goes false after 3 - s0 steps, before the 5 the unroll runs: the state
    stops changing exactly where the loop stops."""
    g = while_graph(5)
    got = lower_control_flow(g)
    assert not any(n.kind == "While" for n in got.nodes)
    feeds = {"v": np.float32([1.5, -1.1]), "s": np.float32([s0])}
    np.testing.assert_array_equal(interpret(got, feeds)[0], interpret(g, feeds)[0])


def test_unbounded_while_is_kept_with_rlx_message():
    g = while_graph(None)
    log = PassLog()
    assert lower_control_flow(g, log=log) is g
    assert log.lines == [f"[lower_control_flow] @main %2 kept: {UNBOUNDED_WHILE}"]


def test_auto_keeps_what_the_backend_claims():
    g = if_graph()
    claims_if = SupportTable({"If": "all", "Activation": "all"})
    assert lower_control_flow(g, claims_if) is g
    assert lower_control_flow(g, claims_if, lower=True) != g
    lowered = lower_control_flow(g, SupportTable({"Where": "all"}))
    assert {n.kind for n in lowered.nodes} == {"Input", "Activation", "Expand", "Where"}
    assert lower_control_flow(g, SupportTable({"Where": "all"}), lower=False) is g
    with pytest.raises(ValueError, match="lower must be"):
        lower_control_flow(g, lower="always")


def test_nested_if_inside_a_branch_is_lowered_first():
    inner = if_graph()
    branch = make_body("outer_th", [S2, Shape((1,), DType.BOOL)],
                       lambda b, c, p: b.op("If", (p, c), inner.nodes[2].attrs),
                       names=["c", "p"])
    other = make_body("outer_el", [S2, Shape((1,), DType.BOOL)], lambda b, c, p: c,
                      names=["c", "p"])
    g = Graph("main")
    x, p = g.input("x", [2]), g.input("p", [1], "bool")
    g.set_outputs([g.op("If", (p, x, p), IfAttrs(branch, other))])
    got = lower_control_flow(g)
    assert [n.kind for n in got.nodes].count("Where") == 2
    assert "If" not in {n.kind for n in got.nodes}
    for taken in (True, False):
        feeds = {"x": np.float32([-1, 2]), "p": np.array([taken])}
        np.testing.assert_array_equal(interpret(got, feeds)[0], interpret(g, feeds)[0])
