"""Reduction ops against naive loops and independent formulas; verifier and run errors."""
import math

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._reduction_arg import ArgAttrs, TopKAttrs
from rlx_ref.ops.reduction import CumAttrs, ReduceAttrs, SoftmaxAttrs
from rlx_ref.ops.single import verify_single, run_single

RNG = np.random.default_rng(11)
F = DType.F32


def f32(*dims):
    return RNG.standard_normal(dims).astype(np.float32)


def errors(kind, attrs, inputs, out):
    """Verifier messages of a one-op graph whose declared output is ``out``."""
    return " | ".join(verify_single(kind, attrs, inputs, out))


def topk(x, k):
    return run_single("TopK", TopKAttrs(k), x, out=Shape(x.shape[:-1] + (k,), DType.of(x)))


# ── Reduce ────────────────────────────────────────────────────────────────

def naive_reduce(x, op, axes, keep_dim):
    """Visit every input element once and fold it into its output slot (float64)."""
    out_dims = [1 if i in axes else d for i, d in enumerate(x.shape)]
    init = {"Sum": 0.0, "Mean": 0.0, "Prod": 1.0, "Max": -math.inf, "Min": math.inf}[op]
    acc = np.full(out_dims, init)
    for idx in np.ndindex(*x.shape):
        slot = tuple(0 if i in axes else j for i, j in enumerate(idx))
        v = float(x[idx])
        if op in ("Sum", "Mean"):
            acc[slot] += v
        elif op == "Prod":
            acc[slot] *= v
        elif not math.isnan(v):                   # Max/Min never pick NaN
            acc[slot] = max(acc[slot], v) if op == "Max" else min(acc[slot], v)
    if op == "Mean":
        count = math.prod(x.shape[i] for i in set(axes))
        acc = acc / count if count else np.full(out_dims, np.nan)
    if not keep_dim:
        acc = acc.reshape([d for i, d in enumerate(x.shape) if i not in axes])
    return acc


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod"])
@pytest.mark.parametrize("axes,keep", [((1,), False), ((0, 2), True), ((2, 0, 2), False),
                                       ((0, 1, 2), False), ((), False)])
def test_reduce_matches_naive_loops(op, axes, keep):
    x = f32(2, 3, 4)
    x[0, 1, 2] = np.nan if op in ("Max", "Min") else x[0, 1, 2]
    x[1, :, 3] = np.nan if op in ("Max", "Min") else x[1, :, 3]
    out = run_single("Reduce", ReduceAttrs(op, axes, keep), x)
    ref = naive_reduce(x, op, axes, keep)
    assert out.shape == ref.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    out64 = run_single("Reduce", ReduceAttrs(op, axes, keep), x, float64=True)
    np.testing.assert_allclose(out64, ref, rtol=1e-13, atol=1e-14)


def test_reduce_empty_slices_give_the_identities():
    x = np.zeros((3, 0), np.float32)
    got = {op: run_single("Reduce", ReduceAttrs(op, (1,), False), x)[0]
           for op in ("Sum", "Mean", "Max", "Min", "Prod")}
    assert got["Sum"] == 0 and got["Prod"] == 1 and np.isnan(got["Mean"])
    assert got["Max"] == -np.inf and got["Min"] == np.inf


def test_reduce_all_nan_max_is_minus_inf_and_ints_wrap():
    x = np.array([[np.nan, np.nan]], np.float32)
    assert run_single("Reduce", ReduceAttrs("Max", (1,), False), x)[0] == -np.inf
    i = np.array([2**31 - 1, 1], np.int32)
    s = run_single("Reduce", ReduceAttrs("Sum", (0,), False), i)
    assert s.dtype == np.int32 and s == -(2**31)
    m = run_single("Reduce", ReduceAttrs("Min", (0,), False), np.zeros(0, np.int32))
    assert m == 2**31 - 1                            # Min's identity for i32


def test_reduce_f16_accumulates_in_f32():
    x = np.ones(4096, np.float16)                   # an f16 running sum stalls at 2048
    out = run_single("Reduce", ReduceAttrs("Sum", (0,), False), x)
    assert out.dtype == np.float16 and out == 4096
    m = run_single("Reduce", ReduceAttrs("Mean", (0,), False), x)
    assert m == 1


def test_reduce_verifier_errors():
    s = Shape([2, 3], F)
    assert "(C2) axis 3 is out of range for rank 2" in errors(
        "Reduce", ReduceAttrs("Sum", (3,), False), [s], s)
    assert "(C3) Reduce Mean is defined on float and complex tensors, got i32" in errors(
        "Reduce", ReduceAttrs("Mean", (1,), False), [Shape([2, 3], DType.I32)],
        Shape([2], DType.I32))
    assert "(C3) Reduce is not defined on bool" in errors(
        "Reduce", ReduceAttrs("Max", (1,), False), [Shape([2, 3], DType.BOOL)],
        Shape([2], DType.BOOL))
    assert "shape mismatch" in errors("Reduce", ReduceAttrs("Sum", (1,), True), [s],
                                      Shape([2], F))
    # A full reduction may be declared [] or [1] (RLX treats one-element shapes alike).
    assert errors("Reduce", ReduceAttrs("Sum", (0, 1), False), [s], Shape([1], F)) == ""


# ── Softmax ───────────────────────────────────────────────────────────────

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_softmax_sums_to_one_and_matches_the_definition(axis):
    x = f32(2, 3, 5) * 3
    out = run_single("Softmax", SoftmaxAttrs(axis), x)
    e = np.exp(x.astype(np.float64))
    ref = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=axis), 1.0, rtol=1e-5)
    np.testing.assert_allclose(run_single("Softmax", SoftmaxAttrs(axis), x, float64=True),
                               ref, rtol=1e-13)


def test_softmax_is_shift_invariant_and_does_not_overflow():
    x = f32(4, 6)
    base = run_single("Softmax", SoftmaxAttrs(-1), x)
    shifted = run_single("Softmax", SoftmaxAttrs(-1), x + np.float32(1000))
    np.testing.assert_allclose(shifted, base, rtol=2e-3, atol=1e-6)   # x+1000 rounds x
    big = run_single("Softmax", SoftmaxAttrs(0), np.float32([1000, 1000, -1000]))
    np.testing.assert_allclose(big, [0.5, 0.5, 0.0])


def test_softmax_edge_rows():
    x = np.array([[-np.inf, 0, -np.inf], [-np.inf] * 3, [np.nan, 0, 1]], np.float32)
    out = run_single("Softmax", SoftmaxAttrs(-1), x)
    np.testing.assert_array_equal(out[0], [0, 1, 0])
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all()
    assert run_single("Softmax", SoftmaxAttrs(1), np.zeros((2, 0), np.float32)).shape == (2, 0)


def test_softmax_verifier_errors():
    s = Shape([2, 3], F)
    assert "(C1) axis 2 is out of range for rank 2 (expected -2..1)" in errors(
        "Softmax", SoftmaxAttrs(2), [s], s)
    assert "(C1) axis -3 is out of range" in errors("Softmax", SoftmaxAttrs(-3), [s], s)
    assert "(C1) Softmax needs a tensor of rank >= 1" in errors(
        "Softmax", SoftmaxAttrs(-1), [Shape([], F)], Shape([], F))
    i = Shape([3], DType.I32)
    assert "(C2) Softmax is defined on float tensors, got i32" in errors(
        "Softmax", SoftmaxAttrs(0), [i], i)


# ── Cumsum, CumProd, CumMax ───────────────────────────────────────────────

def naive_scan(x, kind, axis, exclusive):
    """Walk each line along ``axis`` keeping a running accumulator (float64)."""
    axis %= x.ndim
    out = np.zeros(x.shape)
    init = {"Cumsum": 0.0, "CumProd": 1.0, "CumMax": -math.inf}[kind]
    for idx in np.ndindex(*x.shape):
        if idx[axis] != 0:
            continue
        acc = init
        for j in range(x.shape[axis]):
            at = idx[:axis] + (j,) + idx[axis + 1:]
            v = float(x[at])
            before = acc
            if kind == "Cumsum":
                acc += v
            elif kind == "CumProd":
                acc *= v
            elif not math.isnan(v):
                acc = max(acc, v)
            out[at] = before if exclusive else acc
    return out


@pytest.mark.parametrize("kind", ["Cumsum", "CumProd", "CumMax"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scans_match_naive_loops(kind, axis, exclusive):
    x = f32(2, 3, 5)
    x[1, 2, 1] = np.nan if kind == "CumMax" else x[1, 2, 1]
    x[0, 0, 0] = np.nan if kind == "CumMax" else x[0, 0, 0]
    out = run_single(kind, CumAttrs(axis, exclusive), x)
    ref = naive_scan(x, kind, axis, exclusive)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_single(kind, CumAttrs(axis, exclusive), x, float64=True),
                               ref, rtol=1e-13, atol=1e-14)


def test_scans_on_integers_and_empty_axes():
    i = np.array([2**31 - 1, 1, 5], np.int32)
    np.testing.assert_array_equal(run_single("Cumsum", CumAttrs(0, False), i),
                                  [2**31 - 1, -(2**31), -(2**31) + 5])
    np.testing.assert_array_equal(run_single("CumMax", CumAttrs(0, True), i),
                                  [-(2**31), 2**31 - 1, 2**31 - 1])
    np.testing.assert_array_equal(run_single("CumProd", CumAttrs(0, True), i),
                                  [1, 2**31 - 1, 2**31 - 1])
    e = np.zeros((2, 0), np.float32)
    assert run_single("Cumsum", CumAttrs(1, True), e).shape == (2, 0)


def test_scan_verifier_errors():
    s = Shape([2, 3], F)
    assert "(C1) axis 2 is out of range for rank 2" in errors("CumProd", CumAttrs(2, False),
                                                              [s], s)
    b = Shape([3], DType.BOOL)
    assert "(C2) CumMax is defined on float and integer tensors, got bool" in errors(
        "CumMax", CumAttrs(0, False), [b], b)
    assert "shape mismatch" in errors("Cumsum", CumAttrs(0, False), [s], Shape([3, 2], F))


# ── ArgMax, ArgMin ────────────────────────────────────────────────────────

def naive_arg(x, axis, largest):
    """RLX's CPU scan: best = element 0, then each strictly larger (smaller) element."""
    moved = np.moveaxis(x, axis, -1)
    out = np.zeros(moved.shape[:-1])
    for idx in np.ndindex(*moved.shape[:-1]):
        line = moved[idx]
        best, best_i = line[0], 0
        for j in range(1, len(line)):
            if line[j] > best if largest else line[j] < best:
                best, best_i = line[j], j
        out[idx] = best_i
    return out


@pytest.mark.parametrize("kind", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_arg_matches_naive_loops(kind, axis):
    x = np.round(f32(3, 4, 5) * 2) / 2                  # coarse values: many ties
    x[0, 0, :] = np.nan
    x[:, 1, 0] = np.nan
    for keep in (False, True):
        out = run_single(kind, ArgAttrs(axis, keep), x)
        ref = naive_arg(x, axis, kind == "ArgMax")
        assert out.dtype == np.float32                   # f32-encoded indices
        np.testing.assert_array_equal(out, np.expand_dims(ref, axis) if keep else ref)


def test_arg_index_encoding_and_errors():
    x = np.array([[1, 9, 9], [7, 7, 0]], np.int32)
    out = run_single("ArgMax", ArgAttrs(1, False), x)
    assert out.dtype == np.int32 and out.tolist() == [1, 0]
    assert "(C2) ArgMax index 2999 is not exactly representable in f16" in errors(
        "ArgMax", ArgAttrs(0, False), [Shape([3000], DType.F16)], Shape([], DType.F16))
    assert "(C3) ArgMin over an empty axis" in errors(
        "ArgMin", ArgAttrs(1, False), [Shape([2, 0], F)], Shape([2], F))
    assert "(C1) axis 2 is out of range for rank 2" in errors(
        "ArgMax", ArgAttrs(2, False), [Shape([2, 3], F)], Shape([2, 3], F))
    assert "shape mismatch" in errors("ArgMax", ArgAttrs(1, True), [Shape([2, 3], F)],
                                      Shape([2], F))


# ── TopK ──────────────────────────────────────────────────────────────────

def naive_topk(x, k):
    """Repeated selection: take the largest remaining (lowest index on ties), mask it."""
    out = np.zeros(x.shape[:-1] + (k,))
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        taken = set()
        for r in range(k):
            best = None
            for j, v in enumerate(row):
                if j not in taken and (best is None or v > row[best]):
                    best = j
            taken.add(best)
            out[idx + (r,)] = best
    return out


@pytest.mark.parametrize("k", [0, 1, 3, 7])
def test_topk_matches_repeated_selection(k):
    x = np.round(f32(2, 3, 7) * 2) / 2                  # coarse values: many ties
    out = topk(x, k)
    assert out.dtype == np.float32 and out.shape == (2, 3, k)
    np.testing.assert_array_equal(out, naive_topk(x, k))
    vals = np.take_along_axis(x, out.astype(np.int64), axis=-1)
    assert (np.diff(vals, axis=-1) <= 0).all()          # values come out descending


def test_topk_nan_ints_and_i64_indices():
    x = np.array([np.nan, 1, -np.inf, np.nan, 2], np.float32)
    np.testing.assert_array_equal(topk(x, 5), [4, 1, 2, 0, 3])
    u = np.array([[0, 255, 7, 255]], np.uint8)
    np.testing.assert_array_equal(topk(u, 3), [[1, 3, 2]])
    v = f32(3, 4)
    out = run_single("TopK", TopKAttrs(2), v, out=Shape([3, 2], DType.I64))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, naive_topk(v, 2))


def test_topk_verifier_errors():
    s = Shape([2, 3], F)
    assert "(C2) TopK k=4 exceeds the last axis size 3" in errors(
        "TopK", TopKAttrs(4), [s], Shape([2, 4], F))
    assert "(C3) TopK(k=2) of [2, 3] gives [2, 2], declared [2, 3]" in errors(
        "TopK", TopKAttrs(2), [s], s)
    assert "(C4) TopK returns indices in the input's dtype f32 (f32-encoded) or i64" in errors(
        "TopK", TopKAttrs(2), [s], Shape([2, 2], DType.I32))
    assert "(C1) TopK needs a tensor of rank >= 1" in errors(
        "TopK", TopKAttrs(0), [Shape([], F)], Shape([0], F))
    assert "(C5) TopK index 299 is not exactly representable in bf16" in errors(
        "TopK", TopKAttrs(1), [Shape([300], DType.BF16)], Shape([1], DType.BF16))
