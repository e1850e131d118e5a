"""RLX's linear schemes: side-tensor layouts by hand, decode formulas, pack/unpack round
trips with error bounds, and the errors for bad side tensors."""
import ml_dtypes
import numpy as np
import pytest

from rlx_ref.quant import QuantError, dequant, get_scheme, quantize
from rlx_ref.quant.linear import (E2M1, LINEAR, pack_linear, pack_nibbles, unpack_linear,
                                  unpack_nibbles)

RNG = np.random.default_rng(12)
BLOCKED = {"Int8Block": 32, "Int8BlockAsym": 16, "Int4Block": 32}


def weight(k=96, n=12, seed=0):
    return np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)


def roundtrip(name, w, bs=None):
    p = pack_linear(name, w, bs)
    return p, unpack_linear(name, p["w_q"], p["scale"], p["zp"], block_size=bs,
                            shape=w.shape)


# ── layouts by hand ───────────────────────────────────────────────────────

def test_nibbles_follow_the_flat_index_low_first():
    codes = np.arange(12, dtype=np.uint8).reshape(3, 4)       # element e has code e
    b = pack_nibbles(codes)
    assert b.shape == (3, 2)
    np.testing.assert_array_equal(b.reshape(-1), [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA])
    np.testing.assert_array_equal(unpack_nibbles(b, 3, 4), codes)
    odd = pack_nibbles(np.arange(9, dtype=np.uint8).reshape(3, 3))   # crosses rows
    assert odd.shape == (5,) and odd[4] == 0x08
    np.testing.assert_array_equal(unpack_nibbles(odd, 3, 3).reshape(-1), np.arange(9))


def test_int8_formulas():
    q = np.array([[1, -2], [3, 127], [-128, 0]], np.int8)
    scale = np.array([[0.5, 2.0], [4.0, -1.0]], np.float32)           # blocks of 2 rows
    zp = np.array([[1.0, 0.0], [-2.0, 3.0]], np.float32)
    sym = unpack_linear("Int8Block", q, scale, np.zeros_like(zp), block_size=2)
    np.testing.assert_array_equal(sym, [[0.5, -4], [1.5, 254], [-512, 0]])
    asym = unpack_linear("Int8BlockAsym", q.view(np.uint8), scale, zp, block_size=2)
    np.testing.assert_array_equal(asym, [[0, -4], [1, 254], [-504, 3]])


def test_int4_reads_signed_nibbles():
    codes = np.array([[0, 7, 8, 15]], np.uint8)                 # 0, 7, -8, -1
    w = unpack_linear("Int4Block", pack_nibbles(codes), np.array([[1, 1, 1, 0.5]],
                      np.float32), None, block_size=4)
    np.testing.assert_array_equal(w, [[0, 7, -8, -0.5]])


@pytest.mark.parametrize("name, kind", [("Fp8E4m3", ml_dtypes.float8_e4m3fn),
                                        ("Fp8E5m2", ml_dtypes.float8_e5m2)])
def test_fp8_decode_is_ml_dtypes_times_column_scale(name, kind):
    codes = np.arange(256, dtype=np.uint8).reshape(64, 4)
    scale = np.array([[1, 2, 0.5, -1]], np.float32)
    got = unpack_linear(name, codes, scale)
    want = codes.view(kind).astype(np.float32) * scale
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    if name == "Fp8E4m3":
        assert got[0x7E // 4, 0x7E % 4] == 448 * scale[0, 2]   # OCP: exponent 15 finite
    # the record decodes codes alone (scale 1) and encodes with saturation
    sd = get_scheme(name)
    np.testing.assert_array_equal(sd.dequantize(codes.reshape(-1, 1))[:127, 0],
                                  codes.reshape(-1)[:127].view(kind).astype(np.float32))
    top = 448 if name == "Fp8E4m3" else 57344
    big = sd.quantize(np.array([[1e9], [-1e9]], np.float32))
    np.testing.assert_array_equal(sd.dequantize(big)[:, 0], [top, -top])


def test_nvfp4_formula_and_nan_scales():
    codes = np.arange(16, dtype=np.uint8).reshape(16, 1).repeat(2, axis=1)   # [16, 2]
    scale = np.array([[0x38, 0x7F]], np.uint8)      # 1.0 and a NaN code (read as 0)
    w = unpack_linear("Nvfp4Block", pack_nibbles(codes), scale, np.array([2.0],
                      np.float32))
    np.testing.assert_array_equal(w[:, 0], E2M1 * 2)
    np.testing.assert_array_equal(w[:, 1], 0)


# ── round trips ───────────────────────────────────────────────────────────

# worst |w - unpack(pack(w))| over the block's max |w|: half a code step for the integer
# schemes (1/254, 1/14 of max; Asym's step is range/255 <= 2 max/255), FP8's relative
# spacing (2^-4 for E4M3, 2^-3 for E5M2, halved, plus subnormals near 0), and NVFP4's
# widest gap (4 to 6 at the top: 1/6 of the max, plus the E4M3 rounding of the scale)
BOUND = {"Int8Block": 1 / 254, "Int8BlockAsym": 1 / 255, "Int4Block": 1 / 14,
         "Fp8E4m3": 1 / 16, "Fp8E5m2": 1 / 8, "Nvfp4Block": 0.2}


@pytest.mark.parametrize("name", list(LINEAR))
def test_roundtrip_bound(name):
    w = weight(k=96, n=6)
    w[:, 1] *= 1e-3                                  # columns of very different scale
    w[:16, 2] = 0
    bs = BLOCKED.get(name)
    p, y = roundtrip(name, w, bs)
    blk = bs or (16 if name == "Nvfp4Block" else 96)
    amax = np.abs(w).reshape(-1, blk, 6).max(axis=1)
    amax = np.repeat(amax, blk, axis=0)
    err = np.abs(y - w)
    assert (err <= BOUND[name] * amax * 1.0001 + 1e-30).all()
    if name != "Nvfp4Block":
        assert (y[:16, 2] == 0).all()


@pytest.mark.parametrize("name", list(LINEAR))
def test_pack_shapes_and_fixed_point(name):
    w = weight(k=48, n=10, seed=3)
    bs = BLOCKED.get(name)
    p, y = roundtrip(name, w, bs)
    nb = {"Int8Block": 2, "Int8BlockAsym": 3, "Int4Block": 2, "Nvfp4Block": 3}.get(name, 1)
    assert p["scale"].shape == (nb, 10)
    assert p["w_q"].shape == ((48, 5) if LINEAR[name].code in ("s4", "e2m1") else (48, 10))
    p2, y2 = roundtrip(name, y, bs)
    np.testing.assert_allclose(y2, y, rtol=1e-6, atol=1e-6 * np.abs(y).max())


def test_ragged_k_and_odd_n():
    """k not a multiple of the block (the last block is short) and 4-bit codes of odd k*n."""
    w = weight(k=37, n=3, seed=4)
    for name in ("Int8Block", "Int4Block", "Nvfp4Block"):
        p, y = roundtrip(name, w, 8 if name != "Nvfp4Block" else None)
        assert p["scale"].shape[0] == (5 if name != "Nvfp4Block" else 3)
        assert np.abs(y - w).max() < 0.25 * np.abs(w).max()


def test_all_zero_weight():
    for name in LINEAR:
        p, y = roundtrip(name, np.zeros((32, 4), np.float32), BLOCKED.get(name))
        assert (y == 0).all()


# ── records and errors ────────────────────────────────────────────────────

def test_records():
    for name, ls in LINEAR.items():
        sd = get_scheme(name)
        assert sd.kind == "linear" and sd.rlx == name and sd.gpu_id is None
        assert sd.bits_per_weight == (4 if ls.code in ("s4", "e2m1") else 8)
        assert "RLX" in sd.doc and sd.layout


@pytest.mark.parametrize("call, text", [
    (lambda: pack_linear("Int8Block", weight()), "needs a positive integer block_size"),
    (lambda: pack_linear("Int4Block", weight(), 0), "positive integer block_size"),
    (lambda: pack_linear("Nvfp4Block", weight(), 32), "fixed block of 16"),
    (lambda: pack_linear("Int9", weight(), 32), "unknown linear quant scheme"),
    (lambda: pack_linear("Int8Block", np.zeros(8), 4), "2-D [k, n]"),
    (lambda: pack_linear("Fp8E4m3", np.full((2, 2), np.inf)), "non-finite"),
    (lambda: unpack_linear("Int8BlockAsym", np.zeros((4, 2), np.int8),
                           np.ones((1, 2), np.float32), None, block_size=4), "zp"),
    (lambda: unpack_linear("Int8Block", np.zeros((4, 2), np.int8),
                           np.ones((2, 2), np.float32), None, block_size=4), "[1, 2]"),
    (lambda: unpack_linear("Int8Block", np.zeros((4, 2), np.int16),
                           np.ones((1, 2), np.float32), None, block_size=4), "int8"),
    (lambda: unpack_linear("Int4Block", np.zeros(3, np.uint8), np.ones((1, 2), np.float32),
                           block_size=4, shape=(4, 2)), "take 4 bytes"),
    (lambda: unpack_linear("Nvfp4Block", np.zeros((16, 1), np.uint8),
                           np.ones((1, 2), np.uint8)), "global scale"),
    (lambda: unpack_linear("Nvfp4Block", np.zeros((16, 1), np.uint8),
                           np.ones((1, 2), np.float32), np.ones(1, np.float32)), "uint8"),
    (lambda: get_scheme("Int4Block").dequantize(np.zeros((2, 1), np.uint8)), "unpack_linear"),
    (lambda: dequant(np.zeros(4, np.uint8), "Fp8E4m3"), "side tensors"),
    (lambda: quantize(np.zeros(4, np.float32), "Int8Block"), "side tensors"),
])
def test_errors(call, text):
    with pytest.raises(QuantError) as e:
        call()
    assert text in str(e.value)
