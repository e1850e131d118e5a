"""The complex family and C64 through the IR: oracle, text form, Cast, Binary, conformance."""
import numpy as np
import pytest

from rlx_ref.conformance.compare import compare
from rlx_ref.conformance.accuracy import ulp
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, single_op_graph, verify_single

RNG = np.random.default_rng(3)
DEVICES = [None, "numba-cpu"]


def c64(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def run(device, kind, attrs, *arrays):
    if device is None:
        return run_single(kind, attrs, *arrays)
    import rlx_ref

    g = single_op_graph(kind, attrs, arrays)
    return rlx_ref.Session(device).compile(g).run({f"x{i}": a for i, a in enumerate(arrays)})[0]


@pytest.mark.parametrize("device", DEVICES)
def test_norm_sq_conjugate_and_backward(device):
    z = c64(3, 4)
    g = RNG.standard_normal((3, 4)).astype(np.float32)
    ns = run(device, "ComplexNormSq", None, z)
    assert ns.dtype == np.float32
    np.testing.assert_allclose(ns, np.abs(z.astype(np.complex128)) ** 2, rtol=1e-6)
    cj = run(device, "Conjugate", None, z)
    assert cj.dtype == np.complex64
    np.testing.assert_array_equal(cj, np.conj(z))
    back = run(device, "ComplexNormSqBackward", None, z, g)
    np.testing.assert_allclose(back, g * z, rtol=1e-6)


def test_norm_sq_backward_is_the_wirtinger_gradient():
    """g·z = ∂(g·|z|²)/∂z̄ = ½(∂/∂re + i·∂/∂im) of the real loss."""
    z = c64(5).astype(np.complex128)
    g = RNG.standard_normal(5)
    got = run_single("ComplexNormSqBackward", None, z.astype(np.complex64),
                     g.astype(np.float32), float64=True)
    d_re, d_im = 2 * g * z.real, 2 * g * z.imag      # ∂(g·(re² + im²)) per part
    np.testing.assert_allclose(got, 0.5 * (d_re + 1j * d_im), rtol=1e-6)


def test_conjugate_keeps_signed_zeros_and_nan():
    z = np.array([complex(0.0, 0.0), complex(-0.0, -0.0), complex(np.nan, 1)], np.complex64)
    out = run_single("Conjugate", None, z)
    assert np.signbit(out.imag).tolist() == [True, False, True]
    assert np.signbit(out.real).tolist() == [False, True, False]
    assert np.isnan(out[2].real) and out[2].imag == -1


def test_complex_verifier_rules():
    f = Shape((3,), DType.F32)
    z = Shape((3,), DType.C64)
    assert any("(C1)" in m for m in verify_single("ComplexNormSq", None, [f],
                                                  Shape((3,), DType.F32)))
    assert any("(C1)" in m for m in verify_single("Conjugate", None,
                                                  [Shape((3,), DType.C128)]))
    assert any("(C2)" in m for m in verify_single("ComplexNormSqBackward", None,
                                                  [z, Shape((1,), DType.F32)]))
    assert any("(C1)" in m for m in verify_single("ComplexNormSqBackward", None, [z, z]))


def test_c64_and_c128_round_trip_through_the_text_form():
    for dt in (DType.C64, DType.C128):
        x = np.zeros((2, 3), dt.np)
        g = single_op_graph("Binary", get("Binary").attrs("Mul"), (x, x))
        text = print_graph(g)
        assert f"[2, 3] {dt.display}" in text
        assert parse(text) == g


def test_cast_to_and_from_complex():
    cast = get("Cast").attrs
    x = np.float32([1.5, -2.0, np.nan])
    z = run_single("Cast", cast(DType.C64), x)
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.imag, [0, 0, 0])
    np.testing.assert_array_equal(z.real, x)
    back = run_single("Cast", cast(DType.F32), np.complex64([3 - 4j, -1 + 2j]))
    np.testing.assert_array_equal(back, np.float32([3, -1]))     # the real part, as RLX
    wide = run_single("Cast", cast(DType.C128), np.complex64([0.1 + 0.2j]))
    assert wide.dtype == np.complex128 and wide[0] == np.complex64(0.1 + 0.2j)


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract),
                                   ("Mul", np.multiply), ("Div", np.divide)])
def test_complex_binary_arithmetic(op, fn):
    a, b = c64(2, 3), c64(3) + np.complex64(2)
    got = run_single("Binary", get("Binary").attrs(op), a, b)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, fn(a.astype(np.complex128), b), rtol=1e-6)


def test_complex_binary_rejects_real_only_ops():
    z = Shape((2,), DType.C64)
    assert any("(C3)" in m for m in verify_single("Binary", get("Binary").attrs("Max"),
                                                  [z, z]))


def test_compare_checks_both_parts_of_complex_values():
    want = np.complex64([1 + 1j, 2 - 1j])
    shape = Shape((2,), DType.C64)
    acc = ulp(1)
    assert compare(want.copy(), want.astype(np.complex128), want, shape, acc).status == "ok"
    off_imag = want.copy()
    off_imag[1] = 2 - 1.01j
    assert compare(off_imag, want.astype(np.complex128), want, shape, acc).status != "ok"
    nan_imag = want.copy()
    nan_imag[0] = complex(1, np.nan)
    v = compare(nan_imag, want.astype(np.complex128), want, shape, acc)
    assert v.status != "ok" and "NaN" in v.message


def test_a_backend_without_complex_cast_refuses_it_cleanly():
    """Claims are keyed on output dtypes: a Cast c64 → f32 must not reach a real kernel."""
    import rlx_ref
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.passes.legalize import LegalizeError

    x = np.complex64([3 - 4j])
    g = single_op_graph("Cast", get("Cast").attrs(DType.F32), (x,))
    assert any("Cast from c64" in m for m in get_backend("numba-cpu").unsupported_nodes(g))
    with pytest.raises(LegalizeError, match="Cast from c64"):
        rlx_ref.Session("numba-cpu").compile(g)
    np.testing.assert_array_equal(rlx_ref.Session("reference").compile(g).run({"x0": x})[0],
                                  [3.0])


def test_counter_rng_draws_complex_values_part_by_part():
    from rlx_ref.conformance.rng import CounterRNG

    z = CounterRNG(5, "c").standard_normal((2, 3), np.complex64)
    assert z.dtype == np.complex64 and z.shape == (2, 3)
    r = CounterRNG(5, "c")
    re, im = r.standard_normal((2, 3)), r.standard_normal((2, 3))
    np.testing.assert_array_equal(z, (re + 1j * im).astype(np.complex64))
    assert np.abs(z.imag).max() > 0
