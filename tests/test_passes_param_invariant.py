"""split_param_invariant and param_bindings on hand-written graphs: the prepare and main
graphs expected, and prepare-then-main computing what the whole graph computes."""
import numpy as np
import pytest

from rlx_ref import Graph, interpret
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.dtype import DType
from rlx_ref.ops.random import RngNormalAttrs
from rlx_ref.passes import PassLog, compile_pipeline
from rlx_ref.passes.param_invariant import bind_params, split_param_invariant
from rlx_ref.runtime.options import CompileOptions, FusionOptions

RNG = np.random.default_rng(3)


def linear():
    """y = x @ transpose(w) * exp(s) + b: transpose(w) and exp(s) are weight-only."""
    g = Graph("lin")
    x, w = g.input("x", [2, 3]), g.param("w", [4, 3])
    s, b = g.param("s", [4]), g.param("b", [4])
    wt = g.transpose(w, (1, 0))                          # %4
    scale = g.activation("Exp", s)                       # %5
    y = g.add(g.mul(g.matmul(x, wt), scale), b)          # %6 %7 %8
    g.set_outputs([y])
    return g


def test_split_of_a_linear_layer():
    split = split_param_invariant(linear())
    want_prep = Graph("lin")
    w, s = want_prep.param("w", [4, 3]), want_prep.param("s", [4])
    want_prep.set_outputs([want_prep.transpose(w, (1, 0)), want_prep.activation("Exp", s)])
    assert split.prepare == want_prep
    want_main = Graph("lin")
    x, b = want_main.input("x", [2, 3]), want_main.param("b", [4])
    wt, scale = want_main.input("__rlx_prep_0", [3, 4]), want_main.input("__rlx_prep_1", [4])
    want_main.set_outputs([want_main.add(want_main.mul(want_main.matmul(x, wt), scale), b)])
    assert split.main == want_main
    assert split.boundary == ["__rlx_prep_0", "__rlx_prep_1"]
    assert (split.prepare_params, split.main_params) == ({"w", "s"}, {"b"})
    params = {k: RNG.standard_normal(d).astype(np.float32)
              for k, d in (("w", (4, 3)), ("s", (4,)), ("b", (4,)))}
    feeds = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}
    prepared = split.prepare_outputs(params)
    np.testing.assert_array_equal(prepared["__rlx_prep_0"], params["w"].T)
    for _ in range(2):      # prepared once, reused across runs
        np.testing.assert_array_equal(split.run(feeds, params, prepared)[0],
                                      interpret(linear(), feeds, params)[0])


def test_nothing_to_hoist():
    """Params read directly, or weight-only compute already folded: None (RLX)."""
    g = Graph("plain")
    g.set_outputs([g.matmul(g.input("x", [2, 3]), g.param("w", [3, 4]))])
    assert split_param_invariant(g) is None


def test_random_cones_are_dynamic_and_outputs_count():
    """An RNG draw shaped like a weight is not hoisted; a weight-only graph output is a
    boundary even with no dynamic user."""
    g = Graph("r")
    w = g.param("w", [4])
    noise = g.op("RngNormal", (w,), RngNormalAttrs(0.0, 1.0, 5), shape=Shape((4,), DType.F32))
    g.set_outputs([g.add(g.activation("Neg", noise), w), g.activation("Exp", w)])
    split = split_param_invariant(g)
    assert [n.kind for n in split.prepare.nodes] == ["Param", "Activation"]
    assert split.boundary == ["__rlx_prep_0"]
    assert [n.kind for n in split.main.nodes] == ["Param", "RngNormal", "Activation",
                                                  "Binary", "Input"]
    assert split.main.outputs == [3, 4]


def test_param_bindings_bake_and_fold():
    g = linear()
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    log = PassLog()
    bound = bind_params(g, {"w": w.ravel().tolist()}, log=log)
    assert [n.kind for n in bound.nodes[:4]] == ["Input", "Constant", "Param", "Param"]
    assert log.rewritten == {"Param": "bound to a Constant (param_bindings)"}
    with pytest.raises(ValueError, match=r"param_bindings\['w'\] has 3 elements"):
        bind_params(g, {"w": [1, 2, 3]})
    # in the pipeline exp(s) of the bound scale folds away (Transpose is not foldable)
    opts = CompileOptions(fusion_opts=FusionOptions(enable=False)).with_param_bindings(
        {"w": w, "s": np.zeros(4, np.float32)})
    out, _ = compile_pipeline(g, None, opts)
    assert [n.kind for n in out.nodes] == ["Input", "Constant", "Param", "Transpose",
                                           "Constant", "MatMul", "Binary", "Binary"]
    assert {n.attrs.name for n in out.param_nodes()} == {"b"}
    feeds = {"x": np.ones((2, 3), np.float32)}
    b = np.float32([1, 2, 3, 4])
    np.testing.assert_allclose(interpret(out, feeds, {"b": b})[0],
                               np.ones((2, 3), np.float32) @ w.T + b)
