"""Reverse mode through Scan: its VJP rule, ScanBackward / ScanBackwardXs, checkpoints,
gradients of gradients, and the decomposition the backends run."""
import math
import weakref

import numpy as np
import pytest

from rlx_ref import Graph
from rlx_ref.autodiff import SEED, grad, grad_with_loss, gradcheck, prepare_for_ad
from rlx_ref.autodiff.higher_order import _replace_input
from rlx_ref.interpret import Interpreter, interpret
from rlx_ref.ir.builder import BuildError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ops._backward_scan_samples import fma_body, fma_forward, fma_vjp
from rlx_ref.ops._control_bodies import add, binary, constant, make_body
from rlx_ref.ops.backward_scan import ScanBackwardAttrs, ScanBackwardXsAttrs
from rlx_ref.ops.control import scan_kept_steps
from rlx_ref.ops.opdef import RefCtx, get
from rlx_ref.passes.decompose import decompose

HID = 4
SH, SW = Shape([1, HID], "f32"), Shape([HID, HID], "f32")


def _cell(b, h, w, *x_t, tanh=False):
    """h' = 0.5·(h @ W) + Σ x_t (odd rows gate h) - 0.1·h·h, or tanh(h @ W + Σ x_t)."""
    z = add(b, "MatMul", None, h, w)
    if not tanh:
        z = binary(b, "Mul", z, constant(b, 0.5))
    for j, x in enumerate(x_t):
        z = binary(b, "Add", z, binary(b, "Mul", x, h) if j % 2 else x)
    if tanh:
        return add(b, "Activation", get("Activation").attrs("Tanh"), z)
    return binary(b, "Add", z, binary(b, "Mul", constant(b, -0.1), binary(b, "Mul", h, h)))


def _rnn(length, trajectory, bcast=True, n_xs=1, k=0, tanh=False) -> Graph:
    """A Scan over [h0, W (broadcast or per-step rows), xs_0..]; its value is the output."""
    g = Graph("rnn")
    h0 = g.input("h0", [1, HID])
    w = g.input("w", [HID, HID] if bcast else [length, HID, HID])
    xs = [g.input(f"xs{j}", [length, 1, HID]) for j in range(n_xs)]
    body = make_body("cell", [SH, SW] + [SH] * n_xs, lambda b, h, m, *x: _cell(b, h, m, *x,
                                                                              tanh=tanh))
    out = g.op("Scan", [h0, w] + xs, body=body, length=length, save_trajectory=trajectory,
               num_bcast=1 if bcast else 0, num_xs=n_xs if bcast else n_xs + 1,
               num_checkpoints=k)
    g.set_outputs([out])
    return g


def _values(g: Graph, seed=0, scale=0.5) -> dict:
    rng = np.random.default_rng(seed)
    return {n.attrs.name: scale * rng.standard_normal(n.shape.static_dims())
            for n in g.input_nodes()}


def _names(g: Graph) -> list:
    return [n.attrs.name for n in g.input_nodes()]


@pytest.mark.parametrize("length,trajectory,bcast,n_xs", [
    (5, True, True, 1), (5, False, True, 1), (5, True, False, 2), (6, False, False, 3),
    (0, False, True, 1), (0, True, True, 2), (1, False, True, 2), (1, True, False, 1)])
def test_scan_gradients_match_finite_differences(length, trajectory, bcast, n_xs):
    g = _rnn(length, trajectory, bcast, n_xs)
    res = gradcheck(g, _values(g), _names(g))
    assert res.ok, f"{res}\n{g.to_text()}"


@pytest.mark.parametrize("trajectory,k", [(True, 0), (False, 0), (True, 3)])
def test_tanh_rnn_cell_matches_finite_differences(trajectory, k):
    g = _rnn(7, trajectory, bcast=True, k=k, tanh=True)
    res = gradcheck(g, _values(g), _names(g))
    assert res.ok, str(res)


def test_prepass_materializes_broadcasts_and_adds_the_trajectory():
    g = _rnn(5, False, bcast=True)
    got = prepare_for_ad(g)
    scan = next(n for n in got.nodes if n.kind == "Scan")
    a = scan.attrs
    assert (a.num_bcast, a.num_xs, a.save_trajectory) == (0, 2, True)
    assert got.nodes[scan.inputs[1]].kind == "Expand"
    assert got.shape(scan.inputs[1]).dims == (5, HID, HID)
    assert [n.kind for n in got.nodes[scan.id + 1:]] == ["Narrow", "Reshape"]
    v = _values(g)
    np.testing.assert_array_equal(interpret(got, v, float64=True)[0],
                                  interpret(g, v, float64=True)[0])
    empty = prepare_for_ad(_rnn(0, False))            # zero steps: the value is init itself
    assert "Scan" not in [n.kind for n in empty.nodes]
    assert empty.nodes[empty.outputs[0]].attrs.name == "h0"


def test_the_rule_emits_one_backward_sweep_per_float_operand():
    gg = grad(_rnn(5, True, bcast=False, n_xs=2), ["h0", "w", "xs0", "xs1"])
    back = [n for n in gg.nodes if n.kind.startswith("ScanBackward")]
    assert [n.kind for n in back] == ["ScanBackward"] + ["ScanBackwardXs"] * 3
    assert [n.attrs.xs_idx for n in back[1:]] == [0, 1, 2]
    vjp = back[0].attrs.body_vjp
    assert [n.attrs.name for n in vjp.input_nodes()][-1] == SEED
    assert len(vjp.outputs) == 4 and back[0].attrs.forward_body is None
    assert parse(print_graph(gg)) == gg                # bodies round-trip in the text form
    only = grad(_rnn(5, True, bcast=False, n_xs=2), ["xs1"])     # one sweep per wrt
    assert [n.kind for n in only.nodes if n.kind.startswith("ScanBackward")] == \
        ["ScanBackwardXs"]


def test_integer_per_step_operand_gets_no_gradient():
    g = Graph("t")
    c0, steps = g.input("c", [3]), g.input("k", [4, 3], "i32")
    body = make_body("b", [Shape([3], "f32"), Shape([3], "i32")], lambda b, c, k: binary(
        b, "Mul", c, add(b, "Cast", get("Cast").attrs(DType.F32), k)))
    g.set_outputs([g.op("Scan", (c0, steps), body=body, length=4, save_trajectory=False,
                        num_bcast=0, num_xs=1, num_checkpoints=0)])
    k = np.array([[1, 2, 3], [2, 2, 2], [-1, 0, 1], [3, 1, 1]], np.int32)
    gg = grad(g, ["c"])
    assert sum(n.kind == "ScanBackwardXs" for n in gg.nodes) == 0
    (dc,) = interpret(gg, {"c": np.ones(3, np.float32), "k": k, SEED: np.ones(3, np.float32)})
    np.testing.assert_array_equal(dc, k.prod(0).astype(np.float32))


# ── checkpoints ────────────────────────────────────────────────────────────

def _kept_rows(g: Graph, full: int, length: int, k: int) -> int:
    """Rows of a full trajectory that a K-checkpoint Scan keeps, stacked."""
    rows = [g.op("Narrow", (full,), axis=0, start=t, len=1)
            for t in scan_kept_steps(ScanBackwardAttrs(None, length, True, 0, k))]
    return g.op("Concat", rows, axis=0)


@pytest.mark.parametrize("length,k", [(7, 2), (7, 3), (10, 2), (10, 3)])
def test_checkpointed_gradient_equals_the_full_trajectory_gradient(length, k):
    ck = _rnn(length, True, k=k)
    full = _rnn(length, True)
    full.set_outputs([_kept_rows(full, full.outputs[0], length, k)])
    v = _values(ck, seed=length + k)
    u = np.random.default_rng(k).standard_normal((k, 1, HID))
    g_ck, g_full = grad(ck, _names(ck)), grad(full, _names(full))
    back = [n for n in g_ck.nodes if n.kind.startswith("ScanBackward")]
    assert back and all(n.attrs.num_checkpoints == k and n.attrs.forward_body is not None
                        for n in back)
    got = interpret(g_ck, {**v, SEED: u}, float64=True)
    want = interpret(g_full, {**v, SEED: u}, float64=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    assert gradcheck(ck, v, _names(ck)).ok


def _run_body(body, args):
    ins = body.input_nodes()
    return Interpreter(body, True, verify=False).run({n.attrs.name: a for n, a in
                                                     zip(ins, args)})


@pytest.mark.parametrize("length,k", [(7, 2), (10, 3), (12, 3), (9, 4)])
def test_checkpointed_oracle_recomputes_segments_with_the_forward_body(length, k):
    rng = np.random.default_rng(length)
    init, a, b = (0.5 * rng.standard_normal(s) for s in ((3,), (length, 3), (length, 3)))
    full = fma_forward(init, a, b)
    keep = scan_kept_steps(ScanBackwardAttrs(None, length, True, 2, k))
    up = rng.standard_normal((k, 3))
    attrs = ScanBackwardAttrs(fma_vjp(), length, True, 2, k, fma_body())
    calls, recomputed, peak = [], [], [0]

    def counting(body, args):
        out = _run_body(body, args)
        if body is attrs.forward_body:
            calls.append("f")
            recomputed.append(weakref.ref(out[0]))
        else:   # a backward step: count the recomputed carries still held
            calls.append("b")
            peak[0] = max(peak[0], sum(r() is not None for r in recomputed))
        return out
    shape = Shape([3], "f64")
    got = get("ScanBackward").reference(RefCtx(attrs, shape, True, counting), init,
                                        full[keep], up, a, b)
    assert calls.count("b") == length
    assert calls.count("f") == length - k - 1           # each segment but its first carry
    seg = math.ceil(length / k)
    runs = "".join(calls).split("b")
    assert max(len(r) for r in runs) <= seg - 1 and 1 <= peak[0] <= seg - 1
    up_full = np.zeros((length, 3))
    up_full[keep] = up
    every = ScanBackwardAttrs(fma_vjp(), length, True, 2, 0, None)
    want = get("ScanBackward").reference(RefCtx(every, shape, True, _run_body), init, full,
                                         up_full, a, b)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


# ── decomposition and gradients of gradients ───────────────────────────────

@pytest.mark.parametrize("kind", ["ScanBackward", "ScanBackwardXs"])
def test_decomposition_recomputes_from_the_saved_rows_as_the_oracle(kind):
    """Rows that are not the forward's own (a perturbed trajectory) still agree: both
    recompute each segment from its saved row."""
    rng = np.random.default_rng(5)
    length, k = 8, 3
    ins = [rng.standard_normal(s).astype(np.float32) for s in
           ((3,), (k, 3), (k, 3), (length, 3), (length, 3))]
    attrs = (ScanBackwardAttrs(fma_vjp(), length, True, 2, k, fma_body()) if
             kind == "ScanBackward" else
             ScanBackwardXsAttrs(fma_vjp(), length, True, 2, 0, k, fma_body()))
    g = Graph("t")
    ids = [g.input(f"x{i}", x.shape) for i, x in enumerate(ins)]
    g.set_outputs([g.op(kind, ids, attrs)])
    after = decompose(g, kinds=[kind])
    assert kind not in [n.kind for n in after.nodes]
    feeds = {f"x{i}": x for i, x in enumerate(ins)}
    np.testing.assert_array_equal(interpret(after, feeds)[0], interpret(g, feeds)[0])


def test_decomposition_packs_a_carry_and_an_xs_of_different_dtypes():
    g = Graph("t")
    c0, xs = g.input("c", [3]), g.input("xs", [4, 3], "f64")
    body = make_body("b", [Shape([3], "f32"), Shape([3], "f64")], lambda b, c, x: binary(
        b, "Mul", c, add(b, "Cast", get("Cast").attrs(DType.F32), x)))
    g.set_outputs([g.op("Scan", (c0, xs), body=body, length=4, save_trajectory=True,
                        num_bcast=0, num_xs=1, num_checkpoints=2)])
    gg = grad(g, ["c", "xs"])
    after = decompose(gg, kinds=["ScanBackward", "ScanBackwardXs"])
    assert not any(n.kind.startswith("ScanBackward") for n in after.nodes)
    rng = np.random.default_rng(0)
    feeds = {"c": rng.standard_normal(3).astype(np.float32), "xs": rng.standard_normal((4, 3)),
             SEED: rng.standard_normal((2, 3)).astype(np.float32)}
    for got, want in zip(interpret(after, feeds), interpret(gg, feeds)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _squared_gradient(g: Graph) -> Graph:
    """Σ |∂(u·f)/∂inputs|² with the cotangent u an ordinary Input: a scalar of the first
    gradient, whose own gradient needs the gradient of ScanBackward."""
    g1 = grad(g, _names(g))
    total = None
    for o in g1.outputs:
        sq = g1.sum(g1.mul(o, o), list(range(g1.shape(o).rank)))
        total = sq if total is None else g1.add(total, sq)
    g1.set_outputs([total])
    out = g.nodes[g.outputs[0]].shape
    return _replace_input(g1, SEED, lambda ng: ng.input("u", out.dims, out.dtype))


@pytest.mark.parametrize("length,trajectory,k,tanh", [
    (4, True, 0, False), (4, False, 0, False), (7, True, 3, False), (1, False, 0, False),
    (5, False, 0, True), (7, True, 3, True)])
def test_grad_of_grad_matches_finite_differences_of_the_grad(length, trajectory, k, tanh):
    g2 = _squared_gradient(_rnn(length, trajectory, k=k, tanh=tanh))
    v = _values(g2, seed=3)
    assert any(n.kind == "ScanBackward" for n in g2.nodes)
    res = gradcheck(g2, v, _names(_rnn(length, trajectory, k=k)))
    assert res.ok, str(res)


@pytest.mark.parametrize("trajectory,k", [(False, 0), (True, 3)])
def test_hvp_through_a_scan_matches_finite_differences_of_the_gradient(trajectory, k):
    from rlx_ref.conformance.cases import make_case
    from rlx_ref.conformance.gradcheck import check_second_order

    g = _rnn(7, trajectory, k=k, tanh=True)
    feeds = {name: x.astype(np.float32) for name, x in _values(g).items()}
    assert check_second_order(make_case("scan-rnn", "f32", g, feeds)) is None


# ── backends ───────────────────────────────────────────────────────────────

@pytest.mark.parametrize("trajectory,k,tanh", [(False, 0, False), (True, 3, False),
                                               (False, 0, True)])
def test_gradient_graph_of_a_scan_runs_on_numba_cpu(trajectory, k, tanh):
    from rlx_ref.backends.registry import get_backend

    backend = get_backend("numba-cpu")
    if not backend.availability()[0]:
        pytest.skip("numba-cpu is not usable here")
    g = _rnn(7, trajectory, k=k, tanh=tanh)
    gg = grad_with_loss(g, _names(g))
    out = g.nodes[g.outputs[0]].shape.static_dims()
    feeds = {name: x.astype(np.float32) for name, x in _values(g, seed=7).items()}
    feeds[SEED] = np.random.default_rng(0).standard_normal(out).astype(np.float32)
    exe = backend.compile(gg)
    assert backend.paths()["ScanBackward"] == backend.paths()["ScanBackwardXs"] == "decomposed"
    assert exe.dispatch_report.path_of("ScanBackward") == "rewritten"   # before lowering
    for got, want in zip(exe.run(feeds), interpret(gg, feeds)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numba_cpu", "opencl", "numba_cuda"])
def test_backends_claim_only_dtypes_whose_decomposed_products_they_lower(backend):
    import importlib

    from rlx_ref.conformance.cases import build_cases
    from rlx_ref.passes._rewrite import SupportTable
    from rlx_ref.passes.legalize import legalize

    table = importlib.import_module(f"rlx_ref.backends.{backend}.lowering").TABLE
    kinds_ = ("ScanBackward", "ScanBackwardXs")
    assert {table.paths()[k] for k in kinds_} == {"decomposed"}
    native, checked = SupportTable.of(table), 0
    for case in build_cases(kinds=list(kinds_)):
        node = case.graph.nodes[case.graph.outputs[0]]
        if node.kind in kinds_ and node.shape.dtype in table.supported_ops()[node.kind]:
            after = decompose(case.graph, native)
            assert not set(kinds_) & {n.kind for n in after.nodes}, case.id
            legalize(after, native)         # raises naming any unclaimed kind or dtype
            checked += 1
    assert checked >= 15


# ── the verifier ───────────────────────────────────────────────────────────

def _bad(attrs, shapes, says, kind="ScanBackward"):
    g = Graph("t")
    ids = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
    with pytest.raises(BuildError, match=says):
        g.op(kind, ids, attrs)


def test_the_verifier_cites_the_constraints():
    ok = [[3], [5, 3], [5, 3], [5, 3], [5, 3]]
    vjp = fma_vjp()
    _bad(ScanBackwardAttrs(vjp, 5, True, 2), ok[:4], r"\(C1\)")
    _bad(ScanBackwardAttrs(fma_body(), 5, True, 2), ok, r"\(C2\).*'d_output'")
    _bad(ScanBackwardAttrs(vjp, 5, True, 2), [[4]] + ok[1:], r"\(C3\)")
    _bad(ScanBackwardAttrs(vjp, 5, False, 2), ok, r"\(C5\) upstream")
    _bad(ScanBackwardAttrs(vjp, 5, True, 2), [[3], [4, 3]] + ok[2:], r"\(C5\) trajectory")
    _bad(ScanBackwardAttrs(vjp, 5, True, 2, 2), [[3], [2, 3], [2, 3], [5, 3], [5, 3]],
         r"\(C6\).*forward_body")
    _bad(ScanBackwardAttrs(vjp, 5, True, 2, 6), ok, r"\(C6\) num_checkpoints")
    _bad(ScanBackwardAttrs(vjp, 5, True, 2, 0, vjp), ok, r"\(C7\)")
    _bad(ScanBackwardXsAttrs(vjp, 5, True, 2, 2), ok, r"\(C8\)", "ScanBackwardXs")
