"""RLX's text form: exact round trips, RLX-printed fixtures, and line-numbered errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rlx_ref import DType, Dyn, Graph, TextParseError, parse, verify
from rlx_ref.ir.text import print_graph
from rlx_ref.ops.opdef import get

# Text as RLX's `text::print` writes it (crates/core/rlx-ir/src/text.rs conventions).
RLX_PRINTED = [
    """graph @fma {
  %0 = {"Input":{"name":"a"}} : [8] f32
  %1 = {"Input":{"name":"b"}} : [8] f32
  %2 = {"Input":{"name":"c"}} : [8] f32
  %3 = Fma(%0, %1, %2) : [8] f32
  return %3
}
""",
    """graph @reshaped {
  %0 = {"Input":{"name":"x"}} : [4, 16] f32
  %1 = {"Reshape":{"new_shape":[64]}}(%0) : [64] f32
  return %1
}
""",
    """graph @k {
  %0 = {"Constant":{"data":[1,2,3,4,5,6,7,8]}} : [2] f32
  return %0
}
""",
    """graph @dyn {
  %0 = {"Input":{"name":"x"}} : [?3, 8] f32
  %1 = {"Reduce":{"op":"Sum","axes":[0,1],"keep_dim":false}}(%0) : [] f32
  return %1
}
""",
    """graph @named {
  %0 = {"Input":{"name":"x"}} : [2] f32
  %1 = {"Activation":"Gelu"}(%0) : [2] f32 #"weird } \\" name"
  return %1
}
""",
    """graph @multi {
  %0 = {"Input":{"name":"a"}} : [2] f32
  %1 = {"Input":{"name":"b"}} : [2] f32
  %2 = {"Binary":"Add"}(%0, %1) : [2] f32
  return %2, %0
}
""",
    """graph @empty {
  %0 = {"Input":{"name":"a"}} : [1] f32
}
""",
    """graph @outer {
  %0 = {"Input":{"name":"init"}} : [4] f32
  %1 = {"Scan":{"body":{"name":"body","nodes":[{"id":0,"op":{"Input":{"name":"carry"}},"inputs":[],"shape":{"dims":[{"Static":4}],"dtype":"F32"},"name":null,"origin":null},{"id":1,"op":{"Activation":"Gelu"},"inputs":[0],"shape":{"dims":[{"Static":4}],"dtype":"F32"},"name":null,"origin":null}],"outputs":[1]},"length":8,"save_trajectory":false,"num_bcast":0,"num_xs":0,"num_checkpoints":0}}(%0) : [4] f32
  return %1
}
""",
]


@pytest.mark.parametrize("text", RLX_PRINTED, ids=lambda t: t.split("@")[1].split()[0])
def test_rlx_printed_text_parses_and_reprints_identically(text):
    g = parse(text)
    assert print_graph(g) == text
    assert parse(print_graph(g)) == g


def test_every_dtype_round_trips():
    for d in DType:
        g = Graph("dt")
        g.input("x", [2, 3], d)
        g.set_outputs([0])
        assert parse(g.to_text()) == g and f"[2, 3] {d}" in g.to_text()


def test_hand_written_text_with_comments_blank_lines_and_labels():
    g = parse("""
        // A comment, and blank lines, are fine.
        graph @hand {
          %0 = {"Input":{"name":"x"}} : [2, 2] f32

          %1 = {"Param":{"name":"w"}} : [2, 2] f32
          // inner comment
          %2 = MatMul(%0, %1) : [2, 2] f32
          %3 = {"Activation":"Relu"}(%2) : [2, 2] f32 #"act"
          return %3
        }
        """)
    assert len(g) == 4 and g.name == "hand" and g.nodes[2].kind == "MatMul"
    assert g.nodes[3].name == "act" and g.outputs == [3]
    assert verify(g) == []


def test_sparse_and_out_of_order_ids_are_remapped():
    g = parse("""graph @sparse {
      %10 = {"Input":{"name":"x"}} : [2] f32
      %20 = {"Activation":"Relu"}(%10) : [2] f32
      %5 = {"Activation":"Neg"}(%20) : [2] f32
      return %5
    }""")
    assert len(g) == 3 and g.outputs == [2] and g.nodes[1].inputs == (0,)
    assert g.nodes[2].inputs == (1,)


@pytest.mark.parametrize("text,line,msg", [
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n  %1 = Nonsense(%0) : [2] f32\n}\n',
     3, "not a valid op"),
    ("graph @g {\n  %1 = MatMul(%7) : [2] f32\n}\n", 2, "used before it is defined"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] weirdtype\n}\n', 2, "unknown dtype"),
    ("", 1, "empty input"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n', 2, "missing `}`"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n  %0 = Fma(%0, %0, %0) : [2] f32\n}',
     3, "defined twice"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32 extra\n}', 2, "trailing input"),
    ('graph @g {\n  %0 = {"Input":{"nam":"x"}} : [2] f32\n}', 2, "has no field 'nam'"),
    ('graph @g {\n  %0 = {"Activation":"Gelux"}(%0) : [2] f32\n}', 2, "not a valid op"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"} : [2] f32\n}', 2, "unterminated JSON"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2 f32\n}', 2, "expected `]`"),
    ('graph @g {\n  %0 = Fma : [2] f32\n  return %9\n}', 3, "used before it is defined"),
    ('graph @g {\n  %0 = {"Cast":{"to":"F8"}} : [2] f32\n}', 2, "DType"),
    # a body node without "op": the whole If line is the error, not a KeyError
    ('graph @g {\n  %0 = {"Input":{"name":"p"}} : [] bool\n  %1 = {"If":{"then_branch":'
     '{"name":"b","nodes":[{"id":0,"shape":{"dims":[],"dtype":"F32"}}],"outputs":[0]},'
     '"else_branch":{"name":"b","nodes":[],"outputs":[]}}}(%0) : [] f32\n}', 3,
     'a node is an object with "op" and "shape"'),
    ('graph @g {\n  %0 = {"Input":{"name":"p"}} : [] bool\n  %1 = {"If":{"then_branch":'
     '{"name":"b","nodes":[{"op":"Fma","shape":{"dims":[{"Static":-1}],"dtype":"F32"}}],'
     '"outputs":[0]},"else_branch":{"name":"b","nodes":[],"outputs":[]}}}(%0) : [] f32\n}', 3,
     "a Static dim must be an integer in [0, 18446744073709551615], got -1"),
    ('graph @g {\n  %0 = {"Reshape":{"new_shape":' + "[" * 200 + "]" * 200 + '}} : [] f32\n}',
     2, "JSON nested deeper than 128 levels"),
    ('graph @g {\n  %0 = {"Reshape":{"new_shape":[1e400]}} : [] f32\n}', 2,
     "number 1e400 is out of range for f64"),
    ('graph @g {\n  %0 = {"Clamp":{"min":NaN,"max":1.0}} : [] f32\n}', 2,
     'NaN is not JSON (write the string "inf", "-inf" or "nan")'),
    ('graph @g {\n  %0 = {"Clamp":{"min":1e39,"max":1.0}} : [] f32\n}', 2,
     "Clamp.min: 1e+39 is out of range for f32"),
    ('graph @g {\n  %0 = {"Scan":{"body":{"name":"b","nodes":[],"outputs":[]},'
     '"length":9000000000000000}} : [] f32\n}', 2,
     "Scan.length: 9000000000000000 is out of range for u32 [0, 4294967295]"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [' + "9" * 30 + '] f32\n}', 2,
     "a dim 999999999999999999999999 is out of range [0, 18446744073709551615]"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [?4294967296] f32\n}', 2,
     "a dynamic symbol 4294967296 is out of range [0, 4294967295]"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32 #"a\n}', 2, "unterminated JSON"),
    ('graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32 #["a"]\n}', 2,
     "expected a JSON string"),
])
def test_malformed_text_fails_with_line_number(text, line, msg):
    with pytest.raises(TextParseError) as e:
        parse(text)
    assert e.value.line == line and msg in e.value.message
    assert str(e.value).startswith(f"line {line}: ")


def test_unit_ops_print_bare_and_payload_ops_as_json():
    g = parse(RLX_PRINTED[0])
    assert "%3 = Fma(%0, %1, %2) : [8] f32" in g.to_text()
    assert str(g.nodes[0].op) == '{"Input":{"name":"x"}}'.replace("x", "a")


def test_f32_payload_prints_like_serde():
    from rlx_ref.ops.elementwise import ClampAttrs

    g = Graph("c")
    x = g.input("x", [2])
    g.set_outputs([g.op("Clamp", [x], ClampAttrs(-1.0, 1e-5))])
    assert '{"Clamp":{"min":-1.0,"max":0.00001}}' in g.to_text()
    assert parse(g.to_text()) == g


@pytest.mark.parametrize("v,f32,f64", [
    (1e-5, "0.00001", "0.00001"), (1e-6, "0.000001", "1e-6"), (1e-7, "1e-7", "1e-7"),
    (0.5, "0.5", "0.5"), (-0.0, "-0.0", "-0.0"), (100.0, "100.0", "100.0"),
    (1e12, "1000000000000.0", "1000000000000.0"), (1e13, "1e13", "10000000000000.0"),
    (1e17, "1e17", "1e17"), (123.456, "123.456", "123.456"), (1.5e-7, "1.5e-7", "1.5e-7"),
    (3.4028235e38, "3.4028235e38", "3.4028235e38"), (0.1, "0.1", "0.1"),
])
def test_floats_print_as_serde_json_ryu(v, f32, f64):
    from rlx_ref.ops.codec import format_f32, format_f64

    assert format_f32(v) == f32 and format_f64(v) == f64


_ACTS = ["Relu", "Gelu", "Neg", "Exp", "Tanh"]
_BINS = ["Add", "Mul", "Sub", "Max"]


@st.composite
def random_graphs(draw):
    g = Graph(draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,8}", fullmatch=True)))
    n_in = draw(st.integers(1, 3))
    dims = draw(st.lists(st.one_of(st.integers(0, 4), st.builds(Dyn, st.integers(0, 2))),
                         max_size=3))
    dt = draw(st.sampled_from([DType.F32, DType.F64, DType.F16, DType.BF16]))
    for i in range(n_in):
        g.input(f"in{i}", dims, dt)
    for _ in range(draw(st.integers(0, 6))):
        ids = list(range(len(g)))
        label = draw(st.one_of(st.none(), st.text(max_size=6)))
        if draw(st.booleans()):
            g.op("Activation", [draw(st.sampled_from(ids))], op=draw(st.sampled_from(_ACTS)),
                 label=label)
        else:
            g.op("Binary", [draw(st.sampled_from(ids)), draw(st.sampled_from(ids))],
                 op=draw(st.sampled_from(_BINS)), label=label)
    g.set_outputs(draw(st.lists(st.sampled_from(range(len(g))), max_size=3)))
    return g


@settings(max_examples=60, deadline=None)
@given(random_graphs())
def test_property_print_parse_round_trip(g):
    text = print_graph(g)
    back = parse(text)
    assert back == g and print_graph(back) == text


def test_constant_payload_survives_round_trip():
    g = Graph("k")
    c = g.constant(np.array([1.5, -2.0], np.float32))
    g.set_outputs([c])
    back = parse(g.to_text())
    assert back.nodes[0].attrs.data == np.array([1.5, -2.0], np.float32).tobytes()
    assert get("Constant").payload == "struct"


def test_parse_is_linear_in_line_length():
    """160k operands on one line: slicing the rest of the line per token made this take
    seconds; a forward-moving cursor keeps it to a fraction of one."""
    import time

    n = 160_000
    text = ("graph @g {\n  %0 = {\"Input\":{\"name\":\"x\"}} : [1] f32\n"
            f"  %1 = {{\"Concat\":{{\"axis\":0}}}}({', '.join(['%0'] * n)}) : [{n}] f32\n"
            "  return %1\n}\n")
    start = time.perf_counter()
    g = parse(text)
    assert time.perf_counter() - start < 1.0
    assert len(g.nodes[1].inputs) == n and g.nodes[1].shape.dims == (n,)
