"""Numba CPU lowering of movement, indexing and control kinds: conformance and edge cases."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.runner import run_case
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import add, binary, constant, make_body
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")
NB = get_backend("numba-cpu")
F = np.float32

KINDS = ["Reshape", "Transpose", "Narrow", "Slice", "Concat", "Expand", "Reverse", "Pad",
         "Tile", "Trilu", "ResizeNearest2x", "Gather", "GatherElements", "GatherNd",
         "ScatterAdd", "ScatterElements", "ScatterNd", "If", "While", "Scan", "CustomFn",
         "Custom", "multi:if-*", "multi:while-*", "multi:scan-*"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_conformance_case_passes(kind):
    ledger = load_ledger()
    cases = build_cases(kinds=[kind])
    assert cases
    for case in cases:
        res = run_case(NB, case, ledger)
        assert res.status == "ok", (case.id, case.tags, res.message)


def _both(kind, attrs, *xs, out=None):
    """(oracle, numba-cpu) outputs of a one-op graph."""
    g = single_op_graph(kind, attrs, xs, out)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    return interpret(g, feeds)[0], NB.compile(g).run(feeds)[0]


def _same_bits(kind, attrs, *xs, out=None):
    want, got = _both(kind, attrs, *xs, out=out)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), kind


def _movement_cases(x):
    a = lambda kind, *f: (kind, get(kind).attrs(*f))
    return [a("Transpose", (2, 0, 1)), a("Transpose", (0, 2, 1)), a("Reshape", (x.shape[2], -1)),
            a("Narrow", 1, 2, 9), a("Slice", 2, 4, 5, -1), a("Slice", 1, 1, 4, 3),
            a("Reverse", (0, 2)), a("Tile", (2, 1, 3)), a("Trilu", False, 1),
            a("Pad", ((1, 0), (2, 3), (0, 4)), ("Constant", -2.5)),
            a("Pad", ((1, 2), (3, 3), (4, 1)), "Reflect"),
            a("Pad", ((0, 2), (5, 0), (1, 1)), "Replicate"),
            a("Pad", ((2, 1), (0, 11), (5, 5)), "Circular")]


@pytest.mark.parametrize("dtype", [F, np.float16, np.int8, np.float64, np.bool_])
def test_movement_odd_shapes_move_exact_bits(dtype):
    x = (np.random.default_rng(1).standard_normal((3, 11, 5)) * 4).astype(dtype)
    for kind, attrs in _movement_cases(x):
        _same_bits(kind, attrs, x)
    _same_bits("Concat", get("Concat").attrs(1), x, x[:, :2].copy(), x)
    _same_bits("Expand", get("Expand").attrs((2, 3, 11, 5)), x)
    _same_bits("ResizeNearest2x", None, x.reshape(3, 1, 11, 5))


def test_parallel_and_tiled_paths_match_the_oracle(monkeypatch):
    from rlx_ref.backends.numba_cpu import _index_map

    monkeypatch.setenv("RLX_REF_THRESHOLDS", "numba-cpu:move.par_bytes=1")
    monkeypatch.setattr(_index_map, "CHUNK", 4)            # several work items per row
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 37, 41)).astype(F)
    for kind, attrs in _movement_cases(x):
        _same_bits(kind, attrs, x)
    _same_bits("Transpose", get("Transpose").attrs((0, 2, 1)), x)     # tiled
    _same_bits("Concat", get("Concat").attrs(0), x, x)
    idx = rng.integers(0, 37, 50).astype(F)
    _same_bits("Gather", get("Gather").attrs(1), x, idx)
    _same_bits("GatherElements", get("GatherElements").attrs(2),
               x, rng.integers(-41, 41, (3, 37, 9)).astype(F))
    tuples = np.stack([rng.integers(0, 3, 20), rng.integers(-37, 37, 20)], -1).astype(F)
    _same_bits("GatherNd", get("GatherNd").attrs(0), x, tuples)
    for red in ("None", "Add", "Max"):
        upd = rng.standard_normal((20, 41)).astype(F)
        _same_bits("ScatterNd", get("ScatterNd").attrs(red), x, tuples, upd)


@pytest.mark.parametrize("red", ["None", "Add", "Mul", "Max", "Min"])
@pytest.mark.parametrize("dtype", [F, np.float16, np.int32, np.bool_])
def test_scatters_with_duplicates_follow_the_update_order(red, dtype):
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((5, 4)) * 3).astype(dtype)
    idx = np.array([[1, 1, 0, 1], [4, 1, 4, 4]], F)        # many duplicate targets
    upd = (rng.standard_normal((2, 4)) * 3).astype(dtype)
    _same_bits("ScatterElements", get("ScatterElements").attrs(0, red), data, idx, upd)
    rows = np.array([[3], [0], [3], [-2]], np.int64)
    _same_bits("ScatterNd", get("ScatterNd").attrs(red), data, rows,
               (rng.standard_normal((4, 4)) * 3).astype(dtype))


def test_scatter_add_accumulates_and_handles_empty_updates():
    upd = np.arange(12, dtype=F).reshape(6, 2)
    _same_bits("ScatterAdd", None, upd, np.array([2, 0, 2, 2, 1, 0], F), out=Shape((3, 2),
                                                                                     DType.F32))
    _same_bits("ScatterAdd", None, np.zeros((0, 2), F), np.zeros(0, F),
               out=Shape((3, 2), DType.F32))


def _error(kind, attrs, *xs, out=None) -> tuple:
    g = single_op_graph(kind, attrs, xs, out)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    msgs = []
    for run in (lambda: interpret(g, feeds), lambda: NB.compile(g).run(feeds)):
        with pytest.raises(Exception) as e:
            run()
        msgs.append(str(e.value).splitlines()[0])
    return msgs


@pytest.mark.parametrize("kind, attrs, idx, what", [
    ("Gather", get("Gather").attrs(0), np.array([1, -1], F), "index -1 at indices[1]"),
    ("Gather", get("Gather").attrs(1), np.array([[0, 3]], np.int64), "axis 1 of size 3"),
    ("Gather", get("Gather").attrs(0), np.array([0.5], np.float16), "not an integer"),
    ("Gather", get("Gather").attrs(0), np.array([np.nan], F), "index nan"),
    ("GatherElements", get("GatherElements").attrs(-1), np.array([[0], [-4], [0], [0]], F),
     "expected -3..2"),
    ("GatherNd", get("GatherNd").attrs(0), np.array([[0, 1], [9, 5]], F), "index 9 at"),
])
def test_bad_indices_raise_the_oracles_error_naming_the_node(kind, attrs, idx, what):
    table = np.arange(12, dtype=F).reshape(4, 3)
    want, got = _error(kind, attrs, table, idx)
    assert got == want and what in got and got.startswith("at %2 in @")


def test_scatter_index_errors_name_the_node():
    data = np.zeros((4, 3), F)
    want, got = _error("ScatterNd", get("ScatterNd").attrs("Add"), data,
                       np.array([[0, 1], [3, -4]], F), np.ones(2, F))
    assert got == want and "axis 1 of size 3" in got
    want, got = _error("ScatterAdd", None, np.ones((2, 3), F), np.array([0, 4], F),
                       out=Shape((4, 3), DType.F32))
    assert got == want and "ScatterAdd does not wrap" in got


S4 = Shape([4], DType.F32)


def _zero_trip_while():
    cond = make_body("cond", [S4], lambda b, a: add(
        b, "Compare", get("Compare").attrs("Lt"), constant(b, 1.0), constant(b, 0.0)))
    body = make_body("body", [S4], lambda b, a: binary(b, "Add", a, a))
    return get("While").attrs(cond, body, None)


def test_zero_trip_loops_do_not_alias_a_reused_buffer():
    g = rlx_ref.Graph("alias")
    x = g.input("x", [4])
    y = g.neg(x)                                   # an intermediate: its buffer is reused
    w = g.op("While", (y,), _zero_trip_while())
    s = g.op("Scan", (y,), body=make_body("s", [S4], lambda b, c: c), length=0)
    later = g.add(x, x)                            # may take y's buffer after its last use
    g.set_outputs([w, s, g.mul(later, x)])
    xv = np.arange(4, dtype=F)
    got = NB.compile(g).run({"x": xv})
    assert got[0].tolist() == (-xv).tolist() and got[1].tolist() == (-xv).tolist()


def test_scan_over_scalar_rows_with_a_trajectory():
    s0 = Shape([], DType.F32)
    body = make_body("acc", [s0, s0], lambda b, c, t: binary(b, "Mul", binary(b, "Add", c, t),
                                                             constant(b, 0.5)))
    attrs = get("Scan").attrs(body, 6, True, 0, 1, 4)
    want, got = _both("Scan", attrs, F(1), np.arange(6, dtype=F))
    assert got.shape == (4,) and np.array_equal(got, want)


def test_scan_checkpoints_and_body_errors_name_the_body_node():
    from rlx_ref.ops._control_samples import cumsum_scan

    xs = np.arange(15, dtype=F).reshape(5, 3)
    init = np.ones(3, F)
    want, got = _both("Scan", cumsum_scan(5, checkpoints=2), init, xs)
    assert got.shape == (2, 3) and np.array_equal(got, want)
    gather = get("Gather").attrs(0)
    body = make_body("step", [Shape([3], DType.F32), Shape([3], DType.F32)],
                     lambda b, c, t: add(b, "Gather", gather, c, t))
    attrs = get("Scan").attrs(body, 2, False, 0, 1, 0)
    bad = np.array([[0, 1, 2], [0, 7, 0]], F)
    want, got = _error("Scan", attrs, np.zeros(3, F), bad)
    assert "in @step" in got and "index 7" in got


def test_declared_paths():
    paths = NB.paths()
    assert paths["Custom"] == "host"
    assert all(paths[k] == "native" for k in KINDS if k[0].isupper() and k != "Custom")
    table = NB.supported_ops()
    assert DType.BF16 in table["Gather"] and DType.BOOL in table["Transpose"]


def test_kernel_sources_include_the_bodies_kernels():
    from rlx_ref.ops._control_samples import cumsum_scan

    g = single_op_graph("Scan", cumsum_scan(4), (np.ones(3, F), np.ones((4, 3), F)))
    sources = NB.compile(g).kernel_sources()
    assert any(name.startswith("ew_") for name in sources)
