"""Activation and normalization backward kinds: each oracle against float64 central finite
differences of its forward kind's oracle (vector-Jacobian products), the subgradients
chosen at kinks, verifier messages and the text form."""
import json

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import op_from_json, parse, print_graph
from rlx_ref.ops.backward_activation import DERIVATIVES, ActivationBackwardAttrs
from rlx_ref.ops.elementwise import ActivationAttrs
from rlx_ref.ops.normalization import AxisNormAttrs, EpsAttrs, GroupNormAttrs
from rlx_ref.ops.single import run_single, single_op_graph, verify_single

RNG = np.random.default_rng(11)
H = 1e-6            # central differences in float64: error ~ h²·f''' + eps64/h, far below
TOL = 1e-6          # the tolerance, relative to the VJP's scale


def _vjp_fd(forward, x, dy):
    """<dy, f(x + h v) - f(x - h v)> / 2h for a random direction v, with v."""
    v = RNG.standard_normal(np.shape(x))
    fd = np.sum(dy * (forward(x + H * v) - forward(x - H * v))) / (2 * H)
    return fd, v


def _assert_vjp(forward, grad, x, dy, what):
    fd, v = _vjp_fd(forward, x, dy)
    an = np.sum(grad * v)
    scale = 1 + np.sum(np.abs(grad * v))
    assert abs(fd - an) <= TOL * scale, f"{what}: <grad, v> = {an}, finite differences {fd}"


# ── activations ────────────────────────────────────────────────────────────

def _smooth_points(kind, n=9):
    """Points away from the kind's kinks and inside its domain."""
    if kind in ("Log", "Sqrt", "Rsqrt"):
        return RNG.uniform(0.2, 4.0, n)
    if kind == "Tan":
        return RNG.uniform(-1.2, 1.2, n)
    x = RNG.uniform(-5.0, 5.0, n)
    x = np.where(np.abs(x) < 0.1, x + 0.3, x)                   # 0: Relu, Abs, Sign, Elu
    x = np.where(np.abs(np.abs(x) - 3) < 0.1, x * 0.9, x)       # ±3: HardSigmoid/Swish
    frac = x - np.floor(x)                                      # integers: Floor, Ceil
    return np.where((frac < 0.05) | (frac > 0.95), x + 0.5, x)


def _act(kind, x):
    return run_single("Activation", ActivationAttrs(kind), x, float64=True)


def _grad(kind, x, dy):
    return run_single("ActivationBackward", ActivationBackwardAttrs(kind), x, dy, float64=True)


SMOOTH = [k for k in DERIVATIVES if k != "Round"]


@pytest.mark.parametrize("kind", SMOOTH)
def test_activation_backward_is_the_derivative(kind):
    x, dy = _smooth_points(kind), RNG.standard_normal(9)
    dx = _grad(kind, x, dy)
    _assert_vjp(lambda t: _act(kind, t), dx, x, dy, kind)
    # elementwise: each dx[i] is f'(x[i])·dy[i]
    slope = (_act(kind, x + H) - _act(kind, x - H)) / (2 * H)
    np.testing.assert_allclose(dx, slope * dy, rtol=TOL, atol=TOL, err_msg=kind)


def test_round_passes_the_gradient_straight_through():
    """RLX's convention (STE): round's derivative is 0 almost everywhere, its rule is dy."""
    x, dy = np.array([0.3, 0.5, 1.5, -2.7]), np.array([1.0, -2.0, 3.0, np.nan])
    np.testing.assert_array_equal(_grad("Round", x, dy), dy)
    slope = (_act("Round", x[:1] + H) - _act("Round", x[:1] - H)) / (2 * H)
    assert slope[0] == 0


# x at a kink -> the documented subgradient (dy = 2)
KINKS = [
    ("Relu", 0.0, 0.0), ("Relu", -0.0, 0.0), ("Abs", 0.0, 0.0), ("Elu", 0.0, 2.0),
    ("HardSigmoid", 3.0, 0.0), ("HardSigmoid", -3.0, 0.0), ("HardSwish", 3.0, 2.0),
    ("HardSwish", -3.0, 0.0), ("Sign", 0.0, 0.0), ("Floor", 2.0, 0.0), ("Ceil", -1.0, 0.0),
    ("Sqrt", 0.0, 0.0), ("Rsqrt", 0.0, 0.0), ("Sqrt", -1.0, 0.0), ("Round", 0.5, 2.0),
]


@pytest.mark.parametrize("kind, x, want", KINKS)
def test_kinks_take_the_documented_subgradient(kind, x, want):
    got = _grad(kind, np.array([x]), np.array([2.0]))[0]
    assert got == want
    if kind in ("Relu", "Abs", "Elu", "HardSigmoid", "HardSwish"):
        # a Clarke subgradient: between the one-sided derivatives
        at = _act(kind, np.array([x]))[0]
        left = (at - _act(kind, np.array([x - H]))[0]) / H
        right = (_act(kind, np.array([x + H]))[0] - at) / H
        assert min(left, right) - 1e-5 <= got / 2 <= max(left, right) + 1e-5


def test_selects_ignore_dy_on_their_zero_branch():
    x = np.array([-1.0, 0.0, np.nan, 2.0])
    dy = np.array([np.nan, np.inf, 5.0, 3.0])
    for kind in ("Relu", "Sqrt"):
        out = _grad(kind, x, dy)
        np.testing.assert_array_equal(out[:3], [0, 0, 0])
    relu = run_single("ReluBackward", None, x, dy, float64=True)
    np.testing.assert_array_equal(relu, _grad("Relu", x, dy))
    assert np.isnan(_grad("Floor", x, dy)[:2]).all()     # 0·dy: a product propagates NaN


def test_half_precision_is_computed_in_f32_and_rounded_once():
    x, dy = RNG.standard_normal(16).astype(np.float16), RNG.standard_normal(16).astype(np.float16)
    a = ActivationBackwardAttrs("Gelu")
    got = run_single("ActivationBackward", a, x, dy)
    ref = run_single("ActivationBackward", a, x.astype(np.float32), dy.astype(np.float32))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, ref.astype(np.float16))


# ── normalizations: each gradient against the forward op ──────────────────

def r(*shape):
    return RNG.standard_normal(shape)


def _forward(kind, attrs, ops, wrt):
    """The forward oracle as a function of operand ``wrt`` alone."""
    def f(t):
        args = list(ops)
        args[wrt] = t
        return run_single(kind, attrs, *args, float64=True)
    return f


def _check_grads(fwd_kind, attrs, ops, grads):
    """``grads``: (backward kind, its operands, forward operand it differentiates)."""
    dy = r(*np.shape(ops[0]))
    for kind, pick, wrt in grads:
        args = [dy if p == "dy" else ops[p] for p in pick]
        out = Shape(np.shape(ops[wrt]), DType.F64)
        grad = run_single(kind, attrs, *args, out=out, float64=True)
        _assert_vjp(_forward(fwd_kind, attrs, ops, wrt), grad, ops[wrt], dy,
                    f"{kind} {attrs} {[np.shape(o) for o in ops]}")


AXIS = [((3, 7), -1, 1e-5, (7,)), ((2, 3, 5), 1, 1e-5, (3,)), ((4, 2, 3), 0, 0.5, (4,)),
        ((6,), 0, 1e-5, (6,)), ((3, 5), -1, 1e-3, (1, 5)), ((5, 1), -1, 0.1, (1,))]


@pytest.mark.parametrize("shape, axis, eps, vec", AXIS)
def test_layer_norm_gradients(shape, axis, eps, vec):
    x = r(*shape) * 2 + 1
    ops = (x, r(*vec), r(*vec))
    _check_grads("LayerNorm", AxisNormAttrs(axis, eps), ops, [
        ("LayerNormBackwardInput", (0, 1, "dy"), 0), ("LayerNormBackwardGamma", (0, "dy"), 1)])


@pytest.mark.parametrize("shape, axis, eps, vec", AXIS)
def test_rms_norm_gradients(shape, axis, eps, vec):
    ops = (r(*shape) * 2 + 1, r(*vec), r(*vec))
    every = (0, 1, 2, "dy")
    _check_grads("RmsNorm", AxisNormAttrs(axis, eps), ops, [
        ("RmsNormBackwardInput", every, 0), ("RmsNormBackwardGamma", every, 1),
        ("RmsNormBackwardBeta", every, 2)])


@pytest.mark.parametrize("shape, groups, eps, vec", [
    ((2, 6, 3, 2), 3, 1e-5, (6,)), ((1, 4, 5), 2, 1e-5, (4,)), ((2, 4, 2, 2), 1, 0.5, (4,)),
    ((1, 3, 4), 3, 1e-5, (1, 3, 1)), ((3, 4), 2, 1e-4, (4,))])
def test_group_norm_gradients(shape, groups, eps, vec):
    ops = (r(*shape) * 2 - 1, r(*vec), r(*vec))
    _check_grads("GroupNorm", GroupNormAttrs(groups, eps), ops, [
        ("GroupNormBackwardInput", (0, 1, 2, "dy"), 0),
        ("GroupNormBackwardGamma", (0, "dy"), 1), ("GroupNormBackwardBeta", (0, "dy"), 2)])


@pytest.mark.parametrize("shape, vec", [((2, 5), (5,)), ((2, 3, 4), (4,)), ((3,), (3,)),
                                        ((2, 4), (1, 4))])
def test_batch_norm_inference_gradients(shape, vec):
    c = shape[-1]
    ops = (r(*shape), r(*vec), r(c), r(c), RNG.uniform(0.5, 2.0, c))
    attrs = EpsAttrs(1e-3)
    dy = r(*shape)
    for kind, pick, wrt in [("BatchNormInferenceBackwardInput", (0, 1, 3, 4, "dy"), 0),
                            ("BatchNormInferenceBackwardGamma", (0, 3, 4, "dy"), 1),
                            ("BatchNormInferenceBackwardBeta", ("dy",), 2)]:
        a = None if kind.endswith("Beta") else attrs
        args = [dy if p == "dy" else ops[p] for p in pick]
        grad = run_single(kind, a, *args, out=Shape(np.shape(ops[wrt]), DType.F64),
                          float64=True)
        _assert_vjp(_forward("BatchNormInference", attrs, ops, wrt), grad, ops[wrt], dy, kind)


# ── verifier and text form ─────────────────────────────────────────────────

def _f32(*dims):
    return Shape(dims, DType.F32)


@pytest.mark.parametrize("kind, attrs, shapes, out, msg", [
    ("ActivationBackward", ActivationBackwardAttrs("Gelu"), [_f32(2, 3), _f32(3)], None,
     "(C3) ActivationBackward `dy` must have x's shape [2, 3] (no broadcasting)"),
    ("ReluBackward", None, [_f32(3), Shape((3,), DType.F64)], None,
     "(C2) ReluBackward `dy` must have x's dtype f32"),
    ("LayerNormBackwardInput", AxisNormAttrs(2, 1e-5), [_f32(2, 4), _f32(4), _f32(2, 4)],
     None, "(C2) axis 2 is out of range for rank 2"),
    ("LayerNormBackwardInput", AxisNormAttrs(-1, 1e-5), [_f32(2, 4), _f32(5), _f32(2, 4)],
     None, "(C3) LayerNormBackwardInput gamma width (5) does not match"),
    ("LayerNormBackwardGamma", AxisNormAttrs(-1, 1e-5), [_f32(2, 4), _f32(2, 4)], _f32(3),
     "(C3) LayerNormBackwardGamma output width (3) does not match the normalised axis (4)"),
    ("RmsNormBackwardInput", AxisNormAttrs(-1, 1e-5),
     [_f32(2, 4), _f32(4), _f32(4), _f32(4, 2)], None, "(C4) RmsNormBackwardInput `dy`"),
    ("GroupNormBackwardGamma", GroupNormAttrs(3, 1e-5), [_f32(1, 4, 2), _f32(1, 4, 2)],
     _f32(4), "(C4) num_groups (3) must divide the channel count C (4)"),
    ("BatchNormInferenceBackwardBeta", None, [_f32(2, 3)], _f32(2),
     "(C3) BatchNormInferenceBackwardBeta output width (2)"),
])
def test_verifier_errors(kind, attrs, shapes, out, msg):
    msgs = " | ".join(verify_single(kind, attrs, shapes, out=out or shapes[0]))
    assert msg in msgs, msgs


# serde prints f32 with ryu (1e-5 is "0.00001"); unit kinds are bare in the text form
@pytest.mark.parametrize("text", [
    '{"ActivationBackward":{"kind":"Gelu"}}', '{"ActivationBackward":{"kind":"LogSigmoid"}}',
    '{"LayerNormBackwardInput":{"axis":-1,"eps":0.00001}}',
    '{"RmsNormBackwardBeta":{"axis":-1,"eps":1e-7}}',
    '{"GroupNormBackwardGamma":{"num_groups":32,"eps":0.00001}}',
    '{"BatchNormInferenceBackwardInput":{"eps":0.001}}', '"ReluBackward"',
    '"BatchNormInferenceBackwardBeta"',
])
def test_payload_text_is_serde_exact(text):
    op = op_from_json(json.loads(text))
    assert str(op) == text.strip('"')


def test_graph_with_a_declared_gradient_shape_round_trips():
    g = single_op_graph("GroupNormBackwardGamma", GroupNormAttrs(2, 1e-5),
                        [_f32(1, 4, 3), _f32(1, 4, 3)], out=_f32(1, 4, 1))
    text = print_graph(g)
    assert parse(text) == g and '{"GroupNormBackwardGamma":' in text


# ── dynamic dims and the backends' claims ──────────────────────────────────

def test_dynamic_dims_are_checked_at_run_time():
    from rlx_ref.interpret import InterpretError, Interpreter
    from rlx_ref.ir.shape import Dyn

    g = single_op_graph("LayerNormBackwardGamma", AxisNormAttrs(-1, 1e-5),
                        [Shape((Dyn(0), 4), DType.F32)] * 2, out=_f32(4))
    x, dy = RNG.standard_normal((3, 4)).astype(np.float32), np.ones((3, 4), np.float32)
    got = Interpreter(g).run({"x0": x, "x1": dy})[0]
    np.testing.assert_allclose(got, run_single("LayerNormBackwardGamma", g.nodes[-1].attrs,
                                               x, dy, out=_f32(4)), rtol=0)
    g = single_op_graph("RmsNormBackwardInput", AxisNormAttrs(-1, 1e-5),
                        [Shape((2, Dyn(0)), DType.F32), Shape((Dyn(1),), DType.F32),
                         _f32(4), Shape((2, Dyn(0)), DType.F32)])
    assert verify_single("RmsNormBackwardInput", g.nodes[-1].attrs,
                         [g.shape(i) for i in g.nodes[-1].inputs]) == []
    with pytest.raises(InterpretError, match=r"\(C3\) a per-feature vector has 3 elements"):
        Interpreter(g).run({"x0": np.ones((2, 4), np.float32), "x1": np.ones(3, np.float32),
                            "x2": np.ones(4, np.float32), "x3": np.ones((2, 4), np.float32)})


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl", "cuda"])
def test_backends_claim_the_kinds_through_their_decompositions(backend):
    """Each sample compiles for the backend into kinds it lowers natively (nothing is run
    on a device here: the rewritten graph runs on the oracle)."""
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.interpret import interpret
    from rlx_ref.ops.opdef import get
    from rlx_ref.passes import compile_pipeline
    from rlx_ref.passes.decompose_backward_norm import KINDS

    b = get_backend(backend)
    if backend == "opencl" and not b.availability()[0]:     # its claim reads the device
        pytest.skip(b.availability()[1])
    paths = b.paths()
    for kind in KINDS:
        assert paths[kind] == "decomposed" and b.path_reasons()[kind]
        s = get(kind).samples(RNG)[0]
        g = single_op_graph(kind, s.attrs, s.inputs, s.out)
        lowered, report = compile_pipeline(g, b)
        assert not {n.kind for n in lowered.nodes} & set(KINDS), kind
        assert report.path_of(kind) == "rewritten"
        feeds = {f"x{i}": a for i, a in enumerate(s.inputs)}
        np.testing.assert_allclose(interpret(lowered, feeds)[0], interpret(g, feeds)[0],
                                   rtol=1e-6, atol=1e-7, err_msg=kind)
