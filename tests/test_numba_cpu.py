"""The Numba CPU backend: contract, planning, caching, kernel dumps and a conformance slice."""
import os
import subprocess
import sys

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.base import UnsupportedOp
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases, filter_cases, make_case
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case

numba = pytest.importorskip("numba")
NB = get_backend("numba-cpu")


def _mlp():
    g = rlx_ref.Graph("mlp")
    x = g.input("x", [4, 8])
    b = g.param("b", [8])
    h = g.gelu(g.add(x, b))
    g.set_outputs([g.mul(h, g.sigmoid(h)), g.lt_(h, x)])
    return g


def test_runs_a_graph_and_matches_the_oracle():
    g = _mlp()
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    b = np.arange(8, dtype=np.float32) / 8
    exe = NB.compile(g)
    exe.set_param("b", b)
    got = exe.run({"x": x})
    want = rlx_ref.interpret(g, {"x": x}, {"b": b})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[1], want[1])
    assert exe.kernel_sources() and all("@njit" in s for s in exe.kernel_sources().values())


def test_outputs_are_fresh_arrays_each_run():
    g = rlx_ref.Graph("o")
    x = g.input("x", [3])
    g.set_outputs([g.neg(x), x])
    exe = NB.compile(g)
    a = exe.run({"x": np.ones(3, np.float32)})
    b = exe.run({"x": np.full(3, 2, np.float32)})
    assert a[0].tolist() == [-1, -1, -1] and b[0].tolist() == [-2, -2, -2]
    assert a[1] is not b[1]


def test_a_dropped_output_is_written_again_and_a_held_one_never():
    g = rlx_ref.Graph("o")
    x = g.input("x", [4])
    g.set_outputs([g.neg(x)])
    exe = NB.compile(g)
    first = exe.run({"x": np.ones(4, np.float32)})[0]
    address = first.ctypes.data
    del first                                   # the caller let go: its memory is reused
    again = exe.run({"x": np.full(4, 2, np.float32)})[0]
    assert again.ctypes.data == address and again.tolist() == [-2] * 4
    view = again[1:]                            # a view keeps the array alive and intact
    del again
    later = exe.run({"x": np.full(4, 3, np.float32)})[0]
    assert not np.shares_memory(view, later)
    assert view.tolist() == [-2] * 3 and later.tolist() == [-3] * 4


def test_intermediates_reuse_buffers_by_liveness():
    g = rlx_ref.Graph("chain")
    x = g.input("x", [64])
    y = x
    for _ in range(6):
        y = g.exp(g.neg(y))
    g.set_outputs([y])
    from rlx_ref.runtime.options import CompileOptions, FusionOptions

    want = rlx_ref.interpret(g, {"x": np.linspace(0, 1, 64, dtype=np.float32)})[0]
    for arena in (True, False):     # arena slots or buffers: two addresses in turn
        exe = NB.compile(g, CompileOptions(fusion_opts=FusionOptions(enable=False),
                                           memory_plan=arena))
        plan = exe._plans[()]
        distinct = {b.ctypes.data for b in plan.buffer.values()}
        assert len(plan.buffer) == 11 and len(distinct) == 2
        got = exe.run({"x": np.linspace(0, 1, 64, dtype=np.float32)})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_unsupported_kinds_fail_to_compile_listing_every_node():
    g = rlx_ref.Graph("u")
    x = g.input("x", [2, 3])
    g.set_outputs([g.softmax(x, -1), g.sum(x, [1])])
    missing = [k for k in ("Softmax", "Reduce") if not NB.supports(k)]
    if not missing:
        pytest.skip("both kinds are lowered now")
    with pytest.raises(UnsupportedOp) as e:
        NB.compile(g)
    for k in missing:
        assert k in str(e.value)


def test_integer_division_by_zero_names_the_node():
    g = rlx_ref.Graph("div")
    a = g.input("a", [3], "i32")
    b = g.input("b", [3], "i32")
    g.set_outputs([g.div(a, b)])
    exe = NB.compile(g)
    with pytest.raises(Exception, match=r"at %2 in @div: integer division by zero"):
        exe.run({"a": np.ones(3, np.int32), "b": np.array([1, 0, 2], np.int32)})


def test_dynamic_dims_bind_per_run():
    g = rlx_ref.Graph("dyn")
    x = g.input("x", [rlx_ref.Dyn(0), 3])
    g.set_outputs([g.relu(x)])
    exe = NB.compile(g)
    for n in (1, 5):
        out = exe.run({"x": np.full((n, 3), -1, np.float32)})[0]
        assert out.shape == (n, 3) and not out.any()


@pytest.mark.parametrize("op", ["Activation", "Binary", "Compare", "Cast", "Where", "Fma",
                                "Clamp", "StopGradient", "ElementwiseRegion"])
def test_conformance_slice(op):
    cases = filter_cases(build_cases(kinds=[op]), op, None, None)
    ledger = load_ledger()
    step = max(1, len(cases) // 60)          # a deterministic sample; the CLI runs them all
    for case in cases[::step]:
        res = run_case(NB, case, ledger)
        assert res.status in ("ok", "unsupported", "xfail"), (case.id, case.tags, res.message)


def test_elementwise_chains_fuse_into_one_kernel_and_report_it():
    g = rlx_ref.Graph("fuse")
    x = g.input("x", [4, 8])
    b = g.input("b", [8])
    g.set_outputs([g.relu(g.gelu(g.add(g.mul(x, x), b)))])
    exe = NB.compile(g)
    kinds = [n.kind for n in exe.graph.nodes]
    assert kinds == ["Input", "Input", "ElementwiseRegion"]
    assert len(exe.kernel_sources()) == 1
    text = exe.dispatch_report.format()
    assert "ElementwiseRegion" in text and "fused into ElementwiseRegion" in text
    xv = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    bv = np.arange(8, dtype=np.float32) / 8
    np.testing.assert_allclose(exe.run({"x": xv, "b": bv})[0],
                               rlx_ref.interpret(g, {"x": xv, "b": bv})[0], rtol=1e-5)


def test_session_compiles_through_a_backend():
    g = _mlp()
    exe = rlx_ref.Session("numba-cpu").compile(g)
    assert exe.device == "numba-cpu"
    with pytest.raises(rlx_ref.SessionError, match="unknown device 'nope'"):
        rlx_ref.Session("nope")


def test_kernel_dump_and_disk_cache(tmp_path):
    code = ("import numpy as np, rlx_ref\n"
            "from rlx_ref.backends.registry import get_backend\n"
            "g = rlx_ref.Graph('c'); x = g.input('x', [5]); g.set_outputs([g.tanh(g.neg(x))])\n"
            "e = get_backend('numba-cpu').compile(g)\n"
            "e.run({'x': np.ones(5, np.float32)})\n"
            "ks = [k.fn for _, st, _ in e._plans[()].steps for k in st.kernels]\n"
            "print(sum(sum(k.stats.cache_hits.values()) for k in ks),\n"
            "      sum(sum(k.stats.cache_misses.values()) for k in ks))\n")
    env = {**os.environ, "RLX_REF_CACHE_DIR": str(tmp_path / "cache"),
           "RLX_REF_DUMP_KERNELS": str(tmp_path / "dump")}
    runs = [tuple(map(int, subprocess.run([sys.executable, "-c", code], env=env,
                                          capture_output=True, text=True,
                                          check=True).stdout.split())) for _ in range(2)]
    dumped = list((tmp_path / "dump").glob("*.py"))
    assert dumped and all("@njit" in p.read_text() for p in dumped)
    assert list((tmp_path / "cache").rglob("*.nbi")), "numba wrote no on-disk cache index"
    (hits1, misses1), (hits2, misses2) = runs
    assert misses1 > 0 and hits1 == 0, runs          # first process compiles
    assert hits2 > 0 and misses2 == 0, runs          # second process loads from disk


@pytest.mark.parametrize("dims,axis,n_idx", [
    ((3000, 128), 0, 700),          # many rows: one work item per row
    ((2, 70001), 0, 3),             # a few long rows: cut into pieces (ragged last piece)
    ((3, 5, 40000), 1, 2),          # outer > 1 and pieces
])
def test_gather_parallel_rows_and_pieces_match_numpy(dims, axis, n_idx):
    rng = np.random.default_rng(3)
    g = rlx_ref.Graph("gather")
    t, i = g.input("t", list(dims)), g.input("i", [n_idx], "i64")
    g.set_outputs([g.op("Gather", [t, i], axis=axis)])
    tv = rng.standard_normal(dims).astype(np.float32)
    iv = rng.integers(0, dims[axis], n_idx)
    exe = NB.compile(g)
    for _ in range(2):                      # the second run writes the reused output
        np.testing.assert_array_equal(exe.run({"t": tv, "i": iv})[0], np.take(tv, iv, axis))


def test_gather_nd_and_scatter_nd_long_slices_match_the_oracle():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((4, 3, 30000)).astype(np.float32)
    idx = np.array([[3, 1], [0, 2], [3, 1]], np.float32)
    upd = rng.standard_normal((3, 30000)).astype(np.float32)
    g = rlx_ref.Graph("nd")
    d, i, u = g.input("d", [4, 3, 30000]), g.input("i", [3, 2]), g.input("u", [3, 30000])
    g.set_outputs([g.op("GatherNd", [d, i], batch_dims=0),
                   g.op("ScatterNd", [d, i, u], reduction="Add")])
    feeds = {"d": data, "i": idx, "u": upd}
    got, want = NB.compile(g).run(feeds), rlx_ref.interpret(g, feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _judged(op, shapes, dtype, fix=None, **attrs):
    """One op on numba-cpu, judged by the conformance contract (random inputs, ``fix``
    edits them first)."""
    from rlx_ref.ops.opdef import get

    rng = np.random.default_rng(5)
    g = rlx_ref.Graph(op.lower())
    ins = [g.input(f"x{i}", list(s), dtype) for i, s in enumerate(shapes)]
    g.set_outputs([g.op(op, ins, get(op).make_attrs(**attrs))])
    np_dt = rlx_ref.DType.BF16.np if dtype == "bf16" else np.dtype(dtype.replace("f", "float"))
    feeds = {f"x{i}": (rng.standard_normal(s) * 2).astype(np_dt) for i, s in enumerate(shapes)}
    if fix:
        fix(feeds)
    res = run_case(NB, make_case(op, dtype, g, feeds, ("large",)), load_ledger())
    assert res.status == "ok", (op, dtype, shapes, attrs, res.message)


def _nan_query(f):
    f["x0"][0, 1, 5, 3] = np.nan


def _inf_key(f):
    f["x1"][0, 0, 7, 2] = np.inf


def _minus_inf_key(f):
    f["x1"][0, 1, 9] = -np.inf


def _inf_value(f):
    f["x2"][0, 0, 100, 0] = np.inf


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("mask", ["None", "Causal", ("SlidingWindow", 50)])
@pytest.mark.parametrize("fix", [None, _nan_query, _inf_key, _minus_inf_key, _inf_value])
def test_attention_f32_products_softmax_rows_with_and_without_non_finite_scores(dtype, mask,
                                                                                  fix):
    # S_k·D >= 4096: f32 scores, whose finite rows take the vectorized max/exp/sum path
    _judged("Attention", [(1, 4, 150, 64), (1, 2, 170, 64), (1, 2, 170, 64)], dtype, fix,
            num_heads=4, head_dim=64, mask_kind=mask)


def test_attention_large_tiles_with_a_negative_scale():
    # no mask: tiles of up to 512 rows, halved until each thread has two
    _judged("Attention", [(1, 600, 2, 64), (1, 700, 2, 64), (1, 700, 2, 64)], "f32",
            num_heads=2, head_dim=64, score_scale=-0.3)


def _non_finite_conv(f):
    f["x0"][0, 3, 4, 5] = np.nan
    f["x0"][1, 2, 0, 0] = np.inf
    f["x1"][1, 2, 0, 1] = -np.inf


@pytest.mark.parametrize("block", [None, 5000])
@pytest.mark.parametrize("dtype", ["f64", "f32", "f16"])
def test_conv_channels_last_blocks(monkeypatch, block, dtype):
    # Cg >= 8: blocks of whole output rows (or, with a small block, pieces of one row)
    from rlx_ref.backends.numba_cpu import lower_conv

    if block:
        monkeypatch.setattr(lower_conv, "BLOCK_BYTES", block)
    _judged("Conv", [(2, 16, 30, 29), (12, 8, 3, 3)], dtype, kernel_size=(3, 3),
            padding=(1, 1), groups=2)
    _judged("Conv", [(3, 8, 31, 29), (7, 8, 3, 2)], dtype, kernel_size=(3, 2),
            padding=(2, 1), stride=(2, 3), dilation=(2, 2))
    _judged("Conv", [(2, 16, 30, 29), (12, 16, 3, 3)], dtype, _non_finite_conv,
            kernel_size=(3, 3), padding=(1, 1))
    _judged("Conv", [(2, 64, 40), (32, 64, 5)], dtype, kernel_size=(1, 5), padding=(0, 2),
            stride=(1, 2))

