"""The quant kinds through Session("numba-cpu"): what the backend claims, every kernel path of
the dequantizing products (GEMV, tiles, grouped, expert-stack decode, the 4-operand
schemes, the host path of the MLX schemes) against the oracle, the integer ops bit for
bit, and the GGUF llama decoding the oracle's tokens."""
import numpy as np
import pytest

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
                             linear_operands, run_one_op)

NB = get_backend("numba-cpu")


def run(kind, attrs, inputs, out=None, spec="numba-cpu"):
    """(backend output, oracle output in float64, the executable) of a one-op graph."""
    return run_one_op(spec, kind, attrs, inputs, out)


# ── claims ──────────────────────────────────────────────────────────────────

def test_every_quant_kind_is_claimed_natively_for_its_output_dtype_only():
    from rlx_ref.backends.numba_cpu.lowering import TABLE

    table, paths, why = NB.supported_ops(), NB.paths(), NB.path_reasons()
    for kind, dt in QUANT.items():
        assert table[kind] == {DType.parse(dt)} and paths[kind] == "native", kind
        assert TABLE[kind].fn.__module__.split(".")[-1] in ("lower_quant", "lower_quant_int")
    for text in ("Q4_K", "IQ2_XXS", "NVFP4", "Int4Block", "MLX", "host"):
        assert text in why["DequantMatMul"], text


def test_a_claim_the_backend_did_not_register_fails_to_compile():
    q = np.zeros((2, 3), np.int8)
    g = single_op_graph("Dequantize", QuantAxisAttrs(None, (0.5,), (0,)), (q,),
                        Shape((2, 3), DType.F64))
    with pytest.raises(Exception, match="Dequantize"):
        rlx_ref.Session("numba-cpu").compile(g)


# ── GGUF products on every path ─────────────────────────────────────────────

@pytest.mark.parametrize("name, batch, m, path", [("Q4_0", 1, 1, "gemv"),
                                                  ("Q4_K", 1, 1, "gemv"),
                                                  ("Q8_0", 2, 5, "tiles"),
                                                  ("Q4_K", 1, 3, "tiles"),
                                                  ("IQ2_XXS", 1, 1, "gemv")])
def test_gguf_dequant_matmul_matches_the_oracle_on_each_path(name, batch, m, path):
    rng = np.random.default_rng(1)
    k, n = (256 if name.endswith(("K", "XXS")) else 64), 5
    if name == "IQ2_XXS":
        packed = iq2_blocks(rng, n)
    else:
        packed = quantize(f32(rng, n, k), name)
    x = f32(rng, batch, m, k)
    rlx = "Gguf" + name.replace("_K", "K").replace("_XXS", "XXS")
    got, want, exe = run("DequantMatMul", SchemeAttrs(rlx), (x, packed),
                         Shape((batch, m, n), DType.F32))
    assert_product(got, want, x, dense_weight(rlx, (packed,), k, n))
    assert exe.variants_run() == [f"numba-cpu:quant.{path}"]



def test_grouped_and_expert_stack_match_the_oracle():
    rng = np.random.default_rng(3)
    k, n, e = 32, 6, 3
    packed = quantize(f32(rng, e, n, k), "Q4_0")
    ids = F([2, 2, 0, 2, 2, 2, 2.7, 0])                # expert 2: a run of 6, 1 unused
    x = f32(rng, ids.size, k)
    got, want, exe = run("DequantGroupedMatMul", SchemeAttrs("GgufQ4_0"), (x, packed, ids),
                         Shape((ids.size, n), DType.F32))
    w = run("DequantMoEWeights", SchemeAttrs("GgufQ4_0"), (packed,),
            Shape((e, k, n), DType.F32), spec="reference")[0]
    for i, ex in enumerate(ids.astype(int)):
        assert_product(got[i:i + 1], want[i:i + 1], x[i:i + 1], w[ex])
    assert exe.variants_run() == ["numba-cpu:quant.grouped"]
    stack, _, exe = run("DequantMoEWeights", SchemeAttrs("GgufQ4_0"), (packed,),
                        Shape((e, k, n), DType.F32))
    assert stack.tobytes() == w.tobytes()
    assert exe.variants_run() == ["numba-cpu:quant.moe_weights"]


def test_bad_expert_ids_fail_the_run_naming_the_token():
    rng = np.random.default_rng(4)
    packed = quantize(f32(rng, 2, 3, 32), "Q8_0")
    x = f32(rng, 3, 32)
    for ids, msg in ((F([0, 2, 1]), r"expert_idx\[1\] = 2"),
                     (F([0, np.nan, 1]), r"expert_idx\[1\] = nan")):
        g = single_op_graph("DequantGroupedMatMul", SchemeAttrs("GgufQ8_0"), (x, packed, ids),
                            Shape((3, 3), DType.F32))
        with pytest.raises(Exception, match=msg):
            rlx_ref.Session("numba-cpu").compile(g).run({"x0": x, "x1": packed, "x2": ids})
    w = f32(rng, 2, 32, 3)
    g = single_op_graph("GroupedMatMul", None, (x, w, F([0, 1, -1])))
    with pytest.raises(Exception, match=r"expert_idx\[2\] = -1 is out of range"):
        rlx_ref.Session("numba-cpu").compile(g).run({"x0": x, "x1": w, "x2": F([0, 1, -1])})


def test_mlx_schemes_run_the_reference_on_the_host():
    rng = np.random.default_rng(5)
    mlx = SchemeAttrs(("MlxAffine", {"bits": 4, "group_size": 32}))
    ops = (f32(rng, 1, 64), rng.integers(0, 256, 3 * 32, dtype=np.uint8),
           np.abs(f32(rng, 3, 2)), f32(rng, 3, 2))
    got, _, exe = run("DequantMatMul", mlx, ops, Shape((1, 3), DType.F32))
    g = single_op_graph("DequantMatMul", mlx, ops, Shape((1, 3), DType.F32))
    want = interpret(g, {f"x{i}": a for i, a in enumerate(ops)})[0]
    assert got.tobytes() == want.tobytes()
    assert exe.variants_run() == [] and not exe.kernel_sources()


# ── the 4-operand schemes: weights decoded bit for bit ──────────────────────




@pytest.mark.parametrize("name", ["Int8Block", "Int8BlockAsym", "Int4Block", "Fp8E4m3",
                                  "Fp8E5m2", "Nvfp4Block"])
def test_linear_weights_decode_as_the_scheme_record(name):
    """x = I: the product returns W, which must equal unpack_linear's bit for bit."""
    rng = np.random.default_rng(6)
    k, n = 48, 5
    w_q, scale, zp = linear_operands(rng, name, k, n)
    blocked = name in ("Int8Block", "Int8BlockAsym", "Int4Block")
    attrs = SchemeAttrs((name, {"block_size": 3}) if blocked else name)
    got, _, exe = run("DequantMatMul", attrs, (np.eye(k, dtype=F), w_q, scale, zp),
                      Shape((k, n), DType.F32))
    want = unpack_linear(name, w_q, scale, zp, block_size=3 if blocked else None,
                         shape=(k, n))
    assert np.array_equal(got, want) and exe.variants_run() == ["numba-cpu:quant.linear"]
    x = f32(rng, 7, k)                                  # and a product of 7 rows
    got, oracle, _ = run("DequantMatMul", attrs, (x, w_q, scale, zp), Shape((7, n), DType.F32))
    assert_product(got, oracle, x, want.astype(np.float64))


# ── the integer ops, bit for bit ────────────────────────────────────────────

def test_quantize_and_dequantize_are_bit_exact_per_tensor_and_per_channel():
    rng = np.random.default_rng(7)
    x = (f32(rng, 3, 5, 4) * 40).astype(F)
    x[0, 0, :] = [0.5, -1.5, np.nan, np.inf]             # ties, NaN and saturation
    x[1, 0, :] = [2.5, -2.5, 1e30, -np.inf]
    for a in (QuantAxisAttrs(None, (0.5,), (3,)),
              QuantAxisAttrs(1, (0.1, 0.3, 0.7, 1.1, 0.05), (0, -5, 9, 127, -128))):
        q, want, exe = run("Quantize", a, (x,))
        assert q.dtype == np.int8 and np.array_equal(q, want)
        assert exe.variants_run() == ["numba-cpu:quant.affine"]
        back, _, _ = run("Dequantize", a, (q,))
        g = single_op_graph("Dequantize", a, (q,))
        assert back.tobytes() == interpret(g, {"x0": q})[0].tobytes()
    q = rng.integers(-128, 128, 6).astype(np.int8)        # f32(q - zp) rounds past 2**24
    a = QuantAxisAttrs(None, (1e-3,), (2**31 - 1,))
    got, _, _ = run("Dequantize", a, (q,))
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
        got, want, exe = run("QMatMul", attrs, (x, w, bias))
        assert np.array_equal(got, want) and exe.variants_run() == ["numba-cpu:qmatmul"]
    hx = np.int8([[1], [3], [-1]])                    # acc 1, 3, -1 -> 0.5, 1.5, -0.5: ties
    got, want, _ = run("QMatMul", QMatMulAttrs(0, 0, 0, 0.5), (hx, np.int8([[1]]),
                                                               np.int32([0])))
    assert got.ravel().tolist() == [1, 2, -1] and np.array_equal(got, want)


def test_qconv2d_is_bit_exact_with_groups_stride_dilation_and_padding():
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (2, 4, 7, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 2, 3, 2)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 6).astype(np.int32)
    attrs = QConv2dAttrs((3, 2), (2, 1), (1, 2), (2, 1), 2, -7, 4, 3, 2.5e-4)
    got, want, exe = run("QConv2d", attrs, (x, w, bias))
    assert got.shape == want.shape and np.array_equal(got, want)
    assert exe.variants_run() == ["numba-cpu:qconv2d"]


def test_grouped_and_lora_products():
    rng = np.random.default_rng(10)
    x, w, ids = f32(rng, 5, 7), f32(rng, 3, 7, 4), F([2, 0, 2, 1, 2])
    got, want, _ = run("GroupedMatMul", None, (x, w, ids))
    for i, e in enumerate(ids.astype(int)):
        assert_product(got[i:i + 1], want[i:i + 1], x[i:i + 1], w[e].astype(np.float64))
    xs, lw, la, lb = f32(rng, 2, 3, 7), f32(rng, 7, 4), f32(rng, 7, 2), f32(rng, 2, 4)
    got, want, exe = run("LoraMatMul", LoraAttrs(-0.75), (xs, lw, la, lb))
    t = np.abs(xs.astype(np.float64)) @ np.abs(la) * 0.75
    bound = 4 * 9 * EPS * (np.abs(xs) @ np.abs(lw) + t @ np.abs(lb)) + 1e-30
    assert got.shape == (2, 3, 4) and np.all(np.abs(got - want) <= bound)
    assert exe.variants_run() == ["numba-cpu:lora"]


# ── end to end ──────────────────────────────────────────────────────────────

@pytest.mark.parametrize("scheme", ["Q8_0", "Q4_0", "Q4_K"])
def test_the_gguf_llama_decodes_the_oracles_tokens(tmp_path, scheme):
    from rlx_ref.models import llama as L
    from rlx_ref.models import llama_gguf as E

    cfg, prompt, steps = L.LlamaConfig(), [1, 2, 3, 4], 4
    seq = len(prompt) + steps - 1
    path = E.write_model_files(str(tmp_path), cfg, (scheme,), seed=0)[scheme]
    want, _ = L.greedy_decode(E.load_runner("reference", cfg, seq, path), cfg, prompt,
                              steps, seq)
    got, _ = L.greedy_decode(E.load_runner("numba-cpu", cfg, seq, path), cfg, prompt, steps,
                             seq)
    assert got == want
