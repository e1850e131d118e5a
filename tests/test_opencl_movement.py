"""OpenCL movement, indexing and control-flow kernels against the oracle, bit for bit."""
import dataclasses

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import add, binary, constant, make_body
from rlx_ref.ops.opdef import get

cl = pytest.importorskip("pyopencl")
OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

KINDS = ("Reshape", "Transpose", "Narrow", "Slice", "Concat", "Expand", "Reverse", "Pad",
         "Tile", "Trilu", "ResizeNearest2x", "Gather", "GatherElements", "GatherNd",
         "ScatterAdd", "ScatterElements", "ScatterNd", "If", "While", "Scan", "CustomFn")
IDX_DTYPE = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64",
             np.dtype(np.int32): "i32"}
DTYPES = ("bool", "i8", "u8", "i16", "i32", "i64", "u32", "f16", "bf16", "f32", "f64", "c64")


def _values(shape, dt: str, seed=0):
    """Distinct-ish values of ``dt`` (bool alternates; floats include a NaN)."""
    rng = np.random.default_rng(seed)
    np_dt = DType.parse(dt).np
    n = int(np.prod(shape))
    if dt == "bool":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    v = rng.permutation(n).astype(np.float64) - n // 2
    if dt in ("u8", "u32"):
        v = np.abs(v)
    out = v.astype(np_dt)
    if dt in ("f16", "bf16", "f32", "f64") and n > 3:
        out[2] = np.nan
    return out.reshape(shape)


def _device(gpu_shaped: bool):
    info, context, queue = OCL._device()
    if gpu_shaped:      # the GPU work split (one element per work-item) on the same device
        info = dataclasses.replace(info, is_cpu=False, max_work_group=64)
    return info, context, queue


def _run(g, feeds, gpu_shaped=False):
    """Compile ``g`` for opencl (optionally with the GPU work split) and run it."""
    from rlx_ref.backends.opencl.executable import OpenCLExecutable
    from rlx_ref.passes import compile_pipeline

    lowered, _ = compile_pipeline(g, OCL)
    return OpenCLExecutable(lowered, *_device(gpu_shaped)).run(feeds)


def _same_bits(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


def _same_values(got, want):
    """Equal values (any NaN matches any NaN: arithmetic may pick another payload)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    wide = np.float64 if got.dtype.kind in "fV" else got.dtype
    np.testing.assert_array_equal(got.astype(wide), want.astype(wide))


def _one_op(kind, shapes, dt, fields, idx=None):
    g = rlx_ref.Graph("m")
    ins = [g.input(f"x{i}", s, dt) for i, s in enumerate(shapes)]
    feeds = {f"x{i}": _values(s, dt, i) for i, s in enumerate(shapes)}
    if idx is not None:
        ins.append(g.input("idx", idx.shape, IDX_DTYPE[idx.dtype]))
        feeds["idx"] = idx
    g.set_outputs([g.op(kind, ins, **fields)])
    return g, feeds


MOVES = [
    ("Reshape", [(4, 6)], {"new_shape": (3, -1)}),
    ("Transpose", [(5, 7, 3)], {"perm": (2, 0, 1)}),
    ("Transpose", [(3, 70, 2)], {"perm": (1, 0, 2)}),
    ("Transpose", [(37, 70)], {"perm": (1, 0)}),             # tiled
    ("Transpose", [(3, 19, 45)], {"perm": (0, 2, 1)}),       # tiled, batched
    ("Narrow", [(4, 9, 5)], {"axis": 1, "start": 2, "len": 5}),
    ("Slice", [(6, 37)], {"axis": 1, "start": 35, "len": 12, "step": -3}),
    ("Concat", [(3, 2, 5), (3, 4, 5), (3, 1, 5)], {"axis": 1}),
    ("Expand", [(3, 1)], {"target_shape": (2, 3, 130)}),
    ("Expand", [(5, 1)], {"target_shape": (2, 5, 9)}),       # tiled, stride 0
    ("Reverse", [(3, 4, 131)], {"axes": (0, 2)}),
    ("Pad", [(3, 5)], {"pads": ((1, 2), (4, 3)), "mode": "Reflect"}),
    ("Pad", [(3, 5)], {"pads": ((2, 0), (5, 5)), "mode": "Circular"}),
    ("Pad", [(3, 70)], {"pads": ((2, 1), (0, 3)), "mode": "Replicate"}),
    ("Pad", [(3, 5)], {"pads": ((1, 2), (0, 3)), "mode": ("Constant", -2.5)}),
    ("Tile", [(2, 3)], {"reps": (3, 2)}),
    ("Trilu", [(2, 5, 67)], {"upper": False, "diagonal": 3}),
    ("Trilu", [(4, 4)], {"upper": True, "diagonal": -1}),
    ("ResizeNearest2x", [(1, 2, 3, 5)], {}),
]


@pytest.mark.parametrize("gpu_shaped", [False, True], ids=["cpu-split", "gpu-split"])
@pytest.mark.parametrize("kind,shapes,fields", MOVES, ids=[m[0] for m in MOVES])
def test_movement_matches_the_oracle_for_every_dtype(kind, shapes, fields, gpu_shaped):
    for dt in DTYPES:
        g, feeds = _one_op(kind, shapes, dt, fields)
        _same_bits(_run(g, feeds, gpu_shaped)[0], rlx_ref.interpret(g, feeds)[0])


def test_declared_native_for_every_dtype():
    paths, table = OCL.paths(), OCL.supported_ops()
    for kind in KINDS:
        assert paths[kind] == "native", kind
    for kind in ("Transpose", "Gather", "Pad"):
        assert {DType.F16, DType.BF16, DType.BOOL, DType.C64} <= table[kind]
    assert DType.BF16 in table["ScatterNd"] and DType.C64 not in table["ScatterNd"]


GATHERS = [
    ("Gather", [(5, 3, 4)], {"axis": 1}, np.array([[2, 0], [2, 1]], np.float32)),
    ("Gather", [(9, 70)], {"axis": 0}, np.array([8, 0, 3], np.int64)),
    ("GatherElements", [(3, 4)], {"axis": -1}, np.array([[-1, 0], [3, -4], [1, 1]],
                                                          np.float32)),
    ("GatherNd", [(2, 3, 4)], {"batch_dims": 1}, np.array([[[2, -1]], [[0, 3]]], np.int32)),
    ("GatherNd", [(3, 2, 70)], {"batch_dims": 0}, np.array([[2], [-3]], np.float32)),
]


@pytest.mark.parametrize("gpu_shaped", [False, True], ids=["cpu-split", "gpu-split"])
@pytest.mark.parametrize("kind,shapes,fields,idx", GATHERS, ids=[g[0] for g in GATHERS])
def test_gathers_match_the_oracle(kind, shapes, fields, idx, gpu_shaped):
    for dt in DTYPES:
        g, feeds = _one_op(kind, shapes, dt, fields, idx)
        _same_bits(_run(g, feeds, gpu_shaped)[0], rlx_ref.interpret(g, feeds)[0])


def _gather_graph(table_shape=(4, 3), n=2):
    g = rlx_ref.Graph("g")
    t = g.input("t", table_shape)
    i = g.input("i", [n])
    g.set_outputs([g.op("Gather", [t, i], axis=0)])
    return g


def test_out_of_range_gather_index_names_the_node():
    exe = OCL.compile(_gather_graph())
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    for bad in ([4, 0], [-1, 0], [0.5, 1], [np.nan, 2]):
        with pytest.raises(RuntimeError, match=r"at %2 in @g: index out of range(.|\n)*"
                                               r"Gather"):
            exe.run({"t": table, "i": np.array(bad, np.float32)})
    got = exe.run({"t": table, "i": np.array([3, 0], np.float32)})[0]
    np.testing.assert_array_equal(got, table[[3, 0]])


def test_indices_of_an_empty_output_are_still_checked():
    exe = OCL.compile(_gather_graph((4, 0), 3))
    ok = exe.run({"t": np.zeros((4, 0), np.float32), "i": np.array([0, 3, 1], np.float32)})
    assert ok[0].shape == (3, 0)
    with pytest.raises(RuntimeError, match="index out of range"):
        exe.run({"t": np.zeros((4, 0), np.float32), "i": np.array([0, 4, 1], np.float32)})


def _scatter_graph(kind, data_dt, data_shape, idx, upd_shape, **fields):
    g = rlx_ref.Graph("s")
    idt = IDX_DTYPE[idx.dtype]
    feeds = {"i": idx, "u": _values(upd_shape, data_dt, 1)}
    if kind == "ScatterAdd":
        u, i = g.input("u", upd_shape, data_dt), g.input("i", idx.shape, idt)
        out = g.op("ScatterAdd", [u, i], shape=Shape(data_shape, DType.parse(data_dt)))
    else:
        d = g.input("d", data_shape, data_dt)
        i, u = g.input("i", idx.shape, idt), g.input("u", upd_shape, data_dt)
        out = g.op(kind, [d, i, u], **fields)
        feeds["d"] = _values(data_shape, data_dt, 2)
    g.set_outputs([out])
    return g, feeds


REDUCTIONS = ("None", "Add", "Mul", "Max", "Min")
SCATTER_DTYPES = ("bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64")


@pytest.mark.parametrize("gpu_shaped", [False, True], ids=["cpu-split", "gpu-split"])
def test_scatters_with_duplicates_match_the_oracle(gpu_shaped):
    rng = np.random.default_rng(3)
    rows = rng.integers(-5, 5, (40, 1)).astype(np.float32)       # many duplicates
    cols = rng.integers(-6, 6, (3, 7, 2)).astype(np.int64)
    for dt in SCATTER_DTYPES:
        cases = [_scatter_graph("ScatterAdd", dt, (6, 3), np.abs(rows[:, 0]), (40, 3))]
        for r in REDUCTIONS:
            cases.append(_scatter_graph("ScatterNd", dt, (5, 3), rows, (40, 3), reduction=r))
            cases.append(_scatter_graph("ScatterElements", dt, (3, 6, 2), cols, (3, 7, 2),
                                        axis=1, reduction=r))
        for g, feeds in cases:
            _same_values(_run(g, feeds, gpu_shaped)[0], rlx_ref.interpret(g, feeds)[0])


def test_scatter_add_rejects_negative_indices_and_scatter_nd_wraps_them():
    g, feeds = _scatter_graph("ScatterAdd", "f32", (4, 2), np.array([1, -1], np.float32),
                              (2, 2))
    with pytest.raises(RuntimeError, match=r"at %2 in @s: index out of range"):
        OCL.compile(g).run(feeds)
    g, feeds = _scatter_graph("ScatterNd", "f32", (4, 2), np.array([[1], [-1]], np.float32),
                              (2, 2), reduction="None")
    _same_bits(OCL.compile(g).run(feeds)[0], rlx_ref.interpret(g, feeds)[0])


# ── control flow ───────────────────────────────────────────────────────────

def _swap_loop():
    """Carried (a [3], b [3], i []): (a, b) swap and i += 1 while i < 3."""
    s, si = Shape([3], DType.F32), Shape([], DType.F32)
    lt = get("Compare").attrs("Lt")
    cond = make_body("cond", [s, s, si], lambda g, a, b, i: add(g, "Compare", lt, i,
                                                                 constant(g, 3.0)))
    body = make_body("body", [s, s, si], lambda g, a, b, i: [
        b, a, binary(g, "Add", i, constant(g, 1.0))])
    g = rlx_ref.Graph("w")
    ins = [g.input("a", [3]), g.input("b", [3]), g.input("i", [])]
    g.set_outputs([g.op("While", ins, cond=cond, body=body, max_iterations=None)])
    return g


def test_while_with_a_swapping_body_keeps_its_state_apart():
    g = _swap_loop()
    feeds = {"a": np.float32([1, 2, 3]), "b": np.float32([4, 5, 6]), "i": np.float32(0)}
    exe = OCL.compile(g)
    for start, want in ((0, [4, 5, 6]), (1, [1, 2, 3]), (7, [1, 2, 3])):
        feeds["i"] = np.float32(start)
        np.testing.assert_array_equal(exe.run(feeds)[0], want)
        np.testing.assert_array_equal(rlx_ref.interpret(g, feeds)[0], want)


def test_an_index_error_inside_a_loop_stops_it_naming_the_body_node():
    s1, s4 = Shape([1], DType.F32), Shape([4], DType.F32)
    gt = get("Compare").attrs("Gt")
    cond = make_body("cond", [s1, s4], lambda g, i, t: add(g, "Compare", gt, i,
                                                            constant(g, [-1.0])))
    body = make_body("body", [s1, s4], lambda g, i, t: [
        binary(g, "Add", binary(g, "Add", i, g.op("Gather", [t, i], axis=0)),
               constant(g, [1.0])), t])
    g = rlx_ref.Graph("w")
    ins = [g.input("i", [1]), g.input("t", [4])]
    g.set_outputs([g.op("While", ins, cond=cond, body=body, max_iterations=None)])
    with pytest.raises(RuntimeError, match=r"in @body: index out of range(.|\n)*Gather"):
        OCL.compile(g).run({"i": np.float32([0]), "t": np.zeros(4, np.float32)})


@pytest.mark.parametrize("trajectory,checkpoints", [(False, 0), (True, 0), (True, 3)])
def test_scan_with_broadcasts_rows_and_a_trajectory(trajectory, checkpoints):
    s = Shape([2, 3], DType.F32)
    body = make_body("step", [s, s, s], lambda g, c, w, x: binary(
        g, "Add", binary(g, "Mul", c, w), x))
    g = rlx_ref.Graph("sc")
    ins = [g.input("c", [2, 3]), g.input("w", [2, 3]), g.input("xs", [7, 2, 3])]
    g.set_outputs([g.op("Scan", ins, body=body, length=7, save_trajectory=trajectory,
                        num_bcast=1, num_xs=1, num_checkpoints=checkpoints)])
    feeds = {"c": np.ones((2, 3), np.float32), "w": np.full((2, 3), 0.5, np.float32),
             "xs": np.arange(42, dtype=np.float32).reshape(7, 2, 3)}
    exe = OCL.compile(g)
    for _ in range(2):      # runs repeat from the same start
        _same_bits(exe.run(feeds)[0], rlx_ref.interpret(g, feeds)[0])


def test_scan_whose_body_returns_a_row_or_its_carry():
    s = Shape([3], DType.F32)
    for pick in (lambda g, c, x: x, lambda g, c, x: c):
        body = make_body("step", [s, s], pick)
        g = rlx_ref.Graph("sc")
        ins = [g.input("c", [3]), g.input("xs", [4, 3])]
        g.set_outputs([g.op("Scan", ins, body=body, length=4, save_trajectory=True,
                            num_bcast=0, num_xs=1, num_checkpoints=0)])
        feeds = {"c": np.float32([9, 9, 9]), "xs": np.arange(12, dtype=np.float32)
                 .reshape(4, 3)}
        _same_bits(OCL.compile(g).run(feeds)[0], rlx_ref.interpret(g, feeds)[0])


def test_if_reads_its_predicate_on_every_run():
    s = Shape([3], DType.I32)
    then = make_body("then", [s], lambda g, x: binary(g, "Add", x, x))
    other = make_body("else", [s], lambda g, x: binary(g, "Mul", x, x))
    g = rlx_ref.Graph("f")
    p, x = g.input("p", [], "i8"), g.input("x", [3], "i32")
    g.set_outputs([g.op("If", [p, x], then_branch=then, else_branch=other)])
    exe = OCL.compile(g)
    x = np.int32([1, -2, 5])
    assert exe.run({"p": np.int8(3), "x": x})[0].tolist() == [2, -4, 10]
    assert exe.run({"p": np.int8(0), "x": x})[0].tolist() == [1, 4, 25]
