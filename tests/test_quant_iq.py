"""GGUF non-linear, ternary, microscaling and IQ block formats: bit-exact with gguf-py's
decoders (and its quantizers where it has them), llama.cpp-style IQ4 / NVFP4 quantizers
within round-trip bounds, and clear errors for malformed data."""
import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlx_ref.quant import QuantError, dequant, get_scheme, quantize
from rlx_ref.quant import _iq4_quant as iq4
from rlx_ref.quant.blocks_iq import KSIGNS, grid
from rlx_ref.quant.blocks_nonlinear import fp32_to_ue4m3

IQ = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
OTHER = ["IQ4_NL", "IQ4_XS", "MXFP4", "NVFP4", "TQ1_0", "TQ2_0"]
ALL = IQ + OTHER
# RLX's dequant_gguf scheme ids (crates/core/rlx-ir/src/quant.rs).
GPU_IDS = {"IQ4_NL": 6, "IQ4_XS": 7, "TQ1_0": 8, "TQ2_0": 9, "MXFP4": 10, "NVFP4": 11,
           "IQ2_XXS": 12, "IQ2_XS": 13, "IQ2_S": 14, "IQ3_XXS": 15, "IQ3_S": 16,
           "IQ1_S": 17, "IQ1_M": 18}
F16_AT = {"TQ1_0": 52, "TQ2_0": 64}           # the others with an f16 d keep it at byte 0


@pytest.fixture(scope="module")
def peer():
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize as deq
    from gguf.quants import quantize as q
    return gguf.GGMLQuantizationType, deq, q


def _finite_f16(rng, n):
    """Random f16 bit patterns with inf / NaN exponents cleared (zeros, subnormals kept)."""
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    bad = (bits & 0x7C00) == 0x7C00
    bits[bad] &= np.uint16(0xBFFF)
    return bits


def _random_blocks(name, n, rng):
    """Random bytes for ``n`` blocks of ``name`` whose scale fields are finite."""
    sd = get_scheme(name)
    b = rng.integers(0, 256, (n, sd.block_bytes), dtype=np.uint8)
    if name == "MXFP4":
        b[:, 0] = rng.integers(97, 157, n)     # E8M0 2**-30 .. 2**29
    elif name == "IQ1_M":                      # d is the top nibbles of four u16 words
        d = _finite_f16(rng, n)
        for k in range(4):
            nib = ((d >> (4 * k)) & 15).astype(np.uint8)
            b[:, 49 + 2 * k] = (b[:, 49 + 2 * k] & 15) | nib << 4
    elif name != "NVFP4":                      # UE4M3 bytes are all finite
        at = F16_AT.get(name, 0)
        b[:, at:at + 2] = _finite_f16(rng, n).astype("<u2").reshape(n, 1).view(np.uint8)
    b[0] = 0                                   # an all-zero block
    return b


def _same_bits(a, b):
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("name", ALL)
def test_record_matches_gguf_and_rlx(name, peer):
    from gguf.constants import GGML_QUANT_SIZES
    types, _, _ = peer
    sd = get_scheme(name)
    assert sd.ggml_type == types[name].value
    assert (sd.block_size, sd.block_bytes) == GGML_QUANT_SIZES[types[name]]
    assert sd.gpu_id == GPU_IDS[name] and sd.kind == "gguf"
    rlx = "Gguf" + (name if name.startswith("TQ") else name.replace("_", ""))
    assert sd.rlx == rlx and get_scheme(rlx) is sd and get_scheme(sd.ggml_type) is sd
    assert sd.doc and sd.layout
    assert (sd.quantize is None) == (name in IQ)


@pytest.mark.parametrize("name", ALL)
def test_dequant_bit_exact_with_gguf_py(name, peer):
    types, deq, _ = peer
    rng = np.random.default_rng(sum(map(ord, name)))
    blocks = _random_blocks(name, 300, rng)
    ref = deq(blocks, types[name])
    assert np.isfinite(ref).all()
    assert _same_bits(dequant(blocks, name), ref)
    # a row of blocks decodes the same through num_elements
    sd = get_scheme(name)
    part = dequant(blocks.ravel(), name, num_elements=7 * sd.block_size)
    assert _same_bits(part, ref[:7])


@pytest.mark.parametrize("name", ["TQ1_0", "TQ2_0", "MXFP4"])
def test_quantize_bit_exact_with_gguf_py(name, peer):
    types, _, q = peer
    rng = np.random.default_rng(7)
    bs = get_scheme(name).block_size
    n = 400
    x = rng.standard_normal((n, bs)) * np.exp(rng.uniform(-8, 8, (n, 1)))
    x[:3] = 0                                              # all-zero blocks
    x[3:60, ::3] = 0                                       # zero weights
    x[60:120] = rng.integers(-4, 5, (60, bs)) * 0.25       # exact halves of the scale
    x[120:130] = -x[120:130]
    x = x.astype(np.float32)
    got = quantize(x, name)
    assert got.dtype == np.uint8
    assert np.array_equal(got, q(x, types[name]).ravel())


def test_ue4m3_encoder_matches_gguf_py(peer):
    from gguf.quants import NVFP4
    rng = np.random.default_rng(3)
    v = np.concatenate([np.exp(rng.uniform(-14, 7, 20000)), rng.uniform(0, 500, 5000),
                        [0, -0.0, -3, 448, 449, 1e30, 2.0 ** -9, 2.0 ** -10, 0.0137,
                         2.0 ** -6, 240, 247.9, 248, 1.9375, 1.96875]]).astype(np.float32)
    assert np.array_equal(fp32_to_ue4m3(v), NVFP4.fp32_to_ue4m3(v))


@pytest.mark.parametrize("key, ref", [("IQ2XXS", "IQ2_XXS"), ("IQ2XS", "IQ2_XS"),
                                      ("IQ2S", "IQ2_S"), ("IQ3XXS", "IQ3_XXS"),
                                      ("IQ3S", "IQ3_S"), ("IQ1S", "IQ1_S")])
def test_codebooks_match_the_format_tables(key, ref, peer):
    from gguf import quants
    cls = getattr(quants, ref)
    cls.init_grid()
    table = grid(key)
    assert np.array_equal(table, cls.grid.reshape(cls.grid_shape))
    assert not table.flags.writeable


def test_codebook_entries_from_ggml_common_h():
    """A few uint64 / uint32 entries as llama.cpp's tables spell them (byte 0 = weight 0)."""
    def row(v, nbytes):
        return np.frombuffer(int(v).to_bytes(nbytes, "little"), np.int8).astype(np.float32)
    for i, v in [(1, 0x080808080808082B), (2, 0x0808080808081919), (17, 0x080808082B080808),
                 (27, 0x080808192B192B08)]:
        assert np.array_equal(grid("IQ2XXS")[i], row(v, 8)), i
    for i, v in [(0, 0x04040404), (1, 0x04040414), (5, 0x04040C3E), (10, 0x04043E1C)]:
        assert np.array_equal(grid("IQ3XXS")[i], row(v, 4)), i


def test_even_parity_rules():
    """ksigns: 7 sign bits plus an even-parity 8th; IQ2 and IQ3_XXS points have an even
    level sum (their sign patterns then keep the E8-style lattice parity)."""
    bits = (KSIGNS[:, None] >> np.arange(8)) & 1
    assert (bits.sum(axis=1) % 2 == 0).all()
    assert np.array_equal(KSIGNS & 127, np.arange(128))
    for key, levels in [("IQ2XXS", (8, 25, 43)), ("IQ2XS", (8, 25, 43)),
                        ("IQ2S", (8, 25, 43)),
                        ("IQ3XXS", (4, 12, 20, 28, 36, 44, 52, 62))]:
        idx = np.searchsorted(np.array(levels, np.float32), grid(key))
        assert (idx.sum(axis=1) % 2 == 0).all(), key


def test_decoders_are_vectorized_over_blocks_and_quiet():
    rng = np.random.default_rng(11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ALL:
            sd = get_scheme(name)
            raw = rng.integers(0, 256, 64 * sd.block_bytes, dtype=np.uint8)
            out = dequant(raw, name)
            assert out.shape == (64 * sd.block_size,) and out.dtype == np.float32
            # decoding blocks one at a time gives the same bits
            one = [dequant(raw[i * sd.block_bytes:(i + 1) * sd.block_bytes], name)
                   for i in (0, 31, 63)]
            assert _same_bits(np.concatenate(one), out.reshape(64, -1)[[0, 31, 63]])


def _llama_iq4(xb, ntry=7):
    """Scalar transcription of llama.cpp's IQ4 sub-block search (no importance matrix),
    f32 arithmetic and sequential sums: returns (scale, codes)."""
    f, kv = np.float32, iq4.KVALUES.astype(np.float32)

    def best_index(v):
        return int(np.searchsorted(kv[:-1] + kv[1:], f(v) + f(v), side="right"))

    w = [f(v) * f(v) for v in xb]
    at = int(np.argmax(np.abs(xb)))
    amax, mx = abs(f(xb[at])), f(xb[at])
    if amax < f(1e-15):
        return f(0), [8] * len(xb)
    d = -mx / kv[0] if ntry > 0 else mx / kv[0]
    ids = [f(1) / d] + [(f(t) + kv[0]) / mx for t in range(-ntry, ntry + 1)]
    best = None
    for k, inv in enumerate(ids):
        sqx = sq2 = f(0)
        for j, v in enumerate(xb):
            q = kv[best_index(inv * v)]
            sqx += w[j] * q * v
            sq2 += w[j] * q * q
        if k == 0:
            d = sqx / sq2
            best = d * sqx
        elif sq2 > 0 and sqx * sqx > best * sq2:
            d = sqx / sq2
            best = d * sqx
    return d, [best_index(f(1) / d * v) for v in xb]


def test_iq4_search_follows_llama_cpp():
    """The vectorized search keeps llama.cpp's scale; where f64 sums tip a near tie the
    other way, the scale kept fits the block at least as well."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 32)) * rng.uniform(0.01, 10, (64, 1))).astype(np.float32)
    x[0] = 0
    ours = iq4.best_scales(x)
    kv = iq4.KVALUES.astype(np.float64)

    def werr(xb, d):
        q = kv[iq4.nearest_level(xb / np.float32(d))]
        return (xb.astype(np.float64) ** 2 * (xb - d * q) ** 2).sum()

    same = 0
    for i in range(64):
        d, codes = _llama_iq4(x[i])
        if i == 0:
            assert ours[0] == d == 0 and codes == [8] * 32
        elif np.isclose(ours[i], d, rtol=1e-5, atol=0):
            same += list(iq4.nearest_level(x[i] / ours[i])) == codes
        else:
            assert werr(x[i], float(ours[i])) <= werr(x[i], float(d)) * (1 + 1e-6)
    assert same >= 60


def _sample(rng, kind, n):
    if kind == "normal":
        return rng.standard_normal(n)
    if kind == "uniform":
        return rng.uniform(-1, 1, n)
    if kind == "laplace":
        return rng.laplace(size=n)
    return np.where(rng.uniform(size=n) < 0.01, 5.0, 0.01 * rng.standard_normal(n))


@pytest.mark.parametrize("name, unit, per_elem, rms, spread", [
    ("IQ4_NL", 32, 0.16, 0.10, (-3, 3)),
    ("IQ4_XS", 256, 0.16, 0.10, (-3, 3)),
    ("NVFP4", 16, 0.18, 0.13, (0, 3)),
])
def test_round_trip_bounds(name, unit, per_elem, rms, spread):
    """|w - deq| <= per_elem * (largest |w| among the ``unit`` weights sharing its scale)
    and a block's relative RMS error is under ``rms`` on average."""
    rng = np.random.default_rng(9)
    n = 256 * 64
    # NVFP4's bound holds while amax / 6 is in UE4M3's normal range, which the 0.01-sized
    # sub-blocks of "outlier" are not
    kinds = ("normal", "uniform", "laplace") + (("outlier",) if name != "NVFP4" else ())
    for kind in kinds:
        x = _sample(rng, kind, n) * np.repeat(np.exp(rng.uniform(*spread, 64)), 256)
        x = x.astype(np.float32)
        back = dequant(quantize(x, name), name)
        err = np.abs(back - x).reshape(-1, unit)
        amax = np.abs(x).reshape(-1, unit).max(axis=1, keepdims=True)
        assert (err <= per_elem * amax).all(), kind
        if kind != "outlier":
            bs = get_scheme(name).block_size
            e2 = ((back - x) ** 2).reshape(-1, bs).sum(axis=1)
            x2 = (x ** 2).reshape(-1, bs).sum(axis=1)
            assert np.sqrt(e2 / x2).mean() < rms, kind


@pytest.mark.parametrize("name", ["IQ4_NL", "IQ4_XS", "NVFP4", "MXFP4", "TQ1_0", "TQ2_0"])
def test_quantize_zero_and_exact_blocks(name):
    bs = get_scheme(name).block_size
    assert not dequant(quantize(np.zeros(bs, np.float32), name), name).any()
    # codes the format holds exactly come back exactly
    exact = {"IQ4_NL": iq4.KVALUES, "IQ4_XS": iq4.KVALUES, "TQ1_0": [-1, 0, 1],
             "TQ2_0": [-1, 0, 1], "MXFP4": [0, 0.5, 1, 1.5, 2, 3, 4, -6],
             "NVFP4": [0, 0.5, 1, 1.5, 2, 3, 4, -6]}[name]
    x = np.resize(np.asarray(exact, np.float32), bs) * np.float32(0.25)
    assert np.array_equal(dequant(quantize(x, name), name), x)


def test_malformed_sizes_are_quant_errors():
    for name in ALL:
        sd = get_scheme(name)
        with pytest.raises(QuantError, match=name):
            dequant(np.zeros(sd.block_bytes + 1, np.uint8), name)
        with pytest.raises(QuantError, match=name):
            dequant(np.zeros(sd.block_bytes, np.uint8), name, num_elements=2 * sd.block_size)
        with pytest.raises(QuantError, match=name):
            dequant(np.zeros(sd.block_bytes, np.uint8), name, num_elements=sd.block_size - 1)
        with pytest.raises(QuantError, match=name):
            quantize(np.zeros(sd.block_size + 1, np.float32), name)
    for name in IQ:
        with pytest.raises(QuantError, match="no quantizer"):
            quantize(np.zeros(256, np.float32), name)


def test_quant_modules_do_not_import_gguf():
    here = Path(__file__).resolve().parents[1] / "rlx_ref" / "quant"
    for mod in ["blocks_iq.py", "blocks_nonlinear.py", "blocks_ternary.py", "_iq4_quant.py",
                "_blockfields.py", "_iq_grids.py"]:
        tree = ast.parse((here / mod).read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m.split(".")[0] == "gguf"], mod
