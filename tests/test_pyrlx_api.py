"""pyrlx's call forms build the same graph as rlx_ref's own spelling, and run.

The call forms are taken from RLX's Python binding (MIT-RLX/rlx, crates/bindings/pyrlx):
``src/graph.rs`` (Graph's methods, op-name strings, defaults), ``python/pyrlx/dsl.py``
(Node methods, ``g.outputs = [...]``, ``g.raw``), ``tests/test_dsl.py`` and
``pyrlx/tests/test_ir_parity.py`` (usage), ``src/session.rs`` (set_param, set_param_typed).
"""
import numpy as np
import pytest

import rlx_ref
from rlx_ref import BuildError, Graph, Session, SessionError, Shape

F = "f32"
X23 = [("in", "a", [2, 3], F), ("in", "b", [2, 3], F)]
X234 = [("in", "x", [2, 3, 4], F)]
NORM = [("in", "x", [2, 4], F), ("param", "g", [4], F), ("param", "b", [4], F)]
NCHW = [("in", "x", [1, 4, 4, 4], F), ("param", "g", [4], F), ("param", "b", [4], F)]
CONV = [("in", "x", [1, 3, 5, 5], F), ("param", "w", [2, 3, 3, 3], F)]
QKV = [("in", n, [1, 2, 4, 8], F) for n in "qkv"]
ROPE = [("in", "x", [1, 4, 8], F), ("param", "cos", [4, 4], F), ("param", "sin", [4, 4], F)]
GATHER = [("param", "tb", [10, 4], F), ("in", "ix", [3], "i64")]
SOLVE = [("in", "A", [3, 3], "f64"), ("in", "B", [3], "f64")]

# pyrlx's binary()/compare()/activation()/reduce() strings (graph.rs binop_from_str,
# cmp_from_str, act_from_str, reduce_from_str) -> rlx_ref's names.
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min",
          "pow": "Pow", "+": "Add", "-": "Sub", "*": "Mul", "/": "Div", "ADD": "Add"}
COMPARE = {"eq": "Eq", "ne": "Ne", "lt": "Lt", "le": "Le", "gt": "Gt", "ge": "Ge",
           "==": "Eq", "!=": "Ne", "<": "Lt", "<=": "Le", ">": "Gt", ">=": "Ge"}
ACTIVATION = {"gelu": "Gelu", "gelu_approx": "GeluApprox", "silu": "Silu", "relu": "Relu",
              "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
              "sqrt": "Sqrt", "rsqrt": "Rsqrt", "neg": "Neg", "abs": "Abs", "round": "Round"}
REDUCE = {"sum": "Sum", "mean": "Mean", "max": "Max", "min": "Min", "prod": "Prod"}

# (id, leaves, pyrlx's call, rlx_ref's own spelling)
CASES = [
    *[(f"binary {s}", X23, lambda g, a, b, s=s: g.binary(s, a, b),
       lambda g, a, b, k=k: g.binary(k, a, b)) for s, k in BINARY.items()],
    *[(f"compare {s}", X23, lambda g, a, b, s=s: g.compare(s, a, b),
       lambda g, a, b, k=k: g.compare(k, a, b)) for s, k in COMPARE.items()],
    *[(f"activation {s}", X23[:1], lambda g, a, s=s: g.activation(s, a),
       lambda g, a, k=k: g.activation(k, a)) for s, k in ACTIVATION.items()],
    *[(f"reduce {s}", X234, lambda g, x, s=s: g.reduce(x, s, [1]),
       lambda g, x, k=k: g.op("Reduce", [x], op=k, axes=(1,), keep_dim=False))
      for s, k in REDUCE.items()],
    ("eq_ lt_ gt_ ge_ ne_", X23,
     lambda g, a, b: [g.eq_(a, b), g.lt_(a, b), g.gt_(a, b), g.ge_(a, b), g.ne_(a, b)],
     lambda g, a, b: [g.compare(k, a, b) for k in ("Eq", "Lt", "Gt", "Ge", "Ne")]),
    ("gelu_approx stop_gradient", X23[:1],
     lambda g, a: [g.gelu_approx(a), g.stop_gradient(a)],
     lambda g, a: [g.activation("GeluApprox", a), g.op("StopGradient", [a])]),
    ("sum mean softmax", X234,
     lambda g, x: [g.sum(x, [1], False), g.mean(x, [2], True), g.softmax(x)],
     lambda g, x: [g.op("Reduce", [x], op="Sum", axes=(1,), keep_dim=False),
                   g.op("Reduce", [x], op="Mean", axes=(2,), keep_dim=True),
                   g.op("Softmax", [x], axis=-1)]),
    ("conv2d positional", CONV, lambda g, x, w: g.conv2d(x, w, [3, 3], [1, 1], [1, 1], [1, 1]),
     lambda g, x, w: g.conv(x, w, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
                            dilation=(1, 1), groups=1)),
    ("conv2d keywords", CONV,
     lambda g, x, w: g.conv2d(x, w, kernel_size=[3, 3], stride=[2, 2], padding=[0, 0],
                              dilation=[1, 1], groups=1),
     lambda g, x, w: g.op("Conv", [x, w], kernel_size=(3, 3), stride=(2, 2))),
    ("conv_transpose2d", [NCHW[0], ("param", "w", [4, 2, 2, 2], F)],
     lambda g, x, w: g.conv_transpose2d(x, w, [2, 2], [2, 2], [0, 0], [1, 1], [0, 0]),
     lambda g, x, w: g.op("ConvTranspose2d", [x, w], kernel_size=(2, 2), stride=(2, 2))),
    ("resize_nearest_2x", NCHW[:1], lambda g, x: g.resize_nearest_2x(x),
     lambda g, x: g.resize_nearest2x(x)),
    ("layer_norm defaults", NORM, lambda g, x, gm, bt: g.layer_norm(x, gm, bt),
     lambda g, x, gm, bt: g.op("LayerNorm", [x, gm, bt], axis=-1, eps=1e-5)),
    ("layer_norm positional", NORM, lambda g, x, gm, bt: g.layer_norm(x, gm, bt, -1, 1e-6),
     lambda g, x, gm, bt: g.op("LayerNorm", [x, gm, bt], axis=-1, eps=1e-6)),
    ("rms_norm without axis", NORM, lambda g, x, gm, bt: g.rms_norm(x, gm, bt, 1e-6),
     lambda g, x, gm, bt: g.op("RmsNorm", [x, gm, bt], axis=-1, eps=1e-6)),
    ("layer_norm2d", NCHW, lambda g, x, gm, bt: g.layer_norm2d(x, gm, bt),
     lambda g, x, gm, bt: g.op("LayerNorm2d", [x, gm, bt], eps=1e-5)),
    ("group_norm", NCHW, lambda g, x, gm, bt: g.group_norm(x, gm, bt, 2),
     lambda g, x, gm, bt: g.op("GroupNorm", [x, gm, bt], num_groups=2, eps=1e-5)),
    ("narrow", [("in", "x", [10, 4], F)], lambda g, x: g.narrow(x, 0, 2, 5),
     lambda g, x: g.op("Narrow", [x], axis=0, start=2, len=5)),
    ("narrow length=", [("in", "x", [10, 4], F)],
     lambda g, x: g.op("Narrow", [x], axis=1, start=1, length=2),
     lambda g, x: g.op("Narrow", [x], axis=1, start=1, len=2)),
    ("gather", GATHER, lambda g, t, i: [g.gather(t, i, 0), g.gather(t, i, axis=0)],
     lambda g, t, i: [g.op("Gather", [t, i], axis=0), g.op("Gather", [t, i], axis=0)]),
    ("cumsum", X234, lambda g, x: [g.cumsum(x, axis=-1), g.cumsum(x, 1, True)],
     lambda g, x: [g.op("Cumsum", [x], axis=-1, exclusive=False),
                   g.op("Cumsum", [x], axis=1, exclusive=True)]),
    ("concat cast reshape transpose", X23,
     lambda g, a, b: [g.concat([a, b], axis=1), g.cast(a, "f16"), g.reshape(a, [3, 2]),
                      g.transpose(a, [1, 0]), g.where_(g.lt_(a, b), a, b)],
     lambda g, a, b: [g.op("Concat", [a, b], axis=1), g.op("Cast", [a], to=rlx_ref.DType.F16),
                      g.op("Reshape", [a], new_shape=(3, 2)),
                      g.op("Transpose", [a], perm=(1, 0)),
                      g.op("Where", [g.compare("Lt", a, b), a, b])]),
    ("attention with a mask", QKV + [("in", "m", [1, 4], F)],
     lambda g, q, k, v, m: g.attention(q, k, v, m, 2, 8),
     lambda g, q, k, v, m: g.op("Attention", [q, k, v, m], num_heads=2, head_dim=8,
                                mask_kind="Custom")),
    *[(f"attention_kind {s}", QKV,
       lambda g, q, k, v, s=s: g.attention_kind(q, k, v, num_heads=2, head_dim=8, mask_kind=s),
       lambda g, q, k, v, m=m: g.op("Attention", [q, k, v], num_heads=2, head_dim=8,
                                    mask_kind=m))
      for s, m in [("causal", "Causal"), ("none", "None"), ("sliding:2", ("SlidingWindow", 2))]],
    ("rope", ROPE, lambda g, x, c, s: g.rope(x, c, s, head_dim=8),
     lambda g, x, c, s: g.op("Rope", [x, c, s], head_dim=8, n_rot=8)),
    ("rope_n", ROPE, lambda g, x, c, s: g.rope_n(x, c, s, 8, 8),
     lambda g, x, c, s: g.op("Rope", [x, c, s], head_dim=8, n_rot=8, style="NeoX")),
    ("matmul_with_shape", [("in", "x", [3, 4], F), ("param", "w", [4, 5], F)],
     lambda g, x, w: g.matmul_with_shape(x, w, [3, 5], "f32"),
     lambda g, x, w: g.op("MatMul", [x, w], shape=Shape([3, 5], rlx_ref.DType.F32))),
    ("dense_solve", SOLVE, lambda g, a, b: g.dense_solve(a, b, [3], "f64"),
     lambda g, a, b: g.op("DenseSolve", [a, b])),
    # rlx_ref's own calls under names pyrlx also uses keep working
    ("own conv_transpose2d", [NCHW[0], ("param", "w", [4, 2, 2, 2], F)],
     lambda g, x, w: g.conv_transpose2d(x, w, kernel_size=(2, 2), stride=(2, 2)),
     lambda g, x, w: g.op("ConvTranspose2d", [x, w], kernel_size=(2, 2), stride=(2, 2))),
    ("own attention", QKV,
     lambda g, q, k, v: g.attention(q, k, v, num_heads=2, head_dim=8, v_head_dim=8),
     lambda g, q, k, v: g.op("Attention", [q, k, v], num_heads=2, head_dim=8, v_head_dim=8,
                             mask_kind="None")),
    ("custom_fn list and own", [("in", "x", [2], F)],
     lambda g, x: [g.custom_fn([x], _relu_body()), g.custom_fn(x, fwd_body=_relu_body(),
                                                                vjp_body=None, jvp_body=None)],
     lambda g, x: [g.op("CustomFn", [x], fwd_body=_relu_body(), vjp_body=None, jvp_body=None,
                        num_inputs=1) for _ in range(2)]),
    ("pool kind=", [("in", "x", [1, 2, 4, 4], F)],
     lambda g, x: [g.pool(x, kind="max", kernel_size=[2, 2], stride=[2, 2]),
                   g.pool(x, kind="Mean", kernel_size=[2, 2])],
     lambda g, x: [g.op("Pool", [x], kind="Max", kernel_size=(2, 2), stride=(2, 2)),
                   g.op("Pool", [x], kind="Mean", kernel_size=(2, 2))]),
]


def _relu_body() -> Graph:
    body = Graph("fwd")
    body.set_outputs([body.relu(body.input("x0", [2]))])
    return body


def _leaves(g: Graph, leaves):
    return [(g.input if k == "in" else g.param)(n, s, d) for k, n, s, d in leaves]


def _feeds(leaves, rng):
    """Valid values per leaf: positive floats (log/sqrt), in-range indices, solvable A."""
    out = {}
    for _, name, shape, dt in leaves:
        if dt == "i64":
            out[name] = rng.integers(0, 10, shape).astype(np.int64)
        elif name == "A":
            out[name] = np.eye(3) * 3 + rng.uniform(0, 0.1, shape)
        elif name == "m":
            out[name] = np.ones(shape, np.float32)
        else:
            out[name] = rng.uniform(0.5, 1.5, shape).astype(rlx_ref.DType.parse(dt).np)
    return out


def _build(leaves, fn) -> Graph:
    g = Graph("case")
    out = fn(g, *_leaves(g, leaves))
    g.set_outputs(out if isinstance(out, list) else [out])
    return g


@pytest.mark.parametrize("leaves,pyrlx_form,own_form", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pyrlx_form_builds_the_same_graph_and_runs(leaves, pyrlx_form, own_form):
    ours, theirs = _build(leaves, own_form), _build(leaves, pyrlx_form)
    assert theirs.structurally_equal(ours), f"\n{theirs}\n!=\n{ours}"
    feeds = _feeds(leaves, np.random.default_rng(0))
    cg = Session("reference").compile(theirs)
    for n in theirs.param_nodes():
        cg.set_param(n.attrs.name, feeds[n.attrs.name])
    outs = cg.run({n.attrs.name: feeds[n.attrs.name] for n in theirs.input_nodes()})
    for o, nid in zip(outs, theirs.outputs):
        assert list(o.shape) == list(theirs.nodes[nid].shape.dims)
        assert o.dtype == np.bool_ or np.isfinite(o.astype(np.float64)).all()


def test_dsl_pyrlx_forms():
    # dsl.py: g.outputs = [...], g.raw, Node methods with pyrlx's positional order
    with rlx_ref.graph("dsl") as g:
        x = g.input("x", [10, 4], "f32")
        gm, bt = g.param("g", [4], "f32"), g.param("b", [4], "f32")
        ix = g.input("ix", [3], "i64")
        n = x.narrow(0, 2, 5).layer_norm(gm, bt).rms_norm(gm, bt, 1e-6)
        h = g.add(n, 2.0)                         # a scalar operand becomes a Constant
        c = g.compare("<", h, 0.5)
        g.outputs = [c.where_(h, x.narrow(0, 0, 5)), x.gather(ix, 0), x.cumsum(axis=-1)]
    graph = g.raw
    assert graph is g.graph and [o.id for o in g.outputs] == graph.outputs
    assert int(x) == x.id == 0
    ref = Graph("dsl")
    rx, rg, rb = ref.input("x", [10, 4]), ref.param("g", [4]), ref.param("b", [4])
    rix = ref.input("ix", [3], "i64")
    rn = ref.op("Narrow", [rx], axis=0, start=2, len=5)
    rn = ref.op("LayerNorm", [rn, rg, rb], axis=-1, eps=1e-5)
    rn = ref.op("RmsNorm", [rn, rg, rb], axis=-1, eps=1e-6)
    rh = ref.binary("Add", rn, ref.constant(2.0, "f32"))
    rc = ref.compare("Lt", rh, ref.constant(0.5, "f32"))
    ref.set_outputs([ref.where_(rc, rh, ref.op("Narrow", [rx], axis=0, start=0, len=5)),
                     ref.op("Gather", [rx, rix], axis=0),
                     ref.op("Cumsum", [rx], axis=-1, exclusive=False)])
    assert graph.structurally_equal(ref), f"\n{graph}\n!=\n{ref}"
    cg = Session().compile(graph)
    cg.set_param("g", [1, 1, 1, 1])
    cg.set_param("b", np.zeros(4, np.float32))
    outs = cg.run({"x": np.ones((10, 4), np.float32), "ix": np.array([0, 9, 3])})
    assert [o.shape for o in outs] == [(5, 4), (3, 4), (10, 4)]


def test_dsl_outputs_assignment_and_unknown_attributes():
    with rlx_ref.graph("o") as g:
        x = g.input("x", [2])
        g.outputs = [x.relu()]
        assert g.graph.outputs == [1]
        with pytest.raises(BuildError, match="outputs must be Nodes"):
            g.outputs = [0]
        with pytest.raises(AttributeError, match="output_"):
            g.output_ = [x]
        with pytest.raises(BuildError, match="outputs must be Nodes"):
            g.output(1)
    with pytest.raises(BuildError, match="belongs to another graph"):
        with rlx_ref.graph("other") as h:
            h.outputs = [x]


@pytest.mark.parametrize("device", ["reference", "numba-cpu"])
def test_set_param_takes_pyrlx_flat_buffers_lists_and_bytes(device):
    # tests/test_dsl.py _set_canonical_params: a flat f32 buffer for a [4, 3] param; the
    # forms live in the shared CompiledGraph, so a kernel backend's executable has them too
    g = Graph("m")
    x, w, b = g.input("x", [2, 4]), g.param("w", [4, 3]), g.param("b", [3], "i32")
    g.set_outputs([g.matmul(x, w), g.cast(b, "f32")])
    xv = np.arange(8, dtype=np.float32).reshape(2, 4)
    wv = np.arange(12, dtype=np.float32)
    try:
        cg = Session(device).compile(g)
    except SessionError as e:
        pytest.skip(str(e))
    cg.set_param("w", wv)
    cg.set_param_typed("b", np.array([1, -2, 3], np.int32).tobytes(), "i32")
    y, bo = cg.run({"x": xv})
    np.testing.assert_allclose(y, xv @ wv.reshape(4, 3))
    assert bo.tolist() == [1, -2, 3]
    cg.set_param("w", list(range(12)))           # ints, exact in f32
    cg.set_param("b", [4.0, 5, 6])               # integral floats for i32
    y2, bo2 = cg.run({"x": xv})
    np.testing.assert_allclose(y2, y)
    assert bo2.tolist() == [4, 5, 6]


@pytest.mark.parametrize("name,data,match", [
    ("w", np.arange(11, dtype=np.float32), r"flat buffer of 11 values, expected \[4, 3\]"),
    ("w", np.arange(12.0), "dtype float64, expected f32.*pass a list"),
    ("w", [1e39] * 12, "1e\\+39 overflows f32"),
    ("w", [2**25 + 1] * 12, "not exact in f32"),
    ("b", [1.5, 2, 3], "1.5 is not an integer"),
    ("b", [2**31, 0, 0], "not an integer in"),
    ("v", [1.0], "no param 'v'; params: w, b"),
])
def test_set_param_errors(name, data, match):
    g = Graph("m")
    x, w, b = g.input("x", [2, 4]), g.param("w", [4, 3]), g.param("b", [3], "i32")
    g.set_outputs([g.matmul(x, w), b])
    cg = Session().compile(g)
    with pytest.raises(SessionError, match=match):
        cg.set_param(name, data)
    with pytest.raises(SessionError, match="dtype f32, but the param is declared"):
        cg.set_param_typed("b", b"\0" * 12, "f32")
    with pytest.raises(SessionError, match="not a whole number of i32"):
        cg.set_param_typed("b", b"\0" * 11, "i32")


def _g23():
    g = Graph("bad")
    return g, g.input("a", [2, 3]), g.input("b", [2, 3])


@pytest.mark.parametrize("call,err,match", [
    (lambda g, a, b: g.binary("plus", a, b), BuildError, r"accepted: Add \(add, \+\)"),
    (lambda g, a, b: g.compare("=<", a, b), BuildError, r"Le \(le, <=\)"),
    (lambda g, a, b: g.activation("gelu_fast", a), BuildError, r"GeluApprox \(gelu_approx"),
    (lambda g, a, b: g.reduce(a, "average", [1]), BuildError, r"Mean \(mean\)"),
    (lambda g, a, b: g.pool(a, kind="avg", kernel_size=[1]), BuildError, r"Max \(max\)"),
    (lambda g, a, b: g.op("Attention", [a, a, a], num_heads=1, head_dim=3,
                          mask_kind="diagonal"), BuildError,
     r"Causal \(causal\).*SlidingWindow\(n\) \(sliding:n\)"),
    (lambda g, a, b: g.op("Attention", [a, a, a], num_heads=1, head_dim=3,
                          mask_kind="sliding:x"), BuildError, "integer after ':'"),
    (lambda g, a, b: g.conv2d(a, b), BuildError,
     r"missing 'kernel_size'; usage: conv2d\(input, weight, kernel_size, stride, padding, "
     r"dilation, groups=1\)"),
    (lambda g, a, b: g.group_norm(a, b, b), BuildError,
     r"missing 'num_groups'; usage: group_norm\(input, gamma, beta, num_groups, eps=1e-05\)"),
    (lambda g, a, b: g.narrow(a, 0, 0), BuildError, "missing 'length'"),
    (lambda g, a, b: g.matmul_with_shape(a, b), BuildError, "needs out_shape and dtype"),
    (lambda g, a, b: g.narrow(a, 0, 0, 1, 7), BuildError,
     r"at most 3; usage: narrow\(x, axis, start, length\)"),
    (lambda g, a, b: g.narrow(a, 0, 0, length=1, len=1), BuildError, "name the same field"),
    (lambda g, a, b: g.layer_norm(a, b), BuildError, "missing operand 'beta'"),
    (lambda g, a, b: g.add(a, 2.0), BuildError, "2.0 is not a node id"),
    (lambda g, a, b: g.layer_norm(a, b, b, epsilon=1e-5), BuildError,
     r"LayerNorm attributes are \(axis, eps\)"),
    (lambda g, a, b: g.layer_nrom(a), AttributeError, "did you mean layer_norm"),
    (lambda g, a, b: g.fft(a), BuildError, r"Fft attributes are \(inverse, norm\)"),
    (lambda g, a, b: g.rfft(a), AttributeError, r"no binding here yet: build RLX's Fft with"),
])
def test_bad_spellings_name_the_accepted_ones(call, err, match):
    g, a, b = _g23()
    with pytest.raises(err, match=match):
        call(g, a, b)


def test_dsl_bad_node_method_suggests():
    with pytest.raises(AttributeError, match="did you mean narrow"):
        with rlx_ref.graph("n") as g:
            g.input("x", [2]).narow(0, 0, 1)


def test_payload_field_called_kind_builds_in_graph_and_dsl():
    # Pool's payload has a field named `kind`; the builder's own kind is positional-only
    with rlx_ref.graph("pool") as g:
        x = g.input("x", [1, 1, 4, 4])
        a = g.op("Pool", x, kind="Max", kernel_size=[2, 2], stride=[2, 2])
        b = g.pool(x, kind="max", kernel_size=[2, 2], stride=[2, 2])
        c = x.pool(kind="Sum", kernel_size=[4, 4])
        g.outputs = [a, b, c]
    xv = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    a, b, c = Session().compile(g.graph).run({"x": xv})
    assert a.tolist() == b.tolist() == [[[[5, 7], [13, 15]]]]
    assert c.reshape(-1).tolist() == [120]
