"""LegalizeBroadcast: which Binary operands get an explicit Expand (RLX's three cases and
the edges around them), with the expected graphs written out."""
import numpy as np
import pytest

from rlx_ref import Graph, interpret
from rlx_ref.passes import PassLog, compile_pipeline
from rlx_ref.passes.legalize_broadcast import legalize_broadcast
from rlx_ref.runtime.options import CompileOptions

from test_passes import TableBackend, claims


def binary(a_dims, b_dims, op="Add"):
    g = Graph("b")
    a, b = g.input("a", list(a_dims)), g.input("b", list(b_dims))
    g.set_outputs([g.binary(op, a, b)])
    return g


@pytest.mark.parametrize("a,b", [((4, 8), (4, 8)),     # equal shapes
                                 ((4, 8), (8,)),       # trailing bias
                                 ((2, 3, 4), (3, 4)),  # trailing slice of rank 2
                                 ((4, 8), (1,)),       # one element
                                 ((4, 8), (1, 1)),     # one element, same rank
                                 ((4, 8), ())])        # 0-d
def test_safe_operands_are_left_alone(a, b):
    g = binary(a, b)
    assert legalize_broadcast(g) is g


def test_channel_bias_is_expanded():
    """RLX's case: [1,2,3,3] + [1,2,1,1] → Expand(b, [1,2,3,3])."""
    want = Graph("b")
    a, b = want.input("a", [1, 2, 3, 3]), want.input("b", [1, 2, 1, 1])
    want.set_outputs([want.add(a, want.op("Expand", (b,), target_shape=(1, 2, 3, 3)))])
    log = PassLog()
    g = binary((1, 2, 3, 3), (1, 2, 1, 1))
    got = legalize_broadcast(g, log=log)
    assert got == want
    assert log.lines == ["[legalize_broadcast] @b %2 operand %1 [1, 2, 1, 1] f32 expanded "
                         "to [1, 2, 3, 3]"]
    feeds = {"a": np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3),
             "b": np.float32([10, 20]).reshape(1, 2, 1, 1)}
    np.testing.assert_array_equal(interpret(got, feeds)[0], interpret(g, feeds)[0])


def test_both_sides_and_leading_ones():
    """[4,1] - [1,3]: both broadcast through 1s, both expanded; a [1,8] row against [4,8]
    has a leading 1, which is not a clean trailing slice either."""
    want = Graph("b")
    a, b = want.input("a", [4, 1]), want.input("b", [1, 3])
    want.set_outputs([want.sub(want.op("Expand", (a,), target_shape=(4, 3)),
                               want.op("Expand", (b,), target_shape=(4, 3)))])
    assert legalize_broadcast(binary((4, 1), (1, 3), "Sub")) == want
    got = legalize_broadcast(binary((4, 8), (1, 8)))
    assert [n.kind for n in got.nodes] == ["Input", "Input", "Expand", "Binary"]


def test_only_binary_is_rewritten():
    g = Graph("w")
    c, x = g.input("c", [4, 1], "bool"), g.input("x", [4, 3])
    g.set_outputs([g.op("Where", (c, x, x))])
    assert legalize_broadcast(g) is g


def test_pipeline_option():
    g = binary((1, 2, 3, 3), (1, 2, 1, 1))
    backend = TableBackend(claims("Input", "Binary", "Expand"))
    assert compile_pipeline(g, backend)[0] == g                 # off by default
    out, _ = compile_pipeline(g, backend, CompileOptions().with_legalize_broadcast())
    assert [n.kind for n in out.nodes] == ["Input", "Input", "Expand", "Binary"]
