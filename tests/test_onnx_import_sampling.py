"""rlx_ref.onnx.load: GridSample, BitCast, MaxUnpool, TensorScatter, MaxPool indices,
RoiAlign and Einsum, against expected values computed here with numpy."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from _onnx_build import model as _model, run as _run  # noqa: E402
from rlx_ref.onnx import OnnxImportError, load_with_params  # noqa: E402

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64
RNG = np.random.default_rng(31)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ── sampling, scatters and indices ───────────────────────────────────────
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


def test_deform_conv_with_a_uniform_fractional_offset_and_mask():
    x, wt, b = _x(1, 2, 4, 5), _x(3, 2, 2, 2), _x(3)
    oh, ow = 4, 5                                 # pads 1 on the top and left only
    off = np.zeros((1, 8, oh, ow), np.float32)
    off[:, 0::2], off[:, 1::2] = 0.5, 0.25         # every tap moves by (0.5, 0.25)
    mask = np.full((1, 4, oh, ow), 0.5, np.float32)
    node = helper.make_node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"],
                            kernel_shape=[2, 2], pads=[1, 1, 0, 0])
    m = _model([node], [("x", F, x.shape), ("off", F, off.shape), ("mask", F, mask.shape)],
               [("y", F)], [("w", wt), ("b", b)], opset=22)
    (y,) = _run(m, {"x": x, "off": off, "mask": mask})

    def at(c, p, q):                              # bilinear, zeros outside the image
        p0, q0 = int(np.floor(p)), int(np.floor(q))
        tot = 0.0
        for i, wy in ((p0, 1 - (p - p0)), (p0 + 1, p - p0)):
            for j, wx in ((q0, 1 - (q - q0)), (q0 + 1, q - q0)):
                if 0 <= i < 4 and 0 <= j < 5:
                    tot += wy * wx * x[0, c, i, j]
        return tot

    want = np.zeros((3, oh, ow))
    for o, i, j in np.ndindex(3, oh, ow):
        want[o, i, j] = b[o] + sum(0.5 * wt[o, c, u, v] * at(c, i - 1 + u + 0.5, j - 1 + v + 0.25)
                                   for c in range(2) for u in range(2) for v in range(2))
    np.testing.assert_allclose(y[0], want, rtol=1e-5, atol=1e-5)
