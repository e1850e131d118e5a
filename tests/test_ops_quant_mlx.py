"""DequantGroupedMatMulMlx: each routed row against the single-expert DequantMatMul of the
same MLX scheme, RLX's id clamping, bf16 scales and the verifier's layout rules."""
import ml_dtypes
import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.quant_matmul import SchemeAttrs
from rlx_ref.ops.single import run_single, verify_single

RNG = np.random.default_rng(3)
F = np.float32


def operands(m, k, n, e, bits, gs):
    x = RNG.standard_normal((m, k)).astype(F)
    codes = RNG.integers(0, 256, size=(e, n * k * bits // 8)).astype(np.uint8)
    sc = (np.abs(RNG.standard_normal((e, n, k // gs))) * 0.1 + 0.01).astype(F)
    bi = (RNG.standard_normal((e, n, k // gs)) * 0.1).astype(F)
    return x, codes, sc, bi


@pytest.mark.parametrize("bits,gs", [(4, 32), (2, 16), (3, 32), (6, 16), (8, 32)])
def test_affine_rows_match_dequant_matmul(bits, gs):
    m, k, n, e = 4, 64, 3, 3
    x, codes, sc, bi = operands(m, k, n, e, bits, gs)
    ids = np.array([2, 0, 1, 2], F)
    a = SchemeAttrs(("MlxAffine", {"bits": bits, "group_size": gs}))
    got = run_single("DequantGroupedMatMulMlx", a, x, codes.reshape(-1), sc, bi, ids,
                     out=Shape((m, n), DType.F32))
    for i, eid in enumerate(ids.astype(int)):
        want = run_single("DequantMatMul", a, x[i:i + 1], codes[eid], sc[eid], bi[eid],
                          out=Shape((1, n), DType.F32))
        np.testing.assert_allclose(got[i], want[0], rtol=1e-5, atol=1e-5)


def test_mxfp4_rows_match_dequant_matmul_with_decoded_scales():
    m, k, n, e, gs = 3, 64, 2, 2, 32
    x, codes, _, bi = operands(m, k, n, e, 4, gs)
    e8m0 = RNG.integers(122, 130, size=(e, n, k // gs)).astype(np.uint8)
    decoded = np.ldexp(1.0, e8m0.astype(int) - 127).astype(F)   # RLX's loader decodes these
    ids = np.array([1, 0, 1], F)
    a = SchemeAttrs(("MlxMxfp4", {"group_size": gs}))
    got = run_single("DequantGroupedMatMulMlx", a, x, codes.reshape(-1), decoded, bi, ids,
                     out=Shape((m, n), DType.F32))
    for i, eid in enumerate(ids.astype(int)):
        want = run_single("DequantMatMul", a, x[i:i + 1], codes[eid], e8m0[eid],
                          np.ones(1, F), out=Shape((1, n), DType.F32))
        np.testing.assert_allclose(got[i], want[0], rtol=1e-5, atol=1e-5)


def test_ids_clamp_like_rlx_and_bf16_scales_decode():
    m, k, n, e = 5, 16, 2, 2
    x, codes, sc, bi = operands(m, k, n, e, 4, 16)
    a = SchemeAttrs(("MlxAffine", {"bits": 4, "group_size": 16}))
    sc16, bi16 = sc.astype(ml_dtypes.bfloat16), bi.astype(ml_dtypes.bfloat16)
    run = lambda ids, s, b: run_single(  # noqa: E731
        "DequantGroupedMatMulMlx", a, x, codes.reshape(-1), s, b, np.asarray(ids, F),
        out=Shape((m, n), DType.F32))
    clamped = run([9.0, -2.0, 1.7, np.nan, 0.2], sc, bi)
    np.testing.assert_array_equal(clamped, run([1, 0, 1, 0, 0], sc, bi))
    np.testing.assert_allclose(run([1, 0, 1, 0, 0], sc16, bi16),
                               run([1, 0, 1, 0, 0], sc16.astype(F), bi16.astype(F)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scheme,wbytes,sshape,needle", [
    (("Int8Block", {"block_size": 32}), 64, (2, 2, 1), "(C1)"),
    (("MlxAffine", {"bits": 4, "group_size": 16}), 63, (2, 2, 1), "(C4)"),
    (("MlxAffine", {"bits": 4, "group_size": 16}), 64, (2, 2, 2), "(C3)"),
])
def test_verifier_rejects(scheme, wbytes, sshape, needle):
    shapes = [Shape((3, 16), DType.F32), Shape((wbytes,), DType.U8),
              Shape(sshape, DType.F32), Shape(sshape, DType.F32), Shape((3,), DType.F32)]
    msgs = verify_single("DequantGroupedMatMulMlx", SchemeAttrs(scheme), shapes,
                         Shape((3, 2), DType.F32))
    assert any(needle in m for m in msgs), msgs


@pytest.mark.parametrize("scheme,bits", [(("MlxAffine", {"bits": 3, "group_size": 32}), 3),
                                         (("MlxAffine", {"bits": 5, "group_size": 32}), 5),
                                         (("MlxAffine", {"bits": 6, "group_size": 16}), 6),
                                         (("MlxMxfp4", {"group_size": 32}), 4)])
def test_numba_cpu_kernel_matches_the_oracle(scheme, bits):
    pytest.importorskip("numba")
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.interpret import interpret
    from rlx_ref.ops.single import single_op_graph

    m, k, n, e = 6, 64, 5, 3
    x, codes, sc, bi = operands(m, k, n, e, bits, dict(scheme[1])["group_size"])
    ids = np.array([2, 0, 1, 2, 9, -1], F)       # the last two clamp to 2 and 0
    xs = (x, codes.reshape(-1), sc.astype(ml_dtypes.bfloat16), bi.astype(ml_dtypes.bfloat16),
          ids)
    g = single_op_graph("DequantGroupedMatMulMlx", SchemeAttrs(scheme), xs,
                        Shape((m, n), DType.F32))
    feeds = {f"x{i}": v for i, v in enumerate(xs)}
    want = interpret(g, feeds)[0]
    got = get_backend("numba-cpu").compile(g).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
