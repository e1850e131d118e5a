"""rlx_ref.onnx.load: quantization, recurrences, rotary embedding, SwiGLU and DFT, against
expected values computed here with numpy from ONNX's written equations."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from _onnx_build import model as _model, run as _run  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load_with_params  # noqa: E402

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
RNG = np.random.default_rng(23)


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


def test_lstm_bidirectional_batch_first_gives_the_final_cell_state():
    batch, seq, inp, hid = 2, 3, 2, 4
    x, w, r, b = _x(batch, seq, inp), _x(2, 4 * hid, inp), _x(2, 4 * hid, hid), _x(2, 8 * hid)
    h0, c0 = _x(batch, 2, hid), _x(batch, 2, hid)          # layout 1: [batch, D, H]
    node = helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"],
                            hidden_size=hid, direction="bidirectional", layout=1)
    m = _model([node], [("x", F, x.shape), ("h0", F, h0.shape), ("c0", F, c0.shape)],
               [("y", F), ("yh", F), ("yc", F)], [("w", w), ("r", r), ("b", b)])
    y, yh, yc = _run(m, {"x": x, "h0": h0, "c0": c0})
    xs = x.transpose(1, 0, 2)
    for d, xd in ((0, xs), (1, xs[::-1])):
        h, c = h0[:, d], c0[:, d]
        ys = []
        for xt in xd:
            z = xt @ w[d].T + h @ r[d].T + b[d, :4 * hid] + b[d, 4 * hid:]
            i, o, f, g = np.split(z, 4, axis=-1)
            c = _sig(f) * c + _sig(i) * np.tanh(g)
            h = _sig(o) * np.tanh(c)
            ys.append(h)
        ys = np.stack(ys[::-1] if d else ys, axis=1)
        np.testing.assert_allclose(y[:, :, d], ys, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(yh[:, d], h, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(yc[:, d], c, rtol=1e-5, atol=1e-5)


def test_pytorch_stacked_recurrences_exported_to_onnx():
    torch = pytest.importorskip("torch")
    import io
    import warnings

    torch.manual_seed(3)
    for cls in (torch.nn.LSTM, torch.nn.GRU):
        m = cls(3, 4, num_layers=2, batch_first=True, bidirectional=True).eval()
        x = torch.randn(2, 5, 3)
        f = io.BytesIO()
        with warnings.catch_warnings():     # the legacy exporter warns of itself
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (x,), f, dynamo=False, input_names=["x"])
        model = onnx.load_from_string(f.getvalue())
        _, params = load_with_params(model)
        weights = {t.name for t in model.graph.initializer if t.dims and len(t.dims) == 3}
        assert weights and weights <= set(params)       # W and R stay the model's Params
        got = _run(model, {"x": x.numpy()})
        with torch.no_grad():
            y, state = m(x)
        want = [y] + list(state if isinstance(state, tuple) else (state,))
        assert len(got) == len(want)
        for g, w_ in zip(got, want):
            np.testing.assert_allclose(g, w_.numpy(), rtol=1e-5, atol=1e-5)


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
    ("LSTM", {"input_forget": 1}, ["y"], "input_forget"),
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


def test_stft_with_window_is_numpys_rfft_of_windowed_frames():
    sig, win = _x(1, 40, 1), np.hanning(8).astype(np.float32)
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"])
    m = _model([node], [("s", F, sig.shape)], [("y", F)],
               [("step", np.array(5, np.int64)), ("w", win)], opset=17)
    (y,) = _run(m, {"s": sig})
    frames = np.stack([sig[0, k * 5:k * 5 + 8, 0] * win for k in range(1 + (40 - 8) // 5)])
    f = np.fft.rfft(frames, axis=-1)
    np.testing.assert_allclose(y[0], np.stack([f.real, f.imag], -1), rtol=1e-4, atol=1e-5)
