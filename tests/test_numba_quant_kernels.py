"""numba-cpu GGUF kernels: block decoders bit-exact against gguf-py, DequantMatMul paths
(GEMV, BLAS tiles, straddling rows) against a float64 product, grouped MoE, checks."""
from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as GT  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

from rlx_ref.backends.numba_cpu import _quant_matmul as qm  # noqa: E402
from rlx_ref.backends.numba_cpu._quant_decode import DECODERS, dot_source  # noqa: E402
from rlx_ref.backends.numba_cpu._quant_grouped import dequant_grouped_matmul  # noqa: E402
from rlx_ref.quant import QuantError, SchemeDef, get_scheme  # noqa: E402

SCHEMES = sorted(DECODERS)
BENCH = ("Q4_0", "Q8_0", "Q4_K")
# byte offsets of each scheme's f16 scale fields (Q8_K: an f32 at 0; MXFP4: an e8m0 byte)
F16_AT = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
          "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
          "IQ4_NL": (0,), "IQ4_XS": (0,), "TQ1_0": (52,), "TQ2_0": (64,), "Q8_K": (),
          "MXFP4": (), "NVFP4": (), "IQ2_XXS": (0,), "IQ2_XS": (0,), "IQ2_S": (0,),
          "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,), "IQ1_M": ()}


def scheme(name: str):
    """The registered record, or (before the scheme modules land) one built from gguf-py's
    sizes; either way its sizes must be gguf-py's."""
    bs, bb = GGML_QUANT_SIZES[GT[name]]
    try:
        sd = get_scheme(name)
    except QuantError:
        return SchemeDef(name, bs, bb, dequantize=lambda blocks: reference(name, blocks))
    assert (sd.block_size, sd.block_bytes) == (bs, bb)
    return sd


def reference(name: str, blocks: np.ndarray) -> np.ndarray:
    """gguf-py's decode of u8 [nb, bb] (Q8_K, which it lacks: d * q as llama.cpp)."""
    if name == "Q8_K":
        d = blocks[:, :4].copy().view(np.float32)
        return d * blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
    return gguf.quants.dequantize(blocks, GT[name]).reshape(blocks.shape[0], -1)


def random_blocks(name: str, nblocks: int, rng, small: bool = False) -> np.ndarray:
    """Random bytes with finite scale fields: every f16 exponent below 31 (``small``: below
    16, so |scale| < 2 and products stay far from overflow)."""
    bb = GGML_QUANT_SIZES[GT[name]][1]
    raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    for off in F16_AT[name]:
        raw[:, off + 1] &= 0xBF if small else 0xFB
    if name == "Q8_K":
        d = rng.uniform(-0.05, 0.05, nblocks).astype(np.float32)
        raw[:, :4] = d.view(np.uint8).reshape(nblocks, 4)
    if name == "IQ1_M":
        raw[:, 55] &= 0xBF                  # its f16 d is split over 4 words: exponent < 16
    if name == "MXFP4":
        raw[:, 0] = rng.integers(115, 131, nblocks) if small else raw[:, 0]
    return raw


def same_bits(a, b) -> bool:
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32),
                          np.asarray(b, np.float32).view(np.uint32))


@pytest.mark.parametrize("name", SCHEMES)
def test_decode_bit_exact(name):
    rng = np.random.default_rng(1)
    raw = random_blocks(name, 40, rng)
    sd = scheme(name)
    got = qm.dequant_blocks(raw.reshape(-1), sd)
    assert same_bits(got, reference(name, raw).reshape(-1))
    assert same_bits(got, np.asarray(sd.dequantize(raw)).reshape(-1))   # the oracle's decode
    assert not np.isnan(got).any()


def test_f16_scales_bit_exact_for_every_half():
    # Q8_0 blocks with q = 1 whose d runs through all 65536 half patterns (NaNs included):
    # q * d must be numpy's f16 -> f32 conversion times one, bit for bit
    raw = np.zeros((65536, 34), np.uint8)
    raw[:, :2] = np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(-1, 2)
    raw[:, 2:] = 1
    got = qm.dequant_blocks(raw.reshape(-1), scheme("Q8_0")).reshape(65536, 32)
    assert same_bits(got, reference("Q8_0", raw))


def test_dequant_blocks_checks_counts():
    sd = scheme("Q4_0")
    raw = np.zeros(18 * 3, np.uint8)
    assert qm.dequant_blocks(raw, sd, 64).shape == (64,)
    with pytest.raises(QuantError, match="multiple of the block size 32"):
        qm.dequant_blocks(raw, sd, 40)
    with pytest.raises(QuantError, match="at most the 96"):
        qm.dequant_blocks(raw, sd, 128)
    with pytest.raises(QuantError, match="whole number of 18-byte"):
        qm.dequant_blocks(raw[:-1], sd)


def product_ref(x, w):
    """float64 x @ w.T and the error scale |x| @ |w|.T."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    return x64 @ w64.T, np.abs(x64) @ np.abs(w64).T


def check_product(out, x, w):
    ref, scale = product_ref(x, w)
    k = x.shape[1]
    tol = 2 * k * np.finfo(np.float32).eps * scale + 1e-30
    assert out.shape == ref.shape and out.dtype == np.float32
    assert np.all(np.abs(out - ref) <= tol), np.max(np.abs(out - ref) / (scale + 1e-30))


def matmul_case(name, m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    sd = scheme(name)
    raw = random_blocks(name, n * k // sd.block_size, rng, small=True)
    w = reference(name, raw).reshape(n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    return sd, raw.reshape(-1), w, x


def grid(name):
    if name in BENCH:
        return [(m, j, n) for m in (1, 3, 17) for j in (1, 2, 3) for n in (1, 7, 64)]
    return [(1, 2, 7), (3, 3, 5), (17, 1, 64)]


@pytest.mark.parametrize("name", SCHEMES)
def test_dequant_matmul_against_float64(name):
    bs = GGML_QUANT_SIZES[GT[name]][0]
    for m, blocks, n in grid(name):
        k = blocks * bs
        sd, raw, w, x = matmul_case(name, m, k, n, seed=m * 100 + n)
        plan = qm.plan_dequant_matmul(sd, m, k, n)
        assert plan.path == ("gemv" if m == 1 else "tiles")
        check_product(plan.run(x, raw), x, w)


def test_gemv_fused_and_scratch_paths_agree():
    # decoders with 16-lane steps get a fused GEMV; the table-lookup ones a scratch row
    assert dot_source("Q4_K") and dot_source("Q8_0") and not dot_source("IQ4_NL")
    for name in ("Q4_K", "IQ4_XS", "MXFP4", "TQ1_0"):
        sd, raw, w, x = matmul_case(name, 1, 512, 70)        # 3 tasks of 32 rows
        for threads in (1, 2):
            check_product(qm.dequant_matmul(x, raw, 70, sd, threads=threads), x, w)


def test_tiles_partial_tiles_and_k_chunks(monkeypatch):
    # small tiles: 4-row tiles (the last one partial) and 64-column chunks accumulated by
    # BLAS (beta = 1 after the first chunk)
    monkeypatch.setattr(qm, "TILE_ROWS", 4)
    monkeypatch.setattr(qm, "TILE_COLS", 64)
    for name, k in (("Q4_0", 256), ("Q6_K", 512)):
        sd, raw, w, x = matmul_case(name, 5, k, 10)
        plan = qm.plan_dequant_matmul(sd, 5, k, 10)
        assert (plan.tile_rows, plan.tile_cols) == (4, max(64, sd.block_size))
        check_product(plan.run(x, raw), x, w)


@pytest.mark.parametrize("name,k,n", [("Q4_0", 48, 4), ("Q8_0", 8, 12), ("Q4_K", 320, 4),
                                      ("Q5_K", 96, 8)])
def test_straddling_blocks(name, k, n):
    # k % bs != 0: blocks run over row ends (RLX's flat block index allows it)
    for m in (1, 3):
        sd, raw, w, x = matmul_case(name, m, k, n, seed=k + m)
        plan = qm.plan_dequant_matmul(sd, m, k, n)
        assert plan.path == "straddle"
        check_product(plan.run(x, raw), x, w)


def test_block_size_pitfall_is_caught():
    # decoding a Q4_0 weight as if its blocks held 256 values (RLX's QK_K pitfall) gives a
    # different product: the same check that passes the right block size rejects it
    sd, raw, w, x = matmul_case("Q4_0", 3, 512, 8)
    right = qm.plan_dequant_matmul(sd, 3, 512, 8)
    wrong = qm.DequantMatmulPlan("Q4_0", 256, 18, 3, 512, 8, "tiles", 1, 8, 256)
    check_product(right.run(x, raw), x, w)
    bad = wrong.run(x, raw[:wrong.weight_bytes])       # the bytes such a kernel reads
    ref, _ = product_ref(x, w)
    assert not np.allclose(bad, ref, rtol=1e-2, atol=1e-2)
    with pytest.raises(AssertionError):
        check_product(bad, x, w)


def test_matmul_checks_before_running():
    sd = scheme("Q4_0")
    x = np.ones((2, 64), np.float32)
    with pytest.raises(QuantError, match="72 bytes, but the packed weight has 71"):
        qm.dequant_matmul(x, np.zeros(71, np.uint8), 2, sd)
    with pytest.raises(QuantError, match="whole number of 32-element blocks"):
        qm.dequant_matmul(np.ones((1, 10), np.float32), np.zeros(18, np.uint8), 3, sd)
    with pytest.raises(QuantError, match="x must be float32"):
        qm.dequant_matmul(x.astype(np.float64), np.zeros(72, np.uint8), 2, sd)
    with pytest.raises(QuantError, match="no block decoder for Q1_0"):
        qm.plan_dequant_matmul(SchemeDef("Q1_0", 128, 18, lambda b: b), 1, 128, 1)
    assert qm.dequant_matmul(np.ones((3, 0), np.float32), np.zeros(0, np.uint8), 4,
                             sd).tolist() == [[0.0] * 4] * 3


def grouped_ref(x, w_experts, ids):
    return np.stack([x[i].astype(np.float64) @ w_experts[e].astype(np.float64).T
                     for i, e in enumerate(ids)])


@pytest.mark.parametrize("name,chunk", [("Q4_0", None), ("Q4_K", 2), ("Q8_0", 1)])
def test_grouped_matmul(name, chunk):
    rng = np.random.default_rng(7)
    sd = scheme(name)
    e_count, n, k, m = 4, 6, 2 * sd.block_size, 9
    raw = random_blocks(name, e_count * n * k // sd.block_size, rng, small=True)
    w = reference(name, raw).reshape(e_count, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    ids = np.array([2, 0, 2, 2, 3, 0, 2, 3, 0], np.float32)      # expert 1 unused
    out = dequant_grouped_matmul(x, raw.reshape(-1), ids + 0.25, n, e_count, sd,
                                 chunk_rows=chunk)
    ref = grouped_ref(x, w, ids.astype(int))
    scale = np.abs(x).astype(np.float64) @ np.abs(w.reshape(-1, k)).T.astype(np.float64)
    assert np.all(np.abs(out - ref) <= 2 * k * np.finfo(np.float32).eps * scale.max() + 1e-30)
    derived = dequant_grouped_matmul(x, raw.reshape(-1), ids, n, None, sd)
    assert np.array_equal(derived, dequant_grouped_matmul(x, raw.reshape(-1), ids, n, 4, sd))


@pytest.mark.parametrize("bad,match", [(4.0, r"expert_idx\[1\] = 4.0 is outside"),
                                       (-1.0, r"expert_idx\[1\] = -1.0 is outside"),
                                       (np.nan, "not a finite expert id")])
def test_grouped_rejects_bad_expert_ids(bad, match):
    sd = scheme("Q4_0")
    x = np.ones((3, 32), np.float32)
    out = np.full((3, 2), 7.0, np.float32)
    ids = np.array([0, bad, 1], np.float32)
    with pytest.raises(QuantError, match=match):
        dequant_grouped_matmul(x, np.zeros(4 * 2 * 18, np.uint8), ids, 2, 4, sd, out=out)
    assert (out == 7.0).all()                       # nothing ran
    with pytest.raises(QuantError, match="144 bytes, but the packed weight has 143"):
        dequant_grouped_matmul(x, np.zeros(143, np.uint8), np.zeros(3), 2, 4, sd)


@pytest.mark.parametrize("name,k,n", [("Q4_0", 64, 20), ("Q4_K", 256, 3), ("Q8_0", 48, 6)])
def test_dequant_moe_weights_layout(name, k, n):
    # [E, K, N]: expert e's W [N, K] transposed (Q8_0 48 x 6: blocks straddle rows)
    rng = np.random.default_rng(3)
    sd = scheme(name)
    raw = random_blocks(name, 3 * n * k // sd.block_size, rng)
    w = reference(name, raw).reshape(3, n, k)
    got = qm.dequant_moe_weights(raw.reshape(-1), sd, 3, k, n)
    assert got.shape == (3, k, n) and same_bits(got, w.transpose(0, 2, 1))
    with pytest.raises(QuantError, match="but the packed weight has"):
        qm.dequant_moe_weights(raw.reshape(-1)[:-1], sd, 3, k, n)
