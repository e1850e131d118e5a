"""rlx_ref.onnx.load: control flow, import-time payloads, resize matrices, gathers and
function bodies, against expected values computed here with numpy."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rlx_ref  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load_with_params  # noqa: E402

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
RNG = np.random.default_rng(29)


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


def _grid_model(x, grid, **attrs):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    return _model([node], [("x", F, x.shape), ("grid", F, grid.shape)], [("y", F)], opset=22)


def test_grid_sample_bilinear_zeros_and_nearest_border():
    x = _x(1, 2, 3, 4)
    grid = (RNG.uniform(-1.4, 1.4, (1, 2, 5, 2))).astype(np.float32)
    (y,) = _run(_grid_model(x, grid, mode="linear", padding_mode="zeros"),
                {"x": x, "grid": grid})
    (yn,) = _run(_grid_model(x, grid, mode="nearest", padding_mode="border"),
                 {"x": x, "grid": grid})
    h, w = 3, 4

    def px(c, i, j):            # zeros outside the image
        return x[0, c, i, j] if 0 <= i < h and 0 <= j < w else 0.0

    for a in range(2):
        for b in range(5):
            gx, gy = grid[0, a, b]
            u, v = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2     # align_corners=0
            j0, i0 = int(np.floor(u)), int(np.floor(v))
            fu, fv = u - j0, v - i0
            # nearest with border padding: the rounded position, clamped into the image
            ni, nj = min(max(int(np.rint(v)), 0), h - 1), min(max(int(np.rint(u)), 0), w - 1)
            for c in range(2):
                want = ((1 - fv) * ((1 - fu) * px(c, i0, j0) + fu * px(c, i0, j0 + 1)) +
                        fv * ((1 - fu) * px(c, i0 + 1, j0) + fu * px(c, i0 + 1, j0 + 1)))
                np.testing.assert_allclose(y[0, c, a, b], want, rtol=1e-5, atol=1e-6)
                assert yn[0, c, a, b] == x[0, c, ni, nj]


def test_bitcast_between_integers_and_its_float_refusal():
    x = np.array([-1, 127, -128, 5], np.int8)
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=U8)], [("x", I8, x.shape)],
               [("y", U8)], opset=26)
    (y,) = _run(m, {"x": x})
    np.testing.assert_array_equal(y, x.view(np.uint8))
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)],
               [("x", F, [2])], [("y", TensorProto.INT32)], opset=26)
    with pytest.raises(OnnxImportError, match="no bit cast between float and integer"):
        load_with_params(m)


def test_max_unpool_scatters_into_a_padded_output():
    x = _x(1, 1, 2, 2)
    idx = np.array([[[[5, 3], [9, 15]]]], np.int64)        # flat positions in a 4×4 plane
    node = helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                            strides=[2, 2])
    m = _model([node], [("x", F, x.shape), ("i", I64, idx.shape)], [("y", F)],
               [("shape", np.array([1, 1, 5, 5], np.int64))], opset=22)
    (y,) = _run(m, {"x": x, "i": idx})
    plane = np.zeros(16, np.float32)
    plane[idx.reshape(-1)] = x.reshape(-1)
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, :4, :4] = plane.reshape(4, 4)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_each_row_at_its_index(mode):
    past, upd = _x(2, 3, 4, 2), _x(2, 3, 2, 2)
    wi = np.array([1, 3 if mode == "circular" else 2], np.int64)
    node = helper.make_node("TensorScatter", ["p", "u", "w"], ["y"], mode=mode)
    m = _model([node], [("p", F, past.shape), ("u", F, upd.shape), ("w", I64, wi.shape)],
               [("y", F)], opset=24)
    (y,) = _run(m, {"p": past, "u": upd, "w": wi})
    want = past.copy()
    for b in range(2):
        for s in range(2):
            want[b, :, (wi[b] + s) % 4] = upd[b, :, s]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices_count_over_the_whole_input(order):
    x = _x(2, 2, 4, 5)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3],
                            strides=[2, 1], pads=[0, 1, 0, 1], storage_order=order)
    m = _model([node], [("x", F, x.shape)], [("y", F), ("i", I64)], opset=22)
    y, idx = _run(m, {"x": x})
    h, w = 4, 5
    for n, c, oh, ow in np.ndindex(*y.shape):
        best, at = None, None
        for kh in range(2):
            for kw in range(3):
                r, q = oh * 2 + kh, ow + kw - 1
                if 0 <= r < h and 0 <= q < w and (best is None or x[n, c, r, q] > best):
                    best, at = x[n, c, r, q], (r, q)
        flat = at[0] * w + at[1] if order == 0 else at[0] + at[1] * h
        assert y[n, c, oh, ow] == best
        assert idx[n, c, oh, ow] == (n * 2 + c) * h * w + flat


def _bilinear(img, y, x):
    """Caffe2's RoiAlign sample: 0 outside [-1, size], edges clamped."""
    h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    y1, x1 = (y0 + 1, x0 + 1)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[y0, x0] + (1 - ly) * lx * img[y0, x1] +
            ly * (1 - lx) * img[y1, x0] + ly * lx * img[y1, x1])


def test_roi_align_average_of_bilinear_samples():
    x = _x(2, 2, 6, 7)
    rois = np.array([[0.5, 1.0, 5.0, 4.5], [2.0, 0.0, 7.5, 6.0]], np.float32)
    batch = np.array([1, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=3,
                            output_width=2, sampling_ratio=2, spatial_scale=0.5)
    m = _model([node], [("x", F, x.shape), ("rois", F, rois.shape), ("b", I64, [2])],
               [("y", F)], opset=22)
    (y,) = _run(m, {"x": x, "rois": rois, "b": batch})
    for r in range(2):
        x1, y1, x2, y2 = rois[r].astype(np.float64) * 0.5 - 0.5      # half_pixel
        bh, bw = (y2 - y1) / 3, (x2 - x1) / 2
        for c, ph, pw in np.ndindex(2, 3, 2):
            samples = [_bilinear(x[batch[r], c], y1 + ph * bh + (iy + 0.5) * bh / 2,
                                 x1 + pw * bw + (ix + 0.5) * bw / 2)
                       for iy in range(2) for ix in range(2)]
            np.testing.assert_allclose(y[r, c, ph, pw], np.mean(samples), rtol=1e-5,
                                       atol=1e-6)


@pytest.mark.parametrize("eq,shapes", [("...ii->...i", [(3, 4, 4)]),
                                       ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
                                       ("bAj,jA->bA", [(2, 3, 4), (4, 3)])])
def test_einsum_ellipsis_diagonal_and_capital_labels(eq, shapes):
    xs = [_x(*s) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    m = _model([node], [(n, F, x.shape) for n, x in zip(names, xs)], [("y", F)], opset=13)
    (y,) = _run(m, dict(zip(names, xs)))
    np.testing.assert_allclose(y, np.einsum(eq, *xs), rtol=1e-5, atol=1e-5)
