"""OpenCL fused GGUF dequant kernels: every decoder bit for bit against gguf-py on random
valid blocks, DequantMatMul against float64 on every path (GEMV, tiled, straddling rows)
in both kernel styles, the grouped MoE product with repeated and unused experts, the
transposed expert dequant, and the host checks that run before any launch."""
import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyopencl")
gguf = pytest.importorskip("gguf")

from rlx_ref.backends.registry import get_backend
from rlx_ref.quant import QuantError, SchemeDef

OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

from rlx_ref.backends.opencl import _quant_matmul, memory, quant_ops
from rlx_ref.backends.opencl._quant_decode_src import DECODERS
from rlx_ref.backends.opencl._quant_grouped import QuantGroupedMatMul, sort_tokens
from rlx_ref.backends.opencl._quant_matmul import QuantMatMul

T = gguf.GGMLQuantizationType
# byte offsets of each block's f16 fields (Q8_K: an f32 d at 0; MXFP4: an exponent byte)
F16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
              "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2),
              "Q6_K": (208,), "Q8_K": (), "IQ4_NL": (0,), "IQ4_XS": (0,), "TQ1_0": (52,),
              "TQ2_0": (64,), "MXFP4": ()}
SCHEMES = list(F16_FIELDS)
STYLES = ("cpu", "gpu")
# cpu-tiled: the CPU tiled kernel even where the scratch share would leave no room for one
# x panel (small weights beside many rows: those run the GEMV over groups of rows)
PATHS = ("cpu", "cpu-tiled", "gpu")
EPS = np.finfo(np.float32).eps


@pytest.fixture
def style(request, monkeypatch):
    """A kernel style of PATHS (cpu-tiled lifts the CPU tiled path's scratch floor)."""
    if request.param == "cpu-tiled":
        monkeypatch.setattr(_quant_matmul, "SCRATCH_FLOOR", 1 << 30)
    return request.param.split("-")[0]


def _device(style: str):
    info, context, queue = OCL._device()
    return dataclasses.replace(info, kernels=style), context, queue


def geometry(name: str) -> tuple:
    if name == "Q8_K":
        return 256, 292
    return gguf.GGML_QUANT_SIZES[getattr(T, name)]


def random_blocks(rng, name: str, nblocks: int, wide: bool = False) -> np.ndarray:
    """Random bytes with finite scale fields; ``wide`` also draws zeros, negative and
    subnormal f16 scales (for the bit-exact decoders)."""
    bs, bb = geometry(name)
    raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        scale = rng.uniform(-0.05, 0.05, nblocks)
        if wide:
            pick = rng.integers(0, 4, nblocks)
            scale = np.where(pick == 0, 0.0, scale)
            scale = np.where(pick == 1, rng.uniform(-6e-5, 6e-5, nblocks), scale)
            scale = np.where(pick == 2, rng.uniform(-900, 900, nblocks), scale)
        raw[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(nblocks, 2)
    if name == "Q8_K":
        d = rng.uniform(-0.05, 0.05, nblocks).astype(np.float32)
        raw[:, 0:4] = d.view(np.uint8).reshape(nblocks, 4)
    if name == "MXFP4":
        raw[:, 0] = rng.integers(1 if wide else 118, 255 if wide else 126, nblocks)
    return raw.reshape(-1)


def reference_dequant(name: str, packed: np.ndarray) -> np.ndarray:
    """gguf-py's decoder (Q8_K, which gguf-py does not decode: d times the int8 quants)."""
    if name == "Q8_K":
        blocks = packed.reshape(-1, 292)
        d = blocks[:, :4].copy().view(np.float32)
        return (d * blocks[:, 4:260].view(np.int8).astype(np.float32)).reshape(-1)
    return gguf.quants.dequantize(packed, getattr(T, name)).reshape(-1)


@pytest.mark.parametrize("name", SCHEMES)
def test_every_decoder_is_bit_exact(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    packed = random_blocks(rng, name, 24, wide=True)
    with np.errstate(all="ignore"):
        want = reference_dequant(name, packed)
    got = quant_ops.dequant(None, packed, name)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_decoders_cover_the_schemes_asked_for():
    from rlx_ref.quant import get_scheme

    assert set(DECODERS) == set(SCHEMES)
    for name in SCHEMES:
        assert (DECODERS[name].block_size, DECODERS[name].block_bytes) == geometry(name)
        sd = get_scheme(name)           # the registry's record, also by RLX's name
        assert _quant_matmul.geometry(sd.rlx)[1] == (sd.block_size, sd.block_bytes)


def test_q8_k_decodes_as_the_scheme_record_does():
    from rlx_ref.quant import dequant

    packed = random_blocks(np.random.default_rng(8), "Q8_K", 5, wide=True)
    np.testing.assert_array_equal(quant_ops.dequant(None, packed, "Q8_K").view(np.uint32),
                                  dequant(packed, "Q8_K").view(np.uint32))


def _check_product(got, x, w, what: str) -> None:
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    bound = (x.shape[-1] + 2) * EPS * (np.abs(x).astype(np.float64) @ np.abs(w).T) + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    assert got.shape == ref.shape, what
    assert (err <= bound).all(), f"{what}: worst error {err.max():.3g}"


@pytest.mark.parametrize("style", PATHS, indirect=True)
@pytest.mark.parametrize("name", SCHEMES)
def test_dequant_matmul_matches_float64(name, style):
    rng = np.random.default_rng(7 + len(name))
    dev = _device(style)
    bs = geometry(name)[0]
    for m in (1, 3, 17):
        for k in (bs, 2 * bs):
            for n in (1, 7, 33):
                packed = random_blocks(rng, name, n * k // bs)
                w = reference_dequant(name, packed).reshape(n, k)
                x = rng.standard_normal((m, k)).astype(np.float32)
                got = quant_ops.dequant_matmul(dev, x, packed, n, name)
                _check_product(got, x, w, f"{name} {style} m={m} k={k} n={n}")


@pytest.mark.parametrize("style", PATHS, indirect=True)
@pytest.mark.parametrize("name,m,k,n,path", [
    ("Q4_0", 3, 16, 4, "straddle"),     # blocks of 32 over rows of 16
    ("Q8_0", 5, 48, 2, "straddle"),     # a block across the row boundary
    ("Q4_K", 2, 16, 16, "straddle"),
    ("Q6_K", 6, 72, 32, "straddle"),
    ("Q4_K", 1, 64, 4, "gemv"),         # 256-blocks over rows of 64: sub-blocks align
    ("Q5_K", 7, 96, 8, "tiled"),
    ("Q3_K", 21, 160, 8, "tiled"),
    ("IQ4_XS", 4, 160, 8, "gemv"),
])
def test_blocks_straddling_rows(name, m, k, n, path, style, request):
    rng = np.random.default_rng(m * 1000 + k + n)
    dev = _device(style)
    packed = random_blocks(rng, name, n * k // geometry(name)[0])
    w = reference_dequant(name, packed).reshape(n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    plan = QuantMatMul(quant_ops.standalone_ctx(dev), name, m, n, k)
    if path == "tiled" and request.node.callspec.params["style"] == "cpu":
        path = "gemv-groups"        # no room for an x panel beside so small a weight
    assert plan.path == path
    _check_product(quant_ops.dequant_matmul(dev, x, packed, n, name), x, w, name)


def test_batched_x_keeps_its_leading_axes():
    rng = np.random.default_rng(3)
    packed = random_blocks(rng, "Q4_0", 6)
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    got = quant_ops.dequant_matmul(None, x, packed, 3, "Q4_0")
    w = reference_dequant("Q4_0", packed).reshape(3, 64)
    assert got.shape == (2, 3, 3)
    _check_product(got.reshape(6, 3), x.reshape(6, 64), w, "batched")


def _grouped_reference(x, packed, ids, name, n, k):
    slab = n * k // geometry(name)[0] * geometry(name)[1]
    out, size = np.empty((len(ids), n)), np.empty((len(ids), n))
    for i, e in enumerate(ids):
        w = reference_dequant(name, packed[int(e) * slab:(int(e) + 1) * slab]).reshape(n, k)
        out[i] = x[i].astype(np.float64) @ w.astype(np.float64).T
        size[i] = np.abs(x[i]).astype(np.float64) @ np.abs(w).T
    return out, size


@pytest.mark.parametrize("style", PATHS, indirect=True)
@pytest.mark.parametrize("name,k", [("Q4_0", 64), ("Q4_K", 256), ("Q8_0", 40)])
def test_grouped_with_repeated_and_unused_experts(name, k, style):
    rng = np.random.default_rng(k)
    dev, n, experts = _device(style), 8, 5
    # expert 2: 6 tokens (tiled), 0: 2 and 3: 1 (GEMV), 1 and 4: none
    ids = np.array([2, 0, 2, 3, 2, 2, 0, 2, 2.7], np.float32)
    packed = random_blocks(rng, name, experts * n * k // geometry(name)[0])
    x = rng.standard_normal((len(ids), k)).astype(np.float32)
    got = quant_ops.dequant_grouped_matmul(dev, x, packed, ids, n, name)
    ref, size = _grouped_reference(x, packed, ids, name, n, k)
    assert got.shape == ref.shape
    assert (np.abs(got - ref) <= (k + 2) * EPS * size + 1e-30).all()


def test_sort_tokens_is_the_stable_counting_order():
    perm, offsets = sort_tokens(np.array([1, 0, 1, 3, 0.5]), 4)
    assert perm.tolist() == [1, 4, 0, 2, 3]
    assert offsets.tolist() == [0, 2, 4, 4, 5]


@pytest.mark.parametrize("bad", [4.0, -1.0, np.nan, np.inf])
def test_an_out_of_range_expert_fails_before_any_kernel(bad):
    ctx = quant_ops.standalone_ctx(None)
    m, n, k, experts = 3, 2, 32, 4
    rng = np.random.default_rng(1)
    plan = QuantGroupedMatMul(ctx, "Q4_0", m, n, k, experts)
    up = lambda a: memory.upload(ctx.program.context, ctx.queue, a)
    out = up(np.full(m * n, 7.0, np.float32))
    launch = plan.bind(out, up(rng.standard_normal(m * k).astype(np.float32)),
                       up(random_blocks(rng, "Q4_0", experts * n)),
                       up(np.array([0, bad, 1], np.float32)))
    with pytest.raises(QuantError, match=r"expert_idx\[1\] .* expected a value in \[0, 4\)"):
        launch()
    assert (out.get(ctx.queue) == 7.0).all()       # nothing ran


@pytest.mark.parametrize("style", STYLES)
def test_moe_dequant_is_each_slab_transposed(style):
    rng = np.random.default_rng(5)
    experts, k, n = 3, 64, 12
    packed = random_blocks(rng, "Q4_K", experts * n * k // 256, wide=True)
    got = quant_ops.dequant_moe_weights(_device(style), packed, "Q4_K", experts, k, n)
    with np.errstate(all="ignore"):
        want = reference_dequant("Q4_K", packed).reshape(experts, n, k).transpose(0, 2, 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_byte_counts_are_checked_before_anything_runs():
    x = np.zeros((2, 64), np.float32)
    with pytest.raises(QuantError, match="has 35 bytes; a \\[3, 64\\] weight needs 108"):
        quant_ops.dequant_matmul(None, x, np.zeros(35, np.uint8), 3, "Q4_0")
    with pytest.raises(QuantError, match="not a multiple of the 256-element block"):
        quant_ops.dequant_matmul(None, np.zeros((1, 16), np.float32), np.zeros(144, np.uint8),
                                 3, "Q4_K")
    with pytest.raises(QuantError, match="not a whole number of \\[2, 32\\] expert slabs"):
        quant_ops.dequant_grouped_matmul(None, np.zeros((1, 32), np.float32),
                                         np.zeros(40, np.uint8), np.zeros(1), 2, "Q4_0")
    ctx = quant_ops.standalone_ctx(None)
    plan = QuantMatMul(ctx, "Q8_0", 1, 2, 32)
    up = lambda a: memory.upload(ctx.program.context, ctx.queue, a)
    with pytest.raises(QuantError, match="packed weight holds 67 elements"):
        plan.bind(up(np.zeros(2, np.float32)), up(np.zeros(32, np.float32)),
                  up(np.zeros(67, np.uint8)))


def test_a_record_that_disagrees_with_the_decoder_is_refused(monkeypatch):
    # the RLX pitfall: a 32-element scheme decoded with a 256-element block size
    wrong = SchemeDef("Q4_0", 256, 18, dequantize=lambda b: b)
    monkeypatch.setattr(_quant_matmul, "get_scheme", lambda key: wrong)
    with pytest.raises(QuantError, match="256-element blocks of 18 bytes but the OpenCL "
                       "decoder is written for 32 elements in 18 bytes"):
        quant_ops.dequant_matmul(None, np.zeros((1, 32), np.float32), np.zeros(18, np.uint8),
                                 1, "Q4_0")


def test_unknown_and_linear_schemes_are_refused(monkeypatch):
    with pytest.raises(QuantError, match="unknown quant scheme 'Q7_Z'"):
        quant_ops.dequant(None, np.zeros(18, np.uint8), "Q7_Z")
    linear = SchemeDef("Int8Block", 32, 32, dequantize=lambda b: b, kind="linear")
    monkeypatch.setattr(_quant_matmul, "get_scheme", lambda key: linear)
    with pytest.raises(QuantError, match="Int8Block is not a GGUF block scheme"):
        quant_ops.dequant(None, np.zeros(32, np.uint8), "Int8Block")


@pytest.mark.parametrize("m,n,k,path", [(200, 4096, 4096, "tiled"), (128, 4096, 4096, "tiled"),
                                        (5, 4096, 512, "tiled"), (64, 8, 4096, "gemv-groups")])
def test_tiled_scratch_is_x_panels_within_a_twelfth_of_the_operands(m, n, k, path):
    ctx = quant_ops.standalone_ctx(_device("cpu"))
    plan = QuantMatMul(ctx, "Q4_0", m, n, k)
    p = plan.product
    operands = m * (k + n) * 4 + p.slab
    assert plan.path == path
    assert p.chunk * p.panel_bytes <= operands / 12     # no f32 copy of W, nor of x


@pytest.mark.parametrize("style", STYLES)
def test_every_f16_scale_decodes_exactly(style):
    # Q8_0 blocks whose quants are all 1: each value is its block's f16 scale, converted
    bits = np.arange(1 << 16, dtype=np.uint16)
    blocks = np.ones((bits.size, 34), np.uint8)
    blocks[:, :2] = bits.view(np.uint8).reshape(-1, 2)
    got = quant_ops.dequant(_device(style), blocks.reshape(-1), "Q8_0").reshape(-1, 32)
    want = bits.view(np.float16).astype(np.float32)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite, 0].view(np.uint32), want[finite].view(np.uint32))
    assert np.isnan(got[~finite]).all()


def test_empty_operands_and_device_resident_results():
    assert quant_ops.dequant(None, np.zeros(0, np.uint8), "Q4_K").shape == (0,)
    got = quant_ops.dequant_matmul(None, np.zeros((0, 64), np.float32),
                                   np.zeros(72, np.uint8), 2, "Q4_0")
    assert got.shape == (0, 2)
    ctx = quant_ops.standalone_ctx(None)
    rng = np.random.default_rng(9)
    packed = random_blocks(rng, "Q8_0", 8)
    x = rng.standard_normal((2, 128)).astype(np.float32)
    up = lambda a: memory.upload(ctx.program.context, ctx.queue, a)
    res = quant_ops.dequant_matmul(ctx, up(x), up(packed), 2, "Q8_0")
    assert isinstance(res, memory.DevArray) and res.shape == (2, 2)
    _check_product(res.get(ctx.queue), x, reference_dequant("Q8_0", packed).reshape(2, 128),
                   "device-resident")


def test_one_context_serves_many_calls():
    ctx = quant_ops.standalone_ctx(None)
    rng = np.random.default_rng(4)
    for name in ("Q4_0", "Q4_K", "Q4_0"):
        packed = random_blocks(rng, name, 2)
        got = quant_ops.dequant(ctx, packed, name)
        np.testing.assert_array_equal(got, reference_dequant(name, packed))


@pytest.mark.parametrize("style", STYLES)
def test_many_schemes_and_paths_share_one_program(style):
    # a graph's program holds every node's kernels: decoders behind include guards, each
    # kernel's defines undone after it
    ctx = quant_ops.standalone_ctx(_device(style))
    rng = np.random.default_rng(12)
    up = lambda a: memory.upload(ctx.program.context, ctx.queue, a)
    shapes = [("Q4_0", 1, 64, 8), ("Q4_K", 20, 256, 4), ("Q8_0", 3, 48, 2), ("Q4_0", 6, 96, 5),
              ("Q6_K", 2, 512, 3), ("Q4_K", 1, 256, 4)]
    plans, data = [], []
    for name, m, k, n in shapes:
        plans.append(QuantMatMul(ctx, name, m, n, k))
        packed = random_blocks(rng, name, n * k // geometry(name)[0])
        x = rng.standard_normal((m, k)).astype(np.float32)
        data.append((x, packed, up(np.zeros(m * n, np.float32))))
    dq = _quant_matmul.QuantDequant(ctx, "Q5_K", 512)
    dq_packed = random_blocks(rng, "Q5_K", 2, wide=True)
    dq_out = up(np.zeros(512, np.float32))
    launches = [p.bind(out, up(x.reshape(-1)), up(packed))
                for p, (x, packed, out) in zip(plans, data)]
    launches.append(dq.bind(dq_out, up(dq_packed)))
    for go in launches:
        go()
    for (name, m, k, n), (x, packed, out) in zip(shapes, data):
        w = reference_dequant(name, packed).reshape(n, k)
        _check_product(out.get(ctx.queue).reshape(m, n), x, w, f"{name} {m}x{k}x{n}")
    with np.errstate(all="ignore"):
        want = reference_dequant("Q5_K", dq_packed)
    np.testing.assert_array_equal(dq_out.get(ctx.queue).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("style", PATHS, indirect=True)
@pytest.mark.parametrize("m", [1, 3, 40])
def test_k_zero_writes_zeros(style, m):
    ctx = quant_ops.standalone_ctx(_device(style))
    up = lambda a: memory.upload(ctx.program.context, ctx.queue, a)
    out = up(np.full(m * 3, 7.0, np.float32))
    plan = QuantMatMul(ctx, "Q4_K", m, 3, 0)
    plan.bind(out, up(np.zeros(m * 0, np.float32)), up(np.zeros(0, np.uint8)))()
    assert (out.get(ctx.queue) == 0).all()
