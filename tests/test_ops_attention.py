"""Attention and Rope: the oracle against naive per-index loops and textbook decompositions."""
import math

import numpy as np
import pytest
from scipy.special import softmax

from rlx_ref.interpret import InterpretError, Interpreter
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ir.text import op_from_json, parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops.attention import AttentionAttrs, RopeAttrs
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, single_op_graph

RNG = np.random.default_rng(1234)


def att(h, d, mask="None", vd=None, scale=None, cap=None):
    return AttentionAttrs(num_heads=h, head_dim=d, v_head_dim=vd, mask_kind=mask,
                          score_scale=scale, attn_logit_softcap=cap)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ── an independent attention: one (batch, head, query) at a time ────────────

def _accessors(q, k, v, a):
    """(B, S_q, S_k, H_kv, getQ, getK, getV, put) for the layout RLX reads Q in."""
    H, D = a.num_heads, a.head_dim
    Dv = a.v_head_dim or D
    if q.ndim == 4 and q.shape[1] == H:                       # [B, H, S, D]
        return (q.shape[0], q.shape[2], k.shape[2], k.shape[1],
                lambda b, h, i: q[b, h, i], lambda b, h, j: k[b, h, j],
                lambda b, h, j: v[b, h, j], lambda o, b, h, i, x: o.__setitem__((b, h, i), x))
    if q.ndim == 4:                                           # [B, S, H, D]
        return (q.shape[0], q.shape[1], k.shape[1], k.shape[2],
                lambda b, h, i: q[b, i, h], lambda b, h, j: k[b, j, h],
                lambda b, h, j: v[b, j, h], lambda o, b, h, i, x: o.__setitem__((b, i, h), x))
    if q.ndim == 2:                                           # [S, H*D], batch 1
        q, k, v = q[None], k[None], v[None]
    packed = (q.shape[0], q.shape[1], k.shape[1], k.shape[2] // D,
              lambda b, h, i: q[b, i, h * D:(h + 1) * D],
              lambda b, h, j: k[b, j, h * D:(h + 1) * D],
              lambda b, h, j: v[b, j, h * Dv:(h + 1) * Dv])

    def put(o, b, h, i, x):
        row = o[i] if o.ndim == 2 else o[b, i]
        row[h * Dv:(h + 1) * Dv] = x
    return packed + (put,)


def naive_attention(q, k, v, mask, a, out_shape):
    """Loops over (b, h, qi, ki) with the mask rules written out one key at a time."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    B, Sq, Sk, Hkv, Q, K, V, put = _accessors(q, k, v, a)
    H, D = a.num_heads, a.head_dim
    scale = a.score_scale if a.score_scale is not None else 1 / math.sqrt(D)
    out = np.zeros(out_shape)
    for b in range(B):
        for h in range(H):
            kvh = h // (H // Hkv)
            for i in range(Sq):
                pos = i + max(Sk - Sq, 0)
                scores = []
                for j in range(Sk):
                    s = scale * sum(float(x) * float(y) for x, y in zip(Q(b, h, i), K(b, kvh, j)))
                    if a.mask_kind == "Bias":
                        s += float(mask[b, h, i, j])
                    if a.attn_logit_softcap is not None:
                        c = a.attn_logit_softcap
                        s = c * math.tanh(s / c)
                    hidden = False
                    if a.mask_kind == "Causal":
                        hidden = j > pos
                    elif isinstance(a.mask_kind, tuple):
                        hidden = j > pos or j < pos - a.mask_kind[1]
                    elif a.mask_kind == "Custom":
                        hidden = float(mask[b, j]) < 0.5
                    scores.append(-1e9 if hidden else s)
                m = max(scores)
                e = [math.exp(s - m) for s in scores]
                put(out, b, h, i, sum(e[j] / sum(e) * V(b, kvh, j) for j in range(Sk)))
    return out


def _finite(sample):
    return all(np.isfinite(np.asarray(x, np.float64)).all() for x in sample.inputs)


SAMPLES = [s for s in get("Attention").samples(np.random.default_rng(0)) if _finite(s)]


@pytest.mark.parametrize("s", SAMPLES, ids=lambda s: "-".join(s.tags))
def test_attention_matches_naive_loop_on_every_sample(s):
    mask = s.inputs[3] if len(s.inputs) == 4 else None
    got64 = run_single("Attention", s.attrs, *s.inputs, float64=True)
    want = naive_attention(*s.inputs[:3], mask, s.attrs, got64.shape)
    np.testing.assert_allclose(got64, want, rtol=1e-10, atol=1e-12)
    got = run_single("Attention", s.attrs, *s.inputs)
    tol = 2e-2 if got.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_decomposition_softmax_qkt_plus_additive_mask_times_v():
    b, h, s, d = 2, 3, 5, 4
    q, k, v = rnd(b, h, s, d), rnd(b, h, s, d), rnd(b, h, s, d)
    bias = rnd(b, h, s, s)
    causal_add = np.where(np.tri(s, dtype=bool), 0.0, -np.inf)
    ref = softmax(q.astype(np.float64) @ k.swapaxes(-1, -2) / math.sqrt(d) + bias + causal_add,
                  axis=-1) @ v
    # the Bias operand carries the whole additive mask (causal part as a -1e9 addend)
    got = run_single("Attention", att(h, d, "Bias"), q, k, v,
                     (bias + np.where(np.tri(s, dtype=bool), 0, -1e9)).astype(np.float32),
                     float64=True)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    got_c = run_single("Attention", att(h, d, "Bias"), q, k, v, bias, float64=True)
    ref_c = softmax(q.astype(np.float64) @ k.swapaxes(-1, -2) / math.sqrt(d) + bias, -1) @ v
    np.testing.assert_allclose(got_c, ref_c, rtol=1e-10, atol=1e-12)


def test_default_scale_is_inverse_sqrt_head_dim():
    q, k, v = rnd(1, 4, 6), rnd(1, 5, 6), rnd(1, 5, 6)
    dflt = run_single("Attention", att(2, 3), q, k, v, float64=True)
    explicit = run_single("Attention", att(2, 3, scale=1 / math.sqrt(3)), q, k, v, float64=True)
    np.testing.assert_allclose(dflt, explicit, atol=1e-6)   # payload scale is f32-rounded
    other = run_single("Attention", att(2, 3, scale=2.0), q, k, v, float64=True)
    assert not np.allclose(dflt, other)


def test_fully_masked_row_is_uniform_mean_of_values():
    q, k, v = rnd(1, 3, 4), rnd(1, 4, 4), rnd(1, 4, 4)
    for cap in (None, 2.0):
        out = run_single("Attention", att(1, 4, "Custom", cap=cap), q, k, v,
                         np.zeros((1, 4), np.float32), float64=True)
        mean_v = v.mean(axis=1, dtype=np.float64)
        np.testing.assert_allclose(out, np.broadcast_to(mean_v, out.shape), rtol=1e-12)


def test_softcap_masks_after_capping():
    # with a small cap, RLX's CPU (cap after the -1e9 fill) would give hidden keys weight;
    # the documented semantics give them none: the first query still sees key 0 only
    q, k, v = rnd(1, 3, 4) * 10, rnd(1, 3, 4) * 10, rnd(1, 3, 4)
    out = run_single("Attention", att(1, 4, "Causal", cap=0.5), q, k, v, float64=True)
    np.testing.assert_allclose(out[0, 0], v[0, 0], rtol=1e-12)
    s = q[0].astype(np.float64) @ k[0].T / 2
    capped = 0.5 * np.tanh(s / 0.5)
    ref = softmax(np.where(np.tri(3, dtype=bool), capped, -np.inf), -1) @ v[0]
    np.testing.assert_allclose(out[0], ref, rtol=1e-10)


def test_causal_kv_cache_queries_align_to_the_end_of_keys():
    s_k, s_q, hd = 6, 2, 4
    q, k, v = rnd(1, s_k, hd), rnd(1, s_k, hd), rnd(1, s_k, hd)
    full = run_single("Attention", att(1, hd, "Causal"), q, k, v, float64=True)
    tail = run_single("Attention", att(1, hd, "Causal"), q[:, -s_q:], k, v, float64=True)
    np.testing.assert_allclose(tail, full[:, -s_q:], rtol=1e-12)
    sw_full = run_single("Attention", att(1, hd, ("SlidingWindow", 2)), q, k, v, float64=True)
    sw_tail = run_single("Attention", att(1, hd, ("SlidingWindow", 2)), q[:, -s_q:], k, v,
                         float64=True)
    np.testing.assert_allclose(sw_tail, sw_full[:, -s_q:], rtol=1e-12)


def test_sliding_window_keeps_w_plus_one_keys():
    s, w = 5, 1
    q = np.zeros((1, s, 2), np.float32)                      # equal scores: weights 1/#visible
    v = np.repeat(np.arange(s, dtype=np.float32)[None, :, None], 2, axis=2)  # row i holds i
    out = run_single("Attention", att(1, 2, ("SlidingWindow", w)), q, rnd(1, s, 2), v)
    want = [np.mean(np.arange(max(i - w, 0), i + 1)) for i in range(s)]
    np.testing.assert_allclose(out[0, :, 0], want, rtol=1e-6)


def test_layouts_agree():
    b, h, s, d = 2, 2, 3, 4
    q, k, v = rnd(b, h, s, d), rnd(b, h, s, d), rnd(b, h, s, d)
    a = att(h, d, "Causal")
    bhsd = run_single("Attention", a, q, k, v, float64=True)
    t = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))  # noqa: E731
    bshd = run_single("Attention", a, t(q), t(k), t(v), float64=True)
    np.testing.assert_allclose(t(bshd), bhsd, rtol=1e-12)
    p = lambda x: t(x).reshape(b, s, h * d)  # noqa: E731
    packed = run_single("Attention", a, p(q), p(k), p(v), float64=True)
    np.testing.assert_allclose(packed.reshape(b, s, h, d), t(bhsd), rtol=1e-12)
    rank2 = run_single("Attention", a, p(q)[0], p(k)[0], p(v)[0], float64=True)
    np.testing.assert_allclose(rank2, packed[0], rtol=1e-12)


def test_gqa_equals_mha_with_repeated_kv_heads():
    b, h, hkv, s, d = 1, 6, 2, 4, 3
    q, k, v = rnd(b, h, s, d), rnd(b, hkv, s, d), rnd(b, hkv, s, d)
    gqa = run_single("Attention", att(h, d), q, k, v, float64=True)
    mha = run_single("Attention", att(h, d), q, np.repeat(k, 3, 1), np.repeat(v, 3, 1),
                     float64=True)
    np.testing.assert_allclose(gqa, mha, rtol=1e-12)


def test_v_head_dim_output_shapes():
    for q, k, v, vd, out in [((1, 3, 8), (1, 5, 8), (1, 5, 10), 5, (1, 3, 10)),
                             ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 7), 7, (1, 2, 3, 7)),
                             ((1, 3, 2, 4), (1, 5, 1, 4), (1, 5, 1, 2), 2, (1, 3, 2, 2))]:
        g = single_op_graph("Attention", att(2, 4, vd=vd), [Shape(x, DType.F32)
                                                            for x in (q, k, v)])
        assert g.nodes[-1].shape.dims == out
        assert verify(g) == []


def _verify_msgs(attrs, shapes, out=None):
    shapes = [Shape(s, DType.F32) if isinstance(s, tuple) else s for s in shapes]
    g = single_op_graph("Attention", attrs, shapes, out=out or shapes[0])
    return " | ".join(str(e) for e in verify(g))


@pytest.mark.parametrize("attrs, shapes, msg", [
    (att(0, 4), [(1, 3, 8)] * 3, "(C1) Attention num_heads and head_dim must be non-zero"),
    (att(2, 4, "Causal"), [(1, 3, 8)] * 3 + [(1, 3)], "(C2) Attention with mask_kind Causal "
                                                      "takes 3 inputs"),
    (att(2, 4, "Custom"), [(1, 3, 8)] * 3, "takes 4 inputs (q, k, v, mask), got 3"),
    (att(2, 4), [(1, 3, 6)] * 3, "(C4) Q last dim (6) must be num_heads * head_dim = 8"),
    (att(2, 4), [(1, 3, 3, 4)] * 3, "(C4) rank-4 Q [1, 3, 3, 4] has num_heads = 2 neither"),
    (att(4, 2), [(1, 3, 8), (1, 3, 6), (1, 3, 6)], "(C5) K/V have 3 heads, which must be >= 1 "
                                                   "and divide num_heads = 4"),
    (att(2, 4), [(1, 3, 8), (1, 3, 8), (1, 4, 8)], "(C5) K and V must have the same key length"),
    (att(2, 4), [(1, 3, 8), (2, 3, 8), (2, 3, 8)], "(C5) Q, K and V must share the batch size"),
    (att(2, 4), [(1, 3, 8), (1, 0, 8), (1, 0, 8)], "(C6) K/V have no keys"),
    (att(2, 4, "Custom"), [(1, 3, 8)] * 3 + [(1, 2, 3)], "(C7) a Custom mask must be [B, S_k]"),
    (att(2, 4, "Bias"), [(1, 3, 8)] * 3 + [(1, 1, 3, 3)], "(C7) an attention Bias must be "
                                                          "[B, H, S_q, S_k] = [1, 2, 3, 3]"),
    (att(2, 4, cap=0.0), [(1, 3, 8)] * 3, "(C8) attn_logit_softcap must be a finite positive"),
    (att(2, 4), [(1, 3, 8), (1, 3, 8), Shape((1, 3, 8), DType.F16)], "(C3) Q, K and V must "
                                                                    "share one dtype"),
    (att(2, 4), [(8,)] * 3, "(C3) Attention Q must have rank 2, 3 or 4"),
    # a value outside the payload's type is reported by the verifier's payload layer
    (att(2, 4, "Sliding"), [(1, 3, 8)] * 3,
     "field mask_kind = 'Sliding' is not a MaskKind (None, Causal, Custom, Bias, SlidingWindow)"),
])
def test_attention_verifier_errors(attrs, shapes, msg):
    assert msg in _verify_msgs(attrs, shapes)


def test_attention_dynamic_dims_are_checked_at_run_time():
    dyn = Shape((Dyn(0), 3, 8), DType.F32)
    g = single_op_graph("Attention", att(2, 4), [dyn, Shape((Dyn(0), 3, 6), DType.F32), dyn])
    assert verify(g) == []
    with pytest.raises(InterpretError, match=r"\(C5\)"):
        Interpreter(g).run({"x0": rnd(1, 3, 8), "x1": rnd(1, 3, 6), "x2": rnd(1, 3, 8)})


def test_attention_payload_text_forms():
    j = {"Attention": {"num_heads": 8, "head_dim": 64, "v_head_dim": None,
                       "mask_kind": {"SlidingWindow": 128}, "score_scale": 0.125,
                       "attn_logit_softcap": None}}
    op = op_from_json(j)
    assert op.attrs == att(8, 64, ("SlidingWindow", 128), scale=0.125)
    old = op_from_json({"Attention": {"num_heads": 8, "head_dim": 64, "mask_kind": "Causal",
                                      "score_scale": None, "attn_logit_softcap": 50.0}})
    assert old.attrs.v_head_dim is None and old.attrs.attn_logit_softcap == 50.0
    g = single_op_graph("Attention", att(2, 4, "Bias", vd=3, cap=30.0),
                        [rnd(1, 3, 8), rnd(1, 3, 8), rnd(1, 3, 6), rnd(1, 2, 3, 3)])
    text = print_graph(g)
    assert ('{"Attention":{"num_heads":2,"head_dim":4,"v_head_dim":3,"mask_kind":"Bias",'
            '"score_scale":null,"attn_logit_softcap":30.0}}') in text
    assert parse(text) == g


# ── Rope against a per-pair rotation loop ──────────────────────────────────

def naive_rope(x, cos, sin, a):
    """Rotate every (position, head, pair) with explicit index arithmetic."""
    x = np.asarray(x, np.float64)
    half = a.n_rot // 2
    seq, hidden = x.shape[-2], x.shape[-1]
    rows = x.reshape(int(np.prod(x.shape[:-2])), seq, hidden)
    batch = rows.shape[0]
    width = cos.shape[-1] if cos.ndim >= 2 else half
    c_tab = np.asarray(cos, np.float64).reshape(-1, width)
    s_tab = np.asarray(sin, np.float64).reshape(-1, width)
    per_token = c_tab.shape[0] == batch * seq and c_tab.shape[0] != seq
    out = rows.copy()
    for b in range(batch):
        for p in range(seq):
            row = b * seq + p if per_token else p
            for h in range(hidden // a.head_dim):
                base = h * a.head_dim
                for i in range(half):
                    if a.style == "NeoX":
                        j1, j2 = base + i, base + i + half
                    else:
                        j1, j2 = base + 2 * i, base + 2 * i + 1
                    x1, x2 = rows[b, p, j1], rows[b, p, j2]
                    c, s = c_tab[row, i], s_tab[row, i]
                    out[b, p, j1] = x1 * c - x2 * s
                    out[b, p, j2] = x2 * c + x1 * s
    return out.reshape(x.shape)


ROPE_SAMPLES = get("Rope").samples(np.random.default_rng(0))


@pytest.mark.parametrize("s", ROPE_SAMPLES, ids=lambda s: "-".join(s.tags))
def test_rope_matches_pair_loop_on_every_sample(s):
    got = run_single("Rope", s.attrs, *s.inputs, float64=True)
    np.testing.assert_allclose(got, naive_rope(*s.inputs, s.attrs), rtol=1e-12, atol=1e-12)


def rope_tables(positions, dim, base=10000.0):
    inv = base ** (-np.arange(0, dim, 2) / dim)
    ang = np.outer(positions, inv)
    return np.cos(ang), np.sin(ang)


@pytest.mark.parametrize("style", ["NeoX", "GptJ"])
@pytest.mark.parametrize("n_rot", [8, 4, 2])
def test_rope_relative_position_property(style, n_rot):
    # <rope(q, m), rope(k, n)> depends only on m - n; partial lanes pass through unchanged
    d = 8
    q, k = RNG.standard_normal(d), RNG.standard_normal(d)
    a = RopeAttrs(d, n_rot, style)

    def rot(x, pos):
        c, s = rope_tables([pos], n_rot)
        return run_single("Rope", a, x[None], c, s, float64=True)[0]
    assert np.isclose(rot(q, 7) @ rot(k, 3), rot(q, 5) @ rot(k, 1))
    assert np.isclose(np.linalg.norm(rot(q, 9)), np.linalg.norm(q))
    np.testing.assert_array_equal(rot(q, 4)[n_rot:], q[n_rot:])


@pytest.mark.parametrize("attrs, shapes, msg", [
    (RopeAttrs(0, 0), [(2, 4), (2, 2), (2, 2)], "(C1) Rope head_dim must be non-zero"),
    (RopeAttrs(5, 2), [(2, 5), (2, 1), (2, 1)], "(C1) Rope head_dim (5) must be even"),
    (RopeAttrs(4, 3), [(2, 4), (2, 2), (2, 2)], "(C1) Rope n_rot (3) must be even"),
    (RopeAttrs(4, 6), [(2, 4), (2, 3), (2, 3)], "(C1) Rope n_rot (6) exceeds head_dim (4)"),
    (RopeAttrs(4, 4), [(2, 6), (2, 2), (2, 2)], "(C2) Rope input last dim (6) is not a multiple"),
    (RopeAttrs(4, 4), [(8,), (1, 2), (1, 2)], "(C2) Rope x must be [..., S, H*head_dim]"),
    (RopeAttrs(4, 4), [(2, 4), (2, 2), (2, 3)], "(C3) Rope cos and sin must have one shape"),
    (RopeAttrs(4, 4), [(2, 4), (2, 1), (2, 1)], "(C4) Rope table rows hold 1 values but n_rot/2"),
    (RopeAttrs(4, 4), [(3, 4), (2, 2), (2, 2)], "(C4) Rope tables have 2 rows"),
    (RopeAttrs(4, 4), [(2, 4), (5,), (5,)], "(C4) a rank-1 Rope table must hold whole rows"),
    (RopeAttrs(4, 4, "Llama"), [(2, 4), (2, 2), (2, 2)],
     "field style = 'Llama' is not a RopeStyle (NeoX, GptJ)"),
])
def test_rope_verifier_errors(attrs, shapes, msg):
    shapes = [Shape(s, DType.F32) for s in shapes]
    g = single_op_graph("Rope", attrs, shapes, out=shapes[0])
    assert msg in " | ".join(str(e) for e in verify(g))


def test_rope_payload_text_forms():
    op = op_from_json({"Rope": {"head_dim": 64, "n_rot": 32, "style": "GptJ"}})
    assert op.attrs == RopeAttrs(64, 32, "GptJ")
    assert op_from_json({"Rope": {"head_dim": 64, "n_rot": 64}}).attrs.style == "NeoX"
    g = single_op_graph("Rope", RopeAttrs(4, 2, "GptJ"), [rnd(3, 8), rnd(3, 2), rnd(3, 2)])
    assert '{"Rope":{"head_dim":4,"n_rot":2,"style":"GptJ"}}' in print_graph(g)


def test_dynamic_mask_and_rope_shapes_are_checked_at_run_time():
    dyn = Shape((Dyn(0), 3, 8), DType.F32)
    g = single_op_graph("Attention", att(2, 4, "Custom"),
                        [dyn, dyn, dyn, Shape((Dyn(0), Dyn(1)), DType.F32)])
    assert verify(g) == []
    x = rnd(1, 3, 8)
    with pytest.raises(InterpretError, match=r"\(C7\) a Custom mask must be \[B, S_k\]"):
        Interpreter(g).run({"x0": x, "x1": x, "x2": x, "x3": np.ones((1, 2), np.float32)})
    g = single_op_graph("Rope", RopeAttrs(4, 4), [Shape((3, Dyn(0)), DType.F32),
                                                  Shape((3, 2), DType.F32),
                                                  Shape((3, 2), DType.F32)])
    assert verify(g) == []
    with pytest.raises(InterpretError, match=r"\(C2\) Rope input last dim \(6\)"):
        Interpreter(g).run({"x0": rnd(3, 6), "x1": rnd(3, 2), "x2": rnd(3, 2)})
