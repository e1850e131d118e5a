"""The kernel backends on the oracle's edge semantics: bit-exact agreement per backend.

Integer Div at the type's minimum, ArgMax/ArgMin with NaN at element 0 (RLX's scan),
Cast f64 -> f16 through f32 (RLX's two roundings) and Elu as exp(x) - 1.
"""
import numpy as np
import pytest

import rlx_ref
from rlx_ref import DType
from rlx_ref.backends.registry import get_backend
from rlx_ref.ops._elementwise_binary import BinaryAttrs
from rlx_ref.ops._reduction_arg import ArgAttrs
from rlx_ref.ops.elementwise import ActivationAttrs, CastAttrs
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")


def _backends():
    out = ["numba-cpu"]
    try:
        import pyopencl  # noqa: F401
        if get_backend("opencl").availability()[0]:
            out.append("opencl")
    except ImportError:
        pass
    return out


def _div_case(dt):
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    return (np.array([lo, lo, lo, hi, -7], dt), np.array([2, -1, 3, lo, 2], dt))


CASES = {
    "div-i8": ("Binary", BinaryAttrs("Div"), _div_case(np.int8)),
    "div-i32": ("Binary", BinaryAttrs("Div"), _div_case(np.int32)),
    "div-i64": ("Binary", BinaryAttrs("Div"), _div_case(np.int64)),
    "argmax-nan": ("ArgMax", ArgAttrs(1, False),
                   (np.array([[np.nan, 1, 5], [2, np.nan, 7], [3, 3, np.nan]], np.float32),)),
    "argmin-nan-cols": ("ArgMin", ArgAttrs(0, True),
                        (np.array([[np.nan, 1], [0, np.nan], [-1, -2]], np.float32),)),
    "cast-f64-f16": ("Cast", CastAttrs(DType.F16),
                     (np.array([1.0 + 2.0**-11 + 2.0**-40, 70000.0, 1e-8]),)),
    "elu-f64": ("Activation", ActivationAttrs("Elu"),
                (np.array([-1e-8, -0.03, -1.0, 2.0]),)),
}


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", list(CASES))
def test_kernels_match_the_oracle_bit_for_bit(backend, name):
    kind, attrs, arrays = CASES[name]
    g = single_op_graph(kind, attrs, arrays)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    want = rlx_ref.interpret(g, feeds)[0]
    got = rlx_ref.Session(device=backend).compile(g).run(feeds)[0]
    assert got.dtype == want.dtype
    if name == "elu-f64":        # libm vs numpy exp may differ by an ulp before the - 1
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-16)
    else:
        np.testing.assert_array_equal(got, want)
