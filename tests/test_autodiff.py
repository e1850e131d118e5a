"""Reverse mode: every VJP rule against float64 finite differences of the oracle, the
pre-pass (If, While, CustomFn, decompositions), and the transform's errors."""
import numpy as np
import pytest

from rlx_ref import Graph
from rlx_ref.autodiff import SEED, AutodiffError, grad, grad_with_loss
from rlx_ref.conformance.gradcheck import (SECOND_ORDER, check_kind, check_kind_second_order,
                                           differentiable_kinds)
from rlx_ref.interpret import interpret


@pytest.mark.parametrize("kind", differentiable_kinds())
def test_every_rule_matches_calculus(kind):
    """Reverse and forward mode against float64 finite differences, and JVP/VJP
    consistency, on every differentiable sub-op of the kind (``rlx-ref gradcheck``)."""
    res = check_kind(kind)
    assert not res.failures, "\n".join(res.failures)
    assert res.checked or res.no_rule, f"no case of {kind} was checked"


@pytest.mark.parametrize("kind", SECOND_ORDER)
def test_second_order_matches_finite_differences_of_the_gradient(kind):
    res = check_kind_second_order(kind)
    assert not res.failures, "\n".join(res.failures)
    assert res.checked, f"no case of {kind} was checked at second order"


def _mlp():
    g = Graph("mlp")
    x, w, b = g.input("x", [4, 3]), g.param("w", [3, 5]), g.param("b", [5])
    h = g.add(g.matmul(x, w), b)
    g.set_outputs([g.sum(g.mul(h, h), [0, 1])])
    return g


def test_gradient_graph_layout_matches_rlx():
    g = _mlp()
    gg = grad_with_loss(g, ["w", "b"])
    seed = [n for n in gg.nodes if n.kind == "Input" and n.attrs.name == SEED]
    assert len(seed) == 1 and seed[0].shape == g.nodes[g.outputs[0]].shape
    assert len(gg.outputs) == 3
    assert [gg.shape(o).dims for o in gg.outputs] == [(), (3, 5), (5,)]
    assert len(grad(g, ["w", "b"]).outputs) == 2
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal(5)
    loss, dw, db = interpret(gg, {"x": x, SEED: np.float64(1.0)}, {"w": w, "b": b},
                             float64=True)
    h = x @ w + b
    np.testing.assert_allclose(loss, (h * h).sum())
    np.testing.assert_allclose(dw, x.T @ (2 * h), rtol=1e-12)
    np.testing.assert_allclose(db, (2 * h).sum(0), rtol=1e-12)


def test_wrt_by_node_id_and_unused_wrt_gets_zeros():
    g = _mlp()
    unused = g.param("unused", [2])
    gg = grad(g, [1, unused])
    out = interpret(gg, {"x": np.ones((4, 3)), SEED: np.float64(1)},
                    {"w": np.ones((3, 5)), "b": np.zeros(5), "unused": np.ones(2)},
                    float64=True)
    assert out[0].shape == (3, 5) and not out[1].any() and out[1].shape == (2,)


@pytest.mark.parametrize("wrt,says", [
    (["nope"], "names no Input or Param"), ([99], "does not exist"),
])
def test_bad_wrt_is_named(wrt, says):
    with pytest.raises(AutodiffError, match=says):
        grad(_mlp(), wrt)


def test_integer_wrt_and_several_outputs_are_refused():
    g = Graph("t")
    i = g.input("i", [3], "i32")
    x = g.input("x", [3])
    g.set_outputs([g.add(x, g.cast(i, "f32"))])
    with pytest.raises(AutodiffError, match="dtype i32"):
        grad(g, ["i"])
    g.set_outputs([x, x])
    with pytest.raises(AutodiffError, match="exactly one output"):
        grad(g, ["x"])


def test_an_op_without_a_rule_is_an_error_naming_the_node():
    g = Graph("t")
    x = g.input("x", [5])
    g.set_outputs([g.cum_max(x, axis=0, exclusive=False)])
    with pytest.raises(AutodiffError, match=r"at %1 \(CumMax\): no VJP rule"):
        grad(g, ["x"])


def test_ops_off_the_path_need_no_rule_and_stop_gradient_blocks():
    g = Graph("t")
    x, c = g.input("x", [5]), g.input("c", [5])
    off = g.cum_max(c, axis=0, exclusive=False)           # no rule, but no x upstream
    blocked = g.stop_gradient(g.mul(x, x))
    g.set_outputs([g.sum(g.add(g.mul(x, off), blocked), [0])])
    xv, cv = np.arange(5.0), np.array([3.0, 1, 4, 1, 5])
    (dx,) = interpret(grad(g, ["x"]), {"x": xv, "c": cv, SEED: np.float64(1)}, float64=True)
    np.testing.assert_array_equal(dx, np.maximum.accumulate(cv))


def test_control_flow_is_rewritten_before_differentiation():
    g = Graph("t")
    x, p = g.input("x", [3]), g.input("p", [1])
    then_b, else_b = Graph("then"), Graph("else")
    for body, square in ((then_b, True), (else_b, False)):
        v = body.input("v", [3])
        other = v if square else body.constant(np.float32(3.0))
        body.set_outputs([body.mul(v, other)])
    y = g.op("If", (p, x), then_branch=then_b, else_branch=else_b, shape=g.shape(x))
    g.set_outputs([y])
    xv = np.array([0.1, 0.2, 0.3])
    for pv, want in ((1.0, 2 * xv), (0.0, np.full(3, 3.0))):
        (dx,) = interpret(grad(g, ["x"]), {"x": xv, "p": np.array([pv]), SEED: np.ones(3)},
                          float64=True)
        np.testing.assert_allclose(dx, want)


def test_custom_fn_vjp_body_is_the_rule():
    g = Graph("t")
    x = g.input("x", [3])
    fwd = Graph("fwd")
    a = fwd.input("a", [3])
    fwd.set_outputs([fwd.mul(a, a)])
    vjp = Graph("vjp")
    a2 = vjp.input("a", [3])
    vjp.input("primal_output", [3])
    d = vjp.input("d_output", [3])
    vjp.set_outputs([vjp.mul(d, vjp.constant(np.float32(10.0)))])   # deliberately not 2a
    g.set_outputs([g.op("CustomFn", (x,), fwd_body=fwd, vjp_body=vjp, jvp_body=None,
                        num_inputs=1)])
    (dx,) = interpret(grad(g, ["x"]), {"x": np.ones(3), SEED: np.ones(3)}, float64=True)
    np.testing.assert_array_equal(dx, [10.0, 10.0, 10.0])
    del a2
    g2 = Graph("t2")
    x2 = g2.input("x", [3])
    g2.set_outputs([g2.op("CustomFn", (x2,), fwd_body=fwd, vjp_body=None, jvp_body=None,
                          num_inputs=1)])
    (dx2,) = interpret(grad(g2, ["x"]), {"x": np.full(3, 3.0), SEED: np.ones(3)},
                       float64=True)
    np.testing.assert_array_equal(dx2, [6.0, 6.0, 6.0])


def test_bounded_while_is_unrolled():
    g = Graph("t")
    x = g.input("x", [1])
    cond, body = Graph("cond"), Graph("body")
    c = cond.input("c", [1])
    cond.set_outputs([cond.compare("Lt", c, cond.constant(np.array([10.0], np.float32)))])
    b = body.input("b", [1])
    body.set_outputs([body.mul(b, body.constant(np.array([2.0], np.float32)))])
    g.set_outputs([g.op("While", (x,), cond=cond, body=body, max_iterations=6)])
    # x = 1.5: 1.5, 3, 6, 12 -> three doublings, d/dx = 8
    (dx,) = interpret(grad(g, ["x"]), {"x": np.array([1.5]), SEED: np.ones(1)}, float64=True)
    np.testing.assert_allclose(dx, [8.0])
    g2 = Graph("t2")
    x2 = g2.input("x", [1])
    g2.set_outputs([g2.op("While", (x2,), cond=cond, body=body, max_iterations=None)])
    with pytest.raises(AutodiffError, match="max_iterations"):
        grad(g2, ["x"])


def test_gradient_graph_runs_on_numba_cpu():
    from rlx_ref.backends.registry import get_backend

    backend = get_backend("numba-cpu")
    if not backend.availability()[0]:
        pytest.skip("numba-cpu is not usable here")
    gg = grad_with_loss(_mlp(), ["w", "b"])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((4, 3)).astype(np.float32),
             SEED: np.float32(1.0)}
    params = {"w": rng.standard_normal((3, 5)).astype(np.float32),
              "b": rng.standard_normal(5).astype(np.float32)}
    want = interpret(gg, feeds, params)
    exe = backend.compile(gg)
    for k, v in params.items():
        exe.set_param(k, v)
    got = exe.run(feeds)
    for w_, g_ in zip(want, got):
        np.testing.assert_allclose(g_, w_, rtol=2e-5, atol=1e-5)


def test_public_api_and_dsl_spelling():
    import rlx_ref

    with rlx_ref.graph("dsl") as g:
        x = g.input("x", [3])
        w = g.param("w", [3])
        loss = g.sum(g.mul(g.mul(x, w), w), [0])
        g.output(loss)
    dsl = g.grad(loss, wrt=[w])
    with_loss = g.grad(loss, wrt="w", with_loss=True)
    direct = rlx_ref.grad(g.graph, ["w"])
    feeds = {"x": np.array([1.0, 2.0, 3.0]), SEED: np.float64(1)}
    params = {"w": np.array([0.5, -1.0, 2.0])}
    want = 2 * feeds["x"] * params["w"]
    for gg, k in ((dsl, 0), (with_loss, 1), (direct, 0)):
        np.testing.assert_allclose(interpret(gg, feeds, params, float64=True)[k], want)
    assert rlx_ref.gradcheck(g.graph, {**feeds, **params}, ["x", "w"]).ok


def test_hvp_is_forward_over_reverse():
    from rlx_ref.autodiff import hvp

    g = Graph("t")
    x = g.input("x", [4])
    cube = g.mul(g.mul(x, x), x)
    g.set_outputs([g.sum(g.mul(cube, g.activation("Tanh", x)), [0])])
    h = hvp(g, ["x"])
    rng = np.random.default_rng(5)
    xv, vv = rng.standard_normal(4), rng.standard_normal(4)
    out = interpret(h, {"x": xv, SEED: np.float64(1), "tangent_x": vv}, float64=True)
    assert len(out) == 4            # [loss, grad, <grad, v>, H·v]
    f2 = lambda z: 3 * z**2 * np.tanh(z) + z**3 * (1 - np.tanh(z) ** 2)   # noqa: E731
    eps = 1e-6
    want = (f2(xv + eps * vv) - f2(xv - eps * vv)) / (2 * eps)
    np.testing.assert_allclose(out[3], want, rtol=1e-6)
    np.testing.assert_allclose(out[2], np.dot(out[1], vv))


def _cube_sum():
    g = Graph("cube")
    x = g.input("x", [5])
    g.set_outputs([g.sum(g.mul(g.mul(x, x), x), [0])])
    return g


def test_nth_order_grad_stacks_reverse_mode():
    from rlx_ref.autodiff import nth_order_grad

    xv = np.linspace(-2, 2, 5)
    for n, want in ((1, 3 * xv**2), (2, 6 * xv), (3, np.full(5, 6.0)), (4, np.zeros(5))):
        g = nth_order_grad(_cube_sum(), "x", n)
        assert {i.attrs.name for i in g.input_nodes()} == {"x"}
        np.testing.assert_allclose(interpret(g, {"x": xv}, float64=True)[0], want,
                                   atol=1e-12)
    with pytest.raises(AutodiffError, match="n >= 1"):
        nth_order_grad(_cube_sum(), "x", 0)


def test_directional_nth_grad_stacks_forward_mode():
    from rlx_ref.autodiff import directional_nth_grad

    rng = np.random.default_rng(4)
    xv, vv = rng.standard_normal(5), rng.standard_normal(5)
    for n, want in ((1, np.sum(3 * xv**2 * vv)), (2, np.sum(6 * xv * vv**2)),
                    (3, np.sum(6 * vv**3))):
        g = directional_nth_grad(_cube_sum(), "x", n)
        got = interpret(g, {"x": xv, "direction_x": vv}, float64=True)[0]
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_jacobians_forward_and_reverse_agree():
    from rlx_ref.autodiff import jacfwd, jacrev

    g = Graph("lin")
    x = g.input("x", [3])
    a = g.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = g.matmul(a, g.reshape(g.mul(x, x), [3, 1]))
    g.set_outputs([y])
    xv = np.array([1.0, -2.0, 0.5])
    want = np.arange(6.0).reshape(2, 3)[:, None, :] * (2 * xv)     # [2, 1, 3]
    for jac in (jacfwd, jacrev):
        np.testing.assert_allclose(jac(g, "x", {"x": xv}), want)


def _grad_at(build, wrt, **values):
    g = Graph("edge")
    out = build(g)
    g.set_outputs([out])
    shape = g.shape(out).dims
    gg = grad(g, wrt)
    return interpret(gg, {**values, SEED: np.ones(shape)}, float64=True)


def test_subgradients_at_kinks_are_the_documented_ones():
    """relu'(0) = 0, |x|'(0) = 0, Binary Max ties send everything to the first operand,
    Reduce Max ties share the cotangent evenly."""
    x = np.array([-1.0, 0.0, 2.0])
    (d,) = _grad_at(lambda g: g.relu(g.input("x", [3])), ["x"], x=x)
    np.testing.assert_array_equal(d, [0.0, 0.0, 1.0])
    (d,) = _grad_at(lambda g: g.activation("Abs", g.input("x", [3])), ["x"], x=x)
    np.testing.assert_array_equal(d, [-1.0, 0.0, 1.0])
    da, db = _grad_at(lambda g: g.binary("Max", g.input("a", [2]), g.input("b", [2])),
                      ["a", "b"], a=np.array([1.0, 3.0]), b=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(da, [1.0, 1.0])
    np.testing.assert_array_equal(db, [0.0, 0.0])
    (d,) = _grad_at(lambda g: g.reduce(g.input("x", [4]), "Max", [0]), ["x"],
                    x=np.array([5.0, 1.0, 5.0, 2.0]))
    np.testing.assert_array_equal(d, [0.5, 0.0, 0.5, 0.0])


def test_nan_and_inf_inputs_propagate_into_the_gradient():
    (d,) = _grad_at(lambda g: g.mul(g.input("x", [3]), g.input("x2", [3])), ["x"],
                    x=np.array([1.0, np.nan, 2.0]), x2=np.array([np.inf, 1.0, 3.0]))
    assert d[0] == np.inf and d[1] == 1.0 and d[2] == 3.0
    (d,) = _grad_at(lambda g: g.activation("Exp", g.input("x", [2])), ["x"],
                    x=np.array([np.nan, 1.0]))
    assert np.isnan(d[0]) and np.isclose(d[1], np.e)


def test_zero_size_tensors_have_zero_size_gradients():
    (d,) = _grad_at(lambda g: g.activation("Tanh", g.input("x", [0, 3])), ["x"],
                    x=np.zeros((0, 3)))
    assert d.shape == (0, 3)
    (d,) = _grad_at(lambda g: g.sum(g.input("x", [0, 3]), [0]), ["x"], x=np.zeros((0, 3)))
    assert d.shape == (0, 3)


def test_broadcasting_in_both_operands_sums_back_to_each_shape():
    a, b = np.arange(3.0).reshape(3, 1), np.arange(4.0).reshape(1, 4) + 1
    da, db = _grad_at(lambda g: g.mul(g.input("a", [3, 1]), g.input("b", [1, 4])),
                      ["a", "b"], a=a, b=b)
    np.testing.assert_allclose(da, np.full((3, 1), b.sum()))
    np.testing.assert_allclose(db, np.full((1, 4), a.sum()))
