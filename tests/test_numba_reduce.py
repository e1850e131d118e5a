"""Numba CPU lowering of the reduction and normalization families: every conformance case
of their kinds, plus the paths the cases do not reach (parallel kernels, the transposing
Reduce, large-k TopK, integer wrap-around) and run-time errors that name the node."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case

numba = pytest.importorskip("numba")
NB = get_backend("numba-cpu")
KINDS = ("Reduce", "Softmax", "Cumsum", "CumProd", "CumMax", "ArgMax", "ArgMin", "TopK",
         "LayerNorm", "RmsNorm", "GroupNorm", "LayerNorm2d", "BatchNormInference")


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case_passes(kind):
    ledger = load_ledger()
    cases = filter_cases(build_cases(kinds=[kind]), kind, None, None)
    assert cases
    bad = [(c.id, c.dtype, c.tags, r.status, r.message)
           for c in cases for r in [run_case(NB, c, ledger)] if r.status not in ("ok", "xfail")]
    assert not bad, bad[:3]


def _run(g, feeds):
    exe = NB.compile(g)
    return exe.run(feeds), rlx_ref.interpret(g, feeds)


def _close(got, want, rtol=2e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=rtol, equal_nan=True)


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("axes,keep", [((0, 2), False), ((1, 3), True), ((0, 1, 3), False),
                                       ((2,), True), ((0, 1, 2, 3), False)])
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod"])
def test_reduce_axis_sets(op, axes, keep):
    x = (1 + 0.1 * RNG.standard_normal((3, 4, 5, 2))).astype(np.float32)
    x[1, 2, 3, 1] = np.nan if op in ("Max", "Min") else x[1, 2, 3, 1]
    g = rlx_ref.Graph("r")
    g.set_outputs([g.reduce(g.input("x", list(x.shape)), op, list(axes), keep)])
    (got,), (want,) = _run(g, {"x": x})
    assert got.shape == want.shape
    _close(got, want)


@pytest.mark.parametrize("dt", ["i8", "u8", "i16", "u32", "i64"])
def test_integer_sums_and_products_wrap_like_numpy(dt):
    info = np.iinfo(np.dtype({"i8": np.int8, "u8": np.uint8, "i16": np.int16,
                              "u32": np.uint32, "i64": np.int64}[dt]))
    x = np.array([[info.max, info.max, 3], [info.min, 1, info.min]], info.dtype)
    g = rlx_ref.Graph("w")
    xi = g.input("x", [2, 3], dt)
    g.set_outputs([g.reduce(xi, op, [1]) for op in ("Sum", "Prod", "Max", "Min")] +
                  [g.cumsum(xi, axis=1, exclusive=False), g.cum_max(xi, axis=0, exclusive=True)])
    got, want = _run(g, {"x": x})
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


# Sizes past PARALLEL_MIN, so the prange twins (and the chunked long-row sum) run.
PAR = [
    ("sum rows", lambda g, x: g.reduce(x, "Sum", [1]), (64, 600)),
    ("sum cols", lambda g, x: g.reduce(x, "Sum", [0]), (600, 64)),
    ("max chunks", lambda g, x: g.reduce(x, "Max", [0]), (300_000,)),
    ("softmax rows", lambda g, x: g.softmax(x, -1), (64, 600)),
    ("softmax cols", lambda g, x: g.softmax(x, 0), (600, 64)),
    ("cumsum rows", lambda g, x: g.cumsum(x, axis=1, exclusive=True), (64, 600)),
    ("cumprod cols", lambda g, x: g.cum_prod(x, axis=0, exclusive=False), (600, 64)),
    ("argmin cols", lambda g, x: g.arg_min(x, axis=0, keep_dim=True), (600, 64)),
    ("topk", lambda g, x: g.top_k(x, k=5, shape=rlx_ref.Shape([64, 5], "f32")), (64, 600)),
]


@pytest.mark.parametrize("name,build,shape", PAR, ids=[p[0] for p in PAR])
def test_parallel_kernels_match_the_oracle(name, build, shape):
    x = (1 + 1e-3 * RNG.standard_normal(shape)).astype(np.float32)
    g = rlx_ref.Graph("p")
    g.set_outputs([build(g, g.input("x", list(shape)))])
    (got,), (want,) = _run(g, {"x": x})
    _close(got, want, rtol=1e-5)


@pytest.mark.parametrize("kind,shapes,c,attrs", [
    ("LayerNorm", [(4, 70, 600), (2, 3, 600)], 600, {"axis": -1, "eps": 1e-5}),
    ("RmsNorm", [(70, 3, 600), (2, 3, 5)], 3, {"axis": 1, "eps": 1e-5}),
    ("LayerNorm2d", [(2, 8, 50, 50), (1, 8, 2, 3)], 8, {"eps": 1e-5}),
    ("GroupNorm", [(2, 8, 50, 50), (1, 8, 2, 3)], 8, {"num_groups": 4, "eps": 1e-5}),
    ("BatchNormInference", [(300, 128), (3, 128)], 128, {"eps": 1e-3}),
])
def test_norms_serial_and_parallel(kind, shapes, c, attrs):
    names = "gbmv" if kind == "BatchNormInference" else "gb"
    for dims in shapes:
        g = rlx_ref.Graph("n")
        xs = [g.input("x", list(dims))] + [g.input(n, [c]) for n in names]
        g.set_outputs([g.op(kind, xs, **attrs)])
        feeds = {"x": RNG.standard_normal(dims).astype(np.float32) * 3 + 1}
        feeds.update({n: RNG.standard_normal(c).astype(np.float32) for n in names})
        if "v" in feeds:
            feeds["v"] = np.abs(feeds["v"]) + 0.5
        (got,), (want,) = _run(g, feeds)
        _close(got, want, rtol=2e-5)


def test_topk_large_k_sorts_stably_with_nan_last():
    x = RNG.integers(-3, 4, (3, 200)).astype(np.float32)
    x[0, [5, 50, 150]] = np.nan
    x[1, [7, 9]] = -np.inf
    x[2, ::7] = -0.0
    g = rlx_ref.Graph("t")
    g.set_outputs([g.top_k(g.input("x", [3, 200]), k=120, shape=rlx_ref.Shape([3, 120],
                                                                            "i64"))])
    (got,), (want,) = _run(g, {"x": x})
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_empty_and_zero_d_shapes():
    g = rlx_ref.Graph("e")
    z = g.input("z", [0, 4])
    s = g.input("s", [])
    g.set_outputs([g.reduce(z, "Max", [0]), g.reduce(z, "Mean", [0, 1]), g.softmax(z, 0),
                   g.cumsum(z, axis=0, exclusive=True), g.reduce(s, "Sum", [])])
    got, want = _run(g, {"z": np.zeros((0, 4), np.float32), "s": np.float32(-2.5)})
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_argmax_over_an_empty_axis_names_the_node():
    g = rlx_ref.Graph("am")
    g.set_outputs([g.arg_max(g.input("x", [rlx_ref.Dyn(0), 3]), axis=0, keep_dim=False)])
    exe = NB.compile(g)
    with pytest.raises(Exception, match=r"at %1 in @am: ArgMax over an empty axis"):
        exe.run({"x": np.zeros((0, 3), np.float32)})


def test_a_short_feature_vector_names_the_node():
    g = rlx_ref.Graph("ln")
    x = g.input("x", [2, 4])
    gamma = g.input("g", [rlx_ref.Dyn(0)])
    g.set_outputs([g.layer_norm(x, gamma, gamma, axis=-1, eps=1e-5)])
    exe = NB.compile(g)
    with pytest.raises(Exception, match=r"at %2 in @ln: LayerNorm operand `gamma` has 3 "):
        exe.run({"x": np.ones((2, 4), np.float32), "g": np.ones(3, np.float32)})


def test_f32_exp_is_within_about_one_ulp_and_flushes_below_the_normal_range():
    from rlx_ref.backends.numba_cpu._vmath import VMATH
    from rlx_ref.backends.numba_cpu.kernels import compile_kernel

    k = compile_kernel("vexpf_map", VMATH + '''
@njit(cache=True, error_model="numpy", fastmath={"contract"})
def vexpf_map(out, x):
    for i in range(x.size):
        out[i] = _vexpf(x[i])


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def vexpf_le0_map(out, x):
    for i in range(x.size):
        out[i] = _vexpf_le0(x[i])
''')
    edges = np.float32([-87.33654, -87.33655, 88.72283, 88.72284, 0, -0.0, 1e-30])
    payload_nans = np.uint32([0x7FC00155, 0xFFC001FF, 0x7F800001]).view(np.float32)
    x = np.concatenate([np.linspace(-104, 89, 200_001, dtype=np.float32), edges,
                        np.float32([np.inf, -np.inf, np.nan]), payload_nans])
    got = np.empty_like(x)
    k.fn(got, x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp(x.astype(np.float64))
        want32 = want.astype(np.float32)
    normal = np.isfinite(want32) & (want32 >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal] - want[normal]) / np.spacing(want32[normal])
    assert ulps.max() < 1.1
    low = np.isfinite(x) & ~normal & (want < 1)
    assert low.any() and np.all(got[low] == 0)           # below 2^-126: flushed to +0
    assert np.array_equal(np.isinf(got), np.isinf(want32))
    assert np.array_equal(np.isnan(got), np.isnan(x))
    le0 = np.empty_like(x)
    k.get("vexpf_le0_map")(le0, x)                       # the x <= 0 variant agrees
    nonpos = x <= 0
    assert np.array_equal(le0[nonpos], got[nonpos]) and np.all(le0[np.isnan(x)] == 0)

