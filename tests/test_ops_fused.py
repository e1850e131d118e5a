"""The fused composites and FKL region kinds (ops/fused, ops/_fused_dit, ops/region_batch):
oracles against independent numpy formulas and hand-computed values, the packed backward
kinds against finite differences, decomposition == oracle, payload text round trips,
constraint errors, and the backends' claims."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.builder import BuildError
from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ops.region import Input, activation, binary
from rlx_ref.ops.region_batch import _batch_attrs
from rlx_ref.passes import decompose
from rlx_ref.passes.unfuse_composites import FORMS, KINDS

RNG = np.random.default_rng(3)
F32, F64 = DType.F32, DType.F64


def run(kind, arrays, out_shape=None, **fields):
    """The oracle of one ``kind`` node over ``arrays`` (f64 arrays keep f64)."""
    g = Graph("t")
    ins = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
    g.set_outputs([g.op(kind, ins, shape=out_shape, **fields)])
    return g, interpret(g, {f"x{i}": a for i, a in enumerate(arrays)})[0]


def r(*dims, dtype=np.float64):
    return RNG.standard_normal(dims).astype(dtype)


def layer_norm(x, eps):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)


def rms_norm(x, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


# ── oracles against independent formulas ─────────────────────────────────

def test_matmul_bias_act_by_hand():
    x = np.array([[1, 2], [-3, 0.5]], np.float32)
    w = np.array([[1, 0, -1], [0.5, 1, 2]], np.float32)
    b = np.array([0.0, -2.5, 1.0], np.float32)
    _, got = run("FusedMatMulBiasAct", [x, w, b], activation="Relu")
    assert np.array_equal(got, np.array([[2, 0, 4], [0, 0, 5]], np.float32))
    _, plain = run("FusedMatMulBiasAct", [x, w, b], activation=None)
    assert np.array_equal(plain, np.array([[2, -0.5, 4], [-2.75, -2, 5]], np.float32))


def test_conv_bias_act_with_residual():
    x, w, b, z = r(1, 2, 4, 4), r(3, 2, 3, 3), r(3), r(1, 3, 4, 4)
    _, got = run("FusedConvBiasAct", [x, w, b, z], kernel_size=(3, 3), padding=(1, 1),
                 activation="Relu", has_residual=True)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 3, 4, 4))
    for i in range(4):
        for j in range(4):
            conv[0, :, i, j] = np.einsum("ckl,ockl->o", xp[0, :, i:i + 3, j:j + 3], w)
    want = np.maximum(conv + b[None, :, None, None] + z, 0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind,norm", [("FusedResidualLN", layer_norm),
                                       ("FusedResidualRmsNorm", rms_norm)])
def test_residual_norm_with_bias(kind, norm):
    x, res, bias, g, beta = r(2, 3, 8), r(2, 3, 8), r(8), r(8), r(8)
    _, got = run(kind, [x, res, bias, g, beta], has_bias=True, eps=1e-5)
    want = norm(x + res + bias, np.float32(1e-5)) * g + beta
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_swiglu_halves_and_gate_first():
    p = r(2, 3, 10)
    up, gate = p[..., :5], p[..., 5:]
    silu = lambda t: t / (1 + np.exp(-t))      # noqa: E731
    _, got = run("FusedSwiGLU", [p])
    np.testing.assert_allclose(got, silu(gate) * up, rtol=1e-14)
    _, swapped = run("FusedSwiGLU", [p], gate_first=True)
    np.testing.assert_allclose(swapped, silu(up) * gate, rtol=1e-14)
    _, half = run("FusedSwiGLU", [p.astype(np.float32)], cast_to=DType.F16)
    assert half.dtype == np.float16 and half.shape == (2, 3, 5)


def _attention(h, qkv_w, out_w, mask, nh, dh, qkv_b=0.0, out_b=0.0):
    b, s, _ = h.shape
    qkv = h @ qkv_w + qkv_b
    q, k, v = (qkv[..., i * nh * dh:(i + 1) * nh * dh].reshape(b, s, nh, dh)
               .transpose(0, 2, 1, 3) for i in range(3))
    sc = q @ k.swapaxes(-1, -2) / np.sqrt(dh)
    sc = np.where(mask[:, None, None, :] >= 0.5, sc, -1e9)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v
    return o.transpose(0, 2, 1, 3).reshape(b, s, nh * dh) @ out_w + out_b


def test_attention_block_matches_textbook_attention():
    nh, dh = 2, 3
    h, qkv_w, out_w = r(2, 4, 5), r(5, 18), r(6, 5)
    qkv_b, out_b = r(18), r(5)
    mask = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], np.float64)
    _, got = run("FusedAttentionBlock", [h, qkv_w, out_w, mask, qkv_b, out_b], num_heads=nh,
                 head_dim=dh, has_bias=True)
    want = _attention(h, qkv_w, out_w, mask, nh, dh, qkv_b, out_b)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_transformer_layer_without_bias_uses_zero_betas():
    nh, dh, inter = 2, 2, 6
    d = nh * dh
    h, qkv_w, out_w, g1, f1, f2, g2 = (r(1, 3, d), r(d, 3 * d), r(d, d), r(d), r(d, inter),
                                       r(inter, d), r(d))
    mask = np.ones((1, 3))
    _, got = run("FusedTransformerLayer", [h, qkv_w, out_w, g1, f1, f2, g2, mask],
                 num_heads=nh, head_dim=dh, intermediate_size=inter, eps1=1e-5, eps2=1e-5,
                 activation="Relu", has_bias=False)
    eps = float(np.float32(1e-5))
    h1 = layer_norm(_attention(h, qkv_w, out_w, mask, nh, dh) + h, eps) * g1
    want = layer_norm(np.maximum(h1 @ f1, 0) @ f2 + h1, eps) * g2
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("norm,fn", [("LayerNorm", layer_norm), ("RmsNorm", rms_norm)])
def test_ada_layer_norm_modulates_the_plain_norm(norm, fn):
    x, scale, shift = r(2, 3, 4), r(2, 1, 4), r(2, 1, 4)
    _, got = run("AdaLayerNorm", [x, scale, shift], norm=norm, eps=1e-6)
    want = fn(x, float(np.float32(1e-6))) * (1 + scale) + shift
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gated_residual_by_hand():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    y = 10 * x
    gate = np.array([0.5, -1.0], np.float32)
    _, got = run("GatedResidual", [x, y, gate])
    assert np.array_equal(got, np.array([[6, -18], [18, -36]], np.float32))


def _numeric_grads(fwd, arrays, dy, h=1e-6):
    """d(Σ fwd(arrays)·dy)/d(each array) by central differences (f64)."""
    out = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[i][idx] += h
            minus[i][idx] -= h
            g[idx] = ((fwd(plus) - fwd(minus)) * dy).sum() / (2 * h)
        out.append(g)
    return out


@pytest.mark.parametrize("norm", ["LayerNorm", "RmsNorm"])
def test_ada_layer_norm_backward_is_the_gradient(norm):
    x, scale, shift, dy = r(2, 3, 4), r(2, 1, 4), r(2, 1, 4), r(2, 3, 4)
    _, packed = run("AdaLayerNormBackward", [x, scale, shift, dy], norm=norm, eps=1e-5)
    fwd = lambda a: run("AdaLayerNorm", a, norm=norm, eps=1e-5)[1]    # noqa: E731
    want = _numeric_grads(fwd, [x, scale, shift], dy)
    assert packed.shape == (x.size + 2 * scale.size,)
    np.testing.assert_allclose(packed, np.concatenate([w.ravel() for w in want]),
                               rtol=1e-6, atol=1e-7)


def test_gated_residual_backward_is_the_gradient():
    x, y, gate, dy = r(2, 3, 4), r(2, 3, 4), r(2, 1, 4), r(2, 3, 4)
    _, packed = run("GatedResidualBackward", [x, y, gate, dy])
    want = _numeric_grads(lambda a: run("GatedResidual", a)[1], [x, y, gate], dy)
    np.testing.assert_allclose(packed, np.concatenate([w.ravel() for w in want]),
                               rtol=1e-7, atol=1e-8)


def test_transform_region_chains_upsamples():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    step = ("ResizeNearest2x", ("Input", 0))
    _, got = run("TransformRegion", [x], steps=(step, step), num_inputs=1)
    assert got.shape == (1, 1, 8, 8)
    assert np.array_equal(got[0, 0, :, ::4], np.repeat([[0, 1], [2, 3]], 4, axis=0))


def test_batch_region_is_the_concat_of_per_slice_regions():
    s = [r(1, 2, 3), r(2, 2, 3)]
    chain = [binary("Mul", Input(0), Input(0)), activation("Tanh", ("Step", 0))]
    a = _batch_attrs(chain, s)
    _, got = run("BatchElementwiseRegion", s, None, **a.__dict__)
    assert np.array_equal(got, np.tanh(np.concatenate(s) ** 2))


# ── decomposition == oracle, text form, claims ────────────────────────────

@pytest.mark.parametrize("kind", ["FusedMatMulBiasAct", "FusedAttentionBlock",
                                  "AdaLayerNormBackward", "BatchElementwiseRegion"])
def test_decomposition_equals_the_oracle_bit_for_bit(kind):
    from rlx_ref.conformance.cases import build_cases

    case = next(c for c in build_cases(kinds=[kind]) if c.op == kind)
    after = decompose(case.graph, kinds=[kind])
    made = {n.kind for n in after.nodes} - {"Input", "Param"}
    assert kind not in made and made <= set(FORMS[kind][1])
    want = interpret(case.graph, case.inputs, case.params)[0]
    got = interpret(after, case.inputs, case.params)[0]
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


def test_payloads_round_trip_through_the_text_form():
    g, _ = run("FusedTransformerLayer", [r(1, 2, 4, dtype=np.float32)] * 1 + [
        r(4, 12, dtype=np.float32), r(4, 4, dtype=np.float32), r(4, dtype=np.float32),
        r(4, 6, dtype=np.float32), r(6, 4, dtype=np.float32), r(4, dtype=np.float32),
        np.ones((1, 2), np.float32)], num_heads=2, head_dim=2, intermediate_size=6,
        eps1=1e-5, eps2=1e-6, activation="Gelu", has_bias=False)
    text = print_graph(g)
    assert print_graph(parse(text)) == text
    assert '"eps2":' in text and '"activation":"Gelu"' in text.replace(" ", "")


NATIVE_CPU = ("FusedSwiGLU", "GatedResidual", "FusedResidualRmsNorm", "FusedMatMulResidual",
              "FusedConvBiasAct")


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl", "numba-cuda"])
def test_every_backend_claims_the_kinds(backend):
    import importlib

    pkg = {"numba-cpu": "numba_cpu", "opencl": "opencl", "numba-cuda": "numba_cuda"}[backend]
    table = importlib.import_module(f"rlx_ref.backends.{pkg}.lowering").TABLE
    entries = table.load()
    for kind in KINDS:
        native = backend == "numba-cpu" and kind in NATIVE_CPU
        path = "native" if native else "decomposed"
        assert entries[kind].path == path and F32 in entries[kind].dtypes, kind


@pytest.mark.parametrize("kind,arrays,fields", [
    ("FusedSwiGLU", [r(3, 70, 2 * 160)], dict(gate_first=True)),
    ("GatedResidual", [r(4, 50, 170), r(4, 50, 170), r(4, 1, 170)], {}),
    ("FusedResidualRmsNorm", [r(40, 900), r(40, 900), r(900), r(900), r(900)],
     dict(has_bias=True, eps=1e-6)),
    ("FusedMatMulResidual", [r(2, 30, 40), r(40, 50), r(2, 30, 50)], {}),
])
def test_native_numba_cpu_kernels_match_the_oracle(kind, arrays, fields):
    from rlx_ref.backends.registry import get_backend

    g, want = run(kind, [a.astype(np.float32) for a in arrays], **fields)
    exe = get_backend("numba-cpu").compile(g)
    got = exe.run({f"x{i}": a.astype(np.float32) for i, a in enumerate(arrays)})[0]
    assert got.dtype == np.float32 and got.shape == want.shape
    # the kernel rounds once where the oracle rounds per step: within a few f32 ulps
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=4e-6 * np.abs(want).max())


# ── constraint errors ─────────────────────────────────────────────────────

def _fails(match, kind, arrays, **fields):
    with pytest.raises(BuildError, match=match):
        run(kind, arrays, **fields)


def test_constraint_errors_name_the_rule():
    x = r(2, 4, dtype=np.float32)
    _fails(r"FusedMatMulBiasAct takes 3 operands", "FusedMatMulBiasAct", [x, x.T],
           activation=None)
    _fails(r"\(C1\) FusedResidualLN takes 5 operands \(x, residual, bias, gamma, beta\)",
           "FusedResidualLN", [x, x, x[0], x[0]], has_bias=True, eps=1e-5)
    _fails(r"\(C2\)", "FusedMatMulBiasAct", [x, x.T.astype(np.float64), x[:, :2]],
           activation=None)
    _fails(r"\(C3\) FusedSwiGLU .* even", "FusedSwiGLU", [r(2, 5, dtype=np.float32)])
    _fails(r"\(C3\) FusedResidualLN residual", "FusedResidualLN",
           [x, x[:1], r(4, dtype=np.float32), r(4, dtype=np.float32)], has_bias=False,
           eps=1e-5)
    _fails(r"\(C3\) GatedResidual gate", "GatedResidual", [x, x, r(2, 1, dtype=np.float32)])
    _fails(r"\(C3\) AdaLayerNorm shift", "AdaLayerNorm",
           [x, r(4, dtype=np.float32), r(1, 4, dtype=np.float32)], norm="RmsNorm", eps=1e-5)
    _fails(r"\(C4\) FusedMatMulBiasAct|\(C3\) FusedMatMulBiasAct", "FusedMatMulBiasAct",
           [x, r(3, 2, dtype=np.float32), r(2, dtype=np.float32)], activation=None)
    _fails(r"\(C2\) step 0", "TransformRegion", [r(1, 1, 2, 2, dtype=np.float32)],
           steps=(("ResizeNearest2x", ("Step", 0)),), num_inputs=1)
    s = [r(1, 2, dtype=np.float32), r(1, 3, dtype=np.float32)]
    _fails(r"\(C2\) slice 1", "BatchElementwiseRegion", s,
           **_batch_attrs([activation("Relu", Input(0))], s).__dict__)
