"""Session(device="reference"): compile, set_param, run, run_flat and input checking."""
import numpy as np
import pytest

from rlx_ref import Dyn, Graph, Session, SessionError


def _graph():
    g = Graph("affine")
    x = g.input("x", [Dyn(0), 3])
    w = g.param("w", [3])
    g.set_outputs([g.mul(x, w)])
    return g


def test_run_and_run_flat():
    cg = Session("reference").compile(_graph())
    cg.set_param("w", np.array([1, 2, 3], np.float32))
    x = np.ones((2, 3), np.float32)
    (out,) = cg.run({"x": x})
    np.testing.assert_array_equal(out, [[1, 2, 3], [1, 2, 3]])
    assert cg.input_names == ["x"] and cg.param_names == ["w"]


def test_run_flat_reshapes_static_inputs():
    g = Graph("flat")
    x = g.input("x", [2, 2])
    g.set_outputs([g.neg(x)])
    cg = Session().compile(g)
    (out,) = cg.run_flat({"x": np.arange(4, dtype=np.float32)})
    assert out.shape == (4,) and list(out) == [0, -1, -2, -3]
    with pytest.raises(SessionError, match="has 3 elements, expected 4"):
        cg.run_flat({"x": np.arange(3, dtype=np.float32)})


@pytest.mark.parametrize("feeds,match", [
    ({"y": np.ones((1, 3), np.float32)}, "unknown input 'y'; inputs of @affine: x"),
    ({}, "missing input 'x'"),
    ({"x": np.ones((2, 4), np.float32)}, r"has shape \[2, 4\], expected \[\?0, 3\]"),
    ({"x": np.ones((2, 3), np.float64)}, "dtype float64, expected f32"),
    ({"x": np.ones(3, np.float32)}, "rank 1"),
])
def test_input_errors_are_clear(feeds, match):
    cg = Session().compile(_graph())
    cg.set_param("w", np.ones(3, np.float32))
    with pytest.raises(SessionError, match=match):
        cg.run(feeds)


def test_param_errors():
    cg = Session().compile(_graph())
    with pytest.raises(SessionError, match="is not set"):
        cg.run({"x": np.ones((1, 3), np.float32)})
    with pytest.raises(SessionError, match="no param 'v'"):
        cg.set_param("v", np.ones(3, np.float32))
    with pytest.raises(SessionError, match=r"expected \[3\]"):
        cg.set_param("w", np.ones(4, np.float32))


def test_unknown_device():
    with pytest.raises(SessionError, match="unknown device 'tpu'"):
        Session("tpu")


def test_float64_mode_widens_floats():
    cg = Session(float64=True).compile(_graph())
    cg.set_param("w", np.ones(3, np.float32))
    (out,) = cg.run({"x": np.ones((2, 3), np.float32)})
    assert out.dtype == np.float64
