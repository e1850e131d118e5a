"""Movement family: each op against numpy / Python slicing / naive loops, plus its errors."""
import itertools

import ml_dtypes
import numpy as np
import pytest

from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph, Op
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ir.text import print_op
from rlx_ref.ir.verify import verify
from rlx_ref.ops.opdef import OpError, get
from rlx_ref.ops.single import verify_single, run_single, single_op_graph

F32 = np.float32


def A(kind, *args):
    return get(kind).make_attrs(*args)


def run(kind, attrs, *xs, **kw):
    return run_single(kind, attrs, *xs, **kw)


def errors(kind, attrs, inputs, out):
    """Verifier messages of a one-op graph whose declared output is ``out``."""
    return " | ".join(verify_single(kind, attrs, inputs, out))


def rand(*dims, seed=0):
    return np.random.default_rng(seed).standard_normal(dims).astype(F32)


# ── payload text form (serde, byte for byte) ──────────────────────────────

@pytest.mark.parametrize("kind,args,text", [
    ("Reshape", ((4, -1),), '{"Reshape":{"new_shape":[4,-1]}}'),
    ("Slice", (0, 4, 5, -1), '{"Slice":{"axis":0,"start":4,"len":5,"step":-1}}'),
    ("Pad", (((1, 2), (0, 0)), ("Constant", 0.5)),
     '{"Pad":{"pads":[[1,2],[0,0]],"mode":{"Constant":0.5}}}'),
    ("Pad", (((1, 1),), "Reflect"), '{"Pad":{"pads":[[1,1]],"mode":"Reflect"}}'),
    ("Trilu", (True, 0), '{"Trilu":{"upper":true,"diagonal":0}}'),
    ("Narrow", (1, 2, 3), '{"Narrow":{"axis":1,"start":2,"len":3}}'),
])
def test_payload_text(kind, args, text):
    assert print_op(Op(kind, A(kind, *args))) == text


def test_resize_is_a_unit_payload():
    assert print_op(Op("ResizeNearest2x")) == "ResizeNearest2x"


# ── Reshape ───────────────────────────────────────────────────────────────

def test_reshape_infers_minus_one_and_keeps_row_major_order():
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    out = run("Reshape", A("Reshape", (-1, 8)), x)
    np.testing.assert_array_equal(out, x.reshape(3, 8))
    assert run("Reshape", A("Reshape", (5, -1)), np.zeros((0, 5), F32)).shape == (5, 0)


@pytest.mark.parametrize("new_shape,msg", [
    ((-1, -1), "(C1)"), ((2, -2), "(C2)"), ((5, 5), "(C3) cannot reshape 6 elements"),
    ((4, -1), "not a multiple of 4"), ((0, -1), "multiply to 0"),
])
def test_reshape_errors(new_shape, msg):
    x = Shape([2, 3], DType.F32)
    assert msg in errors("Reshape", A("Reshape", new_shape), [x], Shape([6], DType.F32))


def test_reshape_dynamic_minus_one_is_the_dynamic_symbol():
    g = single_op_graph("Reshape", A("Reshape", (-1, 4)), [Shape([Dyn(0), 4], DType.F32)])
    assert g.nodes[-1].shape.dims == (Dyn(0), 4)
    out = interpret(g, {"x0": np.ones((3, 4), F32)})[0]
    assert out.shape == (3, 4)


# ── Transpose, Narrow ─────────────────────────────────────────────────────

@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_transpose_matches_numpy(perm):
    x = rand(2, 3, 5)
    np.testing.assert_array_equal(run("Transpose", A("Transpose", perm), x),
                                  np.transpose(x, perm))


def test_transpose_errors():
    x = Shape([2, 3], DType.F32)
    assert "(C1)" in errors("Transpose", A("Transpose", (0,)), [x], x)
    assert "(C2) perm [0, 0]" in errors("Transpose", A("Transpose", (0, 0)), [x], x)


def test_narrow_matches_slicing_and_checks_bounds():
    x = rand(3, 7)
    np.testing.assert_array_equal(run("Narrow", A("Narrow", 1, 4, 3), x), x[:, 4:7])
    msg = errors("Narrow", A("Narrow", 1, 5, 3), [x], Shape([3, 3], DType.F32))
    assert "(C2) narrow [5, 8) is out of range for axis 1 of size 7" in msg
    assert "(C1) axis 2" in errors("Narrow", A("Narrow", 2, 0, 1), [x], Shape([3], DType.F32))


def test_narrow_rechecks_dynamic_dims_at_run_time():
    g = single_op_graph("Narrow", A("Narrow", 0, 2, 3), [Shape([Dyn(0)], DType.F32)])
    np.testing.assert_array_equal(interpret(g, {"x0": np.arange(6, dtype=F32)})[0], [2, 3, 4])
    with pytest.raises(InterpretError, match=r"at %1 .*\(C2\) narrow \[2, 5\)"):
        interpret(g, {"x0": np.arange(4, dtype=F32)})


# ── Slice ─────────────────────────────────────────────────────────────────

def _python_slices(n):
    """Every distinct (start, len, step) that a Python slice of range(n) produces."""
    bounds = [None, 0, 1, 2, n - 1, n, n + 3, -1, -2, -n, -n - 3]
    seen = {}
    for lo, hi, step in itertools.product(bounds, bounds, [1, 2, 3, 5, -1, -2, -3, -6]):
        r = range(n)[slice(lo, hi, step)]
        key = (r.start if len(r) else 0, len(r), step)
        seen.setdefault(key, slice(lo, hi, step))
    return seen


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_slice_matches_python_slicing(n):
    x = np.arange(2 * n, dtype=F32).reshape(2, n) * 1.5
    for (start, length, step), py in _python_slices(n).items():
        got = run("Slice", A("Slice", 1, start, length, step), x)
        np.testing.assert_array_equal(got, x[:, py], err_msg=f"x[:, {py}]")


@pytest.mark.parametrize("attrs,msg", [
    ((0, 7, 1, 1), "(C3) slice reads indices 7"),        # start past the end
    ((0, 2, 4, -1), "..., -1"),                          # walks below 0
    ((0, 0, 3, 4), "..., 8 "),                           # walks past the end
    ((0, 0, 1, 0), "(C2) step must not be 0"),
    ((1, 0, 1, 1), "(C1) axis 1"),
])
def test_slice_errors(attrs, msg):
    x = Shape([7], DType.F32)
    assert msg in errors("Slice", A("Slice", *attrs), [x], Shape([attrs[2]], DType.F32))


def test_slice_declared_shape_is_checked():
    x = Shape([7], DType.F32)
    assert "shape mismatch" in errors("Slice", A("Slice", 0, 6, 3, -2), [x],
                                      Shape([4], DType.F32))


# ── Concat, Expand, Reverse ───────────────────────────────────────────────

def test_concat_matches_numpy():
    xs = [rand(2, k, 3, seed=k) for k in (1, 0, 4)]
    np.testing.assert_array_equal(run("Concat", A("Concat", 1), *xs), np.concatenate(xs, 1))


def test_concat_errors():
    a, b = Shape([2, 3], DType.F32), Shape([3, 3], DType.F32)
    assert "dim 0 differs" in errors("Concat", A("Concat", 1), [a, b], Shape([2, 6], DType.F32))
    assert "(C2) axis 2" in errors("Concat", A("Concat", 2), [a, a], Shape([2, 6], DType.F32))
    assert "(C3)" in errors("Concat", A("Concat", 0), [a, Shape([2, 3], DType.F16)],
                            Shape([4, 3], DType.F32))
    assert "(C2)" in errors("Concat", A("Concat", 0), [Shape([], DType.F32)],
                            Shape([1], DType.F32))


@pytest.mark.parametrize("src,target", [
    ((3, 1), (2, 1, 4)), ((1,), (5,)), ((), (2, 2)), ((2, 1), (2, 0)), ((4,), (1,)),
])
def test_expand_is_a_two_way_broadcast(src, target):
    x = np.arange(int(np.prod(src)), dtype=F32).reshape(src)
    want = np.broadcast_to(x, np.broadcast_shapes(src, target))
    np.testing.assert_array_equal(run("Expand", A("Expand", target), x), want)


def test_expand_errors():
    x = Shape([3, 2], DType.F32)
    assert "(C2) cannot expand [3, 2] to [4, 2]" in errors("Expand", A("Expand", (4, 2)), [x], x)
    assert "(C1)" in errors("Expand", A("Expand", (-1, 2)), [x], x)


def test_reverse_matches_flip_and_flips_a_repeated_axis_once():
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(run("Reverse", A("Reverse", (0, 2)), x), x[::-1, :, ::-1])
    np.testing.assert_array_equal(run("Reverse", A("Reverse", (1, 1)), x), x[:, ::-1])
    assert "(C1) axis 3" in errors("Reverse", A("Reverse", (3,)), [x], Shape(x.shape, "F32"))


# ── Pad ───────────────────────────────────────────────────────────────────

NP_MODE = {"Reflect": "reflect", "Replicate": "edge", "Circular": "wrap"}


def _pad_amount(rng, n, mode):
    most = {"Reflect": n - 1, "Circular": n}.get(mode, 4)     # RLX: pad < n, pad <= n
    return int(rng.integers(0, most + 1))


@pytest.mark.parametrize("mode", ["Constant", "Reflect", "Replicate", "Circular"])
@pytest.mark.parametrize("seed", range(4))
def test_pad_matches_np_pad(mode, seed):
    rng = np.random.default_rng(seed)
    dims = tuple(int(d) for d in rng.integers(2, 5, size=3))
    x = rng.standard_normal(dims).astype(F32)
    pads = tuple((_pad_amount(rng, d, mode), _pad_amount(rng, d, mode)) for d in dims)
    if mode == "Constant":
        want = np.pad(x, pads, constant_values=F32(-2.5))
        got = run("Pad", A("Pad", pads, ("Constant", -2.5)), x)
    else:
        want = np.pad(x, pads, mode=NP_MODE[mode])
        got = run("Pad", A("Pad", pads, mode), x)
    np.testing.assert_array_equal(got, want, err_msg=f"{mode} {pads} on {dims}")


def test_pad_reflect_excludes_the_edge():
    x = np.array([1, 2, 3, 4], F32)                      # abcd -> cb|abcd|cb
    got = run("Pad", A("Pad", ((2, 2),), "Reflect"), x)
    np.testing.assert_array_equal(got, [3, 2, 1, 2, 3, 4, 3, 2])


def test_pad_constant_casts_like_cast():
    got = run("Pad", A("Pad", ((1, 1),), ("Constant", -1.75)), np.array([5, 6], np.int32))
    np.testing.assert_array_equal(got, [-1, 5, 6, -1])     # truncated toward zero
    assert got.dtype == np.int32
    b = run("Pad", A("Pad", ((1, 0),), ("Constant", 2.0)), np.array([False]))
    np.testing.assert_array_equal(b, [True, False])


def test_pad_bf16_and_f64_mode():
    x = np.array([[1, 2, 3]], ml_dtypes.bfloat16)
    got = run("Pad", A("Pad", ((0, 0), (2, 1)), "Circular"), x)
    np.testing.assert_array_equal(got.astype(F32), [[2, 3, 1, 2, 3, 1]])
    x64 = np.array([0.1, 0.2], F32)
    out = run("Pad", A("Pad", ((1, 1),), ("Constant", 0.1)), x64, float64=True)
    assert out.dtype == np.float64 and out[0] == np.float64(F32(0.1))


@pytest.mark.parametrize("pads,mode,msg", [
    (((1, 1),), "Reflect", "(C1) pads has 1"),
    (((0, 0), (3, 0)), "Reflect", "(C2) Reflect pad 3 on axis 1 of size 3"),
    (((0, 0), (0, 4)), "Circular", "(C3) Circular pad 4 on axis 1 of size 3"),
])
def test_pad_errors(pads, mode, msg):
    x = Shape([2, 3], DType.F32)
    assert msg in errors("Pad", A("Pad", pads, mode), [x], x)


def test_pad_replicate_needs_an_edge():
    x = Shape([0], DType.F32)
    assert "(C4)" in errors("Pad", A("Pad", ((1, 0),), "Replicate"), [x], Shape([1], "F32"))
    # Constant may pad an empty axis
    got = run("Pad", A("Pad", ((1, 2),), ("Constant", 4.0)), np.zeros(0, F32))
    np.testing.assert_array_equal(got, [4, 4, 4])


# ── Tile, Trilu, ResizeNearest2x ──────────────────────────────────────────

@pytest.mark.parametrize("reps", [(1, 1), (2, 3), (0, 2), (3, 1)])
def test_tile_matches_np_tile(reps):
    x = rand(2, 3)
    np.testing.assert_array_equal(run("Tile", A("Tile", reps), x), np.tile(x, reps))


def test_tile_needs_one_rep_per_axis():
    x = Shape([2, 3], DType.F32)
    assert "(C1) reps has 1" in errors("Tile", A("Tile", (2,)), [x], x)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("diagonal", range(-4, 5))
def test_trilu_matches_triu_tril(upper, diagonal):
    x = rand(2, 3, 4)
    want = np.triu(x, diagonal) if upper else np.tril(x, diagonal)
    np.testing.assert_array_equal(run("Trilu", A("Trilu", upper, diagonal), x), want)


def test_trilu_zeroes_nan_and_inf_exactly():
    x = np.array([[np.nan, np.inf], [-np.inf, np.nan]], F32)
    np.testing.assert_array_equal(run("Trilu", A("Trilu", True, 0), x),
                                  [[np.nan, np.inf], [0, np.nan]])
    assert "(C1) Trilu needs rank >= 2" in errors("Trilu", A("Trilu", True, 0),
                                                  [Shape([3], "F32")], Shape([3], "F32"))


def test_resize_nearest_2x_against_a_loop():
    x = rand(2, 3, 2, 3)
    got = run("ResizeNearest2x", None, x)
    want = np.empty((2, 3, 4, 6), F32)
    for n, c, y, w in np.ndindex(want.shape):
        want[n, c, y, w] = x[n, c, y // 2, w // 2]
    np.testing.assert_array_equal(got, want)
    bad = Shape([3, 4], DType.F32)
    assert "(C1)" in errors("ResizeNearest2x", None, [bad], bad)


# ── multi-op graph ────────────────────────────────────────────────────────

def test_pad_then_slice_recovers_the_input():
    g = Graph("roundtrip")
    x = g.add_node(Op("Input", A("Input", "x")), [], Shape([5], DType.F32))
    p = g.add_node(Op("Pad", A("Pad", ((2, 3),), "Reflect")), [x], Shape([10], DType.F32))
    s = g.add_node(Op("Slice", A("Slice", 0, 6, 5, -1)), [p], Shape([5], DType.F32))
    g.set_outputs([s])
    assert verify(g) == []
    v = np.arange(5, dtype=F32)
    np.testing.assert_array_equal(interpret(g, {"x": v})[0], v[::-1])


def test_reshape_dims_helper_raises_operror():
    from rlx_ref.ops.movement import reshape_dims

    assert reshape_dims(6, (-1, 3)) == (2, 3)
    with pytest.raises(OpError):
        reshape_dims(6, (4,))
