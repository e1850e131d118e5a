"""rlx_ref.onnx.load: quantization, recurrences, rotary, DFT and control flow, against
expected values computed here with numpy from ONNX's written equations."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rlx_ref  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load_with_params  # noqa: E402

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
RNG = np.random.default_rng(23)


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s)
                                       for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _run(model, feeds, static=None):
    graph, params = load_with_params(model, static_inputs=static)
    names = [n.attrs.name for n in graph.input_nodes()]
    return rlx_ref.interpret(graph, {k: feeds[k] for k in names}, params)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _sig(z):
    return 1 / (1 + np.exp(-z))


# ── quantization ────────────────────────────────────────────────────────
def test_quantize_per_axis_rounds_half_to_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -0.5], [300.0, -300.0, 7.49, np.nan]], np.float32)
    scale = np.array([1.0, 0.5], np.float32)
    zp = np.array([0, 10], np.int8)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)
    m = _model([node], [("x", F, x.shape)], [("y", I8)], [("s", scale), ("z", zp)])
    (y,) = _run(m, {"x": x})
    assert y.dtype == np.int8
    # row 0: half to even; row 1: x/0.5 + 10 saturated; NaN saturates to the minimum
    assert y.tolist() == [[0, 2, 2, 0], [127, -128, 25, -128]]


def test_dequantize_blocked():
    x = np.arange(12, dtype=np.uint8).reshape(2, 6)
    scale = np.array([[0.5, 2.0], [1.0, 0.25]], np.float32)
    zp = np.array([[1, 2], [3, 4]], np.uint8)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=3)
    m = _model([node], [("x", U8, x.shape)], [("y", F)], [("s", scale), ("z", zp)])
    (y,) = _run(m, {"x": x})
    want = (x.astype(np.float32) - np.repeat(zp, 3, 1)) * np.repeat(scale, 3, 1)
    np.testing.assert_array_equal(y, want)


def test_qlinear_matmul_is_the_int32_product_rescaled():
    a = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 256, (4, 2)).astype(np.uint8)
    sa, sb, sy = np.float32(0.02), np.float32(0.03), np.float32(0.05)
    za, zb, zy = np.uint8(120), np.uint8(130), np.uint8(100)
    ins = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    node = helper.make_node("QLinearMatMul", ins, ["y"])
    inits = [(n, np.array(v)) for n, v in zip(ins[1:3] + ins[4:], (sa, za, sb, zb, sy, zy))]
    m = _model([node], [("a", U8, a.shape), ("b", U8, b.shape)], [("y", U8)], inits)
    (y,) = _run(m, {"a": a, "b": b})
    acc = (a.astype(np.int32) - za) @ (b.astype(np.int32) - zb)
    want = np.clip(np.rint(acc * np.float64(sa * sb / sy) + zy), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(y, want)


# ── recurrences ─────────────────────────────────────────────────────────
def _onnx_lstm(x, w, r, b, h, c):
    """ONNX's LSTM equations, gates in ONNX's order i, o, f, c; x is [seq, batch, in]."""
    ys = []
    for xt in x:
        z = xt @ w.T + h @ r.T + b[:4 * len(h[0])] + b[4 * len(h[0]):]
        i, o, f, g = np.split(z, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_with_bias_and_initial_state(direction):
    seq, batch, inp, hid = 4, 2, 3, 5
    x, w, r = _x(seq, batch, inp), _x(1, 4 * hid, inp), _x(1, 4 * hid, hid)
    b, h0, c0 = _x(1, 8 * hid), _x(1, batch, hid), _x(1, batch, hid)
    node = helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh"],
                            hidden_size=hid, direction=direction)
    m = _model([node], [("x", F, x.shape), ("h0", F, h0.shape), ("c0", F, c0.shape)],
               [("y", F), ("yh", F)], [("w", w), ("r", r), ("b", b)])
    y, yh = _run(m, {"x": x, "h0": h0, "c0": c0})
    xs = x[::-1] if direction == "reverse" else x
    ys, hn = _onnx_lstm(xs, w[0], r[0], b[0], h0[0], c0[0])
    ys = ys[::-1] if direction == "reverse" else ys
    np.testing.assert_allclose(y, ys[:, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yh, hn[None], rtol=1e-5, atol=1e-5)


def _onnx_gru_lbr(x, w, r, b, h):
    """ONNX's GRU with linear_before_reset=1, gates z, r, h; x is [batch, seq, in]."""
    hid = h.shape[-1]
    wb, rb = b[:3 * hid], b[3 * hid:]
    ys = []
    for t in range(x.shape[1]):
        xz, xr, xh = np.split(x[:, t] @ w.T + wb, 3, axis=-1)
        hz, hr, hh = np.split(h @ r.T + rb, 3, axis=-1)
        z, rr = _sig(xz + hz), _sig(xr + hr)
        h = (1 - z) * np.tanh(xh + rr * hh) + z * h
        ys.append(h)
    return np.stack(ys, axis=1)


def test_gru_bidirectional_batch_first():
    batch, seq, inp, hid = 2, 3, 4, 3
    x, w, r, b = _x(batch, seq, inp), _x(2, 3 * hid, inp), _x(2, 3 * hid, hid), _x(2, 6 * hid)
    node = helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hid,
                            direction="bidirectional", layout=1, linear_before_reset=1)
    m = _model([node], [("x", F, x.shape)], [("y", F), ("yh", F)],
               [("w", w), ("r", r), ("b", b)])
    y, yh = _run(m, {"x": x})
    zero = np.zeros((batch, hid), np.float32)
    fwd = _onnx_gru_lbr(x, w[0], r[0], b[0], zero)
    bwd = _onnx_gru_lbr(x[:, ::-1], w[1], r[1], b[1], zero)[:, ::-1]
    np.testing.assert_allclose(y, np.stack([fwd, bwd], axis=2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yh, np.stack([fwd[:, -1], bwd[:, 0]], axis=1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,attrs,outs,why", [
    ("GRU", {}, ["y"], "linear_before_reset=0"),
    ("LSTM", {}, ["y", "yh", "yc"], "Y_c"),
    ("RNN", {"clip": 2.0}, ["y"], "clip"),
    ("RNN", {"activations": ["Sigmoid"]}, ["y"], "activations"),
])
def test_recurrent_refusals_name_the_cause(op, attrs, outs, why):
    g = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
    x, w, r = _x(2, 1, 3), _x(1, g * 2, 3), _x(1, g * 2, 2)
    node = helper.make_node(op, ["x", "w", "r"], outs, hidden_size=2, **attrs)
    m = _model([node], [("x", F, x.shape)], [(o, F) for o in outs], [("w", w), ("r", r)])
    with pytest.raises(OnnxImportError, match=why):
        load_with_params(m)


# ── transformer pieces and spectra ──────────────────────────────────────
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_with_position_ids(interleaved):
    b, s, h, d, rot = 1, 3, 2, 6, 4
    x, cos, sin = _x(b, h, s, d), _x(8, rot // 2), _x(8, rot // 2)
    pos = np.array([[5, 0, 2]], np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                            interleaved=interleaved, rotary_embedding_dim=rot)
    m = _model([node], [("x", F, x.shape), ("pos", I64, pos.shape)], [("y", F)],
               [("cos", cos), ("sin", sin)], opset=23)
    (y,) = _run(m, {"x": x, "pos": pos})
    c, s_ = cos[pos][:, None], sin[pos][:, None]          # [b, 1, s, rot/2]
    xr = x[..., :rot]
    x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if interleaved else np.split(xr, 2, axis=-1)
    re, im = c * x1 - s_ * x2, s_ * x1 + c * x2
    rotd = np.stack([re, im], -1).reshape(xr.shape) if interleaved else \
        np.concatenate([re, im], -1)
    np.testing.assert_allclose(y, np.concatenate([rotd, x[..., rot:]], -1), rtol=1e-6,
                               atol=1e-6)


def test_swiglu_alpha():
    a, g = _x(2, 5), _x(2, 5)
    node = helper.make_node("SwiGLU", ["a", "g"], ["y"], alpha=1.7)
    m = _model([node], [("a", F, a.shape), ("g", F, g.shape)], [("y", F)], opset=28)
    (y,) = _run(m, {"a": a, "g": g})
    np.testing.assert_allclose(y, a * _sig(1.7 * a) * g, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_dft_along_axis_one(inverse, onesided):
    n = 6
    m_in = n // 2 + 1 if inverse and onesided else n
    z = _x(2, m_in, 3) + 1j * _x(2, m_in, 3)
    x = np.stack([z.real, z.imag], -1).astype(np.float32)
    if not inverse:
        x = x[..., :1]          # a real signal
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"], inverse=inverse,
                            onesided=onesided)
    m = _model([node], [("x", F, x.shape)], [("y", F)],
               [("axis", np.array(1, np.int64))], opset=20)
    (y,) = _run(m, {"x": x})
    sig = x[..., 0] if not inverse else z
    if inverse and onesided:
        want = np.fft.irfft(sig, n=n, axis=1)[..., None]
    else:
        f = np.fft.ifft(sig, axis=1) if inverse else np.fft.fft(sig, axis=1)
        f = f[:, :n // 2 + 1] if onesided else f
        want = np.stack([f.real, f.imag], -1)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


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
