"""Numba CPU loop drivers: a Scan whose body's steps all run from compiled code is one
generated njit loop; it must give the host loop's bits, its trajectories and its errors."""
import warnings

import numpy as np
import pytest

import rlx_ref
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import add, binary, constant, make_body
from rlx_ref.ops.control import ScanAttrs
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph

pytest.importorskip("numba")
from rlx_ref.backends.numba_cpu import lower_control  # noqa: E402
from rlx_ref.backends.registry import get_backend  # noqa: E402

NB = get_backend("numba-cpu")
F = np.float32


def _rnn(steps, h, traj=False, checkpoints=0):
    body = rlx_ref.Graph("cell")
    hc, w, xt = body.input("h", [1, h]), body.input("w", [h, h]), body.input("x_t", [1, h])
    body.set_outputs([body.tanh(body.add(body.matmul(hc, w), xt))])
    g = rlx_ref.Graph("rnn")
    h0, w_in, xs = g.input("h0", [1, h]), g.input("w", [h, h]), g.input("xs", [steps, 1, h])
    rows = (checkpoints or steps) if traj else None
    shape = Shape([rows, 1, h] if traj else [1, h], DType.F32)
    g.set_outputs([g.op("Scan", [h0, w_in, xs],
                        ScanAttrs(body, steps, traj, 1, 1, checkpoints), shape=shape)])
    r = np.random.default_rng(3)
    feeds = {"h0": r.standard_normal((1, h)).astype(F),
             "w": (r.standard_normal((h, h)) * 0.1).astype(F),
             "xs": r.standard_normal((steps, 1, h)).astype(F)}
    return g, feeds


def _scan_note(exe, kind="Scan"):
    """The loop's note, without the reason a host loop gives."""
    note = next(note for _, k, note in exe.step_notes() if k == kind)
    return note.split(" (")[0]


def _host_only(monkeypatch):
    monkeypatch.setattr(lower_control, "scan_driver", lambda *a: None)


def _scan_over(body, steps: int, carry: list, row: list, dt=DType.F32):
    """Graph @g: a Scan of ``body`` from Input x0 (``carry``) over the ``steps`` rows of
    Input xs (``row`` each), keeping every carry."""
    g = rlx_ref.Graph("g")
    x0, xs = g.input("x0", carry, dt), g.input("xs", [steps, *row], dt)
    g.set_outputs([g.op("Scan", [x0, xs], ScanAttrs(body, steps, True, 0, 1, 0),
                        shape=Shape([steps, *carry], dt))])
    return g


def _compiled_like_host(monkeypatch, g, feeds, rtol, atol):
    """The Scan of ``g`` runs compiled, gives the host loop's bits and the oracle's values."""
    exe = NB.compile(g)
    assert _scan_note(exe) == "compiled loop"
    got = exe.run(feeds)[0]
    _host_only(monkeypatch)
    assert got.tobytes() == NB.compile(g).run(feeds)[0].tobytes()
    np.testing.assert_allclose(got, interpret(g, feeds)[0], rtol=rtol, atol=atol)


@pytest.mark.parametrize("traj,checkpoints", [(False, 0), (True, 0), (True, 3)])
def test_compiled_scan_matches_the_host_loop_bit_for_bit(monkeypatch, traj, checkpoints):
    g, feeds = _rnn(7, 24, traj, checkpoints)
    exe = NB.compile(g)
    got = exe.run(feeds)[0]
    assert _scan_note(exe) == "compiled loop"
    assert any(name.startswith("scan_loop") for name in exe.kernel_sources())
    _host_only(monkeypatch)
    host = NB.compile(g)
    assert _scan_note(host) == "host loop"
    want = host.run(feeds)[0]
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    np.testing.assert_allclose(got, interpret(g, feeds)[0], rtol=1e-5, atol=1e-6)
    # a second run starts again from the inputs (no carry left over in the buffers)
    assert exe.run(feeds)[0].tobytes() == want.tobytes()


def test_scalar_carry_over_rows_of_a_vector():
    s0 = Shape([], DType.F32)
    body = make_body("acc", [s0, s0], lambda b, c, t: binary(b, "Mul", binary(b, "Add", c, t),
                                                             constant(b, 0.5)))
    g = single_op_graph("Scan", get("Scan").attrs(body, 6, True, 0, 1, 0),
                                          (F(1), np.arange(6, dtype=F)), None)
    feeds = {"x0": F(1), "x1": np.arange(6, dtype=F)}
    exe = NB.compile(g)
    got = exe.run(feeds)[0]
    assert _scan_note(exe) == "compiled loop"
    assert got.shape == (6,) and np.array_equal(got, interpret(g, feeds)[0])


def test_integer_division_by_zero_in_a_compiled_body_names_the_body_node():
    i32 = Shape([3], DType.I32)
    body = make_body("divide", [i32, i32], lambda b, c, t: binary(b, "Div", c, t))
    g = single_op_graph("Scan", get("Scan").attrs(body, 2, False, 0, 1, 0),
                                          (np.ones(3, np.int32), np.ones((2, 3), np.int32)),
                                          None)
    exe = NB.compile(g)
    assert _scan_note(exe) == "compiled loop"
    ok = exe.run({"x0": np.full(3, 40, np.int32), "x1": np.full((2, 3), 2, np.int32)})[0]
    assert ok.tolist() == [10, 10, 10]
    with pytest.raises(RuntimeError, match=r"in @divide.*division by zero"):
        exe.run({"x0": np.full(3, 40, np.int32), "x1": np.array([[1, 1, 1], [1, 0, 1]],
                                                                np.int32)})


def test_a_body_with_a_host_step_keeps_the_host_loop():
    body = rlx_ref.Graph("top")
    c, t = body.input("c", [3]), body.input("t", [3])
    body.set_outputs([body.add(body.op("TopK", [c], k=3, shape=Shape([3], DType.F32)), t)])
    g = single_op_graph("Scan", get("Scan").attrs(body, 2, False, 0, 1, 0),
                        (np.zeros(3, F), np.zeros((2, 3), F)), None)
    exe = NB.compile(g)
    assert ("Scan", "host loop (%2 (TopK) runs host code)") in \
        [(k, note) for _, k, note in exe.step_notes()]
    feeds = {"x0": np.array([5, 7, 6], F), "x1": np.array([[1, 2, 3], [4, 5, 6]], F)}
    assert np.array_equal(exe.run(feeds)[0], interpret(g, feeds)[0])


def test_concat_and_trilu_run_inside_a_compiled_body(monkeypatch):
    body = rlx_ref.Graph("join")
    c, t = body.input("c", [2, 3]), body.input("t", [2, 3])
    joined = body.op("Concat", [body.op("Narrow", [c], axis=1, start=1, len=2),
                                body.op("Narrow", [t], axis=1, start=0, len=1)], axis=1)
    body.set_outputs([body.add(body.op("Trilu", [joined], upper=True, diagonal=0), t)])
    g = _scan_over(body, 3, [2, 3], [2, 3])
    feeds = {"x0": np.arange(6, dtype=F).reshape(2, 3),
             "xs": np.arange(18, dtype=F).reshape(3, 2, 3)}
    _compiled_like_host(monkeypatch, g, feeds, 0, 0)


def test_gathers_run_inside_a_compiled_body_and_bad_indices_name_the_node(monkeypatch):
    body = rlx_ref.Graph("lookup")
    c, t = body.input("c", [3]), body.input("t", [3])
    table = body.op("Reshape", [body.add(c, t)], new_shape=(3, 1))
    picked = body.op("Gather", [table, c], axis=0)          # f32-encoded indices, as RLX
    body.set_outputs([body.add(body.op("Reshape", [picked], new_shape=(3,)), t)])
    g = _scan_over(body, 4, [3], [3])
    feeds = {"x0": np.array([0, 1, 2], F), "xs": np.zeros((4, 3), F)}
    _compiled_like_host(monkeypatch, g, feeds, 0, 0)
    monkeypatch.undo()
    exe = NB.compile(g)
    with pytest.raises(RuntimeError, match=r"in @lookup.*index 3 .* out of range"):
        exe.run({"x0": np.array([0, 1, 3], F), "xs": np.zeros((4, 3), F)})


def test_a_body_returning_its_carry_copies_it():
    s3 = Shape([3], DType.F32)
    body = make_body("same", [s3], lambda b, c: c)
    g = single_op_graph("Scan", get("Scan").attrs(body, 3, True, 0, 0, 0), (np.zeros(3, F),),
                        None)
    exe = NB.compile(g)
    assert _scan_note(exe) == "compiled loop"
    x = np.array([1, 2, 3], F)
    assert np.array_equal(exe.run({"x0": x})[0], np.stack([x] * 3))


# ── While ─────────────────────────────────────────────────────────────────

I32, S4 = Shape([], DType.I32), Shape([4], DType.F32)


def _while(cond_build, body_build, shapes, cap=None):
    attrs = get("While").attrs(make_body("cond", shapes, cond_build),
                               make_body("body", shapes, body_build), cap)
    return single_op_graph("While", attrs, shapes, None)


def _compiled_and_host(monkeypatch, g, feeds):
    exe = NB.compile(g)
    note = _scan_note(exe, "While")
    got = exe.run(feeds)[0]
    monkeypatch.setattr(lower_control, "while_driver", lambda *a: None)
    want = NB.compile(g).run(feeds)[0]
    monkeypatch.undo()
    return note, got, want


def _less_than(n):
    return lambda b, i, x: add(b, "Compare", get("Compare").attrs("Lt"), i,
                               constant(b, n, DType.I32))


def _count_and_grow(b, i, x):
    return [binary(b, "Add", i, constant(b, 1, DType.I32)),
            binary(b, "Add", binary(b, "Mul", x, constant(b, 1.5)), constant(b, 1.0))]


@pytest.mark.parametrize("cap", [None, 4])
def test_compiled_while_matches_the_host_loop_and_the_oracle(monkeypatch, cap):
    g = _while(_less_than(9), _count_and_grow, [I32, S4], cap)
    feeds = {"x0": np.int32(2), "x1": np.arange(4, dtype=F)}
    note, got, want = _compiled_and_host(monkeypatch, g, feeds)
    assert note == "compiled loop"
    assert got.tobytes() == want.tobytes() and got == (9 if cap is None else 6)
    assert got == interpret(g, feeds)[0]


def test_while_results_passed_through_or_swapped_are_copied(monkeypatch):
    # body: (i, a, b) -> (i + 1, b, a): two results are other carried values
    shapes = [I32, S4, S4]
    g = _while(lambda b, i, x, y: add(b, "Compare", get("Compare").attrs("Lt"), i,
                                      constant(b, 5, DType.I32)),
               lambda b, i, x, y: [binary(b, "Add", i, constant(b, 1, DType.I32)), y, x],
               shapes)
    feeds = {"x0": np.int32(0), "x1": np.ones(4, F), "x2": np.zeros(4, F)}
    note, got, want = _compiled_and_host(monkeypatch, g, feeds)
    assert note == "compiled loop" and got == want == 5
    # the value of the While is carried[0]; look at the swap through a second While whose
    # first carried value is the swapped one
    g2 = _while(lambda b, x, y, i: add(b, "Compare", get("Compare").attrs("Lt"), i,
                                       constant(b, 3, DType.I32)),
                lambda b, x, y, i: [y, x, binary(b, "Add", i, constant(b, 1, DType.I32))],
                [S4, S4, I32])
    feeds2 = {"x0": np.ones(4, F), "x1": np.zeros(4, F), "x2": np.int32(0)}
    note, got, want = _compiled_and_host(monkeypatch, g2, feeds2)
    assert note == "compiled loop" and got.tolist() == want.tolist() == [0, 0, 0, 0]


def test_while_with_a_nan_predicate_runs_to_its_cap(monkeypatch):
    s0 = Shape([], DType.F32)
    g = _while(lambda b, x: x, lambda b, x: binary(b, "Add", x, x), [s0], cap=3)
    feeds = {"x0": F(np.nan)}
    note, got, want = _compiled_and_host(monkeypatch, g, feeds)
    assert note == "compiled loop" and np.isnan(got) and np.isnan(want)
    feeds = {"x0": F(0.0)}                          # zero: no step, the input comes back
    assert NB.compile(g).run(feeds)[0] == 0.0
    feeds = {"x0": F(1.0)}
    assert NB.compile(g).run(feeds)[0] == 8.0


def test_integer_division_by_zero_in_a_compiled_while_names_the_body_node():
    g = _while(_less_than(3), lambda b, i, x: [binary(b, "Add", i, constant(b, 1, DType.I32)),
                                                binary(b, "Div", x, x)],
               [I32, Shape([2], DType.I32)])
    exe = NB.compile(g)
    assert _scan_note(exe, "While") == "compiled loop"
    assert exe.run({"x0": np.int32(0), "x1": np.array([3, 4], np.int32)})[0] == 3
    with pytest.raises(RuntimeError, match=r"in @body.*division by zero"):
        exe.run({"x0": np.int32(0), "x1": np.array([3, 0], np.int32)})


def test_sixteen_bit_bodies_keep_the_host_loop():
    h = Shape([4], DType.F16)
    body = make_body("half", [h, h], lambda b, c, t: binary(b, "Add", c, t))
    g = single_op_graph("Scan", get("Scan").attrs(body, 3, False, 0, 1, 0),
                        (np.zeros(4, np.float16), np.ones((3, 4), np.float16)), None)
    exe = NB.compile(g)
    assert _scan_note(exe) == "host loop"
    feeds = {"x0": np.zeros(4, np.float16), "x1": np.ones((3, 4), np.float16)}
    assert exe.run(feeds)[0].tolist() == [3, 3, 3, 3]


def test_a_faulty_compiled_loop_warns_and_hands_over_to_the_host(monkeypatch):
    from rlx_ref.backends.numba_cpu import loop_driver

    real = loop_driver.scan_driver

    def broken(*args):
        drive = real(*args)

        def fails(*a):
            raise TypeError("no such signature")
        fails.kernel = drive.kernel
        return fails
    monkeypatch.setattr(lower_control, "scan_driver", broken)
    g, feeds = _rnn(3, 8)
    exe = NB.compile(g)
    with pytest.warns(RuntimeWarning, match="compiled loop failed.*no such signature"):
        got = exe.run(feeds)[0]
    np.testing.assert_allclose(got, interpret(g, feeds)[0], rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exe.run(feeds)                              # the host loop from now on: no warning


def test_movement_steps_run_inside_a_compiled_body(monkeypatch):
    body = rlx_ref.Graph("mover")
    c, t = body.input("c", [2, 3]), body.input("t", [3, 2])
    moved = body.op("Transpose", [t], perm=(1, 0))
    flat = body.op("Reshape", [body.add(c, moved)], new_shape=(6,))
    body.set_outputs([body.op("Reshape", [body.op("Reverse", [flat], axes=(0,))],
                              new_shape=(2, 3))])
    g = _scan_over(body, 4, [2, 3], [3, 2])
    feeds = {"x0": np.arange(6, dtype=F).reshape(2, 3),
             "xs": np.arange(24, dtype=F).reshape(4, 3, 2)}
    exe = NB.compile(g)
    assert _scan_note(exe) == "compiled loop"
    assert np.array_equal(exe.run(feeds)[0], interpret(g, feeds)[0])


def test_reductions_softmax_and_cumulative_steps_run_inside_a_compiled_body(monkeypatch):
    body = rlx_ref.Graph("attend")
    c, t = body.input("c", [3, 5]), body.input("t", [3, 5])
    p = body.softmax(body.add(c, t), -1)
    mean = body.op("Reduce", [p], op="Mean", axes=(1,), keep_dim=True)
    run = body.op("Cumsum", [body.sub(p, mean)], axis=0, exclusive=False)
    body.set_outputs([run])
    g = _scan_over(body, 6, [3, 5], [3, 5])
    r = np.random.default_rng(5)
    feeds = {"x0": r.standard_normal((3, 5)).astype(F),
             "xs": r.standard_normal((6, 3, 5)).astype(F)}
    _compiled_like_host(monkeypatch, g, feeds, 1e-5, 1e-6)


def test_a_normalized_recurrent_cell_runs_compiled(monkeypatch):
    body = rlx_ref.Graph("cell")
    h, w, gam, bet, xt = (body.input("h", [2, 8]), body.input("w", [8, 8]),
                          body.input("g", [8]), body.input("b", [8]), body.input("x", [2, 8]))
    pre = body.add(body.matmul(h, w), xt)
    body.set_outputs([body.tanh(body.layer_norm(pre, gam, bet, axis=-1, eps=1e-5))])
    g = rlx_ref.Graph("g")
    ins = [g.input("h0", [2, 8]), g.input("w", [8, 8]), g.input("g", [8]), g.input("b", [8]),
           g.input("xs", [5, 2, 8])]
    g.set_outputs([g.op("Scan", ins, ScanAttrs(body, 5, False, 3, 1, 0),
                        shape=Shape([2, 8], DType.F32))])
    r = np.random.default_rng(7)
    feeds = {"h0": r.standard_normal((2, 8)), "w": r.standard_normal((8, 8)) * 0.3,
             "g": r.standard_normal(8), "b": r.standard_normal(8),
             "xs": r.standard_normal((5, 2, 8))}
    feeds = {k: v.astype(F) for k, v in feeds.items()}
    _compiled_like_host(monkeypatch, g, feeds, 1e-4, 1e-5)


@pytest.mark.parametrize("dt", [DType.BOOL, DType.I16])
def test_integer_and_bool_bodies_run_compiled(dt):
    body = rlx_ref.Graph("b")
    c, t = body.input("c", [2, 3], dt), body.input("t", [3, 2], dt)
    mx = body.op("Binary", [c, body.op("Reshape", [t], new_shape=(2, 3))], op="Max")
    body.set_outputs([body.op("Transpose", [body.op("Reshape", [mx], new_shape=(3, 2))],
                              perm=(1, 0))])
    g = _scan_over(body, 4, [2, 3], [3, 2], dt)
    r = np.random.default_rng(0)
    feeds = {"x0": r.integers(0, 2, (2, 3)).astype(dt.np),
             "xs": r.integers(0, 2, (4, 3, 2)).astype(dt.np)}
    exe = NB.compile(g)
    assert _scan_note(exe) == "compiled loop"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(exe.run(feeds)[0], interpret(g, feeds)[0])
