"""Indexing family: gathers and scatters against naive Python loops, round trips, errors."""
import math

import numpy as np
import pytest

from rlx_ref.interpret import InterpretError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Op
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import print_op
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import verify_single, run_single, single_op_graph

F32 = np.float32
REDUCTIONS = ["None", "Add", "Mul", "Max", "Min"]


def A(kind, *args):
    return get(kind).make_attrs(*args)


def errors(kind, attrs, inputs, out):
    """Verifier messages of a one-op graph whose declared output is ``out``."""
    return " | ".join(verify_single(kind, attrs, inputs, out))


def combine(old, new, reduction):
    """One scalar update, as the docs define it (Max/Min ignore a NaN operand)."""
    if reduction == "None":
        return new
    if reduction == "Add":
        return old + new
    if reduction == "Mul":
        return old * new
    if math.isnan(old):
        return new
    if math.isnan(new):
        return old
    return max(old, new) if reduction == "Max" else min(old, new)


# ── naive references: one Python loop per definition ──────────────────────

def naive_gather(table, idx, axis):
    idx = np.asarray(idx)
    shape = table.shape[:axis] + idx.shape + table.shape[axis + 1:]
    out = np.empty(shape, table.dtype)
    for o in np.ndindex(shape):
        pre, mid, post = o[:axis], o[axis:axis + idx.ndim], o[axis + idx.ndim:]
        out[o] = table[pre + (int(idx[mid]),) + post]
    return out


def naive_gather_elements(data, idx, axis):
    out = np.empty(idx.shape, data.dtype)
    for p in np.ndindex(idx.shape):
        src = list(p)
        src[axis] = int(idx[p]) % data.shape[axis]
        out[p] = data[tuple(src)]
    return out


def naive_gather_nd(data, idx, b):
    k = idx.shape[-1]
    lead = idx.shape[:-1]
    out = np.empty(lead + data.shape[b + k:], data.dtype)
    for p in np.ndindex(lead):
        tup = tuple(int(v) % data.shape[b + t] for t, v in enumerate(idx[p]))
        out[p] = data[p[:b] + tup]
    return out


def naive_scatter_add(updates, idx, out_dim):
    out = np.zeros((out_dim,) + updates.shape[1:], updates.dtype)
    for i in range(len(idx)):
        out[int(idx[i])] += updates[i]
    return out


def naive_scatter_elements(data, idx, updates, axis, reduction):
    out = data.copy()
    for p in np.ndindex(idx.shape):
        dst = list(p)
        dst[axis] = int(idx[p]) % data.shape[axis]
        dst = tuple(dst)
        out[dst] = combine(out[dst], updates[p], reduction)
    return out


def naive_scatter_nd(data, idx, updates, reduction):
    out = data.copy()
    k = idx.shape[-1]
    for p in np.ndindex(idx.shape[:-1]):
        tup = tuple(int(v) % data.shape[t] for t, v in enumerate(idx[p]))
        for q in np.ndindex(data.shape[k:]):
            out[tup + q] = combine(out[tup + q], updates[p + q], reduction)
    return out


# ── gathers ───────────────────────────────────────────────────────────────

@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_gather_matches_loop(axis, seed):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((3, 4, 2)).astype(F32)
    idx = rng.integers(0, table.shape[axis], size=(2, 3)).astype(F32)
    got = run_single("Gather", A("Gather", axis), table, idx)
    np.testing.assert_array_equal(got, naive_gather(table, idx, axis))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float16, np.float64])
def test_gather_accepts_integer_and_float_indices(dtype):
    table = np.arange(10, dtype=F32).reshape(5, 2)
    idx = np.array([4, 0, 4], dtype)
    np.testing.assert_array_equal(run_single("Gather", A("Gather", 0), table, idx),
                                  table[[4, 0, 4]])


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_gather_elements_matches_loop(axis):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4)).astype(F32)
    ax = axis % 2
    size = data.shape[ax]
    idx_shape = (2, 4) if ax == 0 else (3, 2)
    idx = rng.integers(-size, size, size=idx_shape).astype(F32)      # negatives count back
    got = run_single("GatherElements", A("GatherElements", axis), data, idx)
    np.testing.assert_array_equal(got, naive_gather_elements(data, idx, ax))


@pytest.mark.parametrize("batch_dims,k", [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (2, 1)])
def test_gather_nd_matches_loop(batch_dims, k):
    rng = np.random.default_rng(k + 10 * batch_dims)
    data = rng.standard_normal((2, 3, 4)).astype(F32)
    lead = data.shape[:batch_dims] + (2,)
    cols = [rng.integers(-data.shape[batch_dims + t], data.shape[batch_dims + t], size=lead)
            for t in range(k)]
    idx = np.stack(cols, axis=-1).astype(F32)
    got = run_single("GatherNd", A("GatherNd", batch_dims), data, idx)
    np.testing.assert_array_equal(got, naive_gather_nd(data, idx, batch_dims))


# ── scatters ──────────────────────────────────────────────────────────────

def test_scatter_add_matches_loop_with_duplicates():
    rng = np.random.default_rng(3)
    upd = rng.standard_normal((6, 2)).astype(F32)
    idx = np.array([3, 0, 3, 3, 1, 0], F32)
    out = Shape([5, 2], DType.F32)
    got = run_single("ScatterAdd", None, upd, idx, out=out)
    np.testing.assert_array_equal(got, naive_scatter_add(upd, idx, 5))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_matches_loop(reduction, axis):
    rng = np.random.default_rng(4)
    data = rng.standard_normal((3, 4)).astype(F32)
    ax = axis % 2
    idx = rng.integers(-data.shape[ax], data.shape[ax], size=(2, 3)).astype(F32)
    upd = rng.standard_normal((2, 3)).astype(F32)
    got = run_single("ScatterElements", A("ScatterElements", axis, reduction), data, idx, upd)
    np.testing.assert_array_equal(got, naive_scatter_elements(data, idx, upd, ax, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd_matches_loop(reduction, k):
    rng = np.random.default_rng(5 + k)
    data = rng.standard_normal((3, 2, 4)).astype(F32)
    idx = np.stack([rng.integers(-data.shape[t], data.shape[t], size=(2, 3))
                    for t in range(k)], -1).astype(F32)              # duplicates are likely
    upd = rng.standard_normal((2, 3) + data.shape[k:]).astype(F32)
    got = run_single("ScatterNd", A("ScatterNd", reduction), data, idx, upd)
    np.testing.assert_array_equal(got, naive_scatter_nd(data, idx, upd, reduction))


def test_scatter_none_last_write_wins_and_max_ignores_nan():
    data = np.array([np.nan, 0, 0], F32)
    idx = np.array([[0], [2], [0]], F32)
    upd = np.array([1, 2, 3], F32)
    np.testing.assert_array_equal(
        run_single("ScatterNd", A("ScatterNd", "None"), data, idx, upd), [3, 0, 2])
    np.testing.assert_array_equal(
        run_single("ScatterNd", A("ScatterNd", "Max"), data, idx, upd), [3, 0, 2])


def test_scatter_f16_accumulates_in_f32():
    data = np.zeros(1, np.float16)
    upd = np.array([2048, 1, 1], np.float16)          # f16 alone would drop each +1
    idx = np.zeros((3, 1), F32)
    got = run_single("ScatterNd", A("ScatterNd", "Add"), data, idx, upd)
    assert got.dtype == np.float16 and float(got[0]) == 2050.0


def test_float64_mode_agrees():
    data = np.arange(6, dtype=F32).reshape(2, 3)
    idx = np.array([[2, 0]], F32)
    a = run_single("GatherElements", A("GatherElements", 1), data, idx[:, :2])
    b = run_single("GatherElements", A("GatherElements", 1), data, idx[:, :2], float64=True)
    assert b.dtype == np.float64
    np.testing.assert_array_equal(a, b)


# ── gather of a scatter round-trips on unique indices ─────────────────────

def test_scatter_nd_then_gather_nd_round_trips():
    rng = np.random.default_rng(6)
    flat = rng.permutation(12)[:5]
    idx = np.stack(np.unravel_index(flat, (3, 4)), -1).astype(F32)    # unique tuples
    upd = rng.standard_normal((5, 2)).astype(F32)
    out = run_single("ScatterNd", A("ScatterNd", "None"), np.zeros((3, 4, 2), F32), idx, upd)
    np.testing.assert_array_equal(run_single("GatherNd", A("GatherNd", 0), out, idx), upd)


def test_scatter_elements_then_gather_elements_round_trips():
    rng = np.random.default_rng(7)
    idx = np.stack([rng.permutation(5)[:3] for _ in range(4)], 1).astype(F32)  # unique/column
    upd = rng.standard_normal((3, 4)).astype(F32)
    out = run_single("ScatterElements", A("ScatterElements", 0, "None"),
                     np.zeros((5, 4), F32), idx, upd)
    np.testing.assert_array_equal(
        run_single("GatherElements", A("GatherElements", 0), out, idx), upd)


def test_scatter_add_then_gather_round_trips():
    idx = np.array([4, 1, 2], F32)
    upd = np.arange(6, dtype=F32).reshape(3, 2) + 1
    out = run_single("ScatterAdd", None, upd, idx, out=Shape([6, 2], DType.F32))
    np.testing.assert_array_equal(run_single("Gather", A("Gather", 0), out, idx), upd)


# ── run-time index errors: never clamped, never wrapped unless documented ─

@pytest.mark.parametrize("kind,attrs,inputs,out,msg", [
    ("Gather", (0,), (np.zeros((4, 2), F32), np.array([1, 4], F32)), None,
     "(C3) Gather index 4 at indices[1] is out of range for axis 0 of size 4 (expected 0..3"),
    ("Gather", (0,), (np.zeros((4, 2), F32), np.array([[0, -1]], F32)), None,
     ("index -1 at indices[0, 1] is out of range for axis 0 of size 4 (expected 0..3; "
     "Gather does not wrap negative indices)")),
    ("Gather", (1,), (np.zeros((4, 2), F32), np.array([1.5], F32)), None,
     "(C3) Gather index 1.5 at indices[0] is not an integer"),
    ("Gather", (0,), (np.zeros((4, 2), F32), np.array([np.nan], F32)), None, "nan"),
    ("GatherElements", (1,), (np.zeros((2, 3), F32), np.array([[0], [-4]], F32)), None,
     "index -4 at indices[1, 0] is out of range for axis 1 of size 3 (expected -3..2"),
    ("GatherNd", (0,), (np.zeros((2, 3), F32), np.array([[1, 3]], F32)), None,
     "(C4) GatherNd index 3 at indices[0, 1] is out of range for axis 1 of size 3"),
    ("ScatterAdd", None, (np.ones((2, 1), F32), np.array([0, -1], F32)), Shape([3, 1], "F32"),
     "ScatterAdd index -1 at indices[1] is out of range for axis 0 of size 3"),
    ("ScatterElements", (0, "Add"), (np.zeros(3, F32), np.array([3], F32), np.ones(1, F32)),
     None, "index 3 at indices[0] is out of range for axis 0 of size 3 (expected -3..2"),
    ("ScatterNd", ("Mul",), (np.zeros((2, 2), F32), np.array([[0, 0], [2, 0]], np.int64),
                             np.ones(2, F32)), None,
     "(C4) ScatterNd index 2 at indices[1, 0] is out of range for axis 0 of size 2"),
    ("ScatterNd", ("None",), (np.zeros(2, F32), np.array([[np.inf]], F32), np.ones(1, F32)),
     None, "is not an integer"),
])
def test_bad_indices_are_errors_naming_the_node(kind, attrs, inputs, out, msg):
    a = A(kind, *attrs) if attrs is not None else None
    with pytest.raises(InterpretError) as e:
        run_single(kind, a, *inputs, out=out)
    text = str(e.value)
    assert msg in text
    assert text.startswith(f"at %{len(inputs)} in @{kind.lower()}:")


def test_empty_axis_has_no_valid_index():
    with pytest.raises(InterpretError, match="axis 0 is empty|the axis is empty"):
        run_single("Gather", A("Gather", 0), np.zeros((0, 2), F32), np.array([0], F32))


# ── verifier errors for bad payloads and shapes ───────────────────────────

def S(*dims, dt="F32"):
    return Shape(dims, DType.parse(dt))


@pytest.mark.parametrize("kind,attrs,inputs,out,msg", [
    ("Gather", (2,), [S(4, 2), S(3)], S(3, 2), "(C1) axis 2 is out of range for rank 2"),
    ("Gather", (0,), [S(4, 2), S(3, dt="Bool")], S(3, 2), "(C2)"),
    ("Gather", (1,), [S(4, 2), S(3)], S(3), "shape mismatch"),          # RLX's quirky shape
    ("GatherElements", (2,), [S(4, 2), S(4, 2)], S(4, 2), "(C1) axis 2"),
    ("GatherElements", (0,), [S(4, 2), S(4)], S(4), "(C3) indices rank 1"),
    ("GatherElements", (0,), [S(4, 2), S(5, 3)], S(5, 3), "(C3) indices dim 1 is 3"),
    ("GatherNd", (0,), [S(4, 2), S(3, 3)], S(3), "(C3) GatherNd index tuples have length 3"),
    ("GatherNd", (-1,), [S(4, 2), S(4, 1)], S(4), "(C1) batch_dims must be >= 0"),
    ("GatherNd", (1,), [S(4, 2), S(3, 1)], S(3), "(C1) batch dim 0 differs"),
    ("ScatterAdd", None, [S(3, 2), S(3)], S(5, 4), "(C3) ScatterAdd output [5, 4]"),
    ("ScatterAdd", None, [S(3, 2), S(2)], S(5, 2), "(C2)"),
    ("ScatterElements", (0, "None"), [S(3), S(2), S(3)], S(3), "(C3)"),
    ("ScatterElements", (0, "Add"), [S(3), S(2), S(2, dt="F64")], S(3), "(C4)"),
    ("ScatterElements", (-2, "Add"), [S(3), S(2), S(2)], S(3), "(C1) axis -2"),
    ("ScatterNd", ("Max",), [S(3, 4), S(2, 1), S(2, 3)], S(3, 4),
     "(C3) updates are [2, 3], expected indices.dims[:-1] ++ data.dims[1:] = [2, 4]"),
    ("ScatterNd", ("Min",), [S(3, 4), S(2, 3), S(2)], S(3, 4), "(C2)"),
])
def test_verifier_errors(kind, attrs, inputs, out, msg):
    a = A(kind, *attrs) if attrs is not None else None
    assert msg in errors(kind, a, inputs, out)


def test_gather_infers_the_np_take_shape():
    g = single_op_graph("Gather", A("Gather", 1), [S(4, 5, 2), S(3)])
    assert g.nodes[-1].shape == S(4, 3, 2)


@pytest.mark.parametrize("kind,args,text", [
    ("ScatterNd", ("Add",), '{"ScatterNd":{"reduction":"Add"}}'),
    ("ScatterElements", (0, "None"), '{"ScatterElements":{"axis":0,"reduction":"None"}}'),
    ("GatherNd", (0,), '{"GatherNd":{"batch_dims":0}}'),
    ("GatherElements", (-1,), '{"GatherElements":{"axis":-1}}'),
    ("Gather", (0,), '{"Gather":{"axis":0}}'),
])
def test_payload_text(kind, args, text):
    assert print_op(Op(kind, A(kind, *args))) == text
    assert print_op(Op("ScatterAdd")) == "ScatterAdd"
