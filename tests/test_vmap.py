"""vmap: RLX's spelling and layout, the other in_axes spellings, errors, control flow with
per-example predicates, per-example gradients, and composition with grad and itself."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref import Graph
from rlx_ref.autodiff import SEED, VmapError, batch_kinds, batch_rule, grad, grad_with_loss, vmap
from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ops.opdef import kinds as registered_kinds

RNG = np.random.default_rng(11)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _matmul_graph():
    """RLX's vmap_matmul_with_shared_weight: x [m, k] @ w [k, n], w a Param."""
    g = Graph("mm")
    x, w = g.input("x", [2, 3]), g.param("w", [3, 4])
    g.set_outputs([g.matmul(x, w)])
    return g


def test_rlx_spelling_batches_named_inputs_on_axis0_and_shares_params():
    vg = vmap(_matmul_graph(), ["x"], 5)
    assert vg.name == "mm_vmap"
    leaves = {n.attrs.name: (n.kind, n.shape.dims) for n in vg.nodes
              if n.kind in ("Input", "Param")}
    assert leaves == {"x": ("Input", (5, 2, 3)), "w": ("Param", (3, 4))}
    assert vg.shape(vg.outputs[0]).dims == (5, 2, 4)
    xs, w = _f32(5, 2, 3), _f32(3, 4)
    (y,) = interpret(vg, {"x": xs}, {"w": w})
    np.testing.assert_allclose(y, np.stack([x @ w for x in xs]), rtol=1e-6)
    assert rlx_ref.vmap is vmap


def _two_input_graph():
    g = Graph("t")
    x, y = g.input("x", [3, 4]), g.input("y", [4])
    g.set_outputs([g.sum(g.mul(g.exp(x), y), [1])])
    return g


@pytest.mark.parametrize("in_axes", [{"x": 1}, {"x": 1, "y": None}, [1, None], "x"])
def test_in_axes_spellings(in_axes):
    axis = 0 if in_axes == "x" else 1
    vg = vmap(_two_input_graph(), in_axes, 2)
    x = _f32(3, 4)
    xs = np.stack([x, 2 * x], axis=axis)
    y = _f32(4)
    (got,) = interpret(vg, {"x": xs, "y": y})
    want = np.stack([(np.exp(v) * y).sum(1) for v in (x, 2 * x)])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_one_int_batches_every_input_and_negative_axes_count_from_the_end():
    vg = vmap(_two_input_graph(), -1, 2)
    dims = {n.attrs.name: n.shape.dims for n in vg.input_nodes()}
    assert dims == {"x": (3, 4, 2), "y": (4, 2)}
    x, y = _f32(3, 4, 2), _f32(4, 2)
    (got,) = interpret(vg, {"x": x, "y": y})
    want = np.stack([(np.exp(x[..., j]) * y[:, j]).sum(1) for j in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_named_param_is_batched_and_an_unreached_output_keeps_its_shape():
    g = _matmul_graph()
    side = g.input("side", [2])
    g.set_outputs([g.outputs[0], g.exp(side)])
    vg = vmap(g, {"w": 0}, 3)
    assert [n.shape.dims for n in vg.param_nodes()] == [(3, 3, 4)]
    x, ws, s = _f32(2, 3), _f32(3, 3, 4), _f32(2)
    y, e = interpret(vg, {"x": x, "side": s}, {"w": ws})
    np.testing.assert_allclose(y, np.stack([x @ w for w in ws]), rtol=1e-6)
    assert e.shape == (2,)       # no batched value reaches it: shared, as in RLX
    np.testing.assert_allclose(e, np.exp(s), rtol=1e-6)


def test_the_input_graph_is_left_unchanged():
    g = _two_input_graph()
    before = g.to_text()
    vmap(g, ["x", "y"], 4)
    assert g.to_text() == before


@pytest.mark.parametrize("in_axes,says", [
    (["nope"], "names 'nope', which is no Input or Param"),
    ({"x": 3}, "out of range for its rank 2"),
    ({"x": -4}, "out of range"),
    ({"x": 1.5}, "must be an int or None"),
    (["x", 0], "mixes names and axes"),
    ([0], "gives 1 axes but @t has 2 Inputs"),
    (None, "must name the batched Inputs"),
])
def test_bad_in_axes_are_named(in_axes, says):
    with pytest.raises(VmapError, match=says):
        vmap(_two_input_graph(), in_axes, 2)


@pytest.mark.parametrize("size", [0, -1, True, 2.0])
def test_bad_batch_size_is_refused(size):
    with pytest.raises(VmapError, match="batch_size must be a positive int"):
        vmap(_two_input_graph(), ["x"], size)


def test_feeding_another_batch_size_is_an_error_naming_the_input():
    vg = vmap(_two_input_graph(), ["x"], 4)
    with pytest.raises(InterpretError, match=r"input 'x' has shape \[3, 3, 4\], expected "
                                             r"\[4, 3, 4\]"):
        interpret(vg, {"x": _f32(3, 3, 4), "y": _f32(4)})


def test_a_kind_without_a_rule_is_an_error_naming_the_node():
    from rlx_ref.ops.custom import DEMO_SCALE, custom_attrs, scale_attrs

    g = Graph("t")
    x, c = g.input("x", [3]), g.input("c", [3])
    scaled = g.op("Custom", (c,), custom_attrs(DEMO_SCALE, scale_attrs(2.0)),
                  shape=g.shape(c))
    g.set_outputs([g.add(g.exp(x), scaled)])
    with pytest.raises(VmapError, match=r"at %2 \(Custom\): no batching rule for Custom"):
        vmap(g, ["c"], 2)
    vg = vmap(g, ["x"], 2)          # off the batched path: a shared node needs no rule
    xs, cv = _f32(2, 3), _f32(3)
    (got,) = interpret(vg, {"x": xs, "c": cv})
    np.testing.assert_allclose(got, np.exp(xs) + 2 * cv, rtol=1e-6)


def test_rules_are_registered_kinds_and_unique():
    assert set(batch_kinds()) <= set(registered_kinds())
    with pytest.raises(ValueError, match="two batching rules for Binary"):
        batch_rule("Binary")(lambda ctx: None)


def test_if_with_a_per_example_predicate_selects_per_example():
    g = Graph("t")
    p, x = g.input("p", [1]), g.input("x", [3])
    then_b, else_b = Graph("then"), Graph("else")
    for body, k in ((then_b, 2.0), (else_b, -1.0)):
        v = body.input("v", [3])
        body.set_outputs([body.mul(v, body.constant(np.float32(k)))])
    g.set_outputs([g.op("If", (p, x), then_branch=then_b, else_branch=else_b,
                        shape=g.shape(x))])
    x = _f32(3)
    preds = np.array([[1.0], [0.0], [np.nan]], np.float32)   # NaN is true
    (got,) = interpret(vmap(g, ["p"], 3), {"p": preds, "x": x})
    np.testing.assert_allclose(got, np.stack([2 * x, -x, 2 * x]), rtol=1e-6)
    (shared,) = interpret(vmap(g, ["x"], 2), {"p": np.ones(1, np.float32),
                                              "x": np.stack([x, 3 * x])})
    np.testing.assert_allclose(shared, np.stack([2 * x, 6 * x]), rtol=1e-6)
    assert any(n.kind == "If" for n in vmap(g, ["x"], 2).nodes)


@pytest.mark.parametrize("cap", [None, 2])
def test_while_takes_each_examples_own_number_of_steps(cap):
    g = Graph("t")
    x = g.input("x", [1])
    cond, body = Graph("cond"), Graph("body")
    c = cond.input("c", [1])
    cond.set_outputs([cond.compare("Lt", c, cond.constant(np.array([10.0], np.float32)))])
    b = body.input("b", [1])
    body.set_outputs([body.mul(b, body.constant(np.array([2.0], np.float32)))])
    g.set_outputs([g.op("While", (x,), cond=cond, body=body, max_iterations=cap)])
    xs = np.array([[0.7], [3.0], [20.0]], np.float32)
    (got,) = interpret(vmap(g, ["x"], 3), {"x": xs})
    want = np.stack([interpret(g, {"x": v})[0] for v in xs])
    np.testing.assert_array_equal(got, want)
    assert not np.all(want == want[0])        # the examples really take different counts


def _loss_graph():
    """Per-example loss: sum(softmax(x @ w + b) * t)², w and b Params."""
    g = Graph("loss")
    x, t = g.input("x", [1, 3]), g.input("t", [1, 4])
    w, b = g.param("w", [3, 4]), g.param("b", [4])
    h = g.softmax(g.add(g.matmul(x, w), b), -1)
    r = g.sum(g.mul(h, t), [0, 1])
    g.set_outputs([g.mul(r, r)])
    return g


def test_vmap_of_grad_gives_per_example_gradients():
    gg = grad_with_loss(_loss_graph(), ["w", "b"])
    vg = vmap(gg, ["x", "t"], 4)
    xs, ts = _f32(4, 1, 3), _f32(4, 1, 4)
    params = {"w": _f32(3, 4), "b": _f32(4)}
    loss, dw, db = interpret(vg, {"x": xs, "t": ts, SEED: np.float32(1)}, params)
    assert (loss.shape, dw.shape, db.shape) == ((4,), (4, 3, 4), (4, 4))
    for j in range(4):
        want = interpret(gg, {"x": xs[j], "t": ts[j], SEED: np.float32(1)}, params)
        for got, w_ in zip((loss[j], dw[j], db[j]), want):
            np.testing.assert_allclose(got, w_, rtol=1e-5, atol=1e-6)
    # the summed per-example gradients are the gradient of the summed loss
    (dw_all,) = interpret(grad(_batched_loss(), ["w"]), {"x": xs, "t": ts,
                                                        SEED: np.float32(1)}, params)
    np.testing.assert_allclose(dw.sum(0), dw_all, rtol=1e-5, atol=1e-6)


def _batched_loss():
    """Σ over the batch of the per-example loss, built by vmap then a Reduce."""
    vg = vmap(_loss_graph(), ["x", "t"], 4)
    vg.set_outputs([vg.sum(vg.outputs[0], [0])])
    return vg


def test_grad_of_vmap_keeps_a_custom_fn_rule():
    g = Graph("t")
    x = g.input("x", [3])
    fwd, vjp = Graph("fwd"), Graph("vjp")
    a = fwd.input("a", [3])
    fwd.set_outputs([fwd.mul(a, a)])
    vjp.input("a", [3])
    vjp.input("primal_output", [3])
    d = vjp.input("d_output", [3])
    vjp.set_outputs([vjp.mul(d, vjp.constant(np.float32(10.0)))])    # deliberately not 2a
    g.set_outputs([g.op("CustomFn", (x,), fwd_body=fwd, vjp_body=vjp, jvp_body=None,
                        num_inputs=1)])
    vg = vmap(g, ["x"], 2)
    xs = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], np.float32)
    np.testing.assert_allclose(interpret(vg, {"x": xs})[0], xs * xs)
    (dx,) = interpret(grad(vg, ["x"]), {"x": xs, SEED: np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(dx, np.full((2, 3), 10.0))


def test_vmap_composes_with_itself():
    g = _two_input_graph()
    inner = vmap(g, {"x": 0}, 2)              # x [2, 3, 4]
    outer = vmap(inner, {"x": 1, "y": 0}, 3)  # x [2, 3, 3, 4], y [3, 4]
    x, y = _f32(2, 3, 3, 4), _f32(3, 4)
    (got,) = interpret(outer, {"x": x, "y": y})
    assert got.shape == (3, 2, 3)
    for i in range(3):
        for j in range(2):
            want = interpret(g, {"x": x[j, i], "y": y[i]})[0]
            np.testing.assert_allclose(got[i, j], want, rtol=1e-5)


def test_vmapped_graph_runs_on_numba_cpu():
    from rlx_ref.backends.registry import get_backend

    backend = get_backend("numba-cpu")
    if not backend.availability()[0]:
        pytest.skip("numba-cpu is not usable here")
    vg = vmap(_matmul_graph(), {"x": 1}, 3)
    feeds, w = {"x": _f32(2, 3, 3)}, _f32(3, 4)
    want = interpret(vg, feeds, {"w": w})
    exe = backend.compile(vg)
    exe.set_param("w", w)
    np.testing.assert_allclose(exe.run(feeds)[0], want[0], rtol=2e-5, atol=1e-5)


def test_fused_regions_are_unfused_before_batching():
    from rlx_ref.passes.fuse_elementwise import fuse_elementwise

    g = Graph("t")
    x, y = g.input("x", [4]), g.input("y", [4])
    g.set_outputs([g.exp(g.mul(g.add(x, y), y))])
    fused = fuse_elementwise(g)
    assert any(n.kind == "ElementwiseRegion" for n in fused.nodes)
    vg = vmap(fused, ["x"], 3)
    assert not any(n.kind == "ElementwiseRegion" for n in vg.nodes)
    xs, yv = _f32(3, 4), _f32(4)
    (got,) = interpret(vg, {"x": xs, "y": yv})
    np.testing.assert_allclose(got, np.exp((xs + yv) * yv), rtol=1e-6)


def test_a_kind_with_a_decomposition_but_no_rule_is_decomposed_first(monkeypatch):
    from rlx_ref.autodiff import _batching

    _batching._load_rules()
    monkeypatch.delitem(_batching.BATCH, "Slice")
    g = Graph("t")
    x = g.input("x", [2, 7])
    g.set_outputs([g.op("Slice", (x,), axis=1, start=6, len=3, step=-2)])
    vg = vmap(g, {"x": 1}, 3)
    assert "Slice" not in {n.kind for n in vg.nodes}
    xs = _f32(2, 3, 7)
    (got,) = interpret(vg, {"x": xs})
    np.testing.assert_array_equal(got, np.moveaxis(xs, 1, 0)[:, :, 6::-2][:, :, :3])
