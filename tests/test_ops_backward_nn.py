"""Backward kinds of rope, scans, gathers, pooling, convolution, losses and attention: each
oracle is the true derivative of its FORWARD op's oracle (float64 central differences of a
vector-Jacobian product), the losses match their closed forms, and the text form
round-trips."""
import zlib

import numpy as np
import pytest

from rlx_ref.interpret import InterpretError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import op_from_json, op_to_json, parse, print_graph
from rlx_ref.ops.attention import AttentionAttrs, RopeAttrs
from rlx_ref.ops.backward_attention import AttentionBackwardAllAttrs, AttentionBackwardAttrs
from rlx_ref.ops.backward_conv import MaxPoolBackwardAttrs
from rlx_ref.ops.backward_nn import (CumsumBackwardAttrs, GatherBackwardAttrs,
                                     RopeBackwardAttrs)
from rlx_ref.ops.conv import ConvAttrs, PoolAttrs
from rlx_ref.ops.indexing import GatherAttrs
from rlx_ref.ops.opdef import get
from rlx_ref.ops.reduction import CumAttrs
from rlx_ref.ops.single import run_single, single_op_graph, verify_single

F64 = DType.F64
H = 1e-6            # central-difference step (float64): truncation ~1e-12, rounding ~1e-10


def rng_for(*key):
    """A generator seeded by the test's parameters (stable across runs: no str hashing)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def vjp_matches(forward, inputs, wrt, backward, rng, rtol=1e-6):
    """<dy, (f(x + hv) - f(x - hv)) / 2h> == <backward(dy), v> for random dy, v.

    ``forward(*inputs)`` runs the forward op's oracle in float64; ``backward(dy)`` is the
    backward kind's oracle; ``wrt`` is the index of the differentiated input."""
    inputs = [np.asarray(x, np.float64) if np.asarray(x).dtype.kind == "f" else x
              for x in inputs]
    y = forward(*inputs)
    dy = rng.standard_normal(y.shape)
    v = rng.standard_normal(np.shape(inputs[wrt]))

    def f_at(step):
        moved = list(inputs)
        moved[wrt] = inputs[wrt] + step * v
        return forward(*moved)

    fd = np.sum(dy * (f_at(H) - f_at(-H))) / (2 * H)
    grad = backward(dy)
    assert grad.shape == np.shape(inputs[wrt])
    an = np.sum(grad * v)
    assert abs(fd - an) <= rtol * max(1.0, abs(fd), abs(an)), (fd, an)


def fwd(kind, attrs, out=None):
    return lambda *xs: run_single(kind, attrs, *xs, out=out, float64=True)


# ── Rope, Cumsum, Gather ───────────────────────────────────────────────────

def _tables(rng, *shape):
    angle = rng.uniform(-3, 3, shape)
    return np.cos(angle), np.sin(angle)


@pytest.mark.parametrize("style", ["NeoX", "GptJ"])
@pytest.mark.parametrize("x_shape, tab_shape, d, n_rot", [
    ((2, 3, 8), (3, 2), 4, 4), ((1, 5, 12), (5, 3), 6, 2), ((1, 2, 3, 4), (3, 2), 4, 4),
    ((2, 3, 8), (2, 3, 2), 4, 4), ((3, 8), (3, 4), 8, 4), ((1, 2, 4), (4,), 4, 4),
    ((1, 2, 4), (6, 2), 4, 4), ((1, 3, 8), (3, 1), 8, 0)])
def test_rope_backward_is_the_vjp_of_rope(style, x_shape, tab_shape, d, n_rot):
    rng = rng_for("rope", style, x_shape, tab_shape)
    cos, sin = _tables(rng, *tab_shape)
    x = rng.standard_normal(x_shape)
    vjp_matches(fwd("Rope", RopeAttrs(d, n_rot, style)), [x, cos, sin], 0,
                lambda dy: run_single("RopeBackward", RopeBackwardAttrs(d, n_rot, style),
                                      dy, cos, sin, float64=True), rng)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("exclusive", [False, True])
def test_cumsum_backward_is_the_vjp_of_cumsum(axis, exclusive):
    rng = rng_for("cumsum", axis, exclusive)
    x = rng.standard_normal((3, 4, 5))
    vjp_matches(fwd("Cumsum", CumAttrs(axis, exclusive)), [x], 0,
                lambda dy: run_single("CumsumBackward", CumsumBackwardAttrs(axis, exclusive),
                                      dy, float64=True), rng)


@pytest.mark.parametrize("table_shape, indices, axis", [
    ((5, 3), [2, 0, 2, 4], 0), ((4, 3), [[1], [2]], 1), ((2, 4, 3), [0, 3, 3, 1, 0], 1),
    ((2, 3, 4), [[3, 3], [0, 1]], 2), ((4, 3), 3, 0), ((3, 2), [], 0)])
def test_gather_backward_is_the_vjp_of_gather(table_shape, indices, axis):
    rng = rng_for("gather", table_shape, axis)
    table = rng.standard_normal(table_shape)
    idx = np.array(indices, np.float32)
    out = Shape(table_shape, F64)
    for signed in {axis, axis - len(table_shape)}:     # the i32 axis may count from the end
        vjp_matches(fwd("Gather", GatherAttrs(axis)), [table, idx], 0,
                    lambda dy: run_single("GatherBackward", GatherBackwardAttrs(signed), dy,
                                          idx, out=out, float64=True), rng)


def test_gather_backward_accumulates_duplicates_and_rejects_bad_indices():
    dy = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    a, out = GatherBackwardAttrs(0), Shape((3, 2), DType.F32)
    got = run_single("GatherBackward", a, dy, np.array([1, 1, 1], np.float32), out=out)
    np.testing.assert_array_equal(got, [[0, 0], [9, 12], [0, 0]])
    for bad, msg in (([0, 3, 1], "out of range"), ([0, -1, 1], "does not wrap"),
                     ([0, 1.5, 1], "not an integer")):
        with pytest.raises(InterpretError, match=msg):
            run_single("GatherBackward", a, dy, np.array(bad, np.float32), out=out)
    wrong = verify_single("GatherBackward", a, [dy, np.zeros(3, np.float32)], Shape((3, 3),
                                                                                    DType.F32))
    assert wrong and "(C4)" in wrong[0]


# ── MaxPool2dBackward, Conv2dBackwardInput, Conv2dBackwardWeight ───────────

POOLS = [((1, 2, 4, 4), (2, 2), (2, 2), ()), ((1, 1, 5, 5), (3, 3), (1, 1), (1, 1)),
         ((2, 1, 7, 5), (3, 2), (2, 3), (1, 1)), ((1, 1, 3, 3), (2, 2), (1, 1), (1, 1)),
         ((1, 2, 5, 4), (2, 3), (1, 2), (1, 0))]


@pytest.mark.parametrize("shape, k, s, p", POOLS)
def test_maxpool2d_backward_is_the_vjp_of_max_pool(shape, k, s, p):
    rng = rng_for("pool", shape, k, s, p)
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.5    # distinct: no ties
    vjp_matches(fwd("Pool", PoolAttrs("Max", k, s, p)), [x], 0,
                lambda dy: run_single("MaxPool2dBackward", MaxPoolBackwardAttrs(k, s, p), x,
                                      dy, float64=True), rng)


def test_maxpool2d_backward_tie_rule_is_the_first_maximum_and_nan_wins():
    a = MaxPoolBackwardAttrs((2, 2), (2, 2))
    x = np.array([[[[1, 3, 2, 2], [3, 0, 2, 2],
                    [np.nan, 0, -np.inf, -np.inf], [5, np.nan, -np.inf, -np.inf]]]],
                 np.float32)
    dy = np.array([[[[1, 2], [4, 8]]]], np.float32)
    got = run_single("MaxPool2dBackward", a, x, dy)
    want = np.zeros_like(x)
    want[0, 0, 0, 1], want[0, 0, 0, 2] = 1, 2     # first 3 (row-major); first of four 2s
    want[0, 0, 2, 0], want[0, 0, 2, 2] = 4, 8     # first NaN; first of four -inf
    np.testing.assert_array_equal(got, want)


CONVS = [((1, 2, 5, 5), (3, 2, 3, 3), ConvAttrs((3, 3), (1, 1), (1, 1))),
         ((2, 3, 7, 7), (4, 3, 3, 2), ConvAttrs((3, 2), (2, 3), (1, 2), (2, 1))),
         ((1, 4, 5, 6), (6, 2, 3, 3), ConvAttrs((3, 3), (1, 1), (1, 1), (1, 1), 2)),
         ((1, 3, 4, 4), (3, 1, 2, 2), ConvAttrs((2, 2), groups=3)),
         ((1, 1, 8, 6), (2, 1, 3, 3), ConvAttrs((3, 3), (2, 2))),
         ((2, 3, 7), (4, 3, 3), ConvAttrs((1, 3), (1, 2), (0, 1))),
         ((1, 2, 4, 5), (2, 2, 2, 2), ConvAttrs((2, 2), (2,), ())),
         ((1, 2, 9, 8), (4, 1, 2, 3), ConvAttrs((2, 3), (3, 2), (2, 1), (2, 2), 2))]


@pytest.mark.parametrize("x_shape, w_shape, a", CONVS)
def test_conv_backward_kinds_are_the_vjps_of_conv(x_shape, w_shape, a):
    rng = rng_for("conv", x_shape, w_shape, a)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    conv = fwd("Conv", a)
    vjp_matches(conv, [x, w], 0, lambda dy: run_single(
        "Conv2dBackwardInput", a, dy, w, out=Shape(x_shape, F64), float64=True), rng)
    vjp_matches(conv, [x, w], 1, lambda dy: run_single(
        "Conv2dBackwardWeight", a, x, dy, out=Shape(w_shape, F64), float64=True), rng)


def test_conv_backward_checks_rebuild_the_forward_conv():
    a, dy, w = ConvAttrs((3, 3), (2, 2)), np.zeros((1, 2, 3, 2), np.float32), \
        np.zeros((2, 1, 3, 3), np.float32)
    assert verify_single("Conv2dBackwardInput", a, [dy, w], Shape((1, 1, 8, 6), DType.F32)) \
        == []
    assert verify_single("Conv2dBackwardInput", a, [dy, w], Shape((1, 1, 7, 6), DType.F32)) \
        == []           # the floor makes H = 7 and 8 both valid: why RLX declares x's shape
    bad = verify_single("Conv2dBackwardInput", a, [dy, w], Shape((1, 1, 9, 6), DType.F32))
    assert bad and "forward Conv's output" in bad[0]
    bad = verify_single("Conv2dBackwardWeight", a, [np.zeros((1, 3, 8, 6), np.float32), dy],
                        Shape((2, 1, 3, 3), DType.F32))
    assert bad and "the forward Conv" in bad[0] and "groups" in bad[0]


# ── losses ─────────────────────────────────────────────────────────────────

def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_cross_entropy_losses_match_their_closed_forms():
    rng = rng_for("sce")
    x = rng.standard_normal((5, 7))
    labels = np.array([0, 6, 3, 6, 1], np.float32)
    got = run_single("SoftmaxCrossEntropyWithLogits", None, x, labels, float64=True)
    want = [-np.log(np.exp(r[int(c)]) / np.exp(r).sum()) for r, c in zip(x, labels)]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    one_hot = np.eye(7)[labels.astype(int)]
    dense = run_single("SoftmaxCrossEntropy", None, x, one_hot, float64=True)
    np.testing.assert_allclose(dense, got, rtol=1e-13)
    soft = _softmax(rng.standard_normal((5, 7)))
    dense = run_single("SoftmaxCrossEntropy", None, x, soft, float64=True)
    np.testing.assert_allclose(dense, -(soft * np.log(_softmax(x))).sum(axis=1), rtol=1e-12)
    t = rng.random((5, 7)) * 3                       # not normalised: lse - Σ t·x, as RLX
    dense = run_single("SoftmaxCrossEntropy", None, x, t, float64=True)
    np.testing.assert_allclose(dense, np.log(np.exp(x).sum(1)) - (t * x).sum(1), rtol=1e-12)
    big = np.array([[1000.0, 0.0, -1000.0]])        # max-subtracted: no overflow
    np.testing.assert_allclose(run_single("SoftmaxCrossEntropyWithLogits", None, big,
                                          np.array([1.0]), float64=True), [1000.0])


def test_cross_entropy_gradients_are_the_vjps():
    rng = rng_for("sce-grad")
    x = rng.standard_normal((4, 6))
    labels = np.array([5, 0, 2, 5], np.float32)
    vjp_matches(fwd("SoftmaxCrossEntropyWithLogits", None), [x, labels], 0,
                lambda dl: run_single("SoftmaxCrossEntropyBackward", None, x, labels, dl,
                                      float64=True), rng)
    dl = rng.standard_normal(4)
    got = run_single("SoftmaxCrossEntropyBackward", None, x, labels, dl, float64=True)
    np.testing.assert_allclose(got, (_softmax(x) - np.eye(6)[[5, 0, 2, 5]]) * dl[:, None],
                               rtol=1e-13, atol=1e-15)
    # the dense loss has no backward kind: its gradients are RLX's composed closed forms
    t = _softmax(rng.standard_normal((4, 6)))
    dense = fwd("SoftmaxCrossEntropy", None)
    vjp_matches(dense, [x, t], 0, lambda dl: (_softmax(x) - t) * dl[:, None], rng)
    vjp_matches(dense, [x, t], 1, lambda dl: -x * dl[:, None], rng)


@pytest.mark.parametrize("kind, extra", [("SoftmaxCrossEntropyWithLogits", ()),
                                         ("SoftmaxCrossEntropyBackward", (np.ones(2),))])
def test_cross_entropy_rejects_labels_outside_the_classes(kind, extra):
    x = np.zeros((2, 3), np.float32)
    extra = tuple(e.astype(np.float32) for e in extra)
    for bad in ([0, 3], [-1, 0], [np.nan, 0], [0.5, 1]):
        with pytest.raises(InterpretError, match="labels"):
            run_single(kind, None, x, np.array(bad, np.float32), *extra)
    assert run_single(kind, None, x, np.array([[2], [0]], np.float32), *extra).shape[0] == 2


# ── attention ──────────────────────────────────────────────────────────────

MASKS = ["None", "Causal", ("SlidingWindow", 1), ("SlidingWindow", 0), "Custom", "Bias"]
LAYOUTS = [  # q, k, v shapes, heads, head_dim
    ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), 2, 4),       # BHSD, S_k > S_q
    ((2, 3, 2, 4), (2, 3, 2, 4), (2, 3, 2, 4), 2, 4),       # BSHD
    ((2, 4, 6), (2, 3, 6), (2, 3, 6), 3, 2),                # packed, S_k < S_q
    ((3, 8), (3, 8), (3, 8), 2, 4),                         # rank 2
    ((1, 4, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2), 4, 2),       # MQA
    ((1, 3, 8), (1, 4, 4), (1, 4, 4), 2, 4),                # GQA packed
]


def _mask_for(rng, mask_kind, q_shape, k_shape, heads):
    from rlx_ref.ops import _attention_geom as geo

    a = AttentionAttrs(heads, q_shape[-1] if len(q_shape) == 4 else q_shape[-1] // heads)
    g = geo.attention_geom(q_shape, k_shape, k_shape, a)
    if mask_kind == "Custom":
        m = (rng.random((g.batch, g.s_k)) > 0.4).astype(np.float64)
        m[0] = 0                                     # one batch entry with every key hidden
        return [m]
    if mask_kind == "Bias":
        return [rng.standard_normal((g.batch, g.heads, g.s_q, g.s_k))]
    return []


@pytest.mark.parametrize("mask_kind", MASKS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda l: "x".join(map(str, l[0])))
def test_attention_backward_is_the_vjp_of_attention_for_every_wrt(mask_kind, layout):
    qs, ks, vs, h, d = layout
    rng = rng_for("attn", str(mask_kind), qs, ks)
    q, k, v = (rng.standard_normal(s) for s in (qs, ks, vs))
    mask = _mask_for(rng, mask_kind, qs, ks, h)
    attention = fwd("Attention", AttentionAttrs(h, d, mask_kind=mask_kind))
    grads = []
    for i, wrt in enumerate(("Query", "Key", "Value")):
        a = AttentionBackwardAttrs(h, d, mask_kind, wrt)

        def backward(dy, a=a):
            grads.append(run_single("AttentionBackward", a, q, k, v, dy, *mask, float64=True))
            return grads[-1]

        vjp_matches(attention, [q, k, v] + mask, i, backward, rng)
    if qs == ks == vs:
        dy = rng.standard_normal(qs)
        packed = run_single("AttentionBackwardAll", AttentionBackwardAllAttrs(h, d, mask_kind),
                            q, k, v, dy, *mask, float64=True)
        each = [run_single("AttentionBackward", AttentionBackwardAttrs(h, d, mask_kind, w),
                           q, k, v, dy, *mask, float64=True) for w in ("Query", "Key", "Value")]
        np.testing.assert_array_equal(packed, np.concatenate(each, axis=0))


def test_attention_backward_shapes_and_checks():
    q, kv = np.zeros((1, 3, 8), np.float32), np.zeros((1, 4, 4), np.float32)
    a = AttentionBackwardAttrs(2, 4, "None", "Key")
    assert verify_single("AttentionBackward", a, [q, kv, kv, q]) == []
    assert single_op_graph("AttentionBackward", a, [q, kv, kv, q]).nodes[-1].shape.dims == \
        (1, 4, 4)
    bad = verify_single("AttentionBackward", a, [q, kv, kv, q[:, :2]])
    assert bad and "(C3)" in bad[0]
    bad = verify_single("AttentionBackward", AttentionBackwardAttrs(2, 4, "Custom", "Query"),
                        [q, kv, kv, q])
    assert bad and "takes 5 inputs" in bad[0]
    bad = verify_single("AttentionBackwardAll", AttentionBackwardAllAttrs(2, 4, "None"),
                        [q, kv, kv, q])
    assert bad and "(C4)" in bad[0]
    g = single_op_graph("AttentionBackwardAll", AttentionBackwardAllAttrs(2, 4, "Causal"),
                        [q, q, q, q])
    assert g.nodes[-1].shape.dims == (3, 3, 8)


# ── the text form ──────────────────────────────────────────────────────────

TEXTS = {
    "RopeBackward": '{"RopeBackward":{"head_dim":64,"n_rot":32,"style":"GptJ"}}',
    "CumsumBackward": '{"CumsumBackward":{"axis":-1,"exclusive":true}}',
    "GatherBackward": '{"GatherBackward":{"axis":1}}',
    "MaxPool2dBackward": '{"MaxPool2dBackward":{"kernel_size":[2,2],"stride":[2,2],'
                         '"padding":[0,0]}}',
    "Conv2dBackwardInput": '{"Conv2dBackwardInput":{"kernel_size":[3,3],"stride":[1,1],'
                           '"padding":[1,1],"dilation":[1,1],"groups":1}}',
    "Conv2dBackwardWeight": '{"Conv2dBackwardWeight":{"kernel_size":[3,3],"stride":[2,2],'
                            '"padding":[0,0],"dilation":[2,2],"groups":2}}',
    "AttentionBackward": '{"AttentionBackward":{"num_heads":8,"head_dim":64,'
                         '"mask_kind":{"SlidingWindow":128},"wrt":"Value"}}',
    "AttentionBackwardAll": '{"AttentionBackwardAll":{"num_heads":8,"head_dim":64,'
                            '"mask_kind":"Causal"}}',
    "SoftmaxCrossEntropyWithLogits": '"SoftmaxCrossEntropyWithLogits"',
    "SoftmaxCrossEntropy": '"SoftmaxCrossEntropy"',
    "SoftmaxCrossEntropyBackward": '"SoftmaxCrossEntropyBackward"',
}


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_payloads_print_as_rlx_serde_and_graphs_round_trip(kind):
    import json

    op = op_from_json(json.loads(TEXTS[kind]))
    assert op.kind == kind and json.dumps(op_to_json(op), separators=(",", ":")) == TEXTS[kind]
    for s in get(kind).samples(np.random.default_rng(1)):
        g = single_op_graph(kind, s.attrs, s.inputs, s.out)
        text = print_graph(g)
        assert parse(text) == g and print_graph(parse(text)) == text


def test_rope_backward_without_style_reads_as_neox():
    op = op_from_json({"RopeBackward": {"head_dim": 8, "n_rot": 8}})
    assert op.attrs == RopeBackwardAttrs(8, 8, "NeoX")


# ── backends claim them through their decompositions ───────────────────────

@pytest.mark.parametrize("backend", ["numba_cpu", "opencl", "numba_cuda"])
def test_backends_claim_only_dtypes_whose_decomposed_products_they_lower(backend):
    import importlib

    from rlx_ref.backends.backward_claims import DECOMPOSED
    from rlx_ref.conformance.cases import build_cases
    from rlx_ref.passes._rewrite import SupportTable
    from rlx_ref.passes.decompose import decompose
    from rlx_ref.passes.legalize import legalize

    table = importlib.import_module(f"rlx_ref.backends.{backend}.lowering").TABLE
    declared, paths = table.supported_ops(), table.paths()
    for kind, (dtypes, _) in DECOMPOSED.items():
        assert paths[kind] == "decomposed" and declared[kind] == frozenset(dtypes)
    native = SupportTable.of(table)          # what the decompositions may produce
    checked = 0
    for case in build_cases(kinds=list(DECOMPOSED)):
        node = case.graph.nodes[case.graph.outputs[0]]
        if node.kind in DECOMPOSED and node.shape.dtype in DECOMPOSED[node.kind][0]:
            after = decompose(case.graph, native)
            assert not set(DECOMPOSED) & {n.kind for n in after.nodes}, case.id
            legalize(after, native)         # raises naming any unclaimed kind/dtype
            checked += 1
    assert checked > 400


def test_every_kind_is_registered_with_rlx_operand_names():
    names = {"RopeBackward": ("dy", "cos", "sin"), "CumsumBackward": ("dy",),
             "GatherBackward": ("dy", "indices"), "MaxPool2dBackward": ("x", "dy"),
             "Conv2dBackwardInput": ("dy", "w"), "Conv2dBackwardWeight": ("x", "dy"),
             "SoftmaxCrossEntropyWithLogits": ("logits", "labels"),
             "SoftmaxCrossEntropy": ("logits", "targets"),
             "SoftmaxCrossEntropyBackward": ("logits", "labels", "d_loss"),
             "AttentionBackward": ("q", "k", "v", "dy", "mask"),
             "AttentionBackwardAll": ("q", "k", "v", "dy", "mask")}
    for kind, want in names.items():
        assert get(kind).input_names == want
        assert get(kind).family == "backward"
