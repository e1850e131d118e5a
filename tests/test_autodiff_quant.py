"""VJP rules of the quant matmuls against float64 finite differences (gradcheck), the
refusals for quantized constants, and GroupedMatMul's weight gradient by hand."""
import numpy as np
import pytest

from rlx_ref.autodiff import SEED, AutodiffError, grad
from rlx_ref.autodiff.gradcheck import gradcheck
from rlx_ref.conformance.gradcheck import check_case
from rlx_ref.conformance.model import Case
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.quant_matmul import LoraAttrs, SchemeAttrs
from rlx_ref.ops.single import single_op_graph
from rlx_ref.quant import QuantError, get_scheme, quantize

RNG = np.random.default_rng(21)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _check(kind, attrs, arrays, wrt, out=None):
    g = single_op_graph(kind, attrs, arrays, out)
    values = {f"x{i}": a for i, a in enumerate(arrays)}
    res = gradcheck(g, values, [f"x{i}" for i in wrt])
    assert res.ok, str(res)
    # forward mode (derived from the VJP) and <J v, u> = <v, Jᵀ u>, as `rlx-ref gradcheck`
    case = Case(id=f"{kind}.f32.test", op=kind, dtype="f32", tags=(), graph=g,
                inputs=values, params={})
    assert check_case(case) is None


@pytest.mark.parametrize("scale", [0.5, -1.5, 1.0])
def test_lora_matmul_every_operand(scale):
    arrays = [_f32(2, 3, 5), _f32(5, 4), _f32(5, 2), _f32(2, 4)]
    _check("LoraMatMul", LoraAttrs(scale), arrays, range(4))


def test_grouped_matmul_input_and_bank():
    arrays = [_f32(6, 4), _f32(3, 4, 5), np.float32([2, 0, 2, 2, 1.5, 0])]
    _check("GroupedMatMul", None, arrays, (0, 1))


def test_grouped_matmul_weight_gradient_by_hand():
    x, w = _f32(4, 3), _f32(3, 3, 2)
    ids = np.float32([1, 1, 0, 1])                        # expert 2 gets no token
    g = grad(single_op_graph("GroupedMatMul", None, [x, w, ids]), ["x1"])
    u = _f32(4, 2)
    dw, = interpret(g, {"x0": x, "x1": w, "x2": ids, SEED: u})
    want = np.zeros((3, 3, 2))
    for i, e in enumerate(ids.astype(int)):
        want[e] += np.outer(x[i], u[i])
    np.testing.assert_allclose(dw, want, rtol=1e-5, atol=1e-6)
    assert not dw[2].any()


@pytest.mark.parametrize("scheme,arrays,out", [
    (("Int8BlockAsym", {"block_size": 4}),
     [_f32(2, 3, 8), RNG.integers(-128, 128, (8, 5)).astype(np.int8), _f32(2, 5), _f32(2, 5)],
     (2, 3, 5)),
    (("MlxAffine", {"bits": 4, "group_size": 8}),
     [_f32(3, 16), RNG.integers(0, 256, 24).astype(np.uint8), _f32(3, 2), _f32(3, 2)],
     (3, 3)),
])
def test_dequant_matmul_activations_4_operand_forms(scheme, arrays, out):
    _check("DequantMatMul", SchemeAttrs(scheme), arrays, (0,), Shape(out, DType.F32))


def _gguf(*names):
    """The first of ``names`` registered with a quantizer."""
    for name in names:
        try:
            sd = get_scheme(name)
        except QuantError:
            continue
        if sd.quantize is not None:
            return sd
    pytest.skip(f"none of {names} is registered with a quantizer")


def test_dequant_matmul_activations_gguf():
    sd = _gguf("GgufQ4_0", "GgufIQ4NL")
    k, n = 2 * sd.block_size, 3
    arrays = [_f32(2, k), quantize(_f32(n, k), sd.name)]
    _check("DequantMatMul", SchemeAttrs(sd.rlx), arrays, (0,), Shape((2, n), DType.F32))


def test_dequant_grouped_matmul_activations():
    sd = _gguf("GgufQ8_0", "GgufMXFP4")
    k, n = sd.block_size, 4
    arrays = [_f32(5, k), quantize(_f32(3, n, k), sd.name), np.float32([2, 0, 2, 1, 1])]
    _check("DequantGroupedMatMul", SchemeAttrs(sd.rlx), arrays, (0,),
           Shape((5, n), DType.F32))


def test_quantized_scales_are_refused_by_name():
    arrays = [_f32(1, 4), RNG.integers(-8, 8, (4, 2)).astype(np.int8), _f32(1, 2), _f32(1, 2)]
    g = single_op_graph("DequantMatMul", SchemeAttrs(("Int8Block", {"block_size": 4})),
                        arrays, Shape((1, 2), DType.F32))
    with pytest.raises(AutodiffError, match=r"DequantMatMul's scale \(operand 2\)"):
        grad(g, ["x0", "x2"])
