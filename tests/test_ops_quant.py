"""Quant family, integer ops and payloads: Quantize, Dequantize, QMatMul, QConv2d, and the
QuantScheme payload's serde form. Expectations are worked by hand from RLX's CPU kernels."""
import json

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Op
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import op_from_json, print_op
from rlx_ref.ops import _quant_scheme as S
from rlx_ref.ops.codec import CodecError
from rlx_ref.ops.opdef import OpError
from rlx_ref.ops.quant import QConv2dAttrs, QMatMulAttrs, QuantAxisAttrs
from rlx_ref.ops.quant_matmul import SchemeAttrs
from rlx_ref.ops.single import run_single, verify_single


def _run(kind, attrs, *arrays, out=None):
    return run_single(kind, attrs, *arrays, out=out)


def errors(kind, attrs, arrays, out=None):
    """Verifier messages of the one-op graph (a shape rule may raise before it is built)."""
    try:
        return verify_single(kind, attrs, arrays, out)
    except OpError as e:
        return [str(e)]


# ── Quantize / Dequantize ────────────────────────────────────────────────────

def test_quantize_rounds_ties_away_from_zero_and_saturates():
    x = np.float32([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 200, -200, np.nan])
    q = _run("Quantize", QuantAxisAttrs(None, (1.0,), (0,)), x)
    # np.round would give 0, 2, 2, -0, -2; Rust's f32::round gives 1, 2, 3, -1, -3
    np.testing.assert_array_equal(q, np.int8([1, 2, 3, -1, -3, 0, 127, -128, 0]))
    assert q.dtype == np.int8


def test_quantize_multiplies_by_the_f32_reciprocal():
    # 1/3 rounds to 0.33333334f; 1.5 · that = 0.50000001 rounds (in f32) to 0.5 -> 1
    q = _run("Quantize", QuantAxisAttrs(None, (3.0,), (0,)), np.float32([1.5, -1.5]))
    np.testing.assert_array_equal(q, np.int8([1, -1]))


def test_quantize_per_channel_uses_the_index_along_axis():
    x = np.float32([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    a = QuantAxisAttrs(1, (0.5, 0.25, 1.0), (0, 10, -128))
    # channel scales 0.5, 0.25, 1 and zero points 0, 10, -128 per column
    np.testing.assert_array_equal(_run("Quantize", a, x),
                                  np.int8([[2, 14, -127], [-4, 2, -128]]))


def test_dequantize_per_channel_and_zero_point_extremes():
    q = np.int8([[-128, 127], [0, -1]])
    a = QuantAxisAttrs(0, (0.5, 2.0), (-128, 2**31 - 1))
    want = np.float32([[0.0, 127.5], [-(2.0**32 - 2), -(2.0**32)]])
    np.testing.assert_array_equal(_run("Dequantize", a, q), want)


def test_quantize_then_dequantize_is_within_half_a_step():
    x = np.linspace(-3, 3, 25, dtype=np.float32)
    a = QuantAxisAttrs(None, (0.05,), (3,))
    back = _run("Dequantize", a, _run("Quantize", a, x))
    assert np.max(np.abs(back - x)) <= 0.025 + 1e-6


@pytest.mark.parametrize("attrs,shape,dtype,msg", [
    (QuantAxisAttrs(None, (1.0, 2.0), (0, 0)), (4,), np.float32,
     "(C2) per-tensor Quantize"),
    (QuantAxisAttrs(1, (1.0,), (0,)), (2, 3), np.float32, "needs 3 scales and zero points"),
    (QuantAxisAttrs(2, (1.0,), (0,)), (2, 3), np.float32, "axis 2 is out of range"),
    (QuantAxisAttrs(None, (0.0,), (0,)), (2,), np.float32, "finite and non-zero"),
    (QuantAxisAttrs(None, (1.0,), (0,)), (2,), np.float64,
     "(C1) Quantize takes a f32 tensor, got f64"),
])
def test_quantize_verifier_messages(attrs, shape, dtype, msg):
    errs = errors("Quantize", attrs, [np.zeros(shape, dtype)])
    assert errs and msg in errs[0], errs


# ── QMatMul ──────────────────────────────────────────────────────────────────

def test_qmatmul_requantize_ties_and_saturation():
    x = np.int8([[1], [1], [1], [1], [127], [-128]])
    w = np.int8([[1, -1, 3]])
    bias = np.int32([4, -4, 0])
    got = _run("QMatMul", QMatMulAttrs(0, 0, 0, 0.5), x, w, bias)
    # acc rows: [5, -5, 3] -> ·0.5 = 2.5, -2.5, 1.5 -> 3, -3, 2 (half away from zero)
    assert got[0].tolist() == [3, -3, 2]
    # acc [131, -131, 381] -> 65.5, -65.5, 190.5 -> 66, -66, 127 (saturated)
    assert got[4].tolist() == [66, -66, 127]
    # acc [-124, 124, -384] -> -62, 62, -192 -> -62, 62, -128
    assert got[5].tolist() == [-62, 62, -128]


def test_qmatmul_rounds_the_accumulator_to_f32_first():
    # acc = 2**24 + 3 rounds (ties to even) to 2**24 + 4 in f32; ·1/8 = 2097152.5 -> 2097153;
    # the exact acc/8 = 2097152.375 would round to 2097152. out_zp brings it into i8 range.
    got = _run("QMatMul", QMatMulAttrs(0, 0, -2097148, 0.125), np.int8([[1]]),
               np.int8([[3]]), np.int32([2**24]))
    assert got.tolist() == [[5]]


def test_qmatmul_zero_points_shift_both_operands():
    x, w = np.int8([[-128, 5]]), np.int8([[127], [0]])
    got = _run("QMatMul", QMatMulAttrs(-128, 127, 7, 1.0), x, w, np.int32([0]))
    # (x + 128)·(w - 127) = 0·0 + 133·(-127) = -16891 -> clamp(-16891 + 7) = -128
    assert got.tolist() == [[-128]]


@pytest.mark.parametrize("arrays,msg", [
    ((np.zeros((2, 3), np.float32), np.zeros((3, 2), np.int8), np.zeros(2, np.int32)),
     "(C1) QMatMul operands x and w must be i8"),
    ((np.zeros((2, 3), np.int8), np.zeros((4, 2), np.int8), np.zeros(2, np.int32)),
     "(C2) QMatMul K mismatch"),
    ((np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8), np.zeros(2, np.int8)),
     "(C3) QMatMul bias must be i32"),
    ((np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8), np.zeros(3, np.int32)),
     "(C3) QMatMul bias must be [2]"),
])
def test_qmatmul_verifier_messages(arrays, msg):
    errs = errors("QMatMul", QMatMulAttrs(0, 0, 0, 1.0), arrays)
    assert errs and msg in errs[0], errs


# ── QConv2d ──────────────────────────────────────────────────────────────────

def _qconv_loops(x, w, bias, a):
    """The nested loops of RLX's CPU QConv2d, taps outside the input skipped."""
    n, c_in, h, wd = x.shape
    c_out, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = a.stride, a.padding, a.dilation
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, c_out, ho, wo), np.int8)
    for b, co, i, j in np.ndindex(n, c_out, ho, wo):
        g = co // (c_out // a.groups)
        acc = int(bias[co])
        for ci, ki, kj in np.ndindex(cg, kh, kw):
            hi, wi = i * sh + ki * dh - ph, j * sw + kj * dw - pw
            if 0 <= hi < h and 0 <= wi < wd:
                xv, wv = int(x[b, g * cg + ci, hi, wi]), int(w[co, ci, ki, kj])
                acc += (xv - a.x_zp) * (wv - a.w_zp)
        v = np.float64(np.float32(acc) * np.float32(a.mult))
        r = int(np.sign(v) * np.floor(abs(v) + 0.5))
        out[b, co, i, j] = min(127, max(-128, r + a.out_zp))
    return out


def test_qconv2d_matches_rlx_loops_with_padding_groups_and_zero_points():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (2, 4, 5, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 2, 3, 2)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 6).astype(np.int32)
    a = QConv2dAttrs((3, 2), (2, 1), (1, 2), (1, 2), 2, 17, -9, -4, 7e-4)
    np.testing.assert_array_equal(_run("QConv2d", a, x, w, bias), _qconv_loops(x, w, bias, a))


def test_qconv2d_verifier_messages():
    x, w = np.zeros((1, 2, 4, 4), np.int8), np.zeros((3, 2, 3, 3), np.int8)
    errs = errors("QConv2d", QConv2dAttrs((3, 3)), [x, w, np.zeros(2, np.int32)],
                  out=Shape((1, 3, 2, 2), DType.I8))
    assert errs and "(C6) QConv2d bias must be [3]" in errs[0], errs
    errs = errors("QConv2d", QConv2dAttrs((2, 2)), [x, w, np.zeros(3, np.int32)],
                  out=Shape((1, 3, 2, 2), DType.I8))
    assert errs and "(C2) kernel_size [2, 2] does not match" in errs[0], errs
    errs = errors("QConv2d", QConv2dAttrs((3, 3), mult=float("nan")),
                  [x, w, np.zeros(3, np.int32)], out=Shape((1, 3, 2, 2), DType.I8))
    assert errs and "(C7) QConv2d mult must be finite" in errs[0], errs


# ── the QuantScheme payload ──────────────────────────────────────────────────

EVERY_SCHEME = [
    "Fp8E4m3", "Fp8E5m2", "Nvfp4Block", *S.GGUF,
    ("Int8Block", {"block_size": 32}), ("Int8BlockAsym", {"block_size": 64}),
    ("Int4Block", {"block_size": 16}), ("MlxAffine", {"bits": 4, "group_size": 64}),
    ("MlxMxfp4", {"group_size": 32}), ("MlxMxfp8", {"group_size": 32}),
    ("MxFp4x2Block", {"group_size": 32}),
]


def test_every_rlx_quant_scheme_variant_is_in_the_codec():
    assert len(S.QUANT_SCHEME.variants) == 40 == len(EVERY_SCHEME)


@pytest.mark.parametrize("scheme", EVERY_SCHEME, ids=S.name_of)
@pytest.mark.parametrize("kind", ["DequantMatMul", "DequantGroupedMatMul",
                                  "DequantMoEWeights"])
def test_scheme_payload_round_trips_through_serde_json(kind, scheme):
    op = Op(kind, SchemeAttrs(scheme))
    text = print_op(op)
    back = op_from_json(json.loads(text))
    assert back == op and print_op(back) == text


@pytest.mark.parametrize("scheme,text", [
    ("GgufQ4K", '{"DequantMatMul":{"scheme":"GgufQ4K"}}'),
    (("Int8Block", {"block_size": 32}),
     '{"DequantMatMul":{"scheme":{"Int8Block":{"block_size":32}}}}'),
    (("MlxAffine", {"group_size": 64, "bits": 4}),
     '{"DequantMatMul":{"scheme":{"MlxAffine":{"bits":4,"group_size":64}}}}'),
])
def test_scheme_payload_text_is_rlx_serde(scheme, text):
    assert print_op(Op("DequantMatMul", SchemeAttrs(scheme))) == text


@pytest.mark.parametrize("payload", [
    {"scheme": "GgufQ9K"}, {"scheme": {"Int8Block": {}}},
    {"scheme": {"Int8Block": {"block_size": 32, "extra": 1}}},
    {"scheme": {"MlxAffine": {"bits": 300, "group_size": 64}}},
])
def test_bad_scheme_payloads_are_rejected(payload):
    with pytest.raises(CodecError):
        op_from_json({"DequantMatMul": payload})
