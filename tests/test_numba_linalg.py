"""Numba CPU lowering of linalg, attention and conv: every conformance case of those kinds,
plus the paths tiny cases miss (BLAS, prange, tiles), edge cases and run-time errors."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case
from rlx_ref.ops.opdef import get

numba = pytest.importorskip("numba")
from rlx_ref.backends.registry import get_backend

NB = get_backend("numba-cpu")
KINDS = ["MatMul", "DotGeneral", "DenseSolve", "BatchedDenseSolve", "Attention", "Rope",
         "Conv", "ConvTranspose2d", "Pool", "Im2Col"]
RNG = np.random.default_rng(7)


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case(kind):
    ledger = load_ledger()
    for case in filter_cases(build_cases(kinds=[kind]), kind, None, None):
        res = run_case(NB, case, ledger)
        assert res.status == "ok", (case.id, case.tags, res.message)


def _check(g, feeds, rtol=1e-12, atol=1e-12):
    """The graph on numba-cpu against the oracle (float64 inputs: both nearly exact)."""
    got = NB.compile(g).run(feeds)
    want = rlx_ref.interpret(g, feeds)
    for x, y in zip(got, want):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
    return got


def _graph(op, shapes, dtype="f64", **attrs):
    g = rlx_ref.Graph(op.lower())
    ins = [g.input(f"x{i}", list(s), dtype) for i, s in enumerate(shapes)]
    g.set_outputs([g.op(op, ins, get(op).make_attrs(**attrs) if attrs else None)])
    return g


def _feeds(shapes, dtype=np.float64):
    return {f"x{i}": RNG.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


# ── linalg ────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_matmul_blas_path_with_broadcast_batch(dt):
    shapes = [(2, 1, 40, 30), (3, 30, 50)]            # M·N·K above the BLAS threshold
    rtol = 1e-5 if dt == np.float32 else 1e-12
    _check(_graph("MatMul", shapes, "f32" if dt == np.float32 else "f64"), _feeds(shapes, dt),
           rtol=rtol, atol=rtol)


def test_matmul_row_blocks_in_prange():
    shapes = [(3, 200, 64), (64, 120)]                 # 4.6M multiply-adds, 75-row blocks
    _check(_graph("MatMul", shapes), _feeds(shapes))


def test_integer_matmul_wraps_in_the_parallel_loop():
    a = RNG.integers(-2**31, 2**31, (70, 60), dtype=np.int64).astype(np.int32)
    b = RNG.integers(-2**31, 2**31, (60, 80), dtype=np.int64).astype(np.int32)
    g = _graph("MatMul", [a.shape, b.shape], "i32")
    got = NB.compile(g).run({"x0": a, "x1": b})[0]
    np.testing.assert_array_equal(got, a @ b)          # numpy wraps too


def test_matmul_empty_k_gives_zeros():
    g = _graph("MatMul", [(2, 3, 0), (0, 4)])
    out = NB.compile(g).run({"x0": np.zeros((2, 3, 0)), "x1": np.zeros((0, 4))})[0]
    assert out.shape == (2, 3, 4) and not out.any()


@pytest.mark.parametrize("op, attrs", [("MatMul", {}), ("DotGeneral", dict(
    lhs_contracting=(1,), rhs_contracting=(0,), lhs_batch=(), rhs_batch=()))])
def test_products_run_the_kernel_their_plan_chose(monkeypatch, op, attrs):
    """The product kernel is chosen at lowering, under the plan's thresholds: a run never
    chooses again (at run time the defaults are in force, so a small product planned as
    BLAS row blocks under lowered thresholds would run the serial loop)."""
    from rlx_ref.backends import variants
    from rlx_ref.backends.numba_cpu import lower_linalg
    from rlx_ref.runtime.options import CompileOptions

    shapes = [(6, 5), (5, 4)]
    g = _graph(op, shapes, **attrs)
    exe = NB.compile(g, CompileOptions(thresholds=variants.lowered("numba-cpu")))
    monkeypatch.setattr(lower_linalg, "mm_call", None)       # a run-time choice would fail
    feeds = _feeds(shapes)
    got = exe.run(feeds)[0]
    np.testing.assert_allclose(got, feeds["x0"] @ feeds["x1"], rtol=1e-12)
    assert exe.variants_run() == ["numba-cpu:matmul.blas.par"]

def test_dot_general_permuted_batch_at_blas_size():
    shapes = [(4, 33, 5, 17), (17, 29, 5, 4)]
    _check(_graph("DotGeneral", shapes, lhs_contracting=(3,), rhs_contracting=(0,),
                  lhs_batch=(0, 2), rhs_batch=(3, 2)), _feeds(shapes))


def test_singular_solve_is_an_error_naming_the_node():
    g = _graph("BatchedDenseSolve", [(3, 2, 2), (3, 2)])
    a = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]], np.eye(2)])
    with pytest.raises(Exception, match=r"at %2 in @batcheddensesolve: BatchedDenseSolve: "
                                        r"A\[1\] \(2x2\) is singular"):
        NB.compile(g).run({"x0": a, "x1": np.ones((3, 2))})


@pytest.mark.parametrize("dt, name", [(np.float32, "f32"), (np.float64, "f64")])
@pytest.mark.parametrize("where", [(0, 0), (1, 0), (1, 1), (0, 1)])
def test_nan_in_a_is_singular_on_oracle_and_numba(dt, name, where):
    """LAPACK builds disagree on NaN pivots; the spec makes any NaN in A singular."""
    from rlx_ref import interpret

    g = _graph("DenseSolve", [(2, 2), (2,)], name)
    a = np.array([[3.0, 1.0], [1.0, 2.0]], dt)
    a[where] = np.nan
    feeds = {"x0": a, "x1": np.ones(2, dt)}
    for run in (lambda: NB.compile(g).run(feeds), lambda: interpret(g, feeds),
                lambda: interpret(g, feeds, float64=True)):
        with pytest.raises(Exception, match=r"DenseSolve: A \(2x2\) is singular: it holds NaN"):
            run()


@pytest.mark.parametrize("dt, name, tol", [(np.float64, "f64", 1e-10), (np.float32, "f32", 1e-3)])
def test_solve_matches_lapack_on_a_larger_system(dt, name, tol):
    a = (RNG.standard_normal((4, 60, 60)) + 8 * np.eye(60)).astype(dt)
    b = RNG.standard_normal((4, 60, 3)).astype(dt)
    g = _graph("BatchedDenseSolve", [a.shape, b.shape], name)
    got = NB.compile(g).run({"x0": a, "x1": b})[0]
    np.testing.assert_allclose(got, np.linalg.solve(a.astype(np.float64), b), rtol=tol,
                               atol=tol)


def test_solve_with_non_finite_entries_matches_numpy():
    g = _graph("DenseSolve", [(3, 3), (3,)])
    a = np.array([[4.0, 1, 0], [1, 3, 1], [0, 1, 2]])
    b = np.array([1.0, np.nan, 2.0])
    out = NB.compile(g).run({"x0": a, "x1": b})[0]
    assert np.array_equal(np.isnan(out), np.isnan(np.linalg.solve(a, b)))
    a[0, 0] = np.inf                                    # Numba's solve would refuse this
    out = NB.compile(g).run({"x0": a, "x1": np.ones(3)})[0]
    assert out.shape == (3,)


# ── attention and rope ────────────────────────────────────────────────────

def _attention(q, k, v, extra=(), dtype="f64", **attrs):
    shapes = [q, k, v] + list(extra)
    return _graph("Attention", shapes, dtype, **attrs), _feeds(shapes)


@pytest.mark.parametrize("mask", ["None", "Causal", ("SlidingWindow", 9)])
def test_attention_tiles_and_threads(mask):
    # S_q = 150 is not a multiple of the 64-row tile; 4.6M scored products run in prange
    g, feeds = _attention((2, 150, 6, 16), (2, 170, 2, 16), (2, 170, 2, 24), num_heads=6,
                          head_dim=16, v_head_dim=24, mask_kind=mask)
    _check(g, feeds)


def test_attention_long_keys_shrink_the_tile():
    g, feeds = _attention((1, 1, 5, 8), (1, 1, 3000, 8), (1, 1, 3000, 8), num_heads=1,
                          head_dim=8, mask_kind="Causal")
    _check(g, feeds)


@pytest.mark.parametrize("mask", ["Custom", "Bias"])
def test_attention_tensor_masks_with_softcap(mask):
    extra = [(2, 40)] if mask == "Custom" else [(2, 4, 30, 40)]
    g, feeds = _attention((2, 30, 32), (2, 40, 32), (2, 40, 32), extra, num_heads=4,
                          head_dim=8, mask_kind=mask, attn_logit_softcap=5.0)
    if mask == "Custom":
        feeds["x3"] = (feeds["x3"] > 0).astype(np.float64)
        feeds["x3"][1] = 0                              # batch 1: every key hidden
    _check(g, feeds)


def test_attention_rows_that_see_no_key_average_every_value():
    g, feeds = _attention((1, 12, 4), (1, 3, 4), (1, 3, 4), num_heads=1, head_dim=4,
                          mask_kind=("SlidingWindow", 1))
    out = _check(g, feeds)[0]
    np.testing.assert_allclose(out[0, -1], feeds["x2"][0].mean(0), rtol=1e-12)


def test_attention_keeps_nan_from_hidden_infinite_values():
    g, feeds = _attention((1, 6, 4), (1, 6, 4), (1, 6, 4), num_heads=1, head_dim=4,
                          mask_kind="Causal")
    feeds["x2"][0, 5, 0] = np.inf                       # hidden from rows 0-4: 0·inf = NaN
    out = _check(g, feeds)[0]
    assert np.isnan(out[0, :5, 0]).all() and out[0, 5, 0] == np.inf


def test_attention_hidden_keys_weigh_in_when_visible_scores_are_below_the_fill():
    # the tile's key range starts at key 5; keys 0-4 are hidden from every row, yet they win
    # over visible keys whose scores (-1.2e9) are below the -1e9 fill
    g, feeds = _attention((1, 4, 2), (1, 10, 2), (1, 10, 2), num_heads=1, head_dim=2,
                          mask_kind=("SlidingWindow", 1), score_scale=1.0)
    feeds["x0"][:] = [3e4, 0]
    feeds["x1"][:] = [-4e4, 0]
    out = _check(g, feeds)[0]
    np.testing.assert_allclose(out[0, 0], feeds["x2"][0, [0, 1, 2, 3, 4, 7, 8, 9]].mean(0))


def test_attention_f32_is_computed_in_f64():
    g, feeds = _attention((1, 64, 64), (1, 64, 64), (1, 64, 64), dtype="f32", num_heads=2,
                          head_dim=32)
    feeds = {k: v.astype(np.float32) * 3 for k, v in feeds.items()}
    got = NB.compile(g).run(feeds)[0]
    g64, _ = _attention((1, 64, 64), (1, 64, 64), (1, 64, 64), num_heads=2, head_dim=32)
    want = rlx_ref.interpret(g64, {k: v.astype(np.float64) for k, v in feeds.items()})[0]
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=2e-7 * np.abs(want).max())


@pytest.mark.parametrize("dt, name", [(np.float32, "f32"), (np.float16, "f16")])
def test_attention_f32_products_stay_within_the_contract(dt, name):
    # S_k·D = 8192: scores and the V sum run as f32 BLAS products (softmax in f64)
    shapes = [(1, 4, 96, 64), (1, 2, 128, 64), (1, 2, 128, 64)]
    g = _graph("Attention", shapes, name, num_heads=4, head_dim=64, mask_kind="Causal")
    feeds = {k: (v * 2).astype(dt) for k, v in _feeds(shapes).items()}
    got = NB.compile(g).run(feeds)[0].astype(np.float64)
    g64 = _graph("Attention", shapes, num_heads=4, head_dim=64, mask_kind="Causal")
    f64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    want = rlx_ref.interpret(g64, f64)[0]
    scale = rlx_ref.interpret(g64, {**f64, "x2": np.abs(f64["x2"])})[0]   # Σ p·|v|
    ulp = np.spacing(np.abs(want).astype(dt)).astype(np.float64)
    budget = ulp + 2 * np.finfo(np.float32).eps * 128 * 64 * scale
    assert (np.abs(got - want) <= budget).all()
    if name == "f32":                                          # far inside it, in fact
        assert (np.abs(got - want) <= 0.01 * budget).all()


@pytest.mark.parametrize("style", ["NeoX", "GptJ"])
def test_rope_parallel_rows_per_token_tables(style):
    shapes = [(3, 500, 48), (1500, 10), (1500, 10)]
    _check(_graph("Rope", shapes, head_dim=24, n_rot=16, style=style), _feeds(shapes))


# ── conv family ───────────────────────────────────────────────────────────

@pytest.mark.parametrize("attrs, w", [
    ({"kernel_size": (3, 3), "padding": (1, 1), "groups": 2}, (8, 3, 3, 3)),
    ({"kernel_size": (3, 2), "stride": (2, 3), "padding": (2, 1), "dilation": (2, 2)},
     (5, 6, 3, 2)),
    ({"kernel_size": (1, 1)}, (7, 6, 1, 1)),
])
def test_conv_gemm_paths(attrs, w):
    shapes = [(2, 6, 31, 29), w]
    _check(_graph("Conv", shapes, **attrs), _feeds(shapes))


def test_conv_scratch_smaller_than_the_batch(monkeypatch):
    monkeypatch.setenv("RLX_REF_THRESHOLDS", "numba-cpu:conv.cols_bytes=1")   # an image a pass
    shapes = [(3, 4, 20, 20), (6, 2, 3, 3)]
    _check(_graph("Conv", shapes, kernel_size=(3, 3), padding=(1, 1), groups=2),
           _feeds(shapes))
    shapes = [(3, 4, 9, 9), (4, 3, 2, 2)]
    _check(_graph("ConvTranspose2d", shapes, kernel_size=(2, 2), stride=(2, 2), groups=2),
           _feeds(shapes))


def test_conv_transpose_parallel_col2im():
    shapes = [(2, 6, 17, 13), (6, 4, 3, 4)]
    _check(_graph("ConvTranspose2d", shapes, kernel_size=(3, 4), stride=(2, 3),
                  padding=(1, 2), dilation=(2, 1), output_padding=(1, 0), groups=2),
           _feeds(shapes))


@pytest.mark.parametrize("kind", ["Sum", "Mean", "Max", "Min", "Prod"])
def test_pool_parallel_with_padding(kind):
    shapes = [(2, 5, 40, 37)]
    feeds = _feeds(shapes)
    feeds["x0"][0, 0, :3, :3] = np.nan
    _check(_graph("Pool", shapes, kind=kind, kernel_size=(3, 4), stride=(2, 1),
                  padding=(1, 2)), feeds)
    shapes3 = [(1, 2, 9, 8, 7)]
    _check(_graph("Pool", shapes3, kind=kind, kernel_size=(2, 3, 2), stride=(2, 1, 3),
                  padding=(1, 1, 0)), _feeds(shapes3))


def test_im2col_copies_bits_exactly():
    x = RNG.standard_normal((2, 3, 30, 20)).astype(np.float32)
    x[0, 0, 0, 0] = -0.0
    for dt, name in ((np.float32, "f32"), (rlx_ref.DType.BF16.np, "bf16")):
        g = _graph("Im2Col", [x.shape], name, kernel_size=(3, 2), stride=(1, 2),
                   padding=(1, 1), dilation=(2, 1))
        xs = x.astype(dt)
        got = NB.compile(g).run({"x0": xs})[0]
        want = rlx_ref.interpret(g, {"x0": xs})[0]
        assert got.dtype == want.dtype
        assert got.view(np.uint16 if name == "bf16" else np.uint32).tolist() == \
            want.view(np.uint16 if name == "bf16" else np.uint32).tolist()
