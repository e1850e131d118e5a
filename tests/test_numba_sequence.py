"""numba-cpu's sequence kernels against the oracle: every conformance case, and shapes with
more lanes than threads, odd widths, every payload flag, in f32 and f64."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.ir.dtype import DType
from rlx_ref.ops._sequence_samples import recurrent_inputs
from rlx_ref.ops.sequence import (
    GatedDeltaNetAttrs,
    Mamba2Attrs,
    RecurrentAttrs,
    RnnAttrs,
    SelectiveScanAttrs,
)

pytest.importorskip("numba")
from rlx_ref.backends.registry import get_backend  # noqa: E402

NB = get_backend("numba-cpu")
KINDS = ["SelectiveScan", "Mamba2", "GatedDeltaNet", "Lstm", "Gru", "Rnn"]


# numba-cpu runs every default conformance case of these kinds in `rlx-ref conformance`
# (CI's first step), so the cases are not run again here
def test_every_kind_runs_natively():
    paths = NB.paths()
    assert all(paths.get(k) == "native" for k in KINDS)


def _run(kind, arrays, attrs, dt):
    g = rlx_ref.Graph(kind.lower())
    arrays = [np.asarray(a, dt) for a in arrays]
    ids = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
    g.set_outputs([g.op(kind, ids, attrs)])
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    got = NB.compile(g).run(feeds)[0]
    want = rlx_ref.interpret(g, feeds, float64=True)[0]
    tol = 1e-5 if dt == np.float32 else 1e-12
    assert got.dtype == np.dtype(dt) and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dt", DTYPES)
def test_selective_scan_many_lanes(dt):
    rng = np.random.default_rng(1)
    b, s, h, n = 3, 7, 5, 3
    ins = (rng.standard_normal((b, s, h)), rng.uniform(0.05, 1, (b, s, h)),
           -rng.uniform(0.2, 2, (h, n)), rng.standard_normal((b, s, n)),
           rng.standard_normal((b, s, n)))
    _run("SelectiveScan", ins, SelectiveScanAttrs(n), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_mamba2_many_lanes(dt):
    rng = np.random.default_rng(2)
    b, s, h, p, n = 2, 6, 3, 5, 4
    ins = (rng.standard_normal((b, s, h, p)), rng.uniform(0.05, 1, (b, s, h)),
           -rng.uniform(0.2, 2, h), rng.standard_normal((b, s, h, n)),
           rng.standard_normal((b, s, h, n)))
    _run("Mamba2", ins, Mamba2Attrs(p, n), dt)


@pytest.mark.parametrize("carry,per_channel", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_gated_delta_net_flags(carry, per_channel):
    rng = np.random.default_rng(3)
    b, s, h, n = 2, 5, 3, 4
    q, k, v = (rng.standard_normal((b, s, h, n)) * 0.5 for _ in range(3))
    g = -rng.uniform(0, 1, (b, s, h, n) if per_channel else (b, s, h))
    ins = (q, k, v, g, rng.uniform(0, 1, (b, s, h)))
    ins += (rng.standard_normal((b, h, n, n)),) if carry else ()
    for dt in DTYPES:
        _run("GatedDeltaNet", ins, GatedDeltaNetAttrs(n, carry, per_channel), dt)


@pytest.mark.parametrize("kind", ["Lstm", "Gru", "Rnn"])
@pytest.mark.parametrize("flags", [(5, 1, False, False), (3, 3, True, True), (4, 2, False, True)])
def test_recurrent_layers_directions_carry(kind, flags):
    rng = np.random.default_rng(4)
    variants = [RnnAttrs(*flags, False), RnnAttrs(*flags, True)] if kind == "Rnn" \
        else [RecurrentAttrs(*flags)]
    for a in variants:
        ins = recurrent_inputs(rng, kind, 3, 6, 5, a, flat=True)
        for dt in DTYPES:
            _run(kind, ins, a, dt)
