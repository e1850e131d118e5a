"""Leaves and elementwise ops against hand-computed values and independent scalar formulas."""
import math

import numpy as np
import pytest

from rlx_ref import DType, Graph, InterpretError, Op, Shape, interpret, verify
from rlx_ref.ops.elementwise import ACTIVATIONS, ActivationAttrs, CastAttrs
from rlx_ref.ops._elementwise_binary import BinaryAttrs, ClampAttrs, CompareAttrs
from rlx_ref.ops.leaves import ConstantAttrs, constant_bytes
from rlx_ref.ops.single import run_single, single_op_graph


def act(name, x):
    return run_single("Activation", ActivationAttrs(name), np.asarray(x))


def binary(name, a, b):
    return run_single("Binary", BinaryAttrs(name), np.asarray(a), np.asarray(b))


def _sig(x):
    return 1 / (1 + math.exp(-x)) if x > -700 else 0.0


# Each activation once more, as scalar Python math (an independent formula).
SCALAR = {
    "Gelu": lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))),
    "GeluApprox": lambda x: 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                     * (x + 0.044715 * x ** 3))),
    "Silu": lambda x: x * _sig(x), "Relu": lambda x: max(x, 0.0), "Sigmoid": _sig,
    "Tanh": math.tanh, "Exp": math.exp, "Log": math.log, "Sqrt": math.sqrt,
    "Rsqrt": lambda x: 1 / math.sqrt(x), "Neg": lambda x: -x, "Abs": abs, "Sin": math.sin,
    "Cos": math.cos, "Tan": math.tan, "Atan": math.atan, "Recip": lambda x: 1 / x,
    "Round": round, "Floor": math.floor, "Ceil": math.ceil,
    "Sign": lambda x: (x > 0) - (x < 0), "Softplus": lambda x: math.log1p(math.exp(x)),
    "Elu": lambda x: x if x > 0 else math.exp(x) - 1, "Erf": math.erf,
    "HardSwish": lambda x: x * min(max(x + 3, 0), 6) / 6,
    "HardSigmoid": lambda x: min(max(x / 6 + 0.5, 0), 1),
    "Mish": lambda x: x * math.tanh(math.log1p(math.exp(x))),
    "Softsign": lambda x: x / (1 + abs(x)),
    "LogSigmoid": lambda x: math.log(_sig(x)),
}


def test_all_29_activations_are_registered():
    assert list(SCALAR) == list(ACTIVATIONS) and len(ACTIVATIONS) == 29


@pytest.mark.parametrize("name", list(SCALAR))
def test_activation_matches_scalar_math_in_f64(name):
    xs = np.array([-3.7, -1.0, -0.25, 0.3, 1.0, 2.5, 4.2])
    if name in ("Log", "Sqrt", "Rsqrt"):
        xs = np.abs(xs)
    got = act(name, xs)
    want = np.array([SCALAR[name](float(v)) for v in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(SCALAR))
def test_activation_f32_within_a_few_ulps_of_f64(name):
    xs = np.linspace(-4, 4, 33, dtype=np.float32)
    if name in ("Log", "Sqrt", "Rsqrt"):
        xs = np.abs(xs) + np.float32(0.01)
    got = act(name, xs)
    ref = act(name, xs.astype(np.float64))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=4e-6, atol=4e-7)


def test_activation_edge_values():
    nan, inf = float("nan"), float("inf")
    assert list(act("Round", np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32))) == \
        [0, 2, 2, -0, -2]
    np.testing.assert_array_equal(act("Sign", np.array([-2, -0.0, 0.0, 3, nan])),
                                  [-1, 0, 0, 1, 0])
    np.testing.assert_array_equal(act("Relu", np.array([nan, -1, 2])), [0, 0, 2])
    assert act("Log", np.array([0.0]))[0] == -inf and np.isnan(act("Log", np.array([-1.0]))[0])
    s = act("Sqrt", np.array([-0.0]))
    assert s[0] == 0 and math.copysign(1, s[0]) == -1
    assert act("Sigmoid", np.array([-inf, inf])).tolist() == [0, 1]
    assert act("Softplus", np.array([1000.0]))[0] == 1000.0
    assert act("LogSigmoid", np.array([-1000.0]))[0] == -1000.0
    np.testing.assert_array_equal(act("Abs", np.array([-3, 4], np.int32)), [3, 4])
    np.testing.assert_allclose(act("Exp", np.array([1j * math.pi])), [-1 + 0j], atol=1e-15)


def test_activation_16_bit_floats_round_once_from_f32():
    x = np.array([0.1, 1.7, -2.3], np.float16)
    got = act("Gelu", x)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, act("Gelu", x.astype(np.float32)).astype(np.float16))
    b = np.array([0.5, 3.0], DType.BF16.np)
    assert act("Exp", b).dtype == DType.BF16.np


def test_activation_rejects_wrong_dtypes():
    g = single_op_graph("Activation", ActivationAttrs("Gelu"), [Shape([2], DType.I32)],
                        out=Shape([2], DType.I32))
    (e,) = verify(g)
    assert "(C2) Gelu is defined on float tensors, got i32" in e.message


def test_binary_float_semantics():
    nan = float("nan")
    assert binary("Max", [nan, 1.0], [2.0, nan]).tolist() == [2.0, 1.0]
    assert binary("Min", [nan], [-1.0]).tolist() == [-1.0]
    np.testing.assert_array_equal(binary("Mod", [7.0, -7.0, 7.0], [3.0, 3.0, -3.0]),
                                  [1.0, -1.0, 1.0])
    assert np.isnan(binary("Mod", [1.0], [0.0])[0])
    assert binary("Div", [1.0, -1.0], [0.0, 0.0]).tolist() == [float("inf"), float("-inf")]
    np.testing.assert_allclose(binary("Atan2", [1.0, -1.0], [-1.0, -1.0]),
                               [3 * math.pi / 4, -3 * math.pi / 4])
    assert binary("Pow", [2.0, -8.0], [10.0, 0.0]).tolist() == [1024.0, 1.0]
    assert binary("BitAnd", [6.9, -3.0], [3.0, 7.0]).tolist() == [2.0, 5.0]
    assert binary("Shl", [3.0], [2.0]).tolist() == [12.0]
    assert binary("Shr", [-8.0], [1.0]).tolist() == [-4.0]


def test_binary_integer_semantics():
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    assert binary("Div", a, b).tolist() == [3, -3, -3, 3]          # truncates toward zero
    assert binary("Mod", a, b).tolist() == [1, -1, 1, -1]          # sign of the dividend
    big = np.array([2**31 - 1], np.int32)
    assert binary("Add", big, np.array([1], np.int32)).tolist() == [-(2**31)]   # wraps
    assert binary("Shl", np.array([1], np.int8), np.array([9], np.int8)).tolist() == [2]
    assert binary("Shr", np.array([-16], np.int32), np.array([2], np.int32)).tolist() == [-4]
    assert binary("Shr", np.array([0x80], np.uint8), np.array([7], np.uint8)).tolist() == [1]
    assert binary("BitXor", np.array([True, True]), np.array([True, False])).tolist() == \
        [False, True]


def test_integer_division_by_zero_is_an_error():
    with pytest.raises(InterpretError, match="integer division by zero"):
        binary("Div", np.array([1], np.int32), np.array([0], np.int32))


def test_binary_broadcasts_and_rejects_mixed_dtypes():
    out = binary("Sub", np.ones((2, 1, 3), np.float32), np.arange(4, dtype=np.float32)
                 .reshape(4, 1))
    assert out.shape == (2, 4, 3) and out[0, 3, 0] == -2
    g = single_op_graph("Binary", BinaryAttrs("Atan2"), [Shape([2], DType.I32)] * 2,
                        out=Shape([2], DType.I32))
    assert "(C3) Atan2 is defined on floats only" in verify(g)[0].message


def test_compare_ieee_rules():
    nan = float("nan")
    a, b = np.array([nan, 1.0, -0.0]), np.array([nan, 2.0, 0.0])
    got = {op: run_single("Compare", CompareAttrs(op), a, b).tolist()
           for op in ("Eq", "Ne", "Lt", "Le", "Gt", "Ge")}
    assert got == {"Eq": [False, False, True], "Ne": [True, True, False],
                   "Lt": [False, True, False], "Le": [False, True, True],
                   "Gt": [False, False, False], "Ge": [False, False, True]}


def test_cast_rules():
    f = np.array([-2.7, -0.5, 2.9, 300.0, -300.0, np.nan, np.inf, -np.inf], np.float32)
    cast = lambda x, to: run_single("Cast", CastAttrs(to), x).tolist()  # noqa: E731
    assert cast(f, DType.I32) == [-2, 0, 2, 300, -300, 0, 2**31 - 1, -(2**31)]
    assert cast(f, DType.U8) == [0, 0, 2, 255, 0, 0, 255, 0]
    assert cast(f, DType.BOOL) == [True, True, True, True, True, True, True, True]
    assert cast(np.array([0.0, -0.0]), DType.BOOL) == [False, False]
    assert cast(np.array([300, -1], np.int32), DType.U8) == [44, 255]
    assert cast(np.array([1e20]), DType.I64) == [2**63 - 1]
    assert cast(np.array([3 + 4j], np.complex64), DType.F32) == [3.0]
    assert cast(np.array([True, False]), DType.F16) == [1.0, 0.0]


def test_where_fma_clamp_and_stop_gradient():
    out = run_single("Where", None, np.array([1.0, 0.0, np.nan, -0.0]),
                     np.ones(4), np.zeros(4))
    assert out.tolist() == [1, 0, 1, 0]
    a, b, c = np.array([1 + 2**-30]), np.array([1 - 2**-30]), np.array([-1.0])
    assert run_single("Fma", None, a, b, c)[0] == -(2.0**-60)       # one rounding
    assert (a * b + c)[0] == 0.0                                     # two roundings lose it
    clamp = run_single("Clamp", ClampAttrs(-1.0, 2.0), np.array([np.nan, -5, 0.5, 9.0]))
    assert clamp.tolist() == [-1.0, -1.0, 0.5, 2.0]
    assert run_single("Clamp", ClampAttrs(-1.5, 2.5), np.array([-5, 5], np.int32)).tolist() \
        == [-1, 2]
    x = np.arange(3.0)
    y = run_single("StopGradient", None, x)
    assert y.tolist() == x.tolist() and y is not x


def test_constant_decodes_bytes_and_checks_length():
    g = Graph("c")
    c = g.constant(np.array([[1, -2], [3, 4]], np.int16))
    g.set_outputs([c])
    assert interpret(g)[0].tolist() == [[1, -2], [3, 4]]
    bad = Graph("bad")
    short = ConstantAttrs(constant_bytes(np.zeros(3, np.float32)))
    bad.add_node_unchecked(Op("Constant", short), [], Shape([4], DType.F32))
    assert "(C1) Constant data has 12 bytes, expected 16" in verify(bad)[0].message


def test_input_feed_is_checked():
    g = Graph("i")
    x = g.input("x", [2], "f32")
    g.set_outputs([x])
    with pytest.raises(InterpretError, match="input 'x' has dtype int32, expected f32"):
        interpret(g, {"x": np.zeros(2, np.int32)})
    with pytest.raises(InterpretError, match="missing input 'x'"):
        interpret(g, {})
