"""rlx_ref.onnx.load: hand-built models, one per decomposition, against onnxruntime."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import rlx_ref  # noqa: E402
from _onnx_build import model  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load, load_with_params  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(17)


def _model(nodes, inputs, outputs, inits=(), opset=18):
    return model(nodes, inputs, outputs, inits, opset=opset, ir_version=9)


def _agree(model, feeds, rtol=1e-5, atol=1e-6):
    """The oracle's outputs equal onnxruntime's (dtype, shape and values)."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    graph, params = load_with_params(model)
    got = rlx_ref.interpret(graph, feeds, params)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return graph


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("ta,tb,alpha,beta", [(0, 0, 1.0, 1.0), (1, 1, 0.5, 2.0)])
def test_gemm(ta, tb, alpha, beta):
    a, b, c = _x(3, 4) if not ta else _x(4, 3), _x(4, 5) if not tb else _x(5, 4), _x(5)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb,
                            alpha=alpha, beta=beta)
    m = _model([node], [("a", F, a.shape)], [("y", F)], [("b", b), ("c", c)])
    g = _agree(m, {"a": a})
    assert [n.kind for n in g.param_nodes()] == ["Param", "Param"]


@pytest.mark.parametrize("op,attrs", [("HardSwish", {}), ("HardSigmoid", {"alpha": 0.3}),
                                      ("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 0.7}),
                                      ("Selu", {}), ("Softsign", {}), ("Asinh", {}),
                                      ("Gelu", {})])
def test_activations(op, attrs):
    x = _x(2, 7) * 4
    opset = 20 if op == "Gelu" else 18
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, x.shape)],
               [("y", F)], opset=opset)
    _agree(m, {"x": x}, rtol=2e-5, atol=2e-6)


def test_erf_gelu_subgraph():
    """The exporters' Gelu: x · 0.5 · (1 + erf(x / √2)), Erf mapped directly."""
    x = _x(3, 5)
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]),
             helper.make_node("Mul", ["x", "p"], ["q"]),
             helper.make_node("Mul", ["q", "half"], ["y"])]
    inits = [("r2", np.float32(np.sqrt(2))), ("one", np.float32(1)), ("half", np.float32(.5))]
    m = _model(nodes, [("x", F, x.shape)], [("y", F)], inits)
    g = _agree(m, {"x": x})
    assert "Erf" in g.to_text()


def test_split_squeeze_unsqueeze():
    x = _x(2, 6, 1)
    nodes = [helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1),
             helper.make_node("Squeeze", ["a", "ax2"], ["a2"]),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b2"])]
    inits = [("s", np.array([2, 4], np.int64)), ("ax2", np.array([2], np.int64)),
             ("ax0", np.array([0], np.int64))]
    m = _model(nodes, [("x", F, x.shape)], [("a2", F), ("b2", F)], inits)
    _agree(m, {"x": x})


def test_shape_driven_reshape_folds_to_static_shape():
    x = _x(2, 3, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [("i0", np.array(0, np.int64)), ("ax0", np.array([0], np.int64)),
             ("m1", np.array([-1], np.int64))]
    m = _model(nodes, [("x", F, x.shape)], [("y", F)], inits)
    g = _agree(m, {"x": x})
    assert [n.kind for n in g.nodes] == ["Input", "Reshape"]


@pytest.mark.parametrize("coord,mode", [("asymmetric", "floor"),
                                        ("half_pixel", "round_prefer_floor"),
                                        ("align_corners", "round_prefer_ceil"),
                                        ("half_pixel", "linear"),
                                        ("align_corners", "linear")])
def test_resize_nearest_and_linear(coord, mode):
    x = _x(1, 2, 3, 4)
    kw = {"mode": "linear"} if mode == "linear" else {"mode": "nearest", "nearest_mode": mode}
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"],
                            coordinate_transformation_mode=coord, **kw)
    m = _model([node], [("x", F, x.shape)], [("y", F)],
               [("sc", np.array([1, 1, 2.0, 1.5], np.float32))])
    exact = mode != "linear"        # nearest copies values bit for bit
    _agree(m, {"x": x}, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6)


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                                       ("ij,kj->ik", [(3, 4), (5, 4)]),
                                       ("ij->ji", [(3, 4)]), ("ijk,ik->j", [(2, 3, 4), (2, 4)])])
def test_einsum_as_dot_general(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    feeds = {n: _x(*s) for n, s in zip(names, shapes)}
    m = _model([helper.make_node("Einsum", names, ["y"], equation=eq)],
               [(n, F, s) for n, s in zip(names, shapes)], [("y", F)])
    _agree(m, feeds, rtol=1e-5, atol=1e-5)


def test_lp_pool_one_hot_cumsum_topk():
    x = _x(1, 2, 5, 4)
    idx = np.array([[0, 3], [-1, 2]], np.int64)
    nodes = [helper.make_node("LpPool", ["x"], ["lp"], kernel_shape=[2, 2], p=2),
             helper.make_node("OneHot", ["i", "d", "v"], ["oh"], axis=1),
             helper.make_node("CumSum", ["x", "ax"], ["cs"], reverse=1, exclusive=1),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=2, largest=0)]
    inits = [("d", np.array(4, np.int64)), ("v", np.array([0.5, 2.0], np.float32)),
             ("ax", np.array(3, np.int64)), ("k", np.array([3], np.int64))]
    m = _model(nodes, [("x", F, x.shape), ("i", TensorProto.INT64, idx.shape)],
               [("lp", F), ("oh", F), ("cs", F), ("tv", F), ("ti", TensorProto.INT64)],
               inits)
    _agree(m, {"x": x, "i": idx}, rtol=1e-5, atol=1e-6)


def test_conv_bias_asymmetric_pads_and_pools():
    x, w, b = _x(1, 2, 7, 6), _x(4, 2, 3, 3), _x(4)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[0, 1, 1, 2],
                              strides=[2, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], ceil_mode=1,
                              strides=[2, 2]),
             helper.make_node("AveragePool", ["c"], ["q"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1])]
    m = _model(nodes, [("x", F, x.shape)], [("p", F), ("q", F)], [("w", w), ("b", b)])
    _agree(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_dilated_pools_and_bool_reduce():
    x = _x(1, 2, 9, 8)
    b = RNG.random((3, 4)) > 0.5
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 3], dilations=[2, 2],
                              pads=[1, 0, 1, 2], strides=[1, 2]),
             helper.make_node("AveragePool", ["x"], ["q"], kernel_shape=[3, 2],
                              dilations=[2, 3], pads=[1, 1, 1, 1], count_include_pad=1),
             helper.make_node("ReduceMax", ["b"], ["any"], keepdims=0)]
    m = _model(nodes, [("x", F, x.shape), ("b", TensorProto.BOOL, b.shape)],
               [("p", F), ("q", F), ("any", TensorProto.BOOL)], opset=20)
    _agree(m, {"x": x, "b": b}, rtol=1e-5, atol=1e-6)


def test_layer_norm_softmax_logsoftmax_reduce():
    x, s, b = _x(2, 3, 4), _x(3, 4), _x(3, 4)
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["ln"], axis=1),
             helper.make_node("Softmax", ["ln"], ["sm"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["ls"]),
             helper.make_node("ReduceMean", ["x", "ax"], ["rm"], keepdims=0)]
    m = _model(nodes, [("x", F, x.shape)], [("sm", F), ("ls", F), ("rm", F)],
               [("s", s), ("b", b), ("ax", np.array([-1], np.int64))])
    _agree(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_weights_as_constants():
    w = _x(4, 2)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", F, (3, 4))],
               [("y", F)], [("w", w)])
    g = load(m, weights="constants")
    assert not g.param_nodes() and any(n.kind == "Constant" for n in g.nodes)
    x = _x(3, 4)
    np.testing.assert_allclose(rlx_ref.interpret(g, {"x": x})[0], x @ w, rtol=1e-6)


def test_unmappable_error_lists_every_node():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("NonZero", ["a"], ["nz"], name="first"),
             helper.make_node("Unique", ["x"], ["lp"], name="second"),
             helper.make_node("Gelu", ["x"], ["g"], approximate="bogus", name="third")]
    m = helper.make_model(helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", F, (1, 2, 4))],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
         for n in ("nz", "lp", "g")]), opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(OnnxImportError) as e:
        load(m)
    names = {(p.node, p.op_type) for p in e.value.problems}
    assert names == {("first", "NonZero"), ("second", "Unique"), ("third", "Gelu")}
    third = [p for p in e.value.problems if p.node == "third"][0]
    assert third.attribute == "approximate" and "bogus" in third.why
    for n in ("first", "second", "third"):
        assert n in str(e.value)


def test_old_opset_is_rejected():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, (2,))], [("y", F)],
               opset=11)
    with pytest.raises(OnnxImportError, match="opset 11"):
        load(m)


def test_corrupt_and_truncated_files(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, (2,))], [("y", F)],
               [("w", _x(64, 64))])
    data = m.SerializeToString()
    for name, blob in (("trunc.onnx", data[: len(data) // 2]), ("junk.onnx", b"\xff" * 40),
                       ("empty.onnx", b"")):
        p = tmp_path / name
        p.write_bytes(blob)
        with pytest.raises(OnnxImportError, match="truncated|corrupt|empty|no graph"):
            load(p)
    with pytest.raises(OnnxImportError, match="cannot read"):
        load(tmp_path / "missing.onnx")


def test_cli_import_writes_text_and_params(tmp_path):
    from rlx_ref.cli import main

    w = _x(4, 3)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", F, (2, 4))],
               [("y", F)], [("w", w)])
    src = tmp_path / "model.onnx"
    src.write_bytes(m.SerializeToString())
    assert main(["import", str(src), "-o", str(tmp_path / "out.rlx")]) == 0
    g = rlx_ref.parse((tmp_path / "out.rlx").read_text())
    params = dict(np.load(tmp_path / "out.npz"))
    x = _x(2, 4)
    np.testing.assert_allclose(rlx_ref.interpret(g, {"x": x}, params)[0], x @ w, rtol=1e-6)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01garbage")
    assert main(["import", str(bad)]) == 1
