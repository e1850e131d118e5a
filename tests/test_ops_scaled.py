"""The Scaled* family: RLX's low-precision codec against ml_dtypes (a test peer), its
payloads in the text form, the verifier's rules and the references' identities."""
import ml_dtypes as md
import numpy as np
import pytest

from rlx_ref.interpret import InterpretError
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ops import _lowp_codec as lc
from rlx_ref.ops import _scaled_math as sm
from rlx_ref.ops.scaled import ScaledMatMulAttrs, ScaledQuantAttrs
from rlx_ref.ops.single import run_single, verify_single

PEER = {"F8E4M3": md.float8_e4m3fn, "F8E5M2": md.float8_e5m2,
        "F8E4M3Fnuz": md.float8_e4m3fnuz, "F8E5M2Fnuz": md.float8_e5m2fnuz,
        "F6E2M3": md.float6_e2m3fn, "F6E3M2": md.float6_e3m2fn, "F4E2M1": md.float4_e2m1fn}
U8, F = np.uint8, np.float32


# ── the codec ────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("fmt", lc.NAMED)
def test_decode_table_matches_ml_dtypes(fmt):
    table = lc.decode_table(fmt)
    peer = np.arange(len(table), dtype=U8).view(PEER[fmt]).astype(F)
    same = (table == peer) & (np.signbit(table) == np.signbit(peer))
    assert (same | (np.isnan(table) & np.isnan(peer))).all()


@pytest.mark.parametrize("fmt", lc.NAMED)
def test_encode_is_round_to_nearest_even_like_ml_dtypes_inside_the_range(fmt):
    top = lc.max_finite(fmt)
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(4000) * top / 4, rng.uniform(-top, top, 4000),
                        lc.decode_table(fmt)[np.isfinite(lc.decode_table(fmt))]]).astype(F)
    grid = np.unique(lc.decode_table(fmt)[np.isfinite(lc.decode_table(fmt))])
    x = np.concatenate([x, ((grid[1:] + grid[:-1]) / 2).astype(F)])      # every midpoint
    mine = lc.decode(fmt, lc.encode(fmt, x))
    np.testing.assert_array_equal(mine, x.astype(PEER[fmt]).astype(F))


@pytest.mark.parametrize("fmt", lc.NAMED + (lc.custom(3, 0), lc.custom(5, 2, 9)))
def test_rlx_encode_rules_where_ml_dtypes_differs(fmt):
    top = lc.max_finite(fmt)
    codes = lc.encode(fmt, np.array([np.nan, np.inf, -np.inf, -0.0, 1e9, -1e9], F))
    assert list(codes[:4]) == [0, 0, 0, 0]                   # NaN, ±inf, -0 -> code 0 (+0)
    np.testing.assert_array_equal(lc.decode(fmt, codes[4:]), [top, -top])   # saturation
    tiny = -np.min(np.abs(lc.decode_table(fmt)[lc.decode_table(fmt) != 0])) / 4
    assert lc.encode(fmt, np.array([tiny], F))[0] == 0      # rounds to zero: +0, not -0


@pytest.mark.parametrize("fmt", lc.NAMED + (lc.custom(3, 0), lc.custom(1, 6)))
def test_every_finite_code_is_a_fixed_point(fmt):
    table = lc.decode_table(fmt)
    fin = np.isfinite(table)
    again = lc.decode(fmt, lc.encode(fmt, table[fin]))
    np.testing.assert_array_equal(again, table[fin])


def test_known_values_from_rlx():
    assert [lc.max_finite(f) for f in lc.NAMED] == [448, 57344, 240, 57344, 7.5, 28, 6]
    for f in lc.NAMED:                                      # 1.0 is (bias << mant_bits)
        e, m, b = lc.fields(f)
        assert lc.decode(f, b << m) == 1.0
    assert list(lc.decode_table(lc.custom(3, 0))[:8]) == [0, 0.25, 0.5, 1, 2, 4, 8, 16]
    assert np.isfinite(lc.decode_table("F8E4M3")).sum() == 254


def test_e8m0():
    p = np.arange(-10, 11)
    s = np.ldexp(1.0, p).astype(F)
    np.testing.assert_array_equal(lc.e8m0_to_f32(lc.f32_to_e8m0(s)), s)
    assert list(lc.f32_to_e8m0(np.array([1.5, 0.3, 0, -1, np.inf, np.nan, 1e-45], F))) == [
        128, 126, 0, 0, 0, 0, 0]
    assert np.isnan(lc.e8m0_to_f32(255)) and lc.e8m0_to_f32(0) == np.float32(2.0 ** -127)


# ── payloads and the verifier ────────────────────────────────────────────────

@pytest.mark.parametrize("fmt,layout,text", [
    ("F8E4M3", "PerTensor", '"format":"F8E4M3","scale_layout":"PerTensor"'),
    ("F4E2M1", lc.mx(32), '"format":"F4E2M1","scale_layout":{"BlockMxE8M0":{"block":32}}'),
    ("F4E2M1", lc.nvfp4(16), '"format":"F4E2M1","scale_layout":{"Nvfp4":{"group":16}}'),
    (lc.custom(3, 0), "PerTensor",
     '"format":{"Custom":{"exp_bits":3,"mant_bits":0,"bias":3}},"scale_layout":"PerTensor"'),
])
def test_payload_text_round_trips(fmt, layout, text):
    from rlx_ref.ops.single import single_op_graph

    x = np.ones((2, 32), F)
    g = single_op_graph("ScaledQuantScale", ScaledQuantAttrs(fmt, layout), (x,))
    printed = print_graph(g)
    assert text in printed and parse(printed) == g


@pytest.mark.parametrize("kind,attrs,ops,says", [
    ("ScaledQuantScale", ScaledQuantAttrs(lc.custom(4, 4), "PerTensor"),
     (np.ones((2, 3), F),), "(C1)"),
    ("ScaledQuantScale", ScaledQuantAttrs("F8E4M3", lc.mx(0)), (np.ones((2, 3), F),),
     "(C1)"),
    ("ScaledQuantScale", ScaledQuantAttrs("F8E4M3", "PerTensor"),
     (np.ones((2, 3), np.float16),), "(C2)"),
    ("ScaledQuantize", ScaledQuantAttrs("F8E4M3", lc.mx(2)),
     (np.ones((2, 3), F), np.ones((2, 3), U8)), "(C3)"),
    ("ScaledQuantize", ScaledQuantAttrs("F8E4M3", lc.mx(2)),
     (np.ones((2, 3), F), np.ones((2, 2), F)), "(C3)"),
    ("ScaledDequantize", ScaledQuantAttrs("F8E4M3", "PerTensor"),
     (np.ones(3, F), np.ones(1, F)), "(C2)"),
    ("ScaledMatMul", ScaledMatMulAttrs("F8E4M3", "F8E4M3", "PerTensor", False),
     (np.ones((2, 3), U8), np.ones((4, 2), U8), np.ones(1, F), np.ones(1, F)), "(C4)"),
    ("ScaledMatMul", ScaledMatMulAttrs("F8E4M3", "F8E4M3", "PerTensor", True),
     (np.ones((2, 3), U8), np.ones((4, 3), U8), np.ones(1, F), np.ones(1, F)), "(C2)"),
    ("ScaledMatMul", ScaledMatMulAttrs("F8E4M3", "F8E4M3", lc.mx(2), False),
     (np.ones((2, 3), U8), np.ones((4, 3), U8), np.ones((2, 2), U8), np.ones((4, 1), U8)),
     "(C5)"),
    ("ScaledMatMul", ScaledMatMulAttrs("F8E4M3", "F8E4M3", "PerTensor", True),
     (np.ones((2, 3), U8), np.ones((4, 3), U8), np.ones(1, F), np.ones(1, F), np.ones(3, F)),
     "(C6)"),
    ("ScaledGroupedMatMul", ScaledMatMulAttrs("F4E2M1", "F4E2M1", "PerTensor", False),
     (np.ones((2, 3), U8), np.ones((2, 4, 3), U8), np.ones(1, F), np.ones(1, F),
      np.ones(3, F)), "(C6)"),
])
def test_verifier_names_the_broken_rule(kind, attrs, ops, says):
    from rlx_ref.ir.shape import Shape
    from rlx_ref.ir.dtype import DType
    from rlx_ref.ops.opdef import get

    shapes = [Shape(o.shape, DType.of(o)) for o in ops]
    try:
        out = get(kind).infer_shape(shapes, attrs)
    except Exception:  # noqa: BLE001 - a payload the shape rule cannot read
        out = Shape((1,), DType.F32)
    errs = verify_single(kind, attrs, ops, out or Shape((1,), DType.F32))
    assert errs and says in " ".join(errs), errs


# ── identities of the references ─────────────────────────────────────────────

@pytest.mark.parametrize("fmt,layout", [
    (f, lay) for f in ("F8E4M3", "F8E5M2", "F6E2M3", "F4E2M1", lc.custom(3, 2))
    for lay in ("PerTensor", lc.mx(8))] + [("F4E2M1", lc.nvfp4(4))])
def test_quantize_then_dequantize_is_within_half_a_step(fmt, layout):
    x = (np.random.default_rng(3).standard_normal((3, 19)) * 5).astype(F)
    a = ScaledQuantAttrs(fmt, layout)
    scale = run_single("ScaledQuantScale", a, x)
    codes = run_single("ScaledQuantize", a, x, scale)
    back = run_single("ScaledDequantize", a, codes, scale)
    s = sm.per_element(layout, sm.read_scales(layout, scale), 3, 19)
    grid = np.unique(lc.decode_table(fmt)[np.isfinite(lc.decode_table(fmt))])
    step = np.max(np.diff(grid))               # the widest gap of the format's grid
    top = lc.max_finite(fmt)
    # NVFP4's E4M3 scale may round below amax/top: the excess saturates
    over = np.maximum(np.abs(x) - top * s, 0)
    assert np.all(np.abs(back - x) <= step / 2 * s + over + 1e-6)
    if lc.layout_tag(layout) != "Nvfp4":      # f32 amax/top, and E8M0 rounds up
        assert np.all(np.abs(x / s) <= top * (1 + 1e-6))


def test_nvfp4_scales_of_a_wide_format_underflow_to_zero_as_rlx():
    """E4M3 cannot hold amax/57344 for values near 1: the scale is 0, so are the codes."""
    a = ScaledQuantAttrs("F8E5M2", lc.nvfp4(4))
    x = np.full((1, 4), 3.0, F)
    scale = run_single("ScaledQuantScale", a, x)
    assert list(scale.ravel()) == [0]
    assert not run_single("ScaledQuantize", a, x, scale).any()


@pytest.mark.parametrize("layout", ("PerTensor", lc.mx(4)))
def test_matmul_equals_the_f32_product_of_dequantized_operands(layout):
    rng = np.random.default_rng(4)
    a = ScaledQuantAttrs("F8E4M3", layout)
    x, w = rng.standard_normal((3, 8)).astype(F), rng.standard_normal((5, 8)).astype(F)
    ops = []
    for t in (x, w):
        s = run_single("ScaledQuantScale", a, t)
        ops.append((run_single("ScaledQuantize", a, t, s), s))
    bias = rng.standard_normal(5).astype(F)
    out = run_single("ScaledMatMul", ScaledMatMulAttrs("F8E4M3", "F8E4M3", layout, True),
                     ops[0][0], ops[1][0], ops[0][1], ops[1][1], bias)
    xd, wd = (run_single("ScaledDequantize", a, c, s) for c, s in ops)
    np.testing.assert_allclose(out, xd @ wd.T + bias, rtol=1e-5, atol=1e-5)
    # E4M3 keeps 3 mantissa bits: each operand within 2^-4 relative, so the product
    # within about 2^-3 of Σ|x|·|w|
    err = np.abs(out - (x @ w.T + bias))
    assert np.all(err <= 0.13 * (np.abs(x) @ np.abs(w).T))


def test_grouped_matmul_is_a_matmul_per_routed_row():
    rng = np.random.default_rng(5)
    lay, f = lc.mx(2), "F4E2M1"
    a = ScaledQuantAttrs(f, lay)
    x, w = rng.standard_normal((4, 6)).astype(F), rng.standard_normal((3, 2, 6)).astype(F)
    xs = run_single("ScaledQuantScale", a, x)
    xc = run_single("ScaledQuantize", a, x, xs)
    ws = run_single("ScaledQuantScale", a, w)
    wc = run_single("ScaledQuantize", a, w, ws)
    ids = np.array([2, 0, 1, 2], F)
    got = run_single("ScaledGroupedMatMul", ScaledMatMulAttrs(f, f, lay, False), xc, wc, xs,
                     ws, ids)
    mm = ScaledMatMulAttrs(f, f, lay, False)
    for i, e in enumerate(ids.astype(int)):
        row = run_single("ScaledMatMul", mm, xc[i:i + 1], wc[e], xs[i:i + 1], ws[e])
        np.testing.assert_array_equal(got[i], row[0])
    with pytest.raises(InterpretError, match="expert_idx"):
        run_single("ScaledGroupedMatMul", ScaledMatMulAttrs(f, f, lay, False), xc, wc, xs,
                   ws, np.array([0, 3, 0, 0], F))


def test_codes_are_computed_in_f32_by_the_float64_oracle():
    a = ScaledQuantAttrs("F4E2M1", "PerTensor")
    x = np.array([0.25, 0.75, 2.5, -5.0], F)
    c32 = run_single("ScaledQuantize", a, x, np.ones(1, F))
    c64 = run_single("ScaledQuantize", a, x, np.ones(1, F), float64=True)
    np.testing.assert_array_equal(c32, c64)
    assert list(c32) == [0, 2, 4, 14]
