"""GGUF block schemes against gguf-py: registry facts, bit-exact decode of random blocks,
bit-exact legacy quantizers on hard data, the public quantize/dequant API and its errors."""
import numpy as np
import pytest

from rlx_ref.quant import QuantError, all_schemes, dequant, get_scheme, quantize

gguf = pytest.importorskip("gguf")
GT = gguf.GGMLQuantizationType

LEGACY = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
KQUANTS = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# byte offsets of each block's f16 fields (scales and mins)
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
              "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
RLX = {"Q4_0": ("GgufQ4_0", 19), "Q8_0": ("GgufQ8_0", 20), "Q4_1": ("GgufQ4_1", 21),
       "Q5_0": ("GgufQ5_0", 22), "Q5_1": ("GgufQ5_1", 23), "Q4_K": ("GgufQ4K", 0),
       "Q5_K": ("GgufQ5K", 1), "Q6_K": ("GgufQ6K", 2), "Q8_K": ("GgufQ8K", 3),
       "Q2_K": ("GgufQ2K", 4), "Q3_K": ("GgufQ3K", 5)}


def bits(a):
    """f32 array as raw bits, so comparisons see signed zeros and NaN payloads."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def random_blocks(name, n, seed):
    """Random bytes whose f16 fields are finite (an exponent of all ones is cleared)."""
    sd = get_scheme(name)
    b = np.random.default_rng(seed).integers(0, 256, (n, sd.block_bytes), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        finite = np.isfinite(b[:, off:off + 2].copy().view("<f2")[:, 0])
        b[~finite, off + 1] &= 0xBB
    return b


# ── registry ──────────────────────────────────────────────────────────────

@pytest.mark.parametrize("name", LEGACY + KQUANTS + ["Q8_K"])
def test_record_matches_ggml_and_rlx(name):
    sd = get_scheme(name)
    assert sd.ggml_type == GT[name].value
    assert (sd.block_size, sd.block_bytes) == gguf.GGML_QUANT_SIZES[GT[name]]
    assert (sd.rlx, sd.gpu_id) == RLX[name]
    assert sd.kind == "gguf" and sd.layout and sd.doc
    assert sd.quantize_source == ("gguf-py" if name in LEGACY else "llama.cpp")
    assert get_scheme(sd.rlx) is sd and get_scheme(sd.ggml_type) is sd


def test_gpu_ids_are_unique():
    ids = [s.gpu_id for s in all_schemes() if s.gpu_id is not None]
    assert len(ids) == len(set(ids))


# ── decode: bit-exact with gguf-py ────────────────────────────────────────

@pytest.mark.parametrize("name", LEGACY + KQUANTS)
def test_dequant_random_blocks_bit_exact(name):
    b = random_blocks(name, 700, seed=len(name) + sum(map(ord, name)))
    ref = gguf.quants.dequantize(b, GT[name])
    got = dequant(b, name)
    np.testing.assert_array_equal(bits(got), bits(ref.reshape(-1)))


@pytest.mark.parametrize("name", LEGACY + KQUANTS)
def test_dequant_extreme_scales_bit_exact(name):
    """Largest, smallest-subnormal and negative-zero f16 scales."""
    b = random_blocks(name, 64, seed=5)
    for i, raw in enumerate([0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x8000, 0x0000, 0x3C00]):
        for off in F16_FIELDS[name]:
            b[i::7, off:off + 2] = np.frombuffer(np.uint16(raw).tobytes(), np.uint8)
    ref = gguf.quants.dequantize(b, GT[name])
    np.testing.assert_array_equal(bits(dequant(b, name)), bits(ref.reshape(-1)))


def test_q8_k_decodes_as_d_times_q():
    """gguf-py has no Q8_K: the f32 scale times the signed codes; bsums are not read."""
    rng = np.random.default_rng(3)
    d = rng.standard_normal(5).astype("<f4")
    q = rng.integers(-127, 128, (5, 256)).astype(np.int8)
    blocks = np.concatenate([d.view(np.uint8).reshape(5, 4), q.view(np.uint8),
                             rng.integers(0, 256, (5, 32), dtype=np.uint8)], axis=1)
    np.testing.assert_array_equal(dequant(blocks, "Q8_K").reshape(5, 256),
                                  d[:, None] * q.astype(np.float32))


# ── legacy quantizers: bit-exact with gguf-py ─────────────────────────────

def hard_rows(rng, bs=32):
    """Rows that stress the reference's branches, ~60 blocks of each kind."""
    n = 60
    yield "normal", rng.standard_normal((n, bs))
    yield "zeros", np.zeros((n, bs))
    yield "negative zeros", -np.zeros((n, bs))
    yield "constant", np.repeat(rng.standard_normal((n, 1)), bs, axis=1)
    t = rng.standard_normal((n, bs))
    t[:, 5] = np.abs(t).max(axis=1) + 1
    t[:, 9] = -t[:, 5]                                # two maxima: the first one wins
    yield "tied maxima", t
    yield "one nonzero", np.eye(n, bs) * rng.standard_normal((n, 1))
    # codes land exactly on x/d + offset = k + 1/2 (and Q8_0's x/d = k + 1/2)
    yield "halves 8", rng.integers(-16, 17, (n, bs)) / 2 * (np.arange(n)[:, None] % 3 + 1)
    g = rng.integers(0, 31, (n, bs)) + 0.5
    g[:, 0], g[:, 1] = 0, 31
    yield "halves 31", g
    h = rng.integers(-254, 255, (n, bs)) / 2
    h[:, 0] = 127
    yield "halves 127", h
    for scale in (1e-3, 1e4, 1e6, 3e38, 1e-30, 1e-39, 1e-44):
        yield f"scale {scale:g}", rng.uniform(-1, 1, (n, bs)) * scale
    yield "mixed magnitudes", rng.standard_normal((n, bs)) * 10.0 ** rng.integers(
        -8, 8, (n, bs))


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_quantize_bit_exact(name):
    rng = np.random.default_rng(11)
    for label, rows in hard_rows(rng):
        x = np.asarray(rows, dtype=np.float32)
        with np.errstate(all="ignore"):
            ref = gguf.quants.quantize(x, GT[name])
        got = quantize(x, name).reshape(ref.shape)
        bad = np.nonzero((got != ref).any(axis=1))[0]
        assert bad.size == 0, f"{name} {label}: blocks {bad[:5]} differ from gguf-py"


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_quantize_is_a_fixed_point(name):
    """Decoded blocks quantize back to the same bytes (values too: a zero block's scale
    is -0 first and +0 after, the same values)."""
    x = np.random.default_rng(4).standard_normal((300, 32)).astype(np.float32)
    x[:3] = 0
    b = quantize(x, name)
    y = dequant(b, name)
    b2 = quantize(y, name)
    np.testing.assert_array_equal(dequant(b2, name), y)
    np.testing.assert_array_equal(b2[3 * get_scheme(name).block_bytes:],
                                  b[3 * get_scheme(name).block_bytes:])


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_known_blocks(name):
    """Hand-computed encodings of a ramp: scale, offset and the nibble order."""
    x = np.arange(32, dtype=np.float32) - 16          # -16 .. 15
    b = quantize(x, name)
    sd = get_scheme(name)
    d = np.frombuffer(b[:2].tobytes(), "<f2")[0]
    assert d == {"Q4_0": 2.0, "Q5_0": 1.0, "Q4_1": np.float16(31 / 15),
                 "Q5_1": 1.0, "Q8_0": np.float16(16 / 127)}[name]
    y = dequant(b, name)
    assert y[0] == (-127 * np.float32(d) if name == "Q8_0" else -16)
    assert np.abs(y - x).max() <= float(d) / 2 + 1e-6
    if name == "Q4_0":                                 # code = x/2 + 8 (trunc of +0.5)
        q = np.concatenate([b[2:] & 15, b[2:] >> 4])
        np.testing.assert_array_equal(q, np.floor(x / 2 + 8.5).clip(0, 15))
    assert sd.bits_per_weight == 8 * sd.block_bytes / 32


# ── public API and errors ─────────────────────────────────────────────────

def test_api_flattens_and_counts_elements():
    w = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    b = quantize(w, "Q8_0")
    assert b.dtype == np.uint8 and b.shape == (8 * 34,)
    assert dequant(b, "Q8_0").shape == (256,)
    np.testing.assert_array_equal(dequant(b, "Q8_0", num_elements=64),
                                  dequant(b[:68], "Q8_0"))
    assert dequant(b.view(np.int8), "GgufQ8_0").shape == (256,)   # by RLX name too


@pytest.mark.parametrize("call, text", [
    (lambda: dequant(np.zeros(35, np.uint8), "Q8_0"), "not a whole number of 34-byte"),
    (lambda: dequant(np.zeros(34, np.uint8), "Q8_0", num_elements=31), "multiple of"),
    (lambda: dequant(np.zeros(34, np.uint8), "Q8_0", num_elements=64), "holds 1"),
    (lambda: dequant(np.zeros(34, np.float32), "Q8_0"), "uint8"),
    (lambda: quantize(np.zeros(33, np.float32), "Q4_0"), "not a multiple of the block"),
    (lambda: quantize(np.zeros(300, np.float32), "Q4_K"), "block size 256"),
    (lambda: dequant(np.zeros(18, np.uint8), "Q9_9"), "unknown quant scheme"),
    (lambda: get_scheme("Q4_0").dequantize(np.zeros((2, 17), np.uint8)), "[n, 18]"),
    (lambda: get_scheme("Q4_K").quantize(np.zeros((2, 255), np.float32)), "[n, 256]"),
    (lambda: get_scheme("Q6_K").dequantize(np.zeros((2, 210), np.int16)), "uint8"),
])
def test_errors_are_quant_errors(call, text):
    with pytest.raises(QuantError) as e:
        call()
    assert text in str(e.value)
