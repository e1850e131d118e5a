"""The sequence family: oracles against hand results, their own Scan loop forms, PyTorch's
recurrent layers and each other; verifier rules."""
import numpy as np
import pytest

from rlx_ref import interpret
from rlx_ref.ir.builder import BuildError
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph
from rlx_ref.ir.shape import Shape
from rlx_ref.ops import _sequence_ref as R
from rlx_ref.ops._sequence_samples import recurrent_inputs
from rlx_ref.ops._sequence_scan import as_scan
from rlx_ref.ops.opdef import RefCtx, get
from rlx_ref.ops.sequence import (
    GatedDeltaNetAttrs,
    Mamba2Attrs,
    RecurrentAttrs,
    RnnAttrs,
    SelectiveScanAttrs,
)

KINDS = ("SelectiveScan", "Mamba2", "GatedDeltaNet", "Lstm", "Gru", "Rnn")
CASES = [(k, i) for k in KINDS for i in range(len(get(k).samples(np.random.default_rng(0))))]


def _shapes(arrays):
    return [Shape(a.shape, DType.of(a)) for a in arrays]


def oracle(kind, inputs, attrs, float64=False):
    d = get(kind)
    out = d.infer_shape(_shapes(inputs), attrs)
    return d.reference(RefCtx(attrs, out, float64=float64), *inputs)


def _sample(kind, i):
    return get(kind).samples(np.random.default_rng(0))[i]


@pytest.mark.parametrize("kind,i", CASES)
def test_samples_verify_and_match_hand_results(kind, i):
    d, s = get(kind), _sample(kind, i)
    shapes = _shapes(s.inputs)
    out = d.infer_shape(shapes, s.attrs)
    d.check(shapes, s.attrs, out)
    y = oracle(kind, s.inputs, s.attrs)
    assert y.shape == tuple(out.dims) and y.dtype == out.dtype.np
    if s.expect is not None:
        np.testing.assert_allclose(y, s.expect, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind,i", CASES)
@pytest.mark.parametrize("float64", [False, True])
def test_oracle_equals_its_scan_form(kind, i, float64):
    s = _sample(kind, i)
    g = as_scan(kind, _shapes(s.inputs), s.attrs)
    assert any(n.kind == "Scan" for n in g.nodes)
    assert not any(n.kind == kind for n in g.nodes)
    got = interpret(g, {f"x{j}": v for j, v in enumerate(s.inputs)}, float64=float64)[0]
    want = oracle(kind, s.inputs, s.attrs, float64)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-12 if float64 or want.dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_scan_form_text_round_trips():
    s = _sample("Lstm", 3)
    g = as_scan("Lstm", _shapes(s.inputs), s.attrs)
    assert Graph.parse(g.to_text()).structurally_equal(g)


# ── against PyTorch ────────────────────────────────────────────────────────

def _torch_layer(kind, a, inputs):
    torch = pytest.importorskip("torch")
    x = inputs[0]
    gates, dirs, hid = R.GATES[kind], 2 if a.bidirectional else 1, a.hidden_size
    kw = {"nonlinearity": "relu" if a.relu else "tanh"} if kind == "Rnn" else {}
    m = getattr(torch.nn, kind.upper())(x.shape[2], hid, a.num_layers, batch_first=True,
                                        bidirectional=a.bidirectional, **kw).double()
    s_ih, s_hh, s_b = R.block_sizes(gates, x.shape[2], hid, a.num_layers, dirs)
    w_ih = R.unpack(inputs[1], s_ih, gates * hid)
    w_hh = R.unpack(inputs[2], s_hh, gates * hid)
    nb = 2 if kind == "Gru" else 1
    bs = [R.unpack(b, s_b, 1) for b in inputs[3:3 + nb]]
    t = lambda v: torch.tensor(np.asarray(v, np.float64))  # noqa: E731
    with torch.no_grad():
        for layer in range(a.num_layers):
            for d in range(dirs):
                sfx, blk = f"_l{layer}" + ("_reverse" if d else ""), layer * dirs + d
                getattr(m, "weight_ih" + sfx).copy_(t(w_ih[blk]))
                getattr(m, "weight_hh" + sfx).copy_(t(w_hh[blk]))
                getattr(m, "bias_ih" + sfx).copy_(t(bs[0][blk].reshape(-1)))
                hh = bs[1][blk].reshape(-1) if nb == 2 else np.zeros(gates * hid)
                getattr(m, "bias_hh" + sfx).copy_(t(hh))     # RLX merges them: b_hh = 0
        states = [t(v) for v in inputs[3 + nb:]]
        hx = None if not states else (tuple(states) if kind == "Lstm" else states[0])
        return m(t(x), hx)[0].numpy()


TORCH_CASES = [
    (kind, (hid, layers, bidir, carry), dims)
    for kind in ("Lstm", "Gru", "Rnn")
    for hid, layers, bidir, carry in [(4, 1, False, False), (3, 2, True, False),
                                      (5, 1, False, True), (2, 3, True, True)]
    for dims in [(2, 6, 3), (1, 8, 5)]
]


@pytest.mark.parametrize("kind,flags,dims", TORCH_CASES)
def test_recurrent_oracle_matches_torch(kind, flags, dims):
    rng = np.random.default_rng(hash((kind, flags, dims)) % 2**32)
    variants = [RnnAttrs(*flags, False), RnnAttrs(*flags, True)] if kind == "Rnn" \
        else [RecurrentAttrs(*flags)]
    for a in variants:
        ins = recurrent_inputs(rng, kind, *dims, a, scale=0.8)
        want = _torch_layer(kind, a, ins)
        np.testing.assert_allclose(oracle(kind, ins, a, float64=True), want,
                                   rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(oracle(kind, ins, a), want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["Lstm", "Gru", "Rnn"])
def test_recurrent_samples_match_torch(kind):
    for s in get(kind).samples(np.random.default_rng(3)):
        if s.inputs[0].shape[1]:
            np.testing.assert_allclose(oracle(kind, s.inputs, s.attrs, float64=True),
                                       _torch_layer(kind, s.attrs, s.inputs), atol=1e-12)


# ── identities between kinds ───────────────────────────────────────────────

def test_mamba2_with_one_head_is_a_selective_scan_with_shared_decay():
    rng = np.random.default_rng(5)
    b, s, p, n = 2, 6, 3, 4
    x, dt = rng.standard_normal((b, s, 1, p)), rng.uniform(0.1, 1, (b, s, 1))
    a, bm, cm = -rng.uniform(0.2, 2, 1), rng.standard_normal((b, s, 1, n)), \
        rng.standard_normal((b, s, 1, n))
    y2 = oracle("Mamba2", (x, dt, a, bm, cm), Mamba2Attrs(p, n))
    y1 = oracle("SelectiveScan", (x[:, :, 0], np.repeat(dt, p, axis=2), np.full((p, n), a[0]),
                                  bm[:, :, 0], cm[:, :, 0]), SelectiveScanAttrs(n))
    np.testing.assert_allclose(y2[:, :, 0], y1, rtol=1e-12, atol=1e-14)


def test_gated_delta_net_zero_carried_state_and_uniform_channel_gate():
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 5, 2, 3)) for _ in range(3))
    g, beta = -rng.uniform(0, 1, (1, 5, 2)), rng.uniform(0, 1, (1, 5, 2))
    plain = oracle("GatedDeltaNet", (q, k, v, g, beta), GatedDeltaNetAttrs(3))
    zero = np.zeros((1, 2, 3, 3))
    carried = oracle("GatedDeltaNet", (q, k, v, g, beta, zero), GatedDeltaNetAttrs(3, True))
    wide = oracle("GatedDeltaNet", (q, k, v, np.repeat(g[..., None], 3, -1), beta),
                  GatedDeltaNetAttrs(3, False, True))
    np.testing.assert_array_equal(carried, plain)
    np.testing.assert_allclose(wide, plain, rtol=1e-13, atol=1e-15)


def test_gated_delta_net_carried_state_resumes_a_split_sequence():
    # the state after a prefix, fed as `state`, continues the sequence (decode threading)
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 6, 1, 2)) for _ in range(3))
    g, beta = -rng.uniform(0, 1, (1, 6, 1)), rng.uniform(0, 1, (1, 6, 1))
    full = oracle("GatedDeltaNet", (q, k, v, g, beta), GatedDeltaNetAttrs(2))
    s = np.zeros((2, 2))                       # replay the prefix by hand: S after t = 0..2
    for t in range(3):
        s = s * np.exp(g[0, t, 0])
        d = (v[0, t, 0] - s.T @ k[0, t, 0]) * beta[0, t, 0]
        s = s + np.outer(k[0, t, 0], d)
    tail = oracle("GatedDeltaNet", (q[:, 3:], k[:, 3:], v[:, 3:], g[:, 3:], beta[:, 3:],
                                    s.reshape(1, 1, 2, 2)), GatedDeltaNetAttrs(2, True))
    np.testing.assert_allclose(tail, full[:, 3:], rtol=1e-12, atol=1e-14)


def test_lstm_carry_of_zeros_equals_no_carry():
    rng = np.random.default_rng(8)
    a = RecurrentAttrs(3, 2, True, True)
    ins = recurrent_inputs(rng, "Lstm", 2, 4, 3, a)
    zeros = tuple(np.zeros_like(v) for v in ins[4:])
    no_carry = oracle("Lstm", ins[:4], RecurrentAttrs(3, 2, True, False))
    np.testing.assert_array_equal(oracle("Lstm", ins[:4] + zeros, a), no_carry)


# ── verifier ───────────────────────────────────────────────────────────────

def _build(kind, arrays, **fields):
    g = Graph("t")
    ids = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
    return g.op(kind, ids, **fields)


def _z(*shape, dt=np.float32):
    return np.zeros(shape, dt)


@pytest.mark.parametrize("kind,arrays,fields,cid", [
    ("SelectiveScan", (_z(1, 2, 3), _z(1, 2, 3), _z(3, 4), _z(1, 2, 4), _z(1, 2, 4)),
     {"state_size": 5}, "C3"),
    ("SelectiveScan", (_z(1, 2, 3), _z(1, 2, 2), _z(3, 4), _z(1, 2, 4), _z(1, 2, 4)),
     {"state_size": 4}, "C2"),
    ("SelectiveScan", (_z(1, 2, 3), _z(1, 2, 3), _z(3, 4, dt=np.float64), _z(1, 2, 4),
                       _z(1, 2, 4)), {"state_size": 4}, "dtype"),
    ("Mamba2", (_z(1, 2, 2, 3), _z(1, 2, 2), _z(2), _z(1, 2, 2, 4), _z(1, 2, 2, 4)),
     {"head_dim": 2, "state_size": 4}, "C2"),
    ("GatedDeltaNet", (_z(1, 2, 2, 3),) * 3 + (_z(1, 2, 2), _z(1, 2, 2)),
     {"state_size": 3, "carry_state": True}, "C1"),
    ("GatedDeltaNet", (_z(1, 2, 2, 3),) * 3 + (_z(1, 2, 2), _z(1, 2, 2)),
     {"state_size": 3, "gate_per_channel": True}, "C3"),
    ("Lstm", (_z(1, 2, 3), _z(16, 3), _z(16, 4), _z(15)),
     {"hidden_size": 4, "num_layers": 1, "bidirectional": False, "carry": False}, "C4"),
    ("Gru", (_z(1, 2, 3), _z(12, 3), _z(12, 4), _z(12)),
     {"hidden_size": 4, "num_layers": 1, "bidirectional": False, "carry": False},
     "at least 5 operands"),
    ("Rnn", (_z(1, 2, 3), _z(4, 3), _z(4, 4), _z(4), _z(2, 1, 4)),
     {"hidden_size": 4, "num_layers": 1, "bidirectional": False, "carry": True,
      "relu": False}, "C5"),
])
def test_verifier_rejects(kind, arrays, fields, cid):
    with pytest.raises(BuildError, match=cid):
        _build(kind, arrays, **fields)


def test_infer_recurrent_output_width():
    g = Graph("t")
    arrays = (_z(2, 5, 3), _z(2 * 9 * 3 + 2 * 9 * 6), _z(4 * 9 * 3), _z(4 * 9), _z(4 * 9))
    ids = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
    out = g.op("Gru", ids, hidden_size=3, num_layers=2, bidirectional=True, carry=False)
    assert g.nodes[out].shape == Shape((2, 5, 6), DType.F32)


def test_packed_block_sizes():
    w_ih, w_hh, bias = R.block_sizes(4, 5, 3, 2, 2)
    assert w_ih == [60, 60, 72, 72] and w_hh == [36] * 4 and bias == [12] * 4
