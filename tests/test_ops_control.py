"""Control family: If / While / Scan / CustomFn semantics against plain Python loops, nested
bodies, the text round trip, and the verifier's body rules."""
import numpy as np
import pytest

from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops._control_bodies import add, binary, constant, make_body
from rlx_ref.ops._control_samples import cumsum_scan, doubling_loop
from rlx_ref.ops.control import CustomFnAttrs, IfAttrs, ScanAttrs, WhileAttrs
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, single_op_graph

F = DType.F32
S3, S0 = Shape([3], F), Shape([], F)
RNG = np.random.default_rng(3)


def tanh_step_body():
    """(c, b, x) -> tanh(c * b + x): a non-linear body so step order matters."""
    tanh = get("Activation").attrs("Tanh")
    return make_body("step", [S3, S3, S3], lambda g, c, b, x: add(
        g, "Activation", tanh, binary(g, "Add", binary(g, "Mul", c, b), x)))


@pytest.mark.parametrize("trajectory, checkpoints", [(False, 0), (True, 0), (True, 3)])
def test_scan_equals_the_unrolled_body(trajectory, checkpoints):
    body = tanh_step_body()
    init, b, xs = (RNG.standard_normal(s).astype(np.float32) for s in (3, 3, (7, 3)))
    a = ScanAttrs(body, 7, trajectory, 1, 1, checkpoints)
    got = run_single("Scan", a, init, b, xs, float64=True)
    carry, rows = init.astype(np.float64), []
    for t in range(7):      # the loop unrolled by hand, one body run per step
        carry = interpret(body, {"step_0": carry, "step_1": b, "step_2": xs[t]},
                          float64=True)[0]
        rows.append(carry)
    if not trajectory:
        np.testing.assert_array_equal(got, carry)
    elif checkpoints:
        np.testing.assert_array_equal(got, np.stack([rows[t * 7 // 3] for t in range(3)]))
    else:
        np.testing.assert_array_equal(got, np.stack(rows))
        np.testing.assert_array_equal(got[-1], carry)


def test_scan_bcast_is_not_sliced():
    s23 = Shape([2, 3], F)
    body = make_body("b", [S3, s23], lambda g, c, m: add(
        g, "Binary", get("Binary").attrs("Add"), c, constant(g, [1.0, 1.0, 1.0])))
    a = ScanAttrs(body, 2, False, 1, 0, 0)
    out = run_single("Scan", a, np.zeros(3, np.float32), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(out, [2, 2, 2])


def test_while_counting_loop_and_limit():
    acc = np.array([1, 2, 3], np.float32)
    for limit, cap, steps in [(5.0, None, 5), (5.0, 2, 2), (5.0, 9, 5), (0.0, None, 0),
                              (1e9, 4, 4)]:
        out = run_single("While", doubling_loop(max_iterations=cap, limit=limit), acc,
                         np.float32(0))
        np.testing.assert_array_equal(out, acc * 2.0 ** steps, err_msg=f"{limit} {cap}")


def test_while_counter_value_is_first_carried():
    lt = get("Compare").attrs("Lt")
    cond = make_body("c", [S0, S3], lambda g, i, v: add(g, "Compare", lt, i, constant(g, 3.0)))
    body = make_body("b", [S0, S3], lambda g, i, v: [binary(g, "Add", i, constant(g, 1.0)), v])
    out = run_single("While", WhileAttrs(cond, body, None), np.float32(0), np.zeros(3, np.float32))
    assert out == 3


@pytest.mark.parametrize("pred, expect", [(True, "then"), (False, "else"), (2.5, "then"),
                                          (0.0, "else"), (-0.0, "else")])
def test_if_takes_both_branches(pred, expect):
    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    a = IfAttrs(make_body("then", [S3, S3], lambda g, p, q: binary(g, "Sub", p, q)),
                make_body("else", [S3, S3], lambda g, p, q: binary(g, "Mul", p, q)))
    p = np.bool_(pred) if isinstance(pred, bool) else np.float32(pred)
    out = run_single("If", a, p, x, y)
    np.testing.assert_array_equal(out, x - y if expect == "then" else x * y)


def _nested_graph():
    """If(pred, init, xs): then = Scan(cumsum) over xs, else = init * 2."""
    s43 = Shape([4, 3], F)
    scan = cumsum_scan(4, trajectory=False)
    a = IfAttrs(make_body("then", [S3, s43], lambda g, c, xs: add(g, "Scan", scan, c, xs)),
                make_body("else", [S3, s43], lambda g, c, xs: binary(g, "Add", c, c)))
    return single_op_graph("If", a, [Shape([], DType.BOOL), S3, s43])


def test_nested_scan_inside_if_and_text_round_trip():
    g = _nested_graph()
    assert verify(g) == []
    text = print_graph(g)
    assert parse(text) == g and print_graph(parse(text)) == text
    init, xs = np.ones(3, np.float32), np.arange(12, dtype=np.float32).reshape(4, 3)
    run = lambda p: interpret(g, {"x0": np.bool_(p), "x1": init, "x2": xs})[0]  # noqa: E731
    np.testing.assert_array_equal(run(True), init + xs.sum(0))
    np.testing.assert_array_equal(run(False), 2 * init)
    out64 = interpret(g, {"x0": np.bool_(True), "x1": init, "x2": xs}, float64=True)[0]
    assert out64.dtype == np.float64


def test_custom_fn_runs_fwd_and_carries_rules_untouched():
    fwd = make_body("fwd", [S3], lambda g, a: binary(g, "Mul", a, a))
    vjp = make_body("vjp", [S3, S3, S3], lambda g, a, y, d: binary(g, "Mul", d, a),
                    names=["a", "primal_output", "d_output"])
    a = CustomFnAttrs(fwd, vjp, None, 1)
    x = np.array([1, -2, 3], np.float32)
    np.testing.assert_array_equal(run_single("CustomFn", a, x), x * x)
    back = parse(print_graph(single_op_graph("CustomFn", a, [x])))
    assert back.nodes[-1].attrs.vjp_body == vjp and back.nodes[-1].attrs.jvp_body is None


# ── verifier rules ─────────────────────────────────────────────────────────

def errs(kind, attrs, shapes, out):
    return [str(e) for e in verify(single_op_graph(kind, attrs, shapes, out=out))]


def test_if_rules():
    two = IfAttrs(make_body("t", [S3, S3], lambda g, a, b: a),
                  make_body("e", [S3, S3], lambda g, a, b: b))
    e = errs("If", two, [Shape([], DType.BOOL), S3], S3)
    assert any("(C2) then_branch declares 2 Op::Inputs but receives 1 captures" in m for m in e)
    e = errs("If", two, [Shape([2], DType.BOOL), S3, S3], S3)
    assert any("(C1) If predicate must hold exactly one element" in m for m in e)
    e = errs("If", two, [Shape([], DType.BOOL), S3, Shape([3], DType.F64)], S3)
    assert any("(C3) then_branch input #1 is declared [3] f32 but is bound to [3] f64" in m
               for m in e)
    uneven = IfAttrs(make_body("t", [S3], lambda g, a: [a, a]), make_body("e", [S3],
                                                                          lambda g, a: a))
    e = errs("If", uneven, [Shape([], DType.BOOL), S3], S3)
    assert any("(C4) If branches disagree on output count: then=2 else=1" in m for m in e)
    shapes = IfAttrs(make_body("t", [S3], lambda g, a: a), make_body("e", [S3], lambda g, a:
                                                                     constant(g, 1.0)))
    e = errs("If", shapes, [Shape([], DType.BOOL), S3], S3)
    assert any("(C4) If branches disagree on the output shape" in m for m in e)
    e = errs("If", two, [Shape([], DType.BOOL), S3, S3], Shape([4], F))
    assert any("shape mismatch: declared [4] f32, inferred [3] f32" in m for m in e)
    e = errs("If", two, [], S3)
    assert any("If expects at least 1 inputs, got 0" in m for m in e)


def test_while_rules():
    a = doubling_loop()
    e = errs("While", a, [S3], S3)
    assert any("(C2) While cond declares 2 Op::Inputs but receives 1" in m for m in e)
    e = errs("While", a, [S3, Shape([1], F)], S3)
    assert any("(C3) While cond input #1 is declared [] f32 but is bound to [1] f32" in m
               for m in e)
    two_out = WhileAttrs(make_body("c", [S0], lambda g, i: [i, i]), make_body("b", [S0],
                                                                              lambda g, i: i))
    e = errs("While", two_out, [S0], S0)
    assert any("While cond must produce exactly one Bool output, got 2" in m for m in e)
    bad_body = WhileAttrs(make_body("c", [S0], lambda g, i: i),
                          make_body("b", [S0], lambda g, i: [i, i]))
    e = errs("While", bad_body, [S0], S0)
    assert any("While body must produce one value per loop-carried input (1 expected), got 2"
               in m for m in e)
    grow = WhileAttrs(make_body("c", [S0], lambda g, i: i),
                      make_body("b", [S0], lambda g, i: constant(g, [1.0, 2.0])))
    e = errs("While", grow, [S0], S0)
    assert any("(C5) While body output #0 is [2] f32 but carried value #0 is [] f32" in m
               for m in e)


def test_scan_rules():
    a = cumsum_scan(4)
    traj = Shape([4, 3], F)
    e = errs("Scan", a, [S3], traj)
    assert any("(C1) Scan takes 1 carry + 0 broadcast + 1 per-step inputs = 2, got 1" in m
               for m in e)
    e = errs("Scan", a, [S3, Shape([5, 3], F)], traj)
    assert any("(C3) Scan xs #0 is [5, 3] f32: its leading dim must be length 4" in m
               for m in e)
    wrong_in = ScanAttrs(a.body, 4, True, 0, 0, 0)
    e = errs("Scan", wrong_in, [S3], traj)
    assert any("(C2) Scan body must declare 1 Op::Inputs (carry + 0 broadcast + 0 per-step), "
               "got 2" in m for m in e)
    two_out = ScanAttrs(make_body("b", [S3, S3], lambda g, c, x: [c, x]), 4, True, 0, 1, 0)
    e = errs("Scan", two_out, [S3, traj], traj)
    assert any("Scan body must produce exactly one output (the next carry), got 2" in m
               for m in e)
    e = errs("Scan", cumsum_scan(4, checkpoints=5), [S3, traj], traj)
    assert any("Scan num_checkpoints (5) exceeds length (4)" in m for m in e)
    e = errs("Scan", cumsum_scan(4, trajectory=False, checkpoints=2), [S3, traj], S3)
    assert any("needs save_trajectory" in m for m in e)
    e = errs("Scan", cumsum_scan(4, checkpoints=2), [S3, traj], traj)
    assert any("shape mismatch: declared [4, 3] f32, inferred [2, 3] f32" in m for m in e)


def test_nested_body_errors_are_wrapped():
    body = make_body("b", [S3, S3], lambda g, c, x: binary(g, "Add", c, x))
    body.add_node_unchecked(body.nodes[2].op, [0, 9], S3)
    body.set_outputs([3])
    e = errs("Scan", ScanAttrs(body, 4, False, 0, 1, 0), [S3, Shape([4, 3], F)], S3)
    assert any(m.startswith("at %2: in Scan body #0: at %3: input %9 references non-existent")
               for m in e), e
    empty = ScanAttrs(make_body("b", [S3, S3], lambda g, c, x: []), 4, False, 0, 1, 0)
    e = errs("Scan", empty, [S3, Shape([4, 3], F)], S3)
    assert any("Scan body #0 declares no outputs" in m for m in e)


def test_custom_fn_rules():
    fwd = make_body("fwd", [S3, S3], lambda g, a, b: binary(g, "Add", a, b))
    e = errs("CustomFn", CustomFnAttrs(fwd, None, None, 3), [S3, S3], S3)
    assert any("(C1) CustomFn declares num_inputs=3 but has 2 operand(s)" in m for m in e)
    e = errs("CustomFn", CustomFnAttrs(fwd, None, None, 1), [S3], S3)
    assert any("(C2) CustomFn fwd_body declares 2 Op::Inputs but receives 1" in m for m in e)
    two = make_body("fwd", [S3], lambda g, a: [a, a])
    e = errs("CustomFn", CustomFnAttrs(two, None, None, 1), [S3], S3)
    assert any("CustomFn fwd_body must produce exactly one output, got 2" in m for m in e)
    bad_vjp = make_body("vjp", [S3, S3, S3, S3], lambda g, a, b, y, d: d)
    e = errs("CustomFn", CustomFnAttrs(fwd, bad_vjp, None, 2), [S3, S3], S3)
    assert any("(C5) CustomFn vjp_body must produce 2 output(s), got 1" in m for m in e)


# ── runtime errors ─────────────────────────────────────────────────────────

def test_scan_rejects_xs_with_the_wrong_length_at_run_time():
    g = single_op_graph("Scan", cumsum_scan(4), [S3, Shape([Dyn(0), 3], F)])
    assert verify(g) == []
    with pytest.raises(InterpretError, match="xs #0 has 5 rows, expected length 4"):
        interpret(g, {"x0": np.zeros(3, np.float32), "x1": np.zeros((5, 3), np.float32)})


def test_while_cond_with_many_elements_is_a_run_time_error():
    dyn = Shape([Dyn(0)], F)
    gt = get("Compare").attrs("Gt")
    cond = make_body("c", [dyn], lambda g, v: add(g, "Compare", gt, v, constant(g, 0.0)))
    body = make_body("b", [dyn], lambda g, v: binary(g, "Sub", v, constant(g, 1.0)))
    g = single_op_graph("While", WhileAttrs(cond, body, 10), [dyn])
    assert interpret(g, {"x0": np.float32([3])})[0].tolist() == [0]
    with pytest.raises(InterpretError, match="While cond output must hold exactly one element"):
        interpret(g, {"x0": np.float32([3, 4])})
