"""Elementwise kernels with strided broadcast reads (or suffix reads of whole rows) run over
rows of the output's last axis: every broadcast pattern, in the serial and the parallel
variant, standalone and fused, matches numpy."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend

NB = get_backend("numba-cpu")

SHAPES = [
    ((8, 4, 16, 16), (8, 4, 16, 1)),      # keep-dim reduction broadcast back
    ((8, 16, 32), (8, 1, 32)),            # a middle size-1 axis
    ((3, 1, 5), (1, 4, 1)),               # both operands broadcast
    ((6, 7, 1), (6, 1, 1)),               # last axis of one element
    ((5, 1), (1, 3)),
    ((0, 4, 3), (0, 4, 1)),               # empty
    ((2, 0, 3), (2, 1, 3)),
    ((8, 16, 32), (16, 32)),              # suffix reads by rows (last axis >= 8)
    ((4, 8, 16), (1, 1, 16)),
    ((6, 4), (4,)),                       # a short last axis: the flat loop
    ((5, 8), (1,)),                       # a scalar operand
]


def _run(sa, sb, op):
    g = rlx_ref.Graph("rows")
    a, b = g.input("a", list(sa)), g.input("b", list(sb))
    g.set_outputs([getattr(g, op)(a, b)])
    rng = np.random.default_rng(0)
    xa = rng.standard_normal(sa).astype(np.float32)
    xb = rng.standard_normal(sb).astype(np.float32)
    return NB.compile(g).run({"a": xa, "b": xb})[0], xa, xb


@pytest.mark.parametrize("sa,sb", SHAPES)
@pytest.mark.parametrize("op,ref", [("sub", np.subtract), ("mul", np.multiply)])
def test_strided_reads_match_numpy(sa, sb, op, ref):
    out, xa, xb = _run(sa, sb, op)
    np.testing.assert_array_equal(out, ref(xa, xb))
    out, xa, xb = _run(sb, sa, op)             # the broadcast operand first
    np.testing.assert_array_equal(out, ref(xa, xb))


def test_parallel_rows_match_numpy():
    """Past the parallel threshold (par_elements) the prange variant runs the rows."""
    out, xa, xb = _run((8, 4, 128, 64), (8, 4, 128, 1), "sub")
    np.testing.assert_array_equal(out, xa - xb)
    out, xa, xb = _run((4, 1, 64), (4, 256, 1), "mul")
    np.testing.assert_array_equal(out, xa * xb)


def test_fused_region_with_suffix_and_scalar_operands():
    """A fused chain reads a [16] bias by rows and a [] scale once per row."""
    g = rlx_ref.Graph("region")
    x, b, c = g.input("x", [64, 16]), g.input("b", [16]), g.input("c", [])
    g.set_outputs([g.exp(g.mul(g.add(x, b), c))])
    rng = np.random.default_rng(1)
    f = {"x": rng.standard_normal((64, 16)).astype(np.float32),
         "b": rng.standard_normal(16).astype(np.float32), "c": np.float32(0.5)}
    exe = NB.compile(g)
    ew = [src for name, src in exe.kernel_sources().items() if name.startswith("ew_")]
    assert len(ew) == 1 and "for t in range(w)" in ew[0]          # one fused row kernel
    np.testing.assert_allclose(exe.run(f)[0], rlx_ref.interpret(g, f)[0], rtol=2e-6)
