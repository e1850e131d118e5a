"""numba-cpu Sort, ArgSort, RngNormal, RngUniform and Sample: exact against the oracle,
on the conformance cases and on shapes large enough for the prange kernels."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.ir.shape import Shape

numba = pytest.importorskip("numba")
from rlx_ref.backends.numba_cpu.lowering import TABLE  # noqa: E402
from rlx_ref.backends.registry import get_backend  # noqa: E402

NB = get_backend("numba-cpu")
KINDS = ["Sort", "ArgSort", "RngNormal", "RngUniform", "Sample"]


def test_the_kinds_are_native():
    paths = TABLE.paths()
    assert all(paths[k] == "native" for k in KINDS)


# numba-cpu runs every default conformance case of these kinds in `rlx-ref conformance`
# (CI's first step), so the cases are not run again here


def _same(g, feeds):
    got, want = NB.compile(g).run(feeds), rlx_ref.interpret(g, feeds)
    for x, y in zip(got, want):
        assert x.dtype == y.dtype and x.shape == y.shape
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8))     # bit for bit
    return got[0]


@pytest.mark.parametrize("kind", ["Sort", "ArgSort"])
@pytest.mark.parametrize("axis,descending", [(0, True), (1, False), (2, True)])
def test_sort_large_lines_with_ties_and_nan(kind, axis, descending):
    x = np.random.default_rng(3).integers(-20, 20, (6, 150, 7)).astype(np.float32)
    x[0, ::13, 1] = np.nan
    x[2, 5::17, :] = -0.0
    g = rlx_ref.Graph("s")
    g.set_outputs([g.op(kind, [g.input("x", x.shape)], axis=axis, descending=descending)])
    _same(g, {"x": x})


@pytest.mark.parametrize("kind,fields", [
    ("RngNormal", dict(mean=0.25, scale=3.0, key=12345)),
    ("RngUniform", dict(low=-2.0, high=5.0, key=2**63 + 7)),
])
def test_fills_of_odd_sizes(kind, fields):
    for n in (1, 2, 3, 5, 4099):
        g = rlx_ref.Graph("r")
        g.set_outputs([g.op(kind, [], shape=Shape([n], "f32"), **fields)])
        _same(g, {})


@pytest.mark.parametrize("k,p,t", [(0, 1.0, 1.0), (50, 0.9, 0.8), (1, 1.0, 1.0),
                                   (0, 0.5, 0.0), (3000, 0.99, 2.0)])
def test_sample_batches(k, p, t):
    x = (np.random.default_rng(4).standard_normal((37, 2001)) * 3).astype(np.float32)
    g = rlx_ref.Graph("smp")
    g.set_outputs([g.op("Sample", [g.input("x", x.shape)], shape=Shape([37], "f32"),
                        top_k=k, top_p=p, temperature=t, seed=777)])
    _same(g, {"x": x})


def test_sample_nan_with_top_k_is_an_error_on_both():
    x = np.array([[0.0, np.nan, 1.0]], np.float32)
    g = rlx_ref.Graph("smp")
    g.set_outputs([g.op("Sample", [g.input("x", x.shape)], shape=Shape([1], "f32"),
                        top_k=2, top_p=1.0, temperature=1.0, seed=1)])
    with pytest.raises(Exception, match="NaN"):
        NB.compile(g).run({"x": x})
    with pytest.raises(Exception, match="NaN"):
        rlx_ref.interpret(g, {"x": x})
