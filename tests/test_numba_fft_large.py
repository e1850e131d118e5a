"""numba-cpu Fft on rows long enough for the tiled bit-reversed gather (2^12 points and
up) and for the row prange, both layouts and directions, against the oracle."""
import numpy as np
import pytest

import rlx_ref

numba = pytest.importorskip("numba")
from rlx_ref.backends.registry import get_backend  # noqa: E402

NB = get_backend("numba-cpu")


@pytest.mark.parametrize("n,rows", [(2 ** 12, 3), (2 ** 15, 4), (6000, 2)])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("c64", [False, True])
def test_long_rows_match_the_oracle(n, rows, inverse, c64):
    rng = np.random.default_rng(n + rows)
    if c64:
        x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n)))
        x, dtype = x.astype(np.complex64), "c64"
    else:
        x, dtype = rng.standard_normal((rows, 2 * n)).astype(np.float32), "f32"
    x[0, 5] = 1e3                    # one large bin: a misplaced point shows everywhere
    g = rlx_ref.Graph("f")
    g.set_outputs([g.op("Fft", [g.input("x", x.shape, dtype)], inverse=inverse,
                        norm="Ortho")])
    got, want = NB.compile(g).run({"x": x})[0], rlx_ref.interpret(g, {"x": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale)
