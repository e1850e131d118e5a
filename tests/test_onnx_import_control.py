"""rlx_ref.onnx.load: control flow, import-time payloads, resize matrices, gathers and
function bodies, against expected values computed here with numpy."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from _onnx_build import model as _model, run as _run  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load_with_params  # noqa: E402

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
RNG = np.random.default_rng(29)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ── control flow ────────────────────────────────────────────────────────
def _body(nodes, ins, outs):
    return helper.make_graph(nodes, "body", [helper.make_tensor_value_info(n, t, s)
                                             for n, t, s in ins],
                             [helper.make_tensor_value_info(n, F, None) for n in outs])


def test_scan_running_sum_reverse_input():
    x = _x(4, 3)
    body = _body([helper.make_node("Add", ["s", "xt"], ["s2"]),
                  helper.make_node("Mul", ["s2", "s2"], ["o"])],
                 [("s", F, [3]), ("xt", F, [3])], ["s2", "o"])
    node = helper.make_node("Scan", ["s0", "x"], ["sn", "os"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1])
    m = _model([node], [("s0", F, [3]), ("x", F, x.shape)], [("sn", F), ("os", F)])
    s0 = _x(3)
    sn, os_ = _run(m, {"s0": s0, "x": x})
    sums = s0 + np.cumsum(x[::-1], axis=0)
    np.testing.assert_allclose(sn, sums[-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(os_, sums ** 2, rtol=1e-6, atol=1e-6)


def test_loop_with_static_trip_count_unrolls():
    body = _body([helper.make_node("Identity", ["c"], ["c2"]),
                  helper.make_node("Cast", ["i"], ["fi"], to=F),
                  helper.make_node("Mul", ["v", "fi"], ["p"]),
                  helper.make_node("Add", ["v", "p"], ["v2"])],
                 [("i", I64, []), ("c", TensorProto.BOOL, []), ("v", F, [2])],
                 ["c2", "v2", "p"])
    node = helper.make_node("Loop", ["n", "", "v0"], ["vn", "ps"], body=body)
    m = _model([node], [("v0", F, [2])], [("vn", F), ("ps", F)],
               [("n", np.array(3, np.int64))], opset=21)
    v0 = _x(2)
    vn, ps = _run(m, {"v0": v0})
    v, rows = v0, []
    for i in range(3):
        rows.append(v * i)
        v = v + v * i
    np.testing.assert_allclose(vn, v, rtol=1e-6)
    np.testing.assert_allclose(ps, np.stack(rows), rtol=1e-6)


def _if_model():
    then = _body([helper.make_node("Neg", ["x"], ["t"])], [], ["t"])
    other = _body([helper.make_node("Exp", ["x"], ["e"])], [], ["e"])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    return _model([node], [("c", TensorProto.BOOL, []), ("x", F, [3])], [("y", F)])


def test_if_on_a_static_condition_inlines_the_branch():
    x = _x(3)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": x}
        (y,) = _run(_if_model(), feeds, static={"c": np.array(c)})
        np.testing.assert_allclose(y, -x if c else np.exp(x), rtol=1e-6)


def test_if_on_a_run_time_condition_is_refused():
    with pytest.raises(OnnxImportError, match="condition computed at run time"):
        load_with_params(_if_model())


def test_payload_computed_from_a_static_input_is_evaluated():
    """Reshape's shape computed by the graph (Concat of an input and a constant)."""
    x = _x(2, 6)
    nodes = [helper.make_node("Concat", ["rows", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    m = _model(nodes, [("x", F, x.shape), ("rows", I64, [1])], [("y", F)],
               [("minus1", np.array([-1], np.int64))])
    rows = np.array([4], np.int64)
    with pytest.raises(OnnxImportError, match="must be known at import time"):
        load_with_params(m)
    (y,) = _run(m, {"x": x, "rows": rows}, static={"rows": rows})
    np.testing.assert_array_equal(y, x.reshape(4, 3))


def test_batch_norm_training_mode_uses_batch_statistics():
    x, s, b = _x(3, 2, 4), _x(2), _x(2)
    mean, var = _x(2), np.abs(_x(2)) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                            ["y", "rm", "rv"], training_mode=1, momentum=0.8, epsilon=1e-3)
    m = _model([node], [("x", F, x.shape)], [("y", F), ("rm", F), ("rv", F)],
               [("s", s), ("b", b), ("m", mean), ("v", var)], opset=15)
    y, rm, rv = _run(m, {"x": x})
    bm, bv = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    want = s[:, None] * (x - bm[:, None]) / np.sqrt(bv[:, None] + 1e-3) + b[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm, 0.8 * mean + 0.2 * bm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv, 0.8 * var + 0.2 * bv, rtol=1e-5, atol=1e-6)


# ── resize by interpolation matrices ────────────────────────────────────
def _keys(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0


def test_resize_cubic_matches_keys_kernel_with_edge_clamp():
    x = _x(1, 1, 1, 5)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")
    m = _model([node], [("x", F, x.shape)], [("y", F)],
               [("scales", np.array([1, 1, 1, 2], np.float32))], opset=19)
    (y,) = _run(m, {"x": x})
    want = []
    for o in range(10):
        src = (o + 0.5) / 2 - 0.5
        i0 = int(np.floor(src))
        want.append(sum(_keys(src - i) * x[0, 0, 0, min(max(i, 0), 4)]
                        for i in range(i0 - 1, i0 + 3)))
    np.testing.assert_allclose(y[0, 0, 0], want, rtol=1e-5, atol=1e-5)


def test_resize_tf_crop_and_resize_extrapolates_outside_the_roi():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4) * 2
    roi = np.array([0, 0, 0, 0.5, 1, 1, 1, 1.5], np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize",
                            extrapolation_value=-7.0)
    m = _model([node], [("x", F, x.shape)], [("y", F)],
               [("roi", roi), ("sizes", np.array([1, 1, 1, 5], np.int64))], opset=19)
    (y,) = _run(m, {"x": x})
    src = 0.5 * 3 + np.arange(5) * (1.5 - 0.5) * 3 / 4      # the ROI's source positions
    want = np.where(src > 3, -7.0, 2 * src)                  # x is the line 2·i
    np.testing.assert_allclose(y[0, 0, 0], want, rtol=1e-6, atol=1e-6)


# ── gathers with import-time indices, LRN, function bodies ──────────────
def test_compress_and_reverse_sequence():
    x = _x(3, 4)
    nodes = [helper.make_node("Compress", ["x", "keep"], ["c"], axis=1),
             helper.make_node("ReverseSequence", ["x", "lens"], ["r"], time_axis=1,
                              batch_axis=0)]
    keep, lens = np.array([1, 0, 1, 1], bool), np.array([4, 1, 2], np.int64)
    m = _model(nodes, [("x", F, x.shape)], [("c", F), ("r", F)],
               [("keep", keep), ("lens", lens)])
    c, r = _run(m, {"x": x})
    np.testing.assert_array_equal(c, x[:, keep])
    want = x.copy()
    for b, n in enumerate(lens):
        want[b, :n] = x[b, :n][::-1]
    np.testing.assert_array_equal(r, want)


def test_lrn_channel_window():
    x = _x(1, 5, 2, 2)
    node = helper.make_node("LRN", ["x"], ["y"], size=4, alpha=0.3, beta=0.6, bias=1.5)
    m = _model([node], [("x", F, x.shape)], [("y", F)])
    (y,) = _run(m, {"x": x})
    sq = np.zeros_like(x)
    for c in range(5):      # window: 1 channel before, 2 after
        sq[:, c] = (x[:, max(c - 1, 0):c + 3] ** 2).sum(axis=1)
    np.testing.assert_allclose(y, x / (1.5 + 0.3 / 4 * sq) ** 0.6, rtol=1e-5, atol=1e-6)


def test_op_without_converter_imports_through_its_function_body():
    """CenterCropPad has no converter: ONNX's function body of it is imported."""
    x = _x(5, 4)
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"])
    m = _model([node], [("x", F, x.shape)], [("y", F)],
               [("shape", np.array([3, 6], np.int64))], opset=18)
    graph, _ = load_with_params(m)
    assert "Pad" in {n.kind for n in graph.nodes}
    (y,) = _run(m, {"x": x})
    want = np.zeros((3, 6), np.float32)
    want[:, 1:5] = x[1:4]           # rows cropped from the centre, columns padded around
    np.testing.assert_array_equal(y, want)


def test_preview_domain_op_imports_through_its_function_body():
    """ai.onnx.preview's FlexAttention (no score or prob modifiers): softmax attention."""
    q, k, v = _x(1, 2, 3, 4), _x(1, 2, 5, 4), _x(1, 2, 5, 4)
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview")
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, F, a.shape)
                                       for n, a in (("q", q), ("k", k), ("v", v))],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26),
                                            helper.make_opsetid("ai.onnx.preview", 1)])
    (y,) = _run(m, {"q": q, "k": k, "v": v})
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(4)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y, p / p.sum(-1, keepdims=True) @ v, rtol=1e-5, atol=1e-6)
