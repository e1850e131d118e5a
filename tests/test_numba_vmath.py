"""The vectorizable maths of the Numba CPU kernels (``_vmath``): accuracy against libm and
the IEEE edge cases (signed zeros, infinities, NaN, subnormals)."""
import numpy as np
import pytest

pytest.importorskip("numba")
from rlx_ref.backends.numba_cpu._vmath import VMATH  # noqa: E402
from rlx_ref.backends.numba_cpu.kernels import compile_kernel  # noqa: E402


def _maps(*names):
    """A kernel module with ``<name>_map(out, x)`` looping the _vmath function ``_<name>``
    and ``libm_<name>_map`` calling ``math.<name>``."""
    src = VMATH
    for n in names:
        src += f"""

@njit(cache=True, error_model="numpy")
def {n}_map(out, x):
    for i in range(x.size):
        out[i] = _v{n}(x[i])


@njit(cache=True, error_model="numpy")
def libm_{n}_map(out, x):
    for i in range(x.size):
        out[i] = math.{n}(x[i])
"""
    return compile_kernel(f"{names[0]}_map", src)


def _ulps(got, want):
    return np.abs(got - want) / np.spacing(np.maximum(np.abs(want), 5e-324))


def test_vectorized_log_is_within_two_ulp_over_the_whole_range():
    k = _maps("log", "log1p")
    r = np.random.default_rng(0)
    x = np.concatenate([np.exp(r.uniform(-744, 709, 300_000)), r.uniform(0.5, 2, 200_000),
                        np.linspace(0.9, 1.1, 100_001),
                        [5e-324, 1e-310, 2.2250738585072014e-308, 1.0, 2.0,
                         np.nextafter(1, 0), 1.7976931348623157e308]])
    got, want = np.empty_like(x), np.empty_like(x)
    k.get("log_map")(got, x)
    k.get("libm_log_map")(want, x)
    assert _ulps(got, want).max() <= 2.0
    edges = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan])
    out = np.empty_like(edges)
    k.get("log_map")(out, edges)
    assert out[:2].tolist() == [-np.inf, -np.inf] and out[3] == np.inf
    assert np.isnan(out[[2, 4, 5]]).all()


def test_vectorized_log1p_keeps_tiny_arguments_and_the_edges():
    k = _maps("log1p")
    r = np.random.default_rng(1)
    y = np.concatenate([np.exp(r.uniform(-744, 0, 300_000)), -np.exp(r.uniform(-744, -1e-9,
                                                                               100_000)),
                        r.uniform(-0.9, 3, 200_000), np.exp(r.uniform(0, 709, 100_000))])
    got, want = np.empty_like(y), np.empty_like(y)
    k.get("log1p_map")(got, y)
    k.get("libm_log1p_map")(want, y)
    assert _ulps(got, want).max() <= 2.0
    edges = np.array([0.0, -0.0, 1e-300, -1.0, -2.0, np.inf, np.nan])
    out = np.empty_like(edges)
    k.get("log1p_map")(out, edges)
    assert out[0] == 0 and not np.signbit(out[0]) and np.signbit(out[1]) and out[2] == 1e-300
    assert out[3] == -np.inf and out[5] == np.inf and np.isnan(out[[4, 6]]).all()


def test_vectorized_erf_is_within_two_ulp_of_libm_and_keeps_the_edges():
    k = _maps("erf")
    edges = [0.0, -0.0, 5e-324, -1e-300, 1e-30, 1.0, -1.0, np.nextafter(1.0, 0), 6.0,
             -6.0, np.nextafter(6.0, 0), 40.0, np.inf, -np.inf, np.nan]
    x = np.concatenate([np.linspace(-7, 7, 400_001),
                        np.random.default_rng(0).standard_normal(100_000) * 2, edges])
    got, want = np.empty_like(x), np.empty_like(x)
    k.get("erf_map")(got, x)
    k.get("libm_erf_map")(want, x)
    fin = np.isfinite(x)
    ulps = np.abs(got[fin] - want[fin]) / np.spacing(np.maximum(np.abs(want[fin]), 1e-300))
    assert ulps.max() <= 2.0
    assert got[-3:-1].tolist() == [1.0, -1.0] and np.isnan(got[-1])
    assert np.signbit(got[x.size - len(edges) + 1]) and got[x.size - len(edges)] == 0.0
    assert np.all(np.abs(got[fin]) <= 1.0)
