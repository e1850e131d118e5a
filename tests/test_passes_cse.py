"""Common-subexpression elimination: hand-written graphs and their expected rewrite."""
import numpy as np

from rlx_ref import DType, Graph, interpret
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import IfAttrs
from rlx_ref.ops.random import RngNormalAttrs, SampleAttrs
from rlx_ref.ir.shape import Shape
from rlx_ref.passes import PassLog
from rlx_ref.passes.cse import common_subexpression_elimination as cse

F32 = DType.F32


def test_merges_duplicate_transpose_and_matmul():
    """RLX's own case: two Transpose(u) and two MatMul(Transpose(u), x) collapse to one."""
    g = Graph("bwd")
    u, x = g.input("u", [4, 3]), g.input("x", [4, 5])
    t0, t1 = g.transpose(u, (1, 0)), g.transpose(u, (1, 0))
    g.set_outputs([g.add(g.matmul(t0, x), g.matmul(t1, x))])

    want = Graph("bwd")
    u, x = want.input("u", [4, 3]), want.input("x", [4, 5])
    m = want.matmul(want.transpose(u, (1, 0)), x)
    want.set_outputs([want.add(m, m)])

    log = PassLog()
    got = cse(g, log=log)
    assert got == want, got.to_text()
    assert log.rewritten == {"Transpose": "merged with an identical node (CSE)",
                             "MatMul": "merged with an identical node (CSE)"}
    feeds = {"u": np.arange(12, dtype=np.float32).reshape(4, 3),
             "x": np.ones((4, 5), np.float32)}
    np.testing.assert_array_equal(interpret(g, feeds)[0], interpret(got, feeds)[0])


def test_leaves_and_distinct_payloads_are_kept():
    """Two same-shape Inputs, Params and Constants stay; so do ops whose payloads, operand
    order or shapes differ."""
    g = Graph("keep")
    a, b = g.input("a", [2, 2]), g.input("b", [2, 2])
    p, q = g.param("p", [2, 2]), g.param("q", [2, 2])
    c0, c1 = g.constant(np.ones((2, 2), np.float32)), g.constant(np.ones((2, 2), np.float32))
    s0, s1 = g.add(a, b), g.add(b, a)                   # operand order differs
    m0, m1 = g.mul(p, q), g.binary("Max", p, q)         # payload differs
    r0, r1 = g.sum(s0, [1]), g.sum(s0, [1], keep_dim=True)   # shape differs
    g.set_outputs([s1, m0, m1, c0, c1, r0, r1])
    assert cse(g) is g


def test_chains_merge_transitively_and_outputs_follow():
    """Once the first pair merges, their users become identical and merge too; a graph
    output that named the duplicate names the survivor."""
    g = Graph("chain")
    x = g.input("x", [3])
    e0, e1 = g.activation("Exp", x), g.activation("Exp", x)
    n0, n1 = g.activation("Neg", e0), g.activation("Neg", e1)
    g.set_outputs([n0, n1])

    want = Graph("chain")
    x = want.input("x", [3])
    n = want.activation("Neg", want.activation("Exp", x))
    want.set_outputs([n, n])
    assert cse(g) == want


def test_nondeterministic_nodes_are_never_merged():
    """RngNormal with a shape template and Sample: equal payloads and operands, still two
    draws; a deterministic user of each stays separate as well."""
    g = Graph("rng")
    x = g.input("x", [4])
    attrs = RngNormalAttrs(mean=0.0, scale=1.0, key=3)
    r0 = g.op("RngNormal", (x,), attrs, shape=Shape((4,), F32))
    r1 = g.op("RngNormal", (x,), attrs, shape=Shape((4,), F32))
    logits = g.input("logits", [2, 5])
    sa = SampleAttrs(top_k=0, top_p=1.0, temperature=1.0, seed=9)
    ids = Shape((2,), F32)
    s0 = g.op("Sample", (logits,), sa, shape=ids)
    s1 = g.op("Sample", (logits,), sa, shape=ids)
    g.set_outputs([g.add(r0, r1), s0, s1])
    assert cse(g) is g


def test_bodies_are_processed():
    """A duplicate inside an If branch is merged inside the branch."""
    s = Shape((2,), F32)

    def branch(name, dup):
        def build(b, c):
            e0 = b.activation("Exp", c)
            e1 = b.activation("Exp", c) if dup else e0
            return b.add(e0, e1)
        return make_body(name, [s], build, names=["c"])

    g = Graph("main")
    p, x = g.input("p", [1], "bool"), g.input("x", [2])
    g.set_outputs([g.op("If", (p, x), IfAttrs(branch("t", True), branch("e", True)))])
    want = Graph("main")
    p, x = want.input("p", [1], "bool"), want.input("x", [2])
    want.set_outputs([want.op("If", (p, x), IfAttrs(branch("t", False), branch("e", False)))])
    assert cse(g) == want
