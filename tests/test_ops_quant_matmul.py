"""Quant family, matmuls: DequantMatMul (GGUF and 4-operand forms), the grouped MoE ops and
LoraMatMul. GGUF layouts are checked by hand on Q8_0 blocks and against gguf-py (a test peer)
for every sampled scheme rlx_ref has."""
import re

import ml_dtypes
import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops import _quant_linear as L
from rlx_ref.ops.opdef import OpError
from rlx_ref.ops.quant_matmul import LoraAttrs, SchemeAttrs
from rlx_ref.ops.single import run_single, verify_single
from rlx_ref.quant import QuantError, dequant, get_scheme, quantize
from rlx_ref.quant import scheme as qs


def _q8_0_decode(blocks):
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return d * blocks[:, 2:].copy().view(np.int8).astype(np.float32)


def _q8_0_encode(x):
    d = (np.abs(x).max(axis=1, keepdims=True) / 127).astype(np.float16)
    inv = np.divide(1, d.astype(np.float32), out=np.zeros(d.shape, np.float32), where=d != 0)
    q = np.round(x * inv).astype(np.int8)
    return np.concatenate([d.view(np.uint8), q.view(np.uint8)], axis=1)


@pytest.fixture
def q8_0(monkeypatch):
    """Q8_0 as registered, or a stand-in record while no block module provides it."""
    try:
        return get_scheme("GgufQ8_0")
    except QuantError:
        sd = qs.SchemeDef("Q8_0", 32, 34, _q8_0_decode, _q8_0_encode, rlx="GgufQ8_0",
                          ggml_type=8)
        monkeypatch.setitem(qs._SCHEMES, "Q8_0", sd)
        return sd


def _block(d, q):
    return np.frombuffer(np.float16(d).tobytes() + np.int8(q).tobytes(), np.uint8)


def _out(*dims):
    return Shape(dims, DType.F32)


def _errors(kind, attrs, arrays, out=None):
    try:
        return verify_single(kind, attrs, arrays, out)
    except OpError as e:
        return [str(e)]


Q8 = SchemeAttrs("GgufQ8_0")


# ── the GGUF layout, by hand ─────────────────────────────────────────────────

def test_q8_0_rows_are_output_features_blocks_run_along_k(q8_0):
    # W row 0: d = 0.5, q = i - 16; row 1: d = 0.25, q = 3. Packed as GGML [N=2, K=32].
    packed = np.concatenate([_block(0.5, np.arange(32) - 16), _block(0.25, [3] * 32)])
    x = np.zeros((2, 32), np.float32)
    x[0] = 1
    x[1, 31] = 1
    y = run_single("DequantMatMul", Q8, x, packed, out=_out(2, 2))
    # row 0: Σ 0.5(i - 16) = -8 and 32 · 0.75 = 24; row 1: W[:, 31] = (7.5, 0.75)
    np.testing.assert_array_equal(y, np.float32([[-8, 24], [7.5, 0.75]]))


def test_leading_dims_of_x_carry_through(q8_0):
    packed = np.concatenate([_block(1.0, [1] * 32), _block(2.0, [-1] * 32)])
    x = np.ones((2, 3, 32), np.float32)
    y = run_single("DequantMatMul", Q8, x, packed, out=_out(2, 3, 2))
    np.testing.assert_array_equal(y, np.full((2, 3, 2), [32, -64], np.float32))


def test_block_size_is_read_from_the_scheme_record(q8_0, monkeypatch):
    """The RLX pitfall: decoding with a block size other than the record's is a bug, so the
    oracle takes it from the record. A 16-element record makes K = 48 legal and changes
    which bytes are scales."""
    x = np.ones((1, 48), np.float32)
    errs = _errors("DequantMatMul", Q8, [x, np.zeros(51, np.uint8)], out=_out(1, 1))
    assert errs and "K = 48 is not a multiple of 32" in errs[0], errs
    half = qs.SchemeDef("Q8_0", 16, 18, _q8_0_decode, None, rlx="GgufQ8_0", ggml_type=8)
    monkeypatch.setitem(qs._SCHEMES, "Q8_0", half)
    packed = np.concatenate([_block(d, [1] * 16) for d in (1.0, 2.0, 4.0)])
    y = run_single("DequantMatMul", Q8, x, packed, out=_out(1, 1))
    assert y.tolist() == [[16 * (1 + 2 + 4)]]


@pytest.mark.parametrize("arrays,out,attrs,msg", [
    ((np.zeros((1, 32), np.float32), np.zeros(34, np.float32)), (1, 1), Q8,
     "(C4) packed_w must be u8 bytes, got f32"),
    ((np.zeros((1, 32), np.float32), np.zeros(35, np.uint8)), (1, 1), Q8,
     "(C4) packed_w holds 35 bytes, expected 34"),
    ((np.zeros((1, 32), np.float32), np.zeros(34, np.uint8)), (2, 1), Q8,
     "(C3) DequantMatMul maps x [..., M, K] to [..., M, N]"),
    ((np.zeros((1, 32), np.float16), np.zeros(34, np.uint8)), (1, 1), Q8,
     "(C3) DequantMatMul takes f32 activations"),
    ((np.zeros((1, 32), np.float32),) + (np.zeros(34, np.uint8),) * 3, (1, 1), Q8,
     "(C2) DequantMatMul with GgufQ8_0 takes (x, packed_w), got 4 operands"),
    ((np.zeros((1, 256), np.float32), np.zeros(104, np.uint8)), (1, 1),
     SchemeAttrs("GgufFV5"), "(C1) rlx_ref cannot decode the GGUF scheme GgufFV5"),
    ((np.zeros((1, 32), np.float32), np.zeros(16, np.uint8), np.zeros(1, np.float32),
      np.zeros(1, np.float32)), (1, 1), SchemeAttrs(("MxFp4x2Block", {"group_size": 32})),
     "(C1) RLX's CPU has no DequantMatMul kernel for MxFp4x2Block{group_size=32}"),
    ((np.zeros((1, 64), np.float32), np.zeros((64, 5), np.int8), np.zeros(4, np.float32),
      np.zeros(1, np.float32)), (1, 5), SchemeAttrs(("Int8Block", {"block_size": 32})),
     "(C5) Int8Block{block_size=32} scale holds 4 elements, expected 10"),
    ((np.zeros((1, 64), np.float32), np.zeros((64, 5), np.float32), np.zeros(10, np.float32),
      np.zeros(1, np.float32)), (1, 5), SchemeAttrs(("Int8Block", {"block_size": 32})),
     "(C5) Int8Block{block_size=32} w_q must be i8/u8, got f32"),
    ((np.zeros((1, 48), np.float32), np.zeros(72, np.uint8), np.zeros(3, np.float32),
      np.zeros(3, np.float32)), (1, 3), SchemeAttrs(("MlxAffine", {"bits": 4,
                                                                   "group_size": 32})),
     "(C1) MlxAffine{bits=4, group_size=32}: K = 48 must be a positive multiple"),
])
def test_dequant_matmul_verifier_messages(q8_0, arrays, out, attrs, msg):
    errs = _errors("DequantMatMul", attrs, list(arrays), out=_out(*out))
    assert errs and msg in errs[0], errs


# ── against gguf-py, every sampled scheme rlx_ref has ────────────────────────

def _gguf_schemes():
    from rlx_ref.ops._quant_mm_samples import GGUF_SAMPLED

    found = []
    for name in GGUF_SAMPLED + ("GgufQ6K", "GgufQ2K", "GgufQ5_1"):
        try:
            sd = get_scheme(name)
        except QuantError:
            continue
        if sd.quantize is not None:
            found.append(sd)
    return found


@pytest.mark.parametrize("sd", _gguf_schemes(), ids=lambda s: s.name)
def test_dequant_matmul_is_x_times_gguf_py_dequant_transposed(sd):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(11)
    m, k, n = 3, 2 * sd.block_size, 5
    packed = quantize(rng.standard_normal((n, k)).astype(np.float32), sd.name)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = gguf.quants.dequantize(packed, gguf.GGMLQuantizationType[sd.name]).reshape(n, k)
    y64 = run_single("DequantMatMul", SchemeAttrs(sd.rlx), x, packed, out=_out(m, n),
                     float64=True)
    np.testing.assert_allclose(y64, x.astype(np.float64) @ w.astype(np.float64).T,
                               rtol=1e-12, atol=1e-12)
    y = run_single("DequantMatMul", SchemeAttrs(sd.rlx), x, packed, out=_out(m, n))
    np.testing.assert_allclose(y, y64, rtol=1e-5, atol=1e-5 * np.abs(y64).max())


def test_moe_weights_are_each_slab_transposed(q8_0):
    rng = np.random.default_rng(5)
    e, k, n = 3, 64, 2
    packed = quantize(rng.standard_normal((e, n, k)).astype(np.float32), q8_0.name)
    got = run_single("DequantMoEWeights", Q8, packed, out=_out(e, k, n))
    slabs = dequant(packed, q8_0.name).reshape(e, n, k)
    np.testing.assert_array_equal(got, slabs.transpose(0, 2, 1))
    errs = _errors("DequantMoEWeights", Q8, [packed], out=_out(2, k, n))
    assert errs and "(C3) packed_w holds 408 bytes, expected 272" in errs[0], errs


def test_dequant_grouped_matmul_is_the_per_token_product(q8_0):
    rng = np.random.default_rng(6)
    e, k, n = 3, 32, 4
    packed = quantize(rng.standard_normal((e, n, k)).astype(np.float32), q8_0.name)
    x = rng.standard_normal((5, k)).astype(np.float32)
    ids = np.float32([2, 0, 2, 2, 0])
    got = run_single("DequantGroupedMatMul", Q8, x, packed, ids, out=_out(5, n))
    w = dequant(packed, q8_0.name).reshape(e, n, k)
    want = np.stack([x[i].astype(np.float64) @ w[int(ids[i])].T for i in range(5)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    errs = _errors("DequantGroupedMatMul", Q8, [x, packed[:-1], ids], out=_out(5, n))
    assert errs and "(C3) DequantGroupedMatMul packed weight must be u8 holding E >= 1 " \
                    "slabs of 136 bytes" in errs[0], errs


# ── GroupedMatMul and expert ids ─────────────────────────────────────────────

def test_grouped_matmul_matches_a_per_token_loop():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 5, 3)).astype(np.float32)
    ids = np.float32([3, 3, 0, 1, 3, 0])          # expert 2 unused, 3 repeated
    got = run_single("GroupedMatMul", None, x, w, ids)
    want = np.stack([x[i].astype(np.float64) @ w[int(e)] for i, e in enumerate(ids)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad,msg", [(4.0, "expert_idx[1] = 4 is out of range for 4 experts"),
                                     (-1.0, "expert_idx[1] = -1 is out of range"),
                                     (np.nan, "expert_idx[1] = nan is not an integer")])
def test_invalid_expert_ids_are_errors(bad, msg):
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3, 2), np.float32)
    with pytest.raises(Exception, match=re.escape(msg)):
        run_single("GroupedMatMul", None, x, w, np.float32([0, bad]))


def test_expert_ids_truncate_toward_zero_as_rlx():
    x, w = np.ones((2, 1), np.float32), np.float32([[[1]], [[10]]])
    got = run_single("GroupedMatMul", None, x, w, np.float32([-0.5, 1.99]))
    assert got.tolist() == [[1.0], [10.0]]


def test_grouped_matmul_rejects_an_e_n_k_bank():
    errs = _errors("GroupedMatMul", None, [np.zeros((2, 4), np.float32),
                                           np.zeros((3, 5, 4), np.float32),
                                           np.zeros(2, np.float32)])
    assert errs and "(C2) GroupedMatMul K mismatch" in errs[0], errs


# ── LoraMatMul ───────────────────────────────────────────────────────────────

@pytest.mark.parametrize("scale", [0.5, -2.0, 1.0])
def test_lora_is_x_w_plus_scaled_x_a_b(scale):
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 3, 6)), rng.standard_normal((6, 4))
    a, b = rng.standard_normal((6, 2)), rng.standard_normal((2, 4))
    f = [t.astype(np.float32) for t in (x, w, a, b)]
    got = run_single("LoraMatMul", LoraAttrs(scale), *f)
    want = f[0].astype(np.float64) @ w + scale * (f[0].astype(np.float64) @ a) @ b
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_lora_verifier_names_the_mismatch():
    errs = _errors("LoraMatMul", LoraAttrs(1.0), [np.zeros((2, 6), np.float32),
                                                  np.zeros((6, 4), np.float32),
                                                  np.zeros((6, 2), np.float32),
                                                  np.zeros((3, 4), np.float32)])
    assert errs and "(C2) LoraMatMul b's R (3) != a's R (2)" in errs[0], errs


# ── 4-operand decoders ───────────────────────────────────────────────────────

def _weight(scheme, w_q, scale, zp, k, n):
    """W [k, n] as the op sees it: x = I_k picks its rows."""
    return run_single("DequantMatMul", SchemeAttrs(scheme), np.eye(k, dtype=np.float32),
                      w_q, scale, zp, out=_out(k, n))


def test_mlx_affine_4bit_hand():
    # codes 0..7 as nibbles (low first), scale 2, bias -1 (RLX's rlx-mlx-io test)
    w = _weight(("MlxAffine", {"bits": 4, "group_size": 8}), np.uint8([0x10, 0x32, 0x54, 0x76]),
                np.float32([2]), np.float32([-1]), 8, 1)
    assert w[:, 0].tolist() == [-1, 1, 3, 5, 7, 9, 11, 13]


def _rlx_extract(bits, b):
    """RLX's extract_bits_3/5/6, written out as its shifts and masks."""
    if bits == 3:
        return [b[0] & 7, (b[0] & 0x38) >> 3, ((b[0] & 0xc0) >> 6) + ((b[1] & 1) << 2),
                (b[1] & 0xe) >> 1, (b[1] & 0x70) >> 4, ((b[1] & 0x80) >> 7) + ((b[2] & 3) << 1),
                (b[2] & 0x1c) >> 2, (b[2] & 0xe0) >> 5]
    if bits == 5:
        return [b[0] & 0x1f, ((b[0] & 0xe0) >> 5) + ((b[1] & 3) << 3), (b[1] & 0x7c) >> 2,
                ((b[1] & 0x80) >> 7) + ((b[2] & 0xf) << 1), ((b[2] & 0xf0) >> 4) +
                ((b[3] & 1) << 4), (b[3] & 0x3e) >> 1, ((b[3] & 0xc0) >> 6) + ((b[4] & 7) << 2),
                (b[4] & 0xf8) >> 3]
    return [b[0] & 0x3f, ((b[0] >> 6) & 3) + ((b[1] & 0xf) << 2),
            ((b[1] >> 4) & 0xf) + ((b[2] & 3) << 4), (b[2] >> 2) & 0x3f]


@pytest.mark.parametrize("bits,nbytes,ncodes", [(3, 3, 8), (5, 5, 8), (6, 3, 4)])
def test_bit_stream_unpacking_matches_rlx_extract_bits(bits, nbytes, ncodes):
    rng = np.random.default_rng(bits)
    for _ in range(20):
        b = rng.integers(0, 256, nbytes).astype(np.uint8)
        assert L.unpack_codes(b, bits, ncodes).tolist() == _rlx_extract(bits, [int(v) for v in b])


def test_int4_and_int8_asym_layouts():
    # Int4: flat index p·n + j, low nibble first, signed (0xF is -1); zp unused
    w = _weight(("Int4Block", {"block_size": 2}), np.uint8([0x21, 0xF3]),
                np.float32([[0.5, 2.0]]), np.zeros(1, np.float32), 2, 2)
    np.testing.assert_array_equal(w, np.float32([[0.5, 4], [1.5, -2]]))
    w = _weight(("Int8BlockAsym", {"block_size": 1}), np.int8([[5, -5], [0, 127]]),
                np.float32([[0.5, 1], [2, 0.25]]), np.float32([[1, -1], [-3, 127]]), 2, 2)
    np.testing.assert_array_equal(w, np.float32([[2, -4], [6, 0]]))


def test_fp8_nvfp4_and_e8m0_scales():
    e4m3 = np.uint8([0x38, 0x7E, 0xB8, 0x01])      # 1, 448, -1, 2**-9
    w = _weight("Fp8E4m3", e4m3.reshape(4, 1), np.float32([2]), np.zeros(1, np.float32), 4, 1)
    assert w[:, 0].tolist() == [2, 896, -2, 2.0**-8]
    # Nvfp4: codes 2 (1.0) and 15 (-6.0); scale bytes 0x38 (1.0) and 0x7F (NaN read as 0)
    w = _weight("Nvfp4Block", np.uint8([0xF2] * 16), np.uint8([0x38, 0x7F]),
                np.float32([0.5]), 32, 1)
    assert w[:16, 0].tolist() == [0.5, -3.0] * 8 and not np.any(w[16:])
    s = np.uint8([[127, 0, 255]])
    assert L._e8m0(s).tolist() == [[1.0, 2.0**-127, np.inf]]
    assert L.fp8_values(np.uint8([0x7F]))[0] != L.fp8_values(np.uint8([0x7F]))[0]
    assert ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max == 448
