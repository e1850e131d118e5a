"""ElementwiseRegion: fused chains equal the unfused ops bit for bit; encoding; checks."""
import json

import numpy as np
import pytest

from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph, Op
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ir.text import op_from_json, op_to_json, parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops.codec import CodecError, dumps
from rlx_ref.ops.elementwise import ACTIVATIONS, BINARIES, COMPARES
from rlx_ref.ops.opdef import OpError, RefCtx, get
from rlx_ref.ops.region import (ElementwiseRegionAttrs, Input, Step, activation, binary, cast,
                                compare, encode_region, unfuse, where)
from rlx_ref.ops.single import run_single, single_op_graph

F32, F16, I32, BOOL = DType.F32, DType.F16, DType.I32, DType.BOOL
SPECIAL = np.array([0.0, -0.0, 0.5, -1.5, 3.0, -7.25, np.inf, -np.inf, np.nan], np.float32)


def _shape(x):
    return Shape(np.shape(x), DType.of(np.asarray(x)))


def _feeds(arrays):
    return {f"x{i}": a for i, a in enumerate(arrays)}


def _fused_and_unfused(chain, arrays, float64=False, **kw):
    """Run the chain as one region and as separate ops on the oracle."""
    shapes = [_shape(x) for x in arrays]
    attrs = encode_region(chain, shapes, **kw)
    fused = run_single("ElementwiseRegion", attrs, *arrays, float64=float64)
    g = Graph("unfused")
    ids = [g.input(f"x{i}", s.dims, s.dtype) for i, s in enumerate(shapes)]
    g.set_outputs([unfuse(g, attrs, ids)])
    assert verify(g) == []
    unfused = interpret(g, _feeds(arrays), float64=float64)[0]
    return fused, unfused


def _assert_bit_identical(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


# ── fused == unfused, bit for bit ──────────────────────────────────────────

@pytest.mark.parametrize("float64", [False, True])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_every_activation_in_a_chain_matches_the_unfused_ops(name, float64):
    chain = [activation(name, Input(0)), binary("Mul", Step(0), Input(1)),
             activation(name, Step(1))]
    arrays = (SPECIAL, np.float32(0.75))
    _assert_bit_identical(*_fused_and_unfused(chain, arrays, float64))


@pytest.mark.parametrize("name", list(BINARIES))
def test_every_binary_in_a_chain_matches_the_unfused_ops(name):
    x = np.array([[7, -7, 5, -9], [0, 3, 12, -1]], np.int32)
    y = np.array([2, 3, 1, 4], np.int32)
    ints = BINARIES[name][2] is not None
    chain = [binary(name, Input(0), Input(1)), binary("Add", Step(0), Input(1)),
             binary(name, Step(1), Input(1))]
    if ints:
        _assert_bit_identical(*_fused_and_unfused(chain, (x, y)))
    xf = SPECIAL.reshape(3, 3)
    yf = np.array([1.5, -0.0, 2.0], np.float32)
    _assert_bit_identical(*_fused_and_unfused(chain, (xf, yf)))


@pytest.mark.parametrize("name", list(COMPARES))
def test_compare_and_where_inside_a_chain(name):
    x = SPECIAL.reshape(3, 3)
    y = np.array([0.5, -0.0, np.nan], np.float32)
    chain = [compare(name, Input(0), Input(1)), where(Step(0), Input(0), Input(1)),
             activation("Neg", Step(1)), compare(name, Step(2), Input(1))]
    fused, unfused = _fused_and_unfused(chain, (x, y))
    _assert_bit_identical(fused, unfused)
    ref = COMPARES[name](-np.where(COMPARES[name](x, y), x, y), y)
    np.testing.assert_array_equal(fused, ref)


@pytest.mark.parametrize("float64", [False, True])
def test_cast_steps_round_like_the_cast_op(float64):
    x = np.array([1 / 3, 65504.0, 7e4, -2.7, np.nan], np.float32)
    chain = [cast(F16, Input(0)), cast(F32, Step(0)), binary("Sub", Input(0), Step(1)),
             cast(I32, Step(0))]
    fused, unfused = _fused_and_unfused(chain, (x,), float64)
    _assert_bit_identical(fused, unfused)
    assert fused.dtype == np.int32 and fused[-1] == 0     # NaN casts to 0


def test_where_with_a_bool_condition_input_and_int_branches():
    cond = np.array([[True], [False]])
    t = np.arange(6, dtype=np.int32).reshape(2, 3)
    chain = [where(Input(0), Input(1), Input(2)), binary("Mul", Step(0), Input(1))]
    shapes = [_shape(cond), _shape(t), _shape(np.int32(-1))]
    with pytest.raises(OpError, match=r"\(C5\) input 0 \[2, 1\] bool"):  # a middle broadcast
        get("ElementwiseRegion").check(shapes, encode_region(chain, shapes), None)
    cond = np.array([True, False, True])
    fused, unfused = _fused_and_unfused(chain, (cond, t, np.int32(-1)))
    _assert_bit_identical(fused, unfused)
    np.testing.assert_array_equal(fused, np.where(cond, t, -1) * t)


def test_integer_division_by_zero_fails_as_the_unfused_op_does():
    x, y = np.array([4, 5], np.int32), np.array([2, 0], np.int32)
    chain = [binary("Div", Input(0), Input(1)), activation("Neg", Step(0))]
    with pytest.raises(InterpretError, match="division by zero"):
        run_single("ElementwiseRegion", encode_region(chain, [_shape(x), _shape(y)]), x, y)


# ── broadcasting by modulus ───────────────────────────────────────────────

def test_bias_and_scale_tile_by_modulus():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    bias, scale = np.array([10, 20, 30, 40], np.float32), np.array([1, 2, 3, 4], np.float32)
    chain = [binary("Add", Input(0), Input(1)), binary("Mul", Step(0), Input(2))]
    attrs = encode_region(chain, [_shape(x), _shape(bias), _shape(scale)])
    assert attrs.input_modulus[:3] == (0, 4, 4) and attrs.scalar_input_mask == 0
    out = run_single("ElementwiseRegion", attrs, x, bias, scale)
    np.testing.assert_array_equal(out, (x + bias) * scale)


def test_scalar_inputs_set_the_mask_like_rlx():
    x, s = np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(2.0)
    row = np.ones((1, 3), np.float32)
    chain = [binary("Mul", Input(1), Input(0)), binary("Add", Step(0), Input(2))]
    attrs = encode_region(chain, [_shape(x), _shape(s), _shape(row)])
    assert attrs.scalar_input_mask == 0b10 and attrs.input_modulus[:3] == (0, 1, 3)
    out = run_single("ElementwiseRegion", attrs, x, s, row)
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out, s * x + row)
    one = encode_region(chain, [_shape(s)] * 3)          # a one-element output: no mask
    assert one.scalar_input_mask == 0 and one.input_modulus == (0,) * 16


def test_reference_reads_element_gid_mod_modulus():
    """The raw encoding: a [3, 1] input over [3, 4] with modulus 3 tiles, unlike numpy."""
    col = np.array([[1.0], [2.0], [3.0]], np.float32)
    zeros = np.zeros((3, 4), np.float32)
    attrs = ElementwiseRegionAttrs((binary("Add", Input(0), Input(1)),), 2, 0,
                                   (0, 3) + (0,) * 14)
    ctx = RefCtx(attrs, Shape((3, 4), F32))
    out = get("ElementwiseRegion").reference(ctx, zeros, col)
    flat = [col.reshape(-1)[gid % 3] for gid in range(12)]
    np.testing.assert_array_equal(out.reshape(-1), flat)
    g = single_op_graph("ElementwiseRegion", attrs, [_shape(zeros), _shape(col)])
    assert any("(C5) input 1 [3, 1] f32 is not a trailing block" in e.message
               for e in verify(g))


def test_dynamic_dims_run_with_the_fed_sizes():
    s = Shape((Dyn(0), 3), F32)
    attrs = encode_region([binary("Add", Input(0), Input(1)), activation("Abs", Step(0))],
                          [s, s])
    g = single_op_graph("ElementwiseRegion", attrs, [s, s])
    assert verify(g) == [] and g.nodes[-1].shape == s
    x = np.arange(-6, 6, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(interpret(g, {"x0": x, "x1": x})[0], np.abs(2 * x))


# ── dtype rule, prologue ──────────────────────────────────────────────────

@pytest.mark.parametrize("chain,dtype", [
    ([compare("Lt", Input(1), Input(2))], BOOL),
    ([activation("Relu", Input(1)), cast(F16, Step(0))], F16),
    ([compare("Lt", Input(1), Input(2)), where(Step(0), Input(3), Input(3))], I32),
    ([where(Input(0), Input(1), Input(2)), binary("Add", Step(0), Input(1))], F32),
    ([binary("Mul", Input(3), Input(3))], I32),
])
def test_output_dtype_is_the_last_steps(chain, dtype):
    shapes = [Shape((4,), BOOL), Shape((4,), F32), Shape((4,), F32), Shape((4,), I32)]
    attrs = ElementwiseRegionAttrs(tuple(chain), 4)
    assert get("ElementwiseRegion").infer(shapes, attrs) == Shape((4,), dtype)


def test_resize_prologue_upsamples_then_runs_the_chain():
    half = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) - 5
    full = np.linspace(-1, 1, 48, dtype=np.float32).reshape(1, 2, 4, 6)
    chain = [activation("Relu", Input(1)), binary("Add", Step(0), Input(0))]
    attrs = encode_region(chain, [_shape(full), _shape(half)], prologue="ResizeNearest2x",
                          prologue_input=1)
    g = single_op_graph("ElementwiseRegion", attrs, [full, half])
    assert g.nodes[-1].shape == Shape((1, 2, 4, 6), F32) and verify(g) == []
    out = run_single("ElementwiseRegion", attrs, full, half)
    up = np.array([[[[half[0, c, y // 2, x // 2] for x in range(6)] for y in range(4)]
                    for c in range(2)]])
    np.testing.assert_array_equal(out, np.maximum(up, 0) + full)
    fused, unfused = _fused_and_unfused(chain, (full, half), prologue="ResizeNearest2x",
                                        prologue_input=1)
    _assert_bit_identical(fused, unfused)


# ── text form ─────────────────────────────────────────────────────────────

RLX_EXAMPLE = ('{"ElementwiseRegion":{"chain":[{"Binary":["Add",{"Input":0},{"Input":1}]},'
               '{"Activation":["Relu",{"Step":0}]},{"Cast":["F16",{"Step":1}]},'
               '{"Compare":["Ge",{"Step":2},{"Input":1}]},'
               '{"Where":[{"Step":3},{"Step":2},{"Step":2}]}],"num_inputs":2,'
               '"scalar_input_mask":2,"input_modulus":[0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0],'
               '"prologue":"None","prologue_input":0}}')


def test_payload_json_matches_rlx_byte_for_byte():
    op = op_from_json(json.loads(RLX_EXAMPLE))
    assert op.attrs.chain[3] == ("Compare", ("Ge", ("Step", 2), ("Input", 1)))
    assert op.attrs.chain[2] == ("Cast", (F16, ("Step", 1)))
    assert dumps(op_to_json(op)) == RLX_EXAMPLE


def test_graph_round_trips_through_text():
    x, s = Shape((2, 3), F32), Shape((1,), F32)
    attrs = encode_region([binary("Add", Input(0), Input(1)), activation("Relu", Step(0)),
                           compare("Gt", Step(1), Input(1)),
                           where(Step(2), Step(1), Input(1))], [x, s])
    g = single_op_graph("ElementwiseRegion", attrs, [x, s])
    text = print_graph(g)
    assert '"scalar_input_mask":2' in text and parse(text) == g
    assert print_graph(parse(text)) == text


def test_older_payload_without_prologue_fields_parses():
    old = json.loads(RLX_EXAMPLE)
    del old["ElementwiseRegion"]["prologue"], old["ElementwiseRegion"]["prologue_input"]
    op = op_from_json(old)
    assert op.attrs.prologue == "None" and op.attrs.prologue_input == 0


@pytest.mark.parametrize("bad,msg", [
    ('[{"Binary":["Add",{"Input":0}]}]', "3-element list"),
    ('[{"Activation":["Relu",{"Other":0}]}]', "ChainOperand"),
    ('[{"Fma":[{"Input":0}]}]', "ChainStep"),
])
def test_malformed_chain_json_is_rejected(bad, msg):
    j = json.loads(RLX_EXAMPLE)
    j["ElementwiseRegion"]["chain"] = json.loads(bad)
    with pytest.raises(CodecError, match=msg):
        op_from_json(j)
    j = json.loads(RLX_EXAMPLE)
    j["ElementwiseRegion"]["input_modulus"] = [0] * 15
    with pytest.raises(CodecError, match="16-element"):
        op_from_json(j)


# ── verifier errors ───────────────────────────────────────────────────────

def _errors(attrs, shapes, out=None):
    g = single_op_graph("ElementwiseRegion", attrs, shapes, out=out or shapes[0])
    return " | ".join(e.message for e in verify(g))


X, V4, X3 = Shape((2, 3), F32), Shape((4,), F32), Shape((2, 3, 4), F32)
ADD = binary("Add", Input(0), Input(1))


def _attrs(chain, n, mask=0, modulus=(), **kw):
    mod = tuple(modulus) + (0,) * (16 - len(modulus))
    return ElementwiseRegionAttrs(tuple(chain), n, mask, mod, **kw)


@pytest.mark.parametrize("attrs,shapes,msg", [
    (_attrs([], 1), [X], "(C1) the chain has 0 steps"),
    (_attrs([activation("Relu", Input(0))] * 33, 1), [X], "(C1) the chain has 33 steps"),
    (_attrs([ADD], 2), [X, X, X], "declares num_inputs=2 but has 3 operand(s)"),
    (_attrs([binary("Add", Input(0), Input(2))], 2), [X, X],
     "(C2) step 0 reads Input(2) but the region has 2 inputs"),
    (_attrs([ADD, activation("Relu", Step(1))], 2), [X, X],
     "(C2) step 1 reads Step(1); a step may only read earlier steps (Step(0)..Step(0))"),
    (_attrs([activation("Relu", Step(0))], 1), [X], "step 0 must read inputs"),
    (_attrs([ADD], 2), [X, Shape((2, 3), I32)],
     "(C3) step 0 Binary(Add, Input(0), Input(1)): (C2) Add operands must share one dtype"),
    (_attrs([activation("Sin", Input(0))], 1), [Shape((3,), I32)],
     "(C3) step 0 Activation(Sin, Input(0)): (C2) Sin is defined on float"),
    (_attrs([where(Input(0), Input(0), Input(1))], 2), [X, Shape((2, 3), F16)],
     "(C3) step 0 Where(Input(0), Input(0), Input(1)): (C1) Where branches"),
    (_attrs([ADD], 2), [X3, V4], "(C4) input 1 [4] f32 has 4 elements but the output"),
    (_attrs([ADD], 2, modulus=(0, 2)), [X3, V4], "(C4) input_modulus[1] = 2 but input 1"),
    (_attrs([ADD], 2, modulus=(0, 0, 5)), [X, X], "(C4) input_modulus[2] = 5 but the region"),
    (_attrs([ADD], 2, modulus=(0, 3)), [Shape((3, 4), F32), Shape((3, 1), F32)], "(C5)"),
    (_attrs([ADD], 2, mask=0b10), [X, X], "(C6) scalar_input_mask marks input 1"),
    (_attrs([ADD], 2, mask=0b100), [X, X], "(C6) scalar_input_mask 0x4 has bits past"),
    (_attrs([ADD], 2, prologue="ResizeNearest2x", prologue_input=2), [X, X],
     "(C7) prologue_input 2 is not an input"),
    (_attrs([ADD], 2, prologue="ResizeNearest2x"), [X, X],
     "(C7) the ResizeNearest2x prologue needs an NCHW (rank 4) input"),
])
def test_verifier_rejects_bad_payloads(attrs, shapes, msg):
    assert msg in _errors(attrs, shapes)


def test_prologue_output_must_be_the_upsampled_input():
    half = Shape((1, 2, 2, 3), F32)
    attrs = _attrs([activation("Relu", Input(0))], 1, prologue="ResizeNearest2x")
    assert "(C7) the prologue input [1, 2, 2, 3] f32 upsamples to [1, 2, 4, 6] f32, which " \
           "must equal the output [1, 2, 2, 3] f32" in _errors(attrs, [half], half)
    assert _errors(attrs, [half], Shape((1, 2, 4, 6), F32)) == ""


def test_declared_shape_and_dtype_are_checked():
    attrs = encode_region([compare("Lt", Input(0), Input(1))], [X, X])
    assert "shape mismatch: declared [2, 3] f32, inferred [2, 3] bool" in _errors(attrs,
                                                                                [X, X])
    attrs = encode_region([ADD], [X, Shape((3,), F32)])
    assert "(C4)" in _errors(attrs, [X, Shape((3,), F32)], Shape((4, 2, 3), F32))


def test_unbroadcastable_inputs_fail_shape_inference():
    with pytest.raises(Exception, match="cannot broadcast"):
        get("ElementwiseRegion").infer([X, V4], _attrs([ADD], 2))


def test_builder_method_appends_a_verified_region():
    g = Graph("b")
    x, b = g.input("x", (2, 3, 4)), g.input("b", (4,))
    r = g.elementwise_region(x, b, **vars(encode_region(
        [ADD, activation("Gelu", Step(0))], [g.shape(x), g.shape(b)])))
    g.set_outputs([r])
    assert verify(g) == [] and g.shape(r) == Shape((2, 3, 4), F32)
    assert g.nodes[r].op == Op("ElementwiseRegion", g.nodes[r].attrs)
