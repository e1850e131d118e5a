"""K-quant quantizers (llama.cpp's reference, no gguf-py peer): round-trip error bounds,
zeros, requantization, Q8_K's block sums, and that blocks are quantized independently."""
import numpy as np
import pytest

from rlx_ref.quant import dequant, get_scheme, quantize
from rlx_ref.quant.blocks_kquants_ref import nearest_int, seq_sum

KQ = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"]
# Largest per-block RMS error over the block's span including zero (max(x, 0) - min(x, 0):
# every K-quant represents 0 exactly), for normal, uniform, Student-t(2), positive and
# negative data. An ideal uniform quantizer with b bits over the span gives
# 1/((2^b - 1) sqrt 12): 0.096, 0.041, 0.019, 0.0093, 0.0046, 0.0011 for b = 2..6, 8; the
# symmetric schemes (Q3_K, Q6_K, Q8_K) spend a bit on the sign, so one-signed data sees
# about twice their figure. Each bound is ~1.3x the worst block seen over 12000 per kind.
BOUND = {"Q2_K": 0.115, "Q3_K": 0.09, "Q4_K": 0.024, "Q5_K": 0.012, "Q6_K": 0.011,
         "Q8_K": 0.0035}


def data(kind, n=48, seed=0):
    rng = np.random.default_rng(seed)
    x = {"normal": lambda: rng.standard_normal((n, 256)),
         "uniform": lambda: rng.uniform(-1, 1, (n, 256)),
         "heavy": lambda: rng.standard_t(2, (n, 256)),
         "shifted": lambda: rng.uniform(2, 3, (n, 256)),
         "negative": lambda: -rng.exponential(1, (n, 256))}[kind]()
    return x.astype(np.float32)


def roundtrip(name, x):
    return dequant(quantize(x, name), name).reshape(x.shape)


@pytest.mark.parametrize("kind", ["normal", "uniform", "heavy", "shifted", "negative"])
@pytest.mark.parametrize("name", KQ)
def test_roundtrip_error_bound(name, kind):
    x = data(kind)
    y = roundtrip(name, x)
    span = np.maximum(x.max(axis=1), 0) - np.minimum(x.min(axis=1), 0)
    rel = np.sqrt(((y - x) ** 2).mean(axis=1)) / span
    assert np.isfinite(y).all()
    assert rel.max() < BOUND[name], f"{name} {kind}: worst block {rel.max():.4g}"


@pytest.mark.parametrize("name", KQ)
def test_error_shrinks_with_bits(name):
    """Each scheme beats the one with a bit less, on the same data."""
    x = data("normal", seed=3)
    err = np.sqrt(((roundtrip(name, x) - x) ** 2).mean())
    lower = {"Q3_K": "Q2_K", "Q4_K": "Q3_K", "Q5_K": "Q4_K", "Q6_K": "Q5_K",
             "Q8_K": "Q6_K"}.get(name)
    if lower:
        assert err < 0.7 * np.sqrt(((roundtrip(lower, x) - x) ** 2).mean())


@pytest.mark.parametrize("name", KQ)
def test_zero_blocks_and_sub_blocks_decode_to_zero(name):
    x = data("normal", n=4, seed=1)
    x[0] = 0
    x[1, :128] = 0                                   # whole sub-blocks of zeros
    x[2, 32:64] = 0
    b = quantize(x, name).reshape(4, -1)
    y = dequant(b, name).reshape(x.shape)
    assert (y[0] == 0).all() and (y[1, :128] == 0).all() and (y[2, 32:64] == 0).all()
    if name in ("Q6_K", "Q8_K"):                     # the reference writes all-zero bytes
        assert (b[0] == 0).all()


@pytest.mark.parametrize("name", KQ)
def test_constant_and_one_hot_blocks(name):
    x = np.zeros((3, 256), np.float32)
    x[0] = 1.5
    x[1] = -2.0
    x[2, 100] = 4.0
    y = roundtrip(name, x)
    tol = {"Q2_K": 0.4, "Q3_K": 0.25}.get(name, 0.05)
    assert np.abs(y - x).max() <= tol * np.abs(x).max()


@pytest.mark.parametrize("name", KQ)
def test_requantizing_decoded_values_drifts_little(name):
    """The searches are not exact fixed points, but a second pass over decoded values moves
    them by at most half the first pass's error (measured worst: 0.38, Q3_K)."""
    x = data("uniform", n=64, seed=2)
    y = roundtrip(name, x)
    y2 = roundtrip(name, y)
    e1 = np.sqrt(((y - x) ** 2).mean())
    assert np.sqrt(((y2 - y) ** 2).mean()) <= 0.5 * e1


def test_q8_k_codes_block_sums_and_fixed_point():
    x = data("heavy", n=16, seed=4)
    b = quantize(x, "Q8_K").reshape(16, 292)
    d = b[:, :4].copy().view("<f4")[:, 0]
    q = b[:, 4:260].view(np.int8)
    sums = b[:, 260:].copy().view("<i2")
    np.testing.assert_array_equal(sums, q.reshape(16, 16, 16).astype(np.int32).sum(axis=2))
    # the largest magnitude maps to -127; d = 1/(-127/max) rounds once
    i = np.abs(x).argmax(axis=1)
    np.testing.assert_array_equal(q[np.arange(16), i], -127)
    np.testing.assert_allclose(d, -x[np.arange(16), i] / 127, rtol=2 ** -22)
    b2 = quantize(dequant(b, "Q8_K"), "Q8_K").reshape(16, 292)
    np.testing.assert_array_equal(b2[:, 4:], b[:, 4:])          # codes and sums kept
    d2 = b2[:, :4].copy().view("<f4")[:, 0]
    assert (np.abs(d2.view(np.int32) - d.view(np.int32)) <= 1).all()   # d within 1 ulp


@pytest.mark.parametrize("name", ["Q3_K", "Q4_K"])
def test_blocks_quantize_independently(name):
    """Vectorized search over many blocks (and in 1024-block chunks) equals one block at
    a time: no state leaks between rows."""
    x = data("heavy", n=1100, seed=5)
    whole = quantize(x, name).reshape(1100, -1)
    for i in (0, 1, 517, 1023, 1024, 1099):
        np.testing.assert_array_equal(whole[i], quantize(x[i], name))


def test_quantizers_are_deterministic_on_layout():
    """A strided or float64 input quantizes as its contiguous float32 copy."""
    x = data("normal", n=8, seed=6)
    wide = np.zeros((8, 512), np.float64)
    wide[:, ::2] = x
    np.testing.assert_array_equal(quantize(wide[:, ::2], "Q5_K"), quantize(x, "Q5_K"))


def test_q4_k_hand_built_block():
    """6-bit scales and mins as the format defines them, decoded by d*sc*q - dmin*m."""
    sc = np.array([1, 2, 3, 4, 63, 17, 40, 5], np.uint8)
    mn = np.array([0, 7, 1, 2, 33, 0, 63, 16], np.uint8)
    table = np.concatenate([sc[:4] | ((sc[4:] >> 4) << 6), mn[:4] | ((mn[4:] >> 4) << 6),
                            (sc[4:] & 15) | ((mn[4:] & 15) << 4)]).astype(np.uint8)
    q = np.random.default_rng(7).integers(0, 16, (8, 32)).astype(np.uint8)
    qs = np.concatenate([q[2 * c] | (q[2 * c + 1] << 4) for c in range(4)])
    head = np.array([0.5, 0.25], "<f2").view(np.uint8)
    y = dequant(np.concatenate([head, table, qs]), "Q4_K").reshape(8, 32)
    want = (np.float32(0.5) * sc[:, None] * q.astype(np.float32)
            - np.float32(0.25) * mn[:, None])
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_reference_helpers():
    """nearest_int rounds half to even like the reference's 1.5*2^23 trick; sums run in
    order from zero (so they differ from pairwise sums where rounding bites)."""
    np.testing.assert_array_equal(nearest_int(np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.49999],
                                                        np.float32)), [0, 2, 2, 0, -2, 3])
    t = np.array([[1e8, 1, 1, 1, 1, -1e8, 0.5, 0.25]], np.float32)
    assert seq_sum(t)[0] == np.float32(0.75)
    assert np.signbit(seq_sum(np.array([[-0.0, -0.0]], np.float32))[0]) == 0


def test_record_facts():
    for name in KQ:
        sd = get_scheme(name)
        assert sd.block_size == 256 and sd.quantize is not None
        assert sd.quantize_source == "llama.cpp" and "reference" in sd.doc
    assert get_scheme("Q4_K").bits_per_weight == 4.5
