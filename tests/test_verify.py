"""The verifier's three layers and its `at %N: message` format."""
import pytest

from rlx_ref import DType, Graph, GraphVerifyError, Op, Shape, verify, verify_or_raise
from rlx_ref.ops.elementwise import ActivationAttrs, BinaryAttrs
from rlx_ref.ops.leaves import Named

F = DType.F32


def _inp(g, name, dims, dt=F):
    return g.add_node(Op("Input", Named(name)), [], Shape(dims, dt))


def test_clean_graph_has_no_errors():
    g = Graph("ok")
    a = _inp(g, "a", [2, 3])
    b = _inp(g, "b", [3])
    g.set_outputs([g.add_node(Op("Binary", BinaryAttrs("Add")), [a, b], Shape([2, 3], F))])
    assert verify(g) == []


def test_structure_dangling_and_non_dag_operands():
    g = Graph("bad")
    _inp(g, "a", [2])
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [5], Shape([2], F))
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [2], Shape([2], F))
    g.outputs = [9]
    msgs = [str(e) for e in verify(g)]
    assert "at %1: input %5 references non-existent node (graph has 3 nodes)" in msgs
    assert "at %2: input %2 is not before %2: graph is not a DAG" in msgs
    assert "output %9 references non-existent node" in msgs


def test_arity_and_leaf_rules():
    g = Graph("arity")
    a = _inp(g, "a", [2])
    g.add_node_unchecked(Op("Binary", BinaryAttrs("Add")), [a], Shape([2], F))
    g.add_node_unchecked(Op("Input", Named("z")), [a], Shape([2], F))
    msgs = [str(e) for e in verify(g)]
    assert "at %1: Binary expects 2 inputs, got 1" in msgs
    assert "at %2: Input is a graph leaf but has 1 operand(s)" in msgs


def test_op_local_rule_cites_constraint():
    g = Graph("dt")
    a = _inp(g, "a", [2])
    b = _inp(g, "b", [2], DType.I32)
    g.add_node_unchecked(Op("Binary", BinaryAttrs("Add")), [a, b], Shape([2], F))
    (e,) = verify(g)
    assert e.node == 2 and "(C2)" in e.message and "f32 and i32" in e.message


def test_declared_shape_is_checked_against_inference():
    g = Graph("shape")
    a = _inp(g, "a", [2, 3])
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [a], Shape([3, 2], F))
    (e,) = verify(g)
    assert str(e).startswith("at %1: shape mismatch: declared [3, 2] f32, inferred [2, 3] f32")


def test_rank0_and_one_element_shapes_are_compatible():
    g = Graph("scalar")
    a = _inp(g, "a", [])
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [a], Shape([1], F))
    assert verify(g) == []


def test_unbroadcastable_operands_are_reported():
    g = Graph("bc")
    a = _inp(g, "a", [2, 3])
    b = _inp(g, "b", [4])
    g.add_node_unchecked(Op("Binary", BinaryAttrs("Add")), [a, b], Shape([2, 3], F))
    (e,) = verify(g)
    assert e.node == 2 and "cannot broadcast [2, 3] with [4]" in e.message


def test_verify_or_raise_lists_every_error():
    g = Graph("many")
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [3], Shape([2], F))
    g.add_node_unchecked(Op("Activation", ActivationAttrs("Relu")), [7], Shape([2], F))
    with pytest.raises(GraphVerifyError, match=r"2 errors"):
        verify_or_raise(g)


def test_users_and_topo_order():
    g = Graph("dag")
    a = _inp(g, "a", [2])
    r = g.add_node(Op("Activation", ActivationAttrs("Relu")), [a], Shape([2], F))
    s = g.add_node(Op("Binary", BinaryAttrs("Add")), [a, r], Shape([2], F))
    t = g.add_node(Op("Binary", BinaryAttrs("Mul")), [s, s], Shape([2], F))
    assert g.users(a) == [r, s] and g.users(s) == [t] and g.users(t) == []
    assert g.users_map() == {a: [r, s], r: [s], s: [t], t: []}
    assert g.topo_order() == [a, r, s, t]
    from rlx_ref.ir.graph import GraphError

    with pytest.raises(GraphError, match="does not precede it"):
        g.add_node(Op("Activation", ActivationAttrs("Relu")), [9], Shape([2], F))


@pytest.mark.parametrize("kind,attrs,msg", [
    ("Slice", dict(axis=0, start=0, len=2, step=2**63),
     "field step = 9223372036854775808 is out of range for i64 [-9223372036854775808, "
     "9223372036854775807] in Slice's payload"),
    ("Narrow", dict(axis=0, start=-1, len=2),
     "field start = -1 is out of range for usize [0, 18446744073709551615]"),
    ("Softmax", dict(axis=2**31), "field axis = 2147483648 is out of range for i32"),
    ("Tile", dict(reps=(1, 2.5)), "field reps[1] = 2.5 is not an integer (usize)"),
    ("Pad", dict(pads=((0, -3),), mode="Reflect"),
     "field pads[0][1] = -3 is out of range for usize"),
    ("Pad", dict(pads=((0, 0),), mode=("Constant", "x")),
     "field mode.Constant = 'x' is not a number (f32)"),
    ("Clamp", dict(min=1e39, max=1.0), "field min = 1e+39 is out of range for f32"),
    ("Reduce", dict(op="Sum", axes=(0,), keep_dim=3), "field keep_dim = 3 is not a bool"),
])
def test_payload_values_outside_their_rlx_type_are_reported(kind, attrs, msg):
    from rlx_ref.ops.opdef import get

    g = Graph("p")
    x = _inp(g, "x", [4])
    g.add_node_unchecked(Op(kind, get(kind).attrs(**attrs)), [x], Shape([4], F))
    errs = [str(e) for e in verify(g)]
    assert any(e.startswith("at %1: ") and msg in e for e in errs), errs


def test_scan_length_is_a_u32():
    from rlx_ref.ops.control import ScanAttrs

    body = Graph("b")
    body.set_outputs([_inp(body, "c", [2])])
    g = Graph("s")
    x = _inp(g, "x", [2])
    g.add_node_unchecked(Op("Scan", ScanAttrs(body, 9 * 10**15)), [x], Shape([2], F))
    assert [str(e) for e in verify(g)] == [
        "at %1: field length = 9000000000000000 is out of range for u32 [0, 4294967295] "
        "in Scan's payload"]


def test_builder_rejects_out_of_range_payloads():
    from rlx_ref.ir.builder import BuildError

    g = Graph("b")
    x = g.input("x", [4])
    with pytest.raises(BuildError, match="field step = 9223372036854775808 is out of range"):
        g.op("Slice", [x], axis=0, start=0, len=2, step=2**63)


def test_element_count_is_bounded():
    g = Graph("big")
    x = _inp(g, "x", [2**20, 2**21])
    errs = [str(e) for e in verify(g)]
    assert errs == ["at %0: declared shape [1048576, 2097152] f32 has 2199023255552 elements, "
                    "more than the 1099511627776 (2**40) one tensor may hold"]
    g = Graph("inferred")
    x = _inp(g, "x", [2**20, 1])
    g.add_node_unchecked(Op("Expand", get_attrs("Expand", target_shape=(2**20, 2**21))), [x],
                         Shape([4], F))
    errs = [str(e) for e in verify(g)]
    assert errs and errs[0].startswith("at %1: inferred shape [1048576, 2097152] f32 has")


def get_attrs(kind, **fields):
    from rlx_ref.ops.opdef import get

    return get(kind).attrs(**fields)
