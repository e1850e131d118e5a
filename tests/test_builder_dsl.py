"""The explicit builder and the DSL: shapes inferred, literals, and build-time errors."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref import BuildError, DType, Graph, Session, interpret


def test_builder_mirrors_pyrlx_methods():
    g = Graph("mlp")
    x = g.input("x", [4, 8])
    w = g.param("w", [8, 16])
    b = g.param("b", [16])
    h = g.relu(g.add(g.matmul(x, w), b))
    g.set_outputs([h])
    assert g.shape_of(h) == ([4, 16], "f32")
    xv = np.ones((4, 8), np.float32)
    wv = np.full((8, 16), 0.5, np.float32)
    bv = -np.arange(16, dtype=np.float32)
    (out,) = interpret(g, {"x": xv}, {"w": wv, "b": bv})
    np.testing.assert_allclose(out, np.maximum(xv @ wv + bv, 0))


def test_builder_errors_name_node_op_and_shapes():
    g = Graph("bad")
    a = g.input("a", [2, 3])
    b = g.input("b", [4])
    with pytest.raises(BuildError, match=r"at %2: Binary of \(%0: \[2, 3\] f32, %1: \[4\] f32\)"):
        g.add(a, b)
    with pytest.raises(BuildError, match="takes 2 operands"):
        g.op("Binary", [a], op="Add")
    with pytest.raises(BuildError, match="does not exist"):
        g.relu(99)


def test_dsl_operators_and_comparisons():
    with rlx_ref.graph("dsl") as g:
        x = g.input("x", [2, 3])
        y = g.input("y", [3])
        z = (x + y) * 2.0 - x / 4 + 1
        m = -z ** 2.0
        c = x > y
        g.output(z, m, c)
    graph = g.graph
    assert graph.nodes[c.id].shape.dtype is DType.BOOL
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    yv = np.array([1, 2, 3], np.float32)
    zo, mo, co = Session().compile(graph).run({"x": xv, "y": yv})
    ze = (xv + yv) * 2 - xv / 4 + 1
    np.testing.assert_allclose(zo, ze, rtol=1e-6)
    np.testing.assert_allclose(mo, -(ze ** 2), rtol=1e-6)
    np.testing.assert_array_equal(co, xv > yv)


def test_dsl_reverse_operators_and_methods():
    with rlx_ref.graph("rev") as g:
        x = g.input("x", [3])
        y = (2.0 - x).relu() + (1.0 / (x + 1)).exp()
        g.output(y)
    xv = np.array([0.0, 1.0, 3.0], np.float32)
    (out,) = interpret(g.graph, {"x": xv})
    np.testing.assert_allclose(out, np.maximum(2 - xv, 0) + np.exp(1 / (xv + 1)), rtol=1e-6)


def test_scalar_literal_takes_the_other_operand_dtype():
    with rlx_ref.graph("lit") as g:
        i = g.input("i", [2], "i32")
        h = g.input("h", [2], "f16")
        g.output(i + 3, h * 0.5)
    graph = g.graph
    consts = [n for n in graph.nodes if n.kind == "Constant"]
    assert [c.shape for c in consts] == [rlx_ref.Shape([], DType.I32),
                                          rlx_ref.Shape([], DType.F16)]
    a, b = interpret(graph, {"i": np.array([1, 2], np.int32),
                             "h": np.array([2, 4], np.float16)})
    assert a.dtype == np.int32 and list(a) == [4, 5]
    assert b.dtype == np.float16 and list(b) == [1, 2]


@pytest.mark.parametrize("dtype,value,err,match", [
    ("i8", 200, ValueError, "out of range"),
    ("i32", 1.5, ValueError, "not integral"),
    ("i64", 2**53 + 1, ValueError, "beyond 2\\*\\*53"),
    ("u8", -1, ValueError, "out of range"),
    ("f16", 1e6, ValueError, "out of range"),
    ("f32", "1", TypeError, "cannot combine"),
    ("f32", None, TypeError, "cannot combine"),
])
def test_scalar_literal_errors(dtype, value, err, match):
    with pytest.raises(err, match=match):
        with rlx_ref.graph("bad") as g:
            x = g.input("x", [2], dtype)
            x + value


def test_node_has_no_truth_value():
    with pytest.raises(TypeError, match="no truth value"):
        with rlx_ref.graph("t") as g:
            x = g.input("x", [2])
            if x > 0:
                pass


def test_dsl_verifies_on_exit_and_registry_methods_exist():
    with rlx_ref.graph("v") as g:
        x = g.input("x", [2, 2])
        y = x.sigmoid().softmax(-1).sum([1])
        g.output(y)
    (out,) = interpret(g.graph, {"x": np.zeros((2, 2), np.float32)})
    np.testing.assert_allclose(out, [1.0, 1.0])
    for name in ("layer_norm", "attention", "scan", "gather", "conv", "top_k"):
        assert hasattr(Graph, name), name


def test_dsl_where_with_a_scalar_branch():
    with rlx_ref.graph("w") as g:
        x = g.input("x", [4])
        g.output((x > 0.0).where(x, 0.0), g.where(x < 1.0, -1.0, x))
    a, b = interpret(g.graph, {"x": np.array([-1, 0.5, 2, 0], np.float32)})
    assert a.tolist() == [0, 0.5, 2, 0] and b.tolist() == [-1, -1, 2, -1]
