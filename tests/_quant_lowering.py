"""What the numba-cpu and OpenCL quant-lowering tests share: the kinds each backend claims,
a one-op run beside the float64 oracle, the product bound and the operand generators."""
import numpy as np

import rlx_ref
from rlx_ref.interpret import interpret
from rlx_ref.ops.single import single_op_graph
from rlx_ref.quant.linear import E4M3, E5M2, pack_nibbles

QUANT = {"DequantMatMul": "f32", "DequantGroupedMatMul": "f32", "DequantMoEWeights": "f32",
         "Quantize": "i8", "Dequantize": "f32", "QMatMul": "i8", "QConv2d": "i8",
         "GroupedMatMul": "f32", "LoraMatMul": "f32"}
EPS = float(np.finfo(np.float32).eps)
F = np.float32


def run_one_op(spec, kind, attrs, inputs, out=None):
    """(backend output, oracle output in float64, the executable) of a one-op graph."""
    g = single_op_graph(kind, attrs, inputs, out)
    feeds = {f"x{i}": a for i, a in enumerate(inputs)}
    exe = rlx_ref.Session(spec).compile(g)
    return exe.run(feeds)[0], interpret(g, feeds, float64=True)[0], exe


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(F)


def assert_product(got, want, x, w):
    """Within K·eps of Σ|x·w| (a product of K f32 terms, any summation order)."""
    bound = 2 * x.shape[-1] * EPS * (np.abs(x.astype(np.float64)) @ np.abs(w)) + 1e-30
    assert got.shape == want.shape and np.all(np.abs(got - want) <= bound)


def iq2_blocks(rng, nblocks):
    """Random IQ2_XXS blocks with a small finite f16 scale."""
    raw = rng.integers(0, 256, size=(nblocks, 66), dtype=np.uint8)
    raw[:, :2] = rng.uniform(-0.05, 0.05, nblocks).astype(np.float16).view(np.uint8
                                                                          ).reshape(-1, 2)
    return raw.reshape(-1)


def linear_operands(rng, name, k, n):
    """Every code each scheme can hold (finite weights), scales and zero points."""
    if name in ("Int8Block", "Int8BlockAsym"):
        q = rng.integers(-128, 128, (k, n)).astype(np.int8)
        nb = -(-k // 3)
        zp = (f32(rng, nb, n) * 4) if name == "Int8BlockAsym" else np.zeros((nb, n), F)
        return q, np.abs(f32(rng, nb, n)) * F(0.01) + F(1e-3), zp
    if name == "Int4Block":
        return (pack_nibbles(rng.integers(0, 16, (k, n)).astype(np.uint8)),
                np.abs(f32(rng, -(-k // 3), n)), np.zeros(1, F))
    if name in ("Fp8E4m3", "Fp8E5m2"):
        table = E4M3 if name == "Fp8E4m3" else E5M2
        finite = np.flatnonzero(np.isfinite(table)).astype(np.uint8)
        return rng.choice(finite, (k, n)), np.abs(f32(rng, 1, n)), np.zeros(1, F)
    scales = rng.integers(0, 256, (-(-k // 16), n)).astype(np.uint8)    # NaN codes too
    return (pack_nibbles(rng.integers(0, 16, (k, n)).astype(np.uint8)), scales,
            F([0.37]))
