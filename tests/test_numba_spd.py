"""Numba CPU lowering of the SPD-manifold kinds: every conformance case, and the
eigenvector sign rule and lower-triangle read that make the packed outputs unique."""
import numpy as np
import pytest

from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case
from rlx_ref.interpret import interpret
from rlx_ref.ops._spd_checks import KINDS
from rlx_ref.ops._spd_samples import with_spectrum
from rlx_ref.ops.spd import SpdEpsAttrs
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")
NB = get_backend("numba-cpu")
RNG = np.random.default_rng(5)


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case_passes(kind):
    ledger = load_ledger()
    cases = build_cases(kinds=[kind])
    assert cases
    for case in cases:
        res = run_case(NB, case, ledger)
        assert res.status == "ok", (case.id, case.tags, res.message)
    assert NB.paths().get(kind, "native") == "native"


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
