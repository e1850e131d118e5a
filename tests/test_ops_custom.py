"""Custom: RLX's payload, the user-facing registry, dispatch, errors, text form, oracle runs."""
import json
import struct

import numpy as np
import pytest

from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import op_from_json, op_to_json, parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops.codec import dumps
from rlx_ref.ops.custom import (DEMO_SCALE, CustomAttrs, custom_attrs, custom_ops, lookup_custom,
                                register_custom, scale_attrs, unregister_custom)
from rlx_ref.ops.opdef import OpError, Sample, get
from rlx_ref.ops.single import run_single, single_op_graph

F32 = DType.F32


# ── example ops, registered only inside these tests ──────────────────────

def _outer_infer(shapes, attrs):
    a, b = shapes
    if a.rank != 1 or b.rank != 1:
        raise OpError(f"outer takes two vectors, got {a} and {b}")
    return Shape((a.dims[0], b.dims[0]), a.dtype)


def _outer_check(shapes, attrs):
    msgs = []
    if shapes[0].dtype != shapes[1].dtype:
        msgs.append(f"operand dtypes differ ({shapes[0].dtype} vs {shapes[1].dtype})")
    if attrs not in (b"", b"\x01"):
        msgs.append(f"attrs is empty or [1] (transpose), got {list(attrs)}")
    return msgs


def _outer_ref(ctx, a, b):
    out = np.multiply.outer(a, b)
    return (out.T if ctx.attrs == b"\x01" else out).astype(ctx.out_np)


@pytest.fixture
def outer():
    """test.outer: a[M] ⊗ b[N] → [M, N]; attrs b'\\x01' would mean transposed (square)."""
    with register_custom("test.outer", num_inputs=2, infer=_outer_infer,
                         reference=_outer_ref, check=_outer_check,
                         doc="outer product") as op:
        yield op
    assert "test.outer" not in custom_ops()


@pytest.fixture
def softclip():
    """test.softclip via the decorator form: c · tanh(x / c), c an f32 in attrs."""
    @register_custom("test.softclip", num_inputs=1, infer=lambda shapes, attrs: shapes[0])
    def softclip_ref(ctx, x):
        """c · tanh(x / c)."""
        (c,) = struct.unpack("<f", ctx.attrs)
        return (c * np.tanh(x / c)).astype(ctx.out_np)
    yield softclip_ref
    unregister_custom("test.softclip")


# ── the registry ──────────────────────────────────────────────────────────

def test_registered_op_runs_on_the_oracle(outer):
    a, b = np.array([1.0, -2.0, 0.5], np.float32), np.array([3.0, 4.0], np.float32)
    attrs = custom_attrs("test.outer")
    assert attrs == CustomAttrs("test.outer", 2, b"")
    out = run_single("Custom", attrs, a, b)
    np.testing.assert_array_equal(out, [[a[i] * b[j] for j in range(2)] for i in range(3)])
    assert out.dtype == np.float32
    out64 = run_single("Custom", attrs, a, b, float64=True)
    assert out64.dtype == np.float64 and out64.shape == (3, 2)


def test_decorator_form_registers_and_keeps_the_function(softclip):
    assert callable(softclip) and lookup_custom("test.softclip").doc == "c · tanh(x / c)."
    x = np.array([-10.0, 0.0, 1.0, 10.0], np.float32)
    out = run_single("Custom", custom_attrs("test.softclip", struct.pack("<f", 2.0)), x)
    np.testing.assert_allclose(out, 2 * np.tanh(x / 2), rtol=1e-6)


def test_builder_infers_the_shape_from_the_registered_rule(outer):
    g = Graph("b")
    a, b = g.input("a", (3,)), g.input("b", (5,))
    y = g.custom(a, b, name="test.outer", num_inputs=2, attrs=b"")
    assert g.nodes[y].attrs == custom_attrs("test.outer")
    g.set_outputs([y])
    assert g.shape(y) == Shape((3, 5), F32) and verify(g) == []
    got = interpret(g, {"a": np.ones(3, np.float32), "b": np.arange(5, dtype=np.float32)})
    np.testing.assert_array_equal(got[0], np.tile(np.arange(5), (3, 1)))


def test_duplicate_names_replace_and_unregister(outer):
    with pytest.raises(ValueError, match="'test.outer' is already registered"):
        register_custom("test.outer", num_inputs=2, infer=_outer_infer, reference=_outer_ref)
    replacement = register_custom("test.outer", num_inputs=2, infer=_outer_infer,
                                  reference=_outer_ref, replace=True)
    assert lookup_custom("test.outer") is replacement
    assert unregister_custom("test.outer") is replacement
    with pytest.raises(KeyError, match=f"'test.outer' is not registered .*{DEMO_SCALE}"):
        unregister_custom("test.outer")


@pytest.mark.parametrize("kwargs,err", [
    ({"name": ""}, "non-empty string"),
    ({"num_inputs": -1}, "num_inputs must be an int >= 0"),
    ({"infer": "nope"}, "infer must be callable"),
])
def test_registration_arguments_are_validated(kwargs, err):
    args = {"name": "test.bad", "num_inputs": 1, "infer": lambda s, a: s[0],
            "reference": lambda ctx, x: x}
    args.update(kwargs)
    name = args.pop("name")
    with pytest.raises((ValueError, TypeError), match=err):
        register_custom(name, **args)
    assert "test.bad" not in custom_ops()


def test_samples_of_registered_ops_join_the_custom_opdef(outer):
    def samples(rng):
        return [Sample((np.ones(2, np.float32), np.ones(3, np.float32)),
                       custom_attrs("test.sampled"), tags=("custom",))]
    with register_custom("test.sampled", num_inputs=2, infer=_outer_infer,
                         reference=_outer_ref, samples=samples):
        names = {s.attrs.name for s in get("Custom").samples(np.random.default_rng(0))}
        assert names == {DEMO_SCALE, "test.sampled"}
    names = {s.attrs.name for s in get("Custom").samples(np.random.default_rng(0))}
    assert names == {DEMO_SCALE}


# ── text form ─────────────────────────────────────────────────────────────

def test_payload_json_matches_rlx():
    j = '{"Custom":{"name":"my_fft","num_inputs":1,"attrs":[1,0,0,0]}}'
    op = op_from_json(json.loads(j))
    assert op.attrs == CustomAttrs("my_fft", 1, b"\x01\x00\x00\x00")
    assert dumps(op_to_json(op)) == j


def test_graph_round_trips_through_text(outer):
    x = Shape((4,), F32)
    attrs = custom_attrs("test.outer", b"\x01")
    g = single_op_graph("Custom", attrs, [x, x])
    text = print_graph(g)
    assert '{"Custom":{"name":"test.outer","num_inputs":2,"attrs":[1]}}(%0, %1)' in text
    back = parse(text)
    assert back == g and print_graph(back) == text and verify(back) == []
    a, b = np.arange(4, dtype=np.float32), np.array([1, 10, 100, 1000], np.float32)
    np.testing.assert_array_equal(interpret(back, {"x0": a, "x1": b})[0],
                                  np.multiply.outer(a, b).T)


def test_an_unregistered_graph_parses_but_does_not_verify():
    text = ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n'
            '  %1 = {"Custom":{"name":"vendor.fft","num_inputs":1,"attrs":[]}}(%0) : [2] f32\n'
            '  return %1\n}\n')
    g = parse(text)
    assert print_graph(g) == text
    (err,) = verify(g)
    assert err.node == 1 and "(C1) custom op 'vendor.fft' is not registered (registered: " \
        f"{DEMO_SCALE})" in err.message
    with pytest.raises(Exception, match="vendor.fft"):
        interpret(g, {"x": np.zeros(2, np.float32)})


# ── verifier and runtime errors ───────────────────────────────────────────

def _errors(attrs, shapes, out):
    return " | ".join(e.message for e in verify(single_op_graph("Custom", attrs, shapes, out)))


V3, V2 = Shape((3,), F32), Shape((2,), F32)


def test_unknown_name_lists_the_registered_names(outer):
    with pytest.raises(OpError, match=r"'nope' is not registered \(registered: "
                                      rf"{DEMO_SCALE}, test.outer\)"):
        single_op_graph("Custom", CustomAttrs("nope", 1, b""), [V3])
    assert "(C1) custom op 'nope'" in _errors(CustomAttrs("nope", 1, b""), [V3], V3)


@pytest.mark.parametrize("attrs,shapes,out,msg", [
    (CustomAttrs("test.outer", 2, b""), [V3], V3,
     "(C2) Custom 'test.outer' declares num_inputs=2 but has 1 operand(s)"),
    (CustomAttrs("test.outer", 3, b""), [V3, V3, V3], V3,
     "(C2) custom op 'test.outer': registered op expects 2 inputs, got 3"),
    (CustomAttrs("test.outer", 2, b"\x07"), [V3, Shape((2,), DType.F64)], V3,
     ("(C3) test.outer: operand dtypes differ (f32 vs f64); test.outer: attrs is empty or "
      "[1] (transpose), got [7]")),
    (CustomAttrs("test.outer", 2, b""), [V3, V2], Shape((2, 3), F32),
     "shape mismatch: declared [2, 3] f32, inferred [3, 2] f32"),
    (CustomAttrs("test.outer", 2, b""), [Shape((3, 1), F32), V2], V3,
     "outer takes two vectors, got [3, 1] f32 and [2] f32"),
])
def test_verifier_rejects_bad_nodes(outer, attrs, shapes, out, msg):
    assert msg in _errors(attrs, shapes, out)


def test_failing_user_rules_become_verifier_messages():
    def bad_infer(shapes, attrs):
        return shapes[5]
    def raising_check(shapes, attrs):
        raise OpError("attrs must not be empty")
    with register_custom("test.broken", num_inputs=1, infer=bad_infer,
                         reference=lambda ctx, x: x, check=raising_check):
        assert "(C3) test.broken: attrs must not be empty" in _errors(
            custom_attrs("test.broken"), [V3], V3)
        with register_custom("test.broken", num_inputs=1, infer=bad_infer,
                             reference=lambda ctx, x: x, replace=True):
            assert "(C4) custom op 'test.broken': infer failed: IndexError" in _errors(
                custom_attrs("test.broken"), [V3], V3)
        with register_custom("test.broken", num_inputs=1, infer=lambda s, a: [3],
                             reference=lambda ctx, x: x, replace=True):
            assert "infer returned [3], expected a Shape" in _errors(
                custom_attrs("test.broken"), [V3], V3)


def test_reference_errors_name_the_node():
    def boom(ctx, x):
        raise ValueError("kernel exploded")
    with register_custom("test.boom", num_inputs=1, infer=lambda s, a: s[0], reference=boom), \
            pytest.raises(InterpretError, match="at %1 .*kernel exploded"):
        run_single("Custom", custom_attrs("test.boom"), np.zeros(3, np.float32))


def test_unregistering_mid_session_is_reported_at_run_time(outer):
    g = single_op_graph("Custom", custom_attrs("test.outer"), [V3, V2])
    unregister_custom("test.outer")
    with pytest.raises(Exception, match="'test.outer' is not registered"):
        interpret(g, {"x0": np.ones(3, np.float32), "x1": np.ones(2, np.float32)})


# ── the demo op ───────────────────────────────────────────────────────────

def test_demo_scale_is_registered_and_runs():
    x = np.array([1.0, -0.0, np.inf, np.nan, 65504.0], np.float16)
    out = run_single("Custom", custom_attrs(DEMO_SCALE, scale_attrs(0.5)), x)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, (x.astype(np.float32) * 0.5).astype(np.float16))
    assert scale_attrs(2.0) == b"\x00\x00\x00\x40"


def test_demo_scale_checks_its_attrs_and_dtype():
    msg = _errors(CustomAttrs(DEMO_SCALE, 1, b"\x00\x00"), [Shape((3,), DType.I32)],
                  Shape((3,), DType.I32))
    assert f"(C3) {DEMO_SCALE}: attrs must be one little-endian f32 (4 bytes), got 2 " \
           f"bytes; {DEMO_SCALE}: the input must be float, got i32" in msg
