"""Oracle semantics at the edges where it once departed from RLX or from IEEE.

Integer Div at the type's minimum, Fma's signed zeros, narrowing Casts in the float64
oracle, and the index ops whose NaN/-inf rules follow RLX's CPU kernels.
"""
import numpy as np
import pytest

from rlx_ref import DType, Shape
from rlx_ref.ops._elementwise_binary import BinaryAttrs
from rlx_ref.ops.elementwise import ActivationAttrs, CastAttrs
from rlx_ref.ops.single import run_single


def _both(kind, attrs, *arrays):
    """The op on the oracle in its own dtype and in float64 mode."""
    return [run_single(kind, attrs, *arrays, float64=f) for f in (False, True)]


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64])
def test_integer_div_at_the_minimum_truncates_without_wrapping(dt):
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    a = np.array([lo, lo, lo, hi, -7, 7], dt)
    b = np.array([2, 3, -1, -2, 2, -2], dt)
    got = run_single("Binary", BinaryAttrs("Div"), a, b)
    # -2**(n-1) / 2 is exact; / 3 truncates toward zero; MIN / -1 wraps to MIN
    want = [lo // 2, -(-lo // 3), lo, -(hi // 2), -3, -3]
    assert got.dtype == dt and got.tolist() == want


def test_fma_keeps_ieee_zero_signs_in_both_oracle_modes():
    a = np.array([0.0, 0.0, -0.0, 2.0], np.float64)
    b = np.array([-0.0, -0.0, 5.0, 3.0], np.float64)
    c = np.array([-0.0, 0.0, -0.0, -6.0], np.float64)
    for x in (a, a.astype(np.float32)):
        for got in _both("Fma", None, x, b.astype(x.dtype), c.astype(x.dtype)):
            assert got.tolist() == [0.0, 0.0, 0.0, 0.0]
            assert np.signbit(got).tolist() == [True, False, True, False]


@pytest.mark.parametrize("to", [DType.F16, DType.BF16, DType.F32])
def test_narrowing_cast_rounds_to_the_target_in_float64_mode(to):
    x = np.array([1e39, -1e39, 1e-50, 1.0 + 2.0**-30, 3.0], np.float64)
    plain, wide = _both("Cast", CastAttrs(to), x)
    assert wide.dtype == np.float64
    # the float64 oracle holds exactly the values the target type can: inf past its
    # range, 0 below its smallest subnormal, the rounded significand in between
    np.testing.assert_array_equal(wide, plain.astype(np.float64))
    assert wide[0] == np.inf and wide[1] == -np.inf and wide[2] == 0 and wide[3] == 1.0


def test_cast_f32_to_f16_overflows_and_underflows_in_float64_mode():
    x = np.array([70000.0, 1e-8, 6e-8], np.float32)
    _, wide = _both("Cast", CastAttrs(DType.F16), x)
    assert wide.tolist() == [np.inf, 0.0, 2.0**-24]


def test_cast_f64_to_f16_rounds_through_f32_as_rlx():
    x = np.array([1.0 + 2.0**-11 + 2.0**-40])     # direct rounding gives 1 + 2**-10
    for got in _both("Cast", CastAttrs(DType.F16), x):
        assert float(got[0]) == 1.0


@pytest.mark.parametrize("kind", ["ArgMax", "ArgMin"])
def test_arg_reductions_scan_from_element_0_as_rlx(kind):
    from rlx_ref.ops._reduction_arg import ArgAttrs

    x = np.array([[np.nan, 1, 5, -2], [2, np.nan, 7, -7], [np.nan] * 4,
                  [-np.inf, np.nan, -np.inf, 0]], np.float32)
    # a NaN at element 0 is never beaten; a later NaN is skipped
    want = [0, 2, 0, 3] if kind == "ArgMax" else [0, 3, 0, 0]
    for got in _both(kind, ArgAttrs(1, False), x):
        assert got.tolist() == want
    kept = run_single(kind, ArgAttrs(1, True), x)
    assert kept.shape == (4, 1) and kept.ravel().tolist() == want


def test_elu_is_exp_minus_one_as_rlx():
    x = np.array([-1e-8, -1.0, 2.0], np.float32)
    plain, wide = _both("Activation", ActivationAttrs("Elu"), x)
    assert plain[0] == 0.0                      # exp(-1e-8) rounds to 1 in f32
    assert wide[0] == np.exp(np.float64(x[0])) - 1.0
    np.testing.assert_allclose(plain[1:], [np.exp(-1.0) - 1.0, 2.0], rtol=1e-6)


# ── choices that stay apart from (or match) RLX's CPU, each with its recorded reason ──

def test_topk_returns_distinct_indices_where_rlx_repeats_index_0():
    from rlx_ref.ops._reduction_arg import TopKAttrs

    def topk(x, k):
        return run_single("TopK", TopKAttrs(k), x, out=Shape([k], DType.F32)).tolist()

    # RLX masks picks with -inf and then returns [0, 0]; the spec returns each index once
    assert topk(np.array([1.0, -np.inf], np.float32), 2) == [0, 1]
    assert topk(np.array([np.nan, 1.0, -np.inf, np.nan, 2.0], np.float32), 5) == [4, 1, 2, 0, 3]


def test_trilu_writes_zero_where_rlx_multiplies_by_the_mask():
    from rlx_ref.ops._movement_fill import TriluAttrs

    x = np.array([[1.0, 2.0], [np.nan, -np.inf]], np.float32)
    got = run_single("Trilu", TriluAttrs(True, 1), x)
    assert got.tolist() == [[0.0, 2.0], [0.0, 0.0]] and not np.signbit(got).any()


def test_softmax_keeps_exact_exp_where_rlx_avx2_clamps():
    from rlx_ref.ops.reduction import SoftmaxAttrs

    x = np.array([[-np.inf, -np.inf], [np.nan, 0.0], [-np.inf, 0.0]], np.float32)
    got = run_single("Softmax", SoftmaxAttrs(1), x)
    assert np.isnan(got[:2]).all() and got[2].tolist() == [0.0, 1.0]


def test_nan_ignoring_max_scans_as_rlx_f32_max():
    from rlx_ref.ops._indexing_scatter import ScatterElementsAttrs
    from rlx_ref.ops.reduction import CumAttrs

    x = np.array([np.nan, 1.0, np.nan, 3.0, 2.0], np.float32)
    assert run_single("CumMax", CumAttrs(0, False), x).tolist() == [-np.inf, 1, 1, 3, 3]
    data = np.array([np.nan, 5.0], np.float32)
    got = run_single("ScatterElements", ScatterElementsAttrs(0, "Max"), data,
                     np.array([0, 1, 1], np.int32), np.array([2.0, np.nan, 4.0], np.float32))
    assert got.tolist() == [2.0, 5.0]


def test_attention_bias_is_capped_with_the_scores_as_rlx():
    import rlx_ref

    attrs = rlx_ref.opdef("Attention").make_attrs(
        num_heads=1, head_dim=2, mask_kind="Bias", attn_logit_softcap=1.0)
    q = np.zeros((1, 1, 1, 2), np.float32)
    v = np.array([[[[1.0, 0.0], [0.0, 1.0]]]], np.float32)
    bias = np.array([[[[0.0, -np.inf]]]], np.float32)
    out = run_single("Attention", attrs, q, q.repeat(2, axis=2), v, bias)
    # the -inf bias becomes -cap, so the second key keeps weight e^-1 / (1 + e^-1)
    w = np.exp(-1.0) / (1 + np.exp(-1.0))
    np.testing.assert_allclose(out.ravel(), [1 - w, w], rtol=1e-6)
