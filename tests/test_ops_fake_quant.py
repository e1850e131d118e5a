"""The fake-quantization family: RLX's payloads in the text form, the verifier's rules, the
references against hand-computed values, and the straight-through VJP rules."""
import numpy as np
import pytest

from rlx_ref import Graph
from rlx_ref.autodiff import SEED, AutodiffError, grad, jvp
from rlx_ref.interpret import interpret
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops._fake_quant_codec import EMA, ema
from rlx_ref.ops.fake_quant import FakeQuantizeAttrs, FakeQuantizeBackwardAttrs, LsqAttrs
from rlx_ref.ops.single import run_single, verify_single

F = np.float32
TINY = F(1e-12)


def _f(*v):
    return np.asarray(v, F)


def fq(x, bits=8, axis=None, ste="Identity", mode="PerBatch", state=None):
    ops = (x,) if state is None else (x, state)
    return run_single("FakeQuantize", FakeQuantizeAttrs(bits, axis, ste, mode), *ops)


# ── payloads in the text form ────────────────────────────────────────────────

@pytest.mark.parametrize("payload", [
    '{"FakeQuantize":{"bits":8,"axis":null,"ste":"Identity","scale_mode":"PerBatch"}}',
    '{"FakeQuantize":{"bits":4,"axis":1,"ste":"ClippedIdentity","scale_mode":"Fixed"}}',
    '{"FakeQuantize":{"bits":2,"axis":0,"ste":"Tanh","scale_mode":{"EMA":{"decay":0.99}}}}',
    '{"FakeQuantizeBackward":{"bits":8,"axis":1,"ste":"HardTanh"}}',
    '{"FakeQuantizeLSQ":{"bits":4,"axis":null}}',
    '{"FakeQuantizeLSQBackwardX":{"bits":2,"axis":1}}',
    '{"FakeQuantizeLSQBackwardScale":{"bits":8,"axis":0}}',
])
def test_rlx_payload_text_round_trips(payload):
    kind = payload[2:payload.index('"', 2)]
    two = kind in ("FakeQuantizeBackward",) or "Fixed" in payload or "EMA" in payload
    n_ops = {"FakeQuantizeLSQ": 2, "FakeQuantizeLSQBackwardX": 3,
             "FakeQuantizeLSQBackwardScale": 3}.get(kind, 2 if two else 1)
    ins = ["  %0 = {\"Input\":{\"name\":\"x\"}} : [3, 2] f32"]
    ins += [f"  %{i} = {{\"Input\":{{\"name\":\"o{i}\"}}}} : "
            f"{'[2] f32' if i == 1 and 'LSQ' in kind and '1}' in payload else '[3, 2] f32'}"
            for i in range(1, n_ops)]
    shape = "[2] f32" if kind.endswith("Scale") else "[3, 2] f32"
    text = ("graph @g {\n" + "\n".join(ins) +
            f"\n  %{n_ops} = {payload}({', '.join(f'%{i}' for i in range(n_ops))}) : {shape}"
            f"\n  return %{n_ops}\n}}\n")
    g = parse(text)
    assert print_graph(g) == text
    assert parse(print_graph(g)) == g


def test_scale_mode_values_and_decay_rounding():
    a = FakeQuantizeAttrs(8, None, "Identity", ema(0.99))
    assert a.scale_mode == ("EMA", EMA(float(F(0.99))))
    g = Graph("g")
    x, s = g.input("x", [4]), g.input("s", [1])
    g.set_outputs([g.op("FakeQuantize", (x, s), a)])
    assert '"scale_mode":{"EMA":{"decay":0.99}}' in print_graph(g)
    assert parse(print_graph(g)) == g


@pytest.mark.parametrize("bad,says", [
    ('"scale_mode":{"EMA":{}}', "missing field 'decay'"),
    ('"scale_mode":{"EMA":{"decay":0.9,"k":1}}', "no field"),
    ('"scale_mode":"Ema"', "expected a ScaleMode"),
    ('"scale_mode":{"Fixed":{}}', "expected a ScaleMode"),
    ('"scale_mode":"PerBatch","ste":"Round"', "expected a SteKind"),
])
def test_bad_payload_text_is_named(bad, says):
    fields = f'"bits":8,"axis":null,"ste":"Identity",{bad}'
    if '"ste":"Round"' in bad:
        fields = f'"bits":8,"axis":null,{bad}'
    text = ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n'
            f'  %1 = {{"FakeQuantize":{{{fields}}}}}(%0) : [2] f32\n  return %1\n}}\n')
    with pytest.raises(Exception, match=says):
        parse(text)


# ── the verifier's rules ─────────────────────────────────────────────────────

X = np.zeros((3, 2), F)


@pytest.mark.parametrize("kind,attrs,ops,says", [
    ("FakeQuantize", FakeQuantizeAttrs(3, None, "Identity", "PerBatch"), (X,), "(C2)"),
    ("FakeQuantize", FakeQuantizeAttrs(1, None, "Identity", "PerBatch"), (X,), "(C2)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, 2, "Identity", "PerBatch"), (X,), "(C3)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, None, "Identity", "Fixed"), (X,), "(C4)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, None, "Identity", "PerBatch"), (X, _f(1)), "(C4)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, 0, "Identity", "Fixed"), (X, _f(1, 2)), "(C5)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, None, "Identity", ema(float("inf"))),
     (X, _f(1)), "(C6)"),
    ("FakeQuantize", FakeQuantizeAttrs(8, None, "Identity", "PerBatch"),
     (X.astype(np.float64),), "(C1)"),
    ("FakeQuantizeBackward", FakeQuantizeBackwardAttrs(8, None, "Tanh"), (X, X[:2]), "(C4)"),
    ("FakeQuantizeLSQ", LsqAttrs(8, 1), (X, _f(1, 2, 3)), "(C4)"),
    ("FakeQuantizeLSQBackwardX", LsqAttrs(8, 1), (X, _f(1, 2), X.T), "(C5)"),
    ("FakeQuantizeLSQBackwardScale", LsqAttrs(4, None), (X, _f(1, 2), X), "(C4)"),
])
def test_verifier_names_the_broken_rule(kind, attrs, ops, says):
    from rlx_ref.ops.opdef import get
    from rlx_ref.ir.shape import Shape

    out = get(kind).infer_shape([Shape(o.shape, "f32") for o in ops], attrs)
    errs = verify_single(kind, attrs, ops, out)
    assert errs and says in " ".join(errs), errs


def test_scale_operand_may_be_any_shape_holding_c_elements():
    attrs = LsqAttrs(4, 1)
    assert verify_single("FakeQuantizeLSQ", attrs, (X, np.ones((1, 2), F))) == []
    assert verify_single("FakeQuantizeLSQ", LsqAttrs(4, None), (X, np.ones((1, 1), F))) == []


# ── the forward against hand-computed values ─────────────────────────────────

def test_rounding_is_half_away_from_zero_not_to_even():
    x = _f(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127)          # max 127, bits 8: s = 1
    np.testing.assert_array_equal(fq(x), _f(1, 2, 3, -1, -2, -3, 127))
    assert not np.array_equal(fq(x), np.rint(x))


def test_q_max_per_bit_width():
    x = _f(-10, -1, 0.3, 10)
    for bits, q in ((8, 127), (4, 7), (2, 1)):
        s = F(10) / F(q)
        np.testing.assert_array_equal(fq(x, bits), np.clip(np.round(x / s), -q, q) * s)
    np.testing.assert_array_equal(fq(x, 2), _f(-10, -0.0, 0, 10))   # ternary: 0, ±max


def test_per_axis_scales_each_channel_on_its_own():
    x = _f([1, 100], [-0.5, 50], [0.25, -25])                 # columns: max 1, max 100
    got = fq(x, 2, axis=1)
    np.testing.assert_array_equal(got, _f([1, 100], [-1, 100], [0, -0.0]))
    per_tensor = fq(x, 2)                                     # one scale: 100
    np.testing.assert_array_equal(per_tensor[:, 0], _f(0, -0.0, 0))


def test_zero_channel_uses_the_floor_and_stays_zero():
    x = _f([0, 0], [-0.0, 3])
    got = fq(x, 8, axis=0)
    np.testing.assert_array_equal(got, _f([0, 0], [0, 3]))
    assert np.signbit(got[1, 0])                              # round(-0) is -0, as Rust
    tiny = _f(1e-11, -1e-12)                                 # max/127 < 1e-12: floor wins
    np.testing.assert_array_equal(fq(tiny), _f(10, -1) * TINY)


def test_fixed_and_ema_read_the_state():
    x = _f(0.26, -0.7, 3)
    np.testing.assert_array_equal(fq(x, 4, mode="Fixed", state=_f(0.25)), _f(0.25, -0.75, 1.75))
    # EMA: decay 0.75, state 4, cur = 3/7: s = 0.75·4 + 0.25·(3/7)
    cur = F(3) / F(7)
    s = F(0.75) * F(4) + F(0.25) * cur
    want = np.clip(np.sign(x / s) * np.floor(np.abs(x / s) + F(0.5)), -7, 7) * s
    np.testing.assert_array_equal(fq(x, 4, mode=ema(0.75), state=_f(4)), want)
    # cold start: a state <= 0 takes the batch scale (PerBatch's result)
    np.testing.assert_array_equal(fq(x, 4, mode=ema(0.75), state=_f(0)), fq(x, 4))


def test_float64_oracle_agrees_on_exact_values():
    x = _f([127, 63.5, -0.5], [2, -1, 0.25])
    a = FakeQuantizeAttrs(8, 0, "Identity", "PerBatch")
    f32 = run_single("FakeQuantize", a, x)
    f64 = run_single("FakeQuantize", a, x, float64=True)
    assert f64.dtype == np.float64
    np.testing.assert_array_equal(f32[0], f64[0])


# ── the backward kinds against their formulas ────────────────────────────────

def _ste(x, dy, ste, bits=4, axis=None):
    return run_single("FakeQuantizeBackward", FakeQuantizeBackwardAttrs(bits, axis, ste), x, dy)


def test_each_ste_against_its_formula():
    x = _f(-3.5, -1, 0, 0.6, 2.8)                             # q = 7: s = 0.5, bound 3.5
    dy = _f(1, -2, 3, 0.5, 4)
    s = F(3.5) / F(7)
    np.testing.assert_array_equal(_ste(x, dy, "Identity"), dy)
    np.testing.assert_array_equal(_ste(x, dy, "ClippedIdentity"), dy)
    t = np.tanh(x / s)
    np.testing.assert_allclose(_ste(x, dy, "Tanh"), dy * (1 - t * t), rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(_ste(x, dy, "HardTanh"),
                                  dy * np.maximum(1 - np.abs(x / F(3.5)), 0))
    # by hand: attenuation 0 at the bound, 1 at 0, 1 - |x|/3.5 between
    np.testing.assert_allclose(_ste(x, dy, "HardTanh"),
                               [0, -2 * (1 - 1 / 3.5), 3, 0.5 * (1 - 0.6 / 3.5), 4 * 0.2],
                               rtol=1e-6)


def test_lsq_backward_against_hand_values():
    x, s, dy = _f(0.375, -0.75, 2, 10, -3.75), _f(0.5), _f(1, 2, 3, 4, 5)
    a = LsqAttrs(4, None)
    np.testing.assert_array_equal(run_single("FakeQuantizeLSQBackwardX", a, x, s, dy),
                                  _f(1, 2, 3, 0, 0))
    # psi: 0.25, -0.5 (the tie -1.5 rounds to -2), 0, +7, -7
    np.testing.assert_array_equal(run_single("FakeQuantizeLSQBackwardScale", a, x, s, dy),
                                  _f(0.25 - 1 + 0 + 28 - 35))


# ── VJP and JVP rules ───────────────────────────────────────────────────────

def _fq_graph(ste, mode="PerBatch", bits=4, axis=None, n=5):
    g = Graph("q")
    x = g.input("x", [n])
    ops = (x,) if mode == "PerBatch" else (x, g.input("state", [1]))
    g.set_outputs([g.op("FakeQuantize", ops, FakeQuantizeAttrs(bits, axis, ste, mode))])
    return g


def test_identity_ste_routes_dy_through():
    gg = grad(_fq_graph("Identity"), ["x"])
    assert not any(n.kind == "FakeQuantizeBackward" for n in gg.nodes)
    u = _f(1, -2, 3, 4, 5)
    (dx,) = interpret(gg, {"x": _f(0.1, 9, -3, 0, 2), SEED: u})
    np.testing.assert_array_equal(dx, u)


@pytest.mark.parametrize("ste", ["ClippedIdentity", "Tanh", "HardTanh"])
def test_other_stes_emit_fake_quantize_backward(ste):
    gg = grad(_fq_graph(ste, mode="Fixed"), ["x"])
    bwd = [n for n in gg.nodes if n.kind == "FakeQuantizeBackward"]
    assert len(bwd) == 1 and bwd[0].attrs == FakeQuantizeBackwardAttrs(4, None, ste)
    x, u = _f(-3.5, -1, 0, 0.6, 2.8), _f(1, -2, 3, 0.5, 4)
    (dx,) = interpret(gg, {"x": x, "state": _f(9), SEED: u})
    np.testing.assert_array_equal(dx, _ste(x, u, ste))       # PerBatch scale, not the state


def test_state_gets_no_gradient_and_asking_is_an_error():
    with pytest.raises(AutodiffError, match="scale state"):
        grad(_fq_graph("Identity", mode=ema(0.9)), ["state"])


def _lsq_graph(bits=4, axis=None, xs=(5,), ss=(1,)):
    g = Graph("lsq")
    x, s = g.input("x", list(xs)), g.param("s", list(ss))
    g.set_outputs([g.op("FakeQuantizeLSQ", (x, s), LsqAttrs(bits, axis))])
    return g


def test_lsq_rule_emits_both_backward_kinds():
    gg = grad(_lsq_graph(), ["x", "s"])
    kinds = [n.kind for n in gg.nodes]
    assert "FakeQuantizeLSQBackwardX" in kinds and "FakeQuantizeLSQBackwardScale" in kinds
    x, u = _f(0.375, -0.75, 2, 10, -3.75), _f(1, 2, 3, 4, 5)
    dx, ds = interpret(gg, {"x": x, SEED: u}, {"s": _f(0.5)})
    np.testing.assert_array_equal(dx, _f(1, 2, 3, 0, 0))
    np.testing.assert_array_equal(ds, _f(-7.75))


def test_lsq_gradient_is_the_derivative_where_everything_saturates():
    """Where every |x/s| > q the output is ±q·s: dx = 0 and dscale = Σ ±q·u are the true
    derivatives, which finite differences of the (there linear) output confirm."""
    g = _lsq_graph(bits=4, axis=1, xs=(3, 2), ss=(2,))
    x = _f([9, -30], [-12, 25], [20, -18])
    s, u = _f(0.5, 1.5), _f([1, -2], [0.5, 3], [-1, 2])
    dx, ds = interpret(grad(g, ["x", "s"]), {"x": x, SEED: u}, {"s": s})
    assert not dx.any()
    np.testing.assert_array_equal(ds, (u * np.sign(x) * 7).sum(0))
    h = F(1 / 64)                                # exact steps: the output is linear in s
    for c in range(2):
        e = np.eye(2, dtype=F)[c] * h
        fp, fm = (interpret(g, {"x": x}, {"s": s + d})[0] for d in (e, -e))
        np.testing.assert_allclose(np.sum(u * (fp - fm)) / (2 * h), ds[c], rtol=1e-6)
        x_moved = interpret(g, {"x": x + h}, {"s": s})[0]
        np.testing.assert_array_equal(x_moved, interpret(g, {"x": x}, {"s": s})[0])


def test_lsq_scale_gradient_is_the_straight_through_derivative_inside():
    """Inside the range ψ = round(z) - z is d/ds of s·round(x/s) with round's derivative
    taken as 1: near s0, round(x/s) ≈ round(z0) + (x/s - z0), whose product with s has
    derivative round(z0) - z0 (finite differences of that surrogate agree)."""
    x, s = np.array([0.3125, -0.8125, 1.0625]), 0.25      # z = 1.25, -3.25, 4.25
    z = x / s
    surrogate = lambda sv: np.sum(sv * (np.round(z) + (x / sv - z)))  # noqa: E731
    fd = (surrogate(s + 1e-6) - surrogate(s - 1e-6)) / 2e-6
    got = run_single("FakeQuantizeLSQBackwardScale", LsqAttrs(4, None), x.astype(F),
                     _f(s), np.ones(3, F), float64=True)
    np.testing.assert_array_equal(got, [-0.25 + 0.25 - 0.25])
    np.testing.assert_allclose(got, [fd], rtol=1e-6)


def test_jvp_is_derived_from_the_straight_through_rules():
    g = _lsq_graph()
    j = jvp(g, ["x", "s"])
    x, s = _f(0.375, -0.75, 2, 10, -3.75), _f(0.5)
    tx, ts = _f(1, 1, 1, 1, 1), _f(2)
    outs = interpret(j, {"x": x, "tangent_x": tx, "tangent_s": ts}, {"s": s})
    # J·t = dx-part (1, 1, 1, 0, 0)·tx + psi·ts, psi = 0.25, -0.5, 0, 7, -7
    np.testing.assert_array_equal(outs[-1], _f(1.5, 0, 1, 14, -14))
    t = jvp(_fq_graph("Identity"), ["x"])
    out = interpret(t, {"x": _f(1, 2, 3, 4, 5), "tangent_x": _f(5, 4, 3, 2, 1)})
    np.testing.assert_array_equal(out[-1], _f(5, 4, 3, 2, 1))


def test_gradient_graphs_verify_and_round_trip():
    for g in (grad(_fq_graph("HardTanh"), ["x"]), grad(_lsq_graph(), ["x", "s"])):
        assert verify(g) == []
        assert parse(print_graph(g)) == g
