"""The quant kinds through Session("opencl"): what the backend claims, every kernel path of
the dequantizing products (GEMV, row groups, tiled, grouped, expert-stack decode, the
4-operand schemes, the host path of schemes without a decoder) against the oracle, and
the integer ops bit for bit."""
import numpy as np
import pytest

pytest.importorskip("pyopencl")

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.quant import QConv2dAttrs, QMatMulAttrs, QuantAxisAttrs
from rlx_ref.ops.quant_matmul import LoraAttrs, SchemeAttrs, dense_weight
from rlx_ref.ops.single import single_op_graph
from rlx_ref.quant import quantize
from rlx_ref.quant.linear import unpack_linear
from _quant_lowering import (EPS, QUANT, F, assert_product, f32, iq2_blocks,  # noqa: E402
                             linear_operands, run_one_op as run)

OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

STYLES = {"cpu": "opencl/cpu-kernels", "gpu": "opencl/gpu-kernels"}


# ── claims ──────────────────────────────────────────────────────────────────

def test_every_quant_kind_is_claimed_natively_for_its_output_dtype_only():
    from rlx_ref.backends.opencl.lowering import TABLE

    table, paths, why = OCL.supported_ops(), OCL.paths(), OCL.path_reasons()
    for kind, dt in QUANT.items():
        assert table[kind] == {DType.parse(dt)} and paths[kind] == "native", kind
        assert TABLE[kind].fn.__module__.split(".")[-1] in ("lower_quant", "lower_quant_int")
    for text in ("NVFP4", "IQ2_XXS", "host.reference", "MLX"):
        assert text in why["DequantMatMul"]
    assert "Q4_K" in why["DequantMatMul"] and "Int4Block" in why["DequantMatMul"]


def test_a_claim_the_backend_did_not_register_fails_to_compile():
    q = np.zeros((2, 3), np.int8)
    g = single_op_graph("Dequantize", QuantAxisAttrs(None, (0.5,), (0,)), (q,),
                        Shape((2, 3), DType.F64))
    with pytest.raises(Exception, match="Dequantize"):
        rlx_ref.Session("opencl").compile(g)


# ── GGUF products on every path ─────────────────────────────────────────────

@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("name, m, path", [("Q4_0", 1, "gemv"), ("Q4_K", 3, "gemv"),
                                           ("Q8_0", 9, "rows"), ("Q4_K", 9, "rows")])
def test_gguf_dequant_matmul_matches_the_oracle_on_each_path(style, name, m, path):
    rng = np.random.default_rng(1)
    k, n = (256 if name.endswith("K") else 64), 5
    x, packed = f32(rng, 2, m, k), quantize(f32(rng, n, k), name)
    rlx = "Gguf" + name.replace("_K", "K")
    got, want, exe = run(STYLES[style], "DequantMatMul", SchemeAttrs(rlx), (x, packed),
                         Shape((2, m, n), DType.F32))
    assert_product(got, want, x, dense_weight(rlx, (packed,), k, n))
    kind = "gemv" if 2 * m <= 4 else ("tiled" if style == "gpu" else "gemv_groups")
    tail = "" if kind == "gemv_groups" else f"_{style}"
    assert f"opencl:quant.{kind}{tail}" in exe.variants_run()


def test_the_cpu_tiled_path_when_the_x_panels_fit():
    rng = np.random.default_rng(2)
    x, packed = f32(rng, 200, 32), quantize(f32(rng, 32, 32), "Q4_0")
    got, want, exe = run(STYLES["cpu"], "DequantMatMul", SchemeAttrs("GgufQ4_0"),
                         (x, packed), Shape((200, 32), DType.F32))
    assert_product(got, want, x, dense_weight("GgufQ4_0", (packed,), 32, 32))
    assert "opencl:quant.tiled_cpu" in exe.variants_run()


@pytest.mark.parametrize("style", list(STYLES))
def test_grouped_and_expert_stack_match_the_oracle(style):
    rng = np.random.default_rng(3)
    k, n, e = 32, 6, 3
    packed = quantize(f32(rng, e, n, k), "Q4_0")
    ids = F([2, 2, 0, 2, 2, 2, 2.7, 0])                # expert 2: a run of 6, 1 unused
    x = f32(rng, ids.size, k)
    got, want, exe = run(STYLES[style], "DequantGroupedMatMul", SchemeAttrs("GgufQ4_0"),
                         (x, packed, ids), Shape((ids.size, n), DType.F32))
    w = run("reference", "DequantMoEWeights", SchemeAttrs("GgufQ4_0"), (packed,),
            Shape((e, k, n), DType.F32))[0]
    for i, ex in enumerate(ids.astype(int)):
        assert_product(got[i:i + 1], want[i:i + 1], x[i:i + 1], w[ex])
    assert {"opencl:quant.grouped", f"opencl:quant.gemv_{style}"} <= set(exe.variants_run())
    stack, oracle, exe = run(STYLES[style], "DequantMoEWeights", SchemeAttrs("GgufQ4_0"),
                             (packed,), Shape((e, k, n), DType.F32))
    assert stack.tobytes() == w.tobytes() and "opencl:quant.moe_weights" in exe.variants_run()


def test_bad_expert_ids_fail_the_run_naming_the_token():
    rng = np.random.default_rng(4)
    packed = quantize(f32(rng, 2, 3, 32), "Q8_0")
    x = f32(rng, 3, 32)
    for ids, msg in ((F([0, 2, 1]), r"expert_idx\[1\] = 2"),
                     (F([0, np.nan, 1]), r"expert_idx\[1\] = nan")):
        g = single_op_graph("DequantGroupedMatMul", SchemeAttrs("GgufQ8_0"), (x, packed, ids),
                            Shape((3, 3), DType.F32))
        with pytest.raises(Exception, match=msg):
            rlx_ref.Session("opencl").compile(g).run({"x0": x, "x1": packed, "x2": ids})
    w = f32(rng, 2, 32, 3)
    g = single_op_graph("GroupedMatMul", None, (x, w, F([0, 1, -1])))
    with pytest.raises(Exception, match=r"expert_idx\[2\] = -1 is out of range"):
        rlx_ref.Session("opencl").compile(g).run({"x0": x, "x1": w, "x2": F([0, 1, -1])})


# ── schemes no kernel decodes: the declared host path ───────────────────────


def test_schemes_without_a_decoder_run_the_reference_on_the_host():
    rng = np.random.default_rng(5)
    x = f32(rng, 2, 256)
    for rlx, packed in (("GgufNVFP4", quantize(f32(rng, 3, 256), "NVFP4")),
                        ("GgufIQ2XXS", iq2_blocks(rng, 3))):
        got, _, exe = run("opencl", "DequantMatMul", SchemeAttrs(rlx), (x, packed),
                          Shape((2, 3), DType.F32))
        g = single_op_graph("DequantMatMul", SchemeAttrs(rlx), (x, packed),
                            Shape((2, 3), DType.F32))
        assert got.tobytes() == interpret(g, {"x0": x, "x1": packed})[0].tobytes()
        assert exe.variants_run() == ["opencl:host.reference"]
        assert not exe.kernel_sources()
    mlx = SchemeAttrs(("MlxAffine", {"bits": 4, "group_size": 32}))
    ops = (f32(rng, 1, 64), rng.integers(0, 256, 3 * 32, dtype=np.uint8),
           np.abs(f32(rng, 3, 2)), f32(rng, 3, 2))
    got, want, exe = run("opencl", "DequantMatMul", mlx, ops, Shape((1, 3), DType.F32))
    assert np.allclose(got, want, rtol=1e-5) and exe.variants_run() == [
        "opencl:host.reference"]


# ── the 4-operand schemes: weights decoded bit for bit ──────────────────────




@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("name", ["Int8Block", "Int8BlockAsym", "Int4Block", "Fp8E4m3",
                                  "Fp8E5m2", "Nvfp4Block"])
def test_linear_weights_decode_as_the_scheme_record(style, name):
    """x = I: the product returns W, which must equal unpack_linear's bit for bit."""
    rng = np.random.default_rng(6)
    k, n = 48, 5
    w_q, scale, zp = linear_operands(rng, name, k, n)
    blocked = name in ("Int8Block", "Int8BlockAsym", "Int4Block")
    attrs = SchemeAttrs((name, {"block_size": 3}) if blocked else name)
    eye = np.eye(k, dtype=F)
    got, _, exe = run(STYLES[style], "DequantMatMul", attrs, (eye, w_q, scale, zp),
                      Shape((k, n), DType.F32))
    want = unpack_linear(name, w_q, scale, zp, block_size=3 if blocked else None,
                         shape=(k, n))
    assert np.array_equal(got, want) and exe.variants_run() == ["opencl:quant.linear"]
    x = f32(rng, 7, k)                                  # and a product of 7 rows
    got, oracle, _ = run(STYLES[style], "DequantMatMul", attrs, (x, w_q, scale, zp),
                         Shape((7, n), DType.F32))
    assert_product(got, oracle, x, want.astype(np.float64))


# ── the integer ops, bit for bit ────────────────────────────────────────────

def test_quantize_and_dequantize_are_bit_exact_per_tensor_and_per_channel():
    rng = np.random.default_rng(7)
    x = (f32(rng, 3, 5, 4) * 40).astype(F)
    x[0, 0, :] = [0.5, -1.5, np.nan, np.inf]             # ties, NaN and saturation
    for a in (QuantAxisAttrs(None, (0.5,), (3,)),
              QuantAxisAttrs(1, (0.1, 0.3, 0.7, 1.1, 0.05), (0, -5, 9, 127, -128))):
        q, want, _ = run("opencl", "Quantize", a, (x,))
        assert q.dtype == np.int8 and np.array_equal(q, want)
        back, want, _ = run("opencl", "Dequantize", a, (q,))
        g = single_op_graph("Dequantize", a, (q,))
        assert back.tobytes() == interpret(g, {"x0": q})[0].tobytes()
    q = rng.integers(-128, 128, 6).astype(np.int8)        # f32(q - zp) rounds past 2**24
    a = QuantAxisAttrs(None, (1e-3,), (2**31 - 1,))
    got, _, _ = run("opencl", "Dequantize", a, (q,))
    assert got.tobytes() == interpret(single_op_graph("Dequantize", a, (q,)),
                                      {"x0": q})[0].tobytes()


def test_qmatmul_rounds_its_accumulator_to_f32_and_ties_away_from_zero():
    rng = np.random.default_rng(8)
    k = 1100                                   # |acc| up to 7e7: f32(acc) rounds
    x = rng.integers(-128, 128, (3, k)).astype(np.int8)
    w = rng.integers(-128, 128, (k, 4)).astype(np.int8)
    bias = rng.integers(-1000, 1000, 4).astype(np.int32)
    for attrs in (QMatMulAttrs(-128, 127, 5, 1.7e-6), QMatMulAttrs(0, 0, -3, 0.5),
                  QMatMulAttrs(3, -2, 0, 1e-3)):
        got, want, exe = run("opencl", "QMatMul", attrs, (x, w, bias))
        assert np.array_equal(got, want) and exe.variants_run() == ["opencl:qmatmul"]


def test_qconv2d_is_bit_exact_with_groups_stride_dilation_and_padding():
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (2, 4, 7, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 2, 3, 2)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 6).astype(np.int32)
    attrs = QConv2dAttrs((3, 2), (2, 1), (1, 2), (2, 1), 2, -7, 4, 3, 2.5e-4)
    got, want, _ = run("opencl", "QConv2d", attrs, (x, w, bias))
    assert got.shape == want.shape and np.array_equal(got, want)


def test_grouped_and_lora_products_in_one_graph():
    rng = np.random.default_rng(10)
    x, w, ids = f32(rng, 5, 7), f32(rng, 3, 7, 4), F([2, 0, 2, 1, 2])
    got, want, _ = run("opencl", "GroupedMatMul", None, (x, w, ids))
    for i, e in enumerate(ids.astype(int)):
        assert_product(got[i:i + 1], want[i:i + 1], x[i:i + 1], w[e].astype(np.float64))
    xs, lw, la, lb = f32(rng, 2, 3, 7), f32(rng, 7, 4), f32(rng, 7, 2), f32(rng, 2, 4)
    got, want, exe = run("opencl", "LoraMatMul", LoraAttrs(-0.75), (xs, lw, la, lb))
    t = np.abs(xs.astype(np.float64)) @ np.abs(la) * 0.75
    bound = 4 * 9 * EPS * (np.abs(xs) @ np.abs(lw) + t @ np.abs(lb)) + 1e-30
    assert got.shape == (2, 3, 4) and np.all(np.abs(got - want) <= bound)
    assert exe.dispatch_report.path_of("LoraMatMul") == "native"


# ── end to end ──────────────────────────────────────────────────────────────

@pytest.mark.parametrize("scheme", ["Q4_0", "Q4_K"])
def test_the_gguf_llama_decodes_the_oracles_tokens(tmp_path, scheme):
    from rlx_ref.models import llama as L
    from rlx_ref.models import llama_gguf as E

    cfg, prompt, steps = L.LlamaConfig(), [1, 2, 3, 4], 4
    seq = len(prompt) + steps - 1
    path = E.write_model_files(str(tmp_path), cfg, (scheme,), seed=0)[scheme]
    want, _ = L.greedy_decode(E.load_runner("reference", cfg, seq, path), cfg, prompt,
                              steps, seq)
    got, _ = L.greedy_decode(E.load_runner("opencl", cfg, seq, path), cfg, prompt, steps,
                             seq)
    assert got == want
