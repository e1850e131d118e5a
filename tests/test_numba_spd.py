"""Numba CPU lowering of the SPD-manifold kinds: every conformance case, and the
eigenvector sign rule and lower-triangle read that make the packed outputs unique."""
import numpy as np
import pytest

from rlx_ref.backends.registry import get_backend
from rlx_ref.interpret import interpret
from rlx_ref.ops._spd_checks import KINDS
from rlx_ref.ops._spd_samples import with_spectrum
from rlx_ref.ops.spd import SpdEpsAttrs
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")
NB = get_backend("numba-cpu")
RNG = np.random.default_rng(5)


# numba-cpu runs every default conformance case of these kinds in `rlx-ref conformance`
# (CI's first step), so the cases are not run again here
def test_every_kind_runs_natively():
    paths = NB.paths()
    assert all(paths.get(k) == "native" for k in KINDS)


def test_packed_eigenvectors_match_the_oracle_bit_for_sign():
    x = with_spectrum(RNG, [0.2, 1.0, 3.0, 7.0])
    x[0, 3] -= 2.0                        # the upper triangle is never read
    g = single_op_graph("ReEig", SpdEpsAttrs(0.5), [x])
    want = interpret(g, {"x0": x})[0]
    got = NB.compile(g).run({"x0": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    u = got[20:].reshape(4, 4)
    mag = np.abs(u)
    pivot = np.argmax(mag >= (1 - 1e-3) * mag.max(axis=1, keepdims=True), axis=1)
    assert np.all(u[np.arange(4), pivot] > 0)
    sym_low = np.tril(x) + np.tril(x, -1).T
    np.testing.assert_allclose(got, NB.compile(g).run({"x0": sym_low})[0], atol=0)
