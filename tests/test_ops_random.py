"""RngNormal, RngUniform, Sample and RLX's Philox stream (rlx_ref.ops._philox)."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from rlx_ref.interpret import interpret
from rlx_ref.ir.graph import Graph
from rlx_ref.ir.shape import Shape
from rlx_ref.ops import _philox as P
from rlx_ref.ops import _sample_row as S
from rlx_ref.ops.opdef import Caps, get

KEY = 0x5EED1234ABCD0001
F = np.float32


def f32(x) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


class RustPhilox:
    """rng.rs's Philox4x32 line by line (Python ints, f32 rounding via struct)."""

    def __init__(self, seed):
        self.seed = [seed & 0xFFFFFFFF, seed >> 32]
        self.counter, self.buffer, self.cursor = [0, 0, 0, 0], [0] * 4, 4

    def fill_buffer(self):
        s, k = list(self.counter), list(self.seed)
        for _ in range(10):
            p0, p1 = s[0] * 0xD2561A75, s[2] * 0xCD9E8D57
            s = [(p1 >> 32) ^ s[1] ^ k[0], p1 & 0xFFFFFFFF,
                 (p0 >> 32) ^ s[3] ^ k[1], p0 & 0xFFFFFFFF]
            k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
        self.buffer, self.cursor = s, 0
        for i in range(4):                  # 128-bit increment with carries
            self.counter[i] = (self.counter[i] + 1) & 0xFFFFFFFF
            if self.counter[i]:
                break

    def next_u32(self):
        if self.cursor >= 4:
            self.fill_buffer()
        self.cursor += 1
        return self.buffer[self.cursor - 1]

    def next_f32(self):
        return (self.next_u32() >> 8) / 2**24

    def normal(self):
        u1 = max(self.next_f32(), f32(np.finfo(F).tiny))
        u2 = self.next_f32()
        r = f32(math.sqrt(f32(-2.0 * f32(math.log(u1)))))
        theta = f32(f32(2.0 * f32(math.pi)) * u2)
        return f32(r * f32(math.cos(theta)))


# ── the stream ────────────────────────────────────────────────────────────

@pytest.mark.parametrize("ctr,key,want", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_round_matches_random123_known_answers_with_the_published_multiplier(ctr, key, want):
    got = P.philox_blocks(np.array([ctr], np.uint64), key, P.RANDOM123_M0)[0]
    assert tuple(int(w) for w in got) == want


def test_rlx_multiplier_is_not_random123s():
    got = P.philox_blocks(np.zeros((1, 4), np.uint64), (0, 0))[0]
    assert int(got[0]) != 0x6627E8D5 and P.M0 == 0xD2561A75


# Words traced from rng.rs (RustPhilox above) and committed.
STREAMS = {
    P.combine_seed(42, KEY): [0xBACFD1A2, 0xA219F9D9, 0x132A42FF, 0xFBC67735,
                              0x4AA1246B, 0x5D03D58D, 0xF060ED67, 0x2E63DDCE],
    0: [0xAB45D93F, 0x7D18EB7F, 0x4BA0FF59, 0x6AF5BCC1,
        0x8FEDB70A, 0x67FF8A25, 0xB7BE6FEF, 0xE6A7535A],
    2**64 - 1: [0xBB3AE9CC, 0xA226C8DA, 0x822D501B, 0x10255DAC],
}


@pytest.mark.parametrize("seed", list(STREAMS))
def test_words_match_the_committed_vectors_and_rng_rs(seed):
    want = STREAMS[seed]
    assert [int(w) for w in P.words(seed, len(want))] == want
    rust = RustPhilox(seed)
    assert [rust.next_u32() for _ in want] == want


def test_combine_seed_and_a_slice_of_the_stream():
    assert P.combine_seed(42, KEY) == 0xAD14D784E31B7C3F
    assert P.combine_seed(1, 2**64 - 1) == (1 - 0x9E3779B97F4A7C15) % 2**64
    seed = 77
    full = P.words(seed, 23)
    for start in (0, 1, 3, 4, 9):
        assert np.array_equal(P.words(seed, 23 - start, start), full[start:])


def test_counter_carries_into_its_second_word():
    seed = 5
    rust = RustPhilox(seed)
    rust.counter = [0xFFFFFFFF, 0, 0, 0]     # block 2^32 - 1, then block 2^32
    want = [rust.next_u32() for _ in range(4)][3:] + [rust.next_u32() for _ in range(2)]
    assert rust.counter == [1, 1, 0, 0]
    assert [int(w) for w in P.words(seed, 3, start=4 * (2**32 - 1) + 3)] == want


def test_uniform_and_normal_bits():
    u = P.uniform_like(6, -1.0, 3.0, KEY)
    assert [hex(int(b)) for b in u.view(np.uint32)] == [
        "0x3ff59fa2", "0x3fc433f2", "0xbf3356f8", "0x403bc677", "0x3e2a1240", "0x3ee81ea8"]
    # by hand: -1 + (0xBACFD1A2 >> 8) / 2^24 * 4
    assert u[0] == F(-1 + (0xBACFD1A2 >> 8) / 2**24 * 4)
    n = P.normal_like(4, 0.0, 1.0, KEY)
    assert [hex(int(b)) for b in n.view(np.uint32)] == [
        "0xbf0818fc", "0x4010f003", "0xbf8353e8", "0x3e1835ef"]
    rust = RustPhilox(P.combine_seed(42, KEY))
    assert n.tolist() == [rust.normal() for _ in range(4)]


@pytest.mark.parametrize("seed", [3, 2**40 + 11])
def test_long_streams_match_rng_rs(seed):
    rust = RustPhilox(seed)
    want = np.array([rust.normal() for _ in range(300)], F)
    assert np.array_equal(P.normal_f32(seed, 300), want)
    rust = RustPhilox(seed)
    want = np.array([f32(f32(0.5) + f32(rust.next_f32() * f32(2.0))) for _ in range(301)], F)
    assert np.array_equal(P.uniform_f32(seed, 301, 0.5, 2.5), want)
    assert ((0 <= P.unit_f32(P.words(seed, 999))) & (P.unit_f32(P.words(seed, 999)) < 1)).all()


# ── the ops ───────────────────────────────────────────────────────────────

def _rng_graph(kind, dims, template=None, **fields):
    g = Graph(kind.lower())
    ins = [g.input("t", template.shape)] if template is not None else []
    g.set_outputs([g.op(kind, ins, shape=Shape(dims, "f32"), **fields)])
    return g, ({"t": template} if template is not None else {})


def test_rng_ops_fill_the_declared_shape_from_the_keyed_stream():
    g, feed = _rng_graph("RngNormal", [2, 3], mean=1.5, scale=2.0, key=KEY)
    out = interpret(g, feed)[0]
    assert out.shape == (2, 3) and out.dtype == F
    assert np.array_equal(out.ravel(), F(1.5) + F(2.0) * P.normal_f32(P.combine_seed(42, KEY), 6))
    g, feed = _rng_graph("RngUniform", [5], np.ones(5, F), low=0.0, high=1.0, key=1)
    out = interpret(g, feed)[0]
    assert np.array_equal(out, P.unit_f32(P.words(P.combine_seed(42, 1), 5)))


def test_op_seed_and_the_template_values_do_not_change_the_draws():
    a, fa = _rng_graph("RngUniform", [4], np.zeros(4, F), low=-1.0, high=1.0, key=9)
    b, fb = _rng_graph("RngUniform", [4], None, low=-1.0, high=1.0, key=9, op_seed=3.0)
    assert np.array_equal(interpret(a, fa)[0], interpret(b, fb)[0])


def test_rng_checks():
    g = Graph("bad")
    with pytest.raises(Exception, match="C2"):
        g.op("RngNormal", (), shape=Shape([3], "f64"), mean=0.0, scale=1.0, key=1)
    x, y = g.input("x", [2]), g.input("y", [2])
    with pytest.raises(Exception, match="C1"):
        g.op("RngUniform", (x, y), shape=Shape([2], "f32"), low=0.0, high=1.0, key=1)


def test_nondeterministic_caps():
    for kind in ("RngNormal", "RngUniform", "Sample"):
        assert Caps.NONDETERMINISTIC in get(kind).caps
        assert Caps.CONST_FOLDABLE not in get(kind).caps
    assert Caps.NONDETERMINISTIC not in get("Sort").caps


# ── Sample ────────────────────────────────────────────────────────────────

def _sample(logits, top_k=0, top_p=1.0, temperature=1.0, seed=1234):
    x = np.asarray(logits, F)
    g = Graph("sample")
    batch = x.shape[0] if x.ndim == 2 else 1
    g.set_outputs([g.op("Sample", [g.input("x", x.shape)], shape=Shape([batch], "f32"),
                        top_k=top_k, top_p=top_p, temperature=temperature, seed=seed)])
    return interpret(g, {"x": x})[0]


def test_sample_draws_word_b_for_row_b_by_inverse_cdf():
    # Equal logits: p = 1/4 each, running sums 0.25, 0.5, 0.75, 1 (exact), so row b's id
    # is the first i with r_b <= (i + 1) / 4.
    r = P.unit_f32(P.words(1234, 6))
    want = [min(i for i in range(4) if rb <= (i + 1) / 4) for rb in r]
    assert _sample(np.zeros((6, 4), F)).tolist() == want
    assert sorted(set(want)) != [want[0]]     # the rows really differ


def test_seed_zero_is_deadbeef():
    x = np.random.default_rng(0).standard_normal((5, 9)).astype(F)
    assert np.array_equal(_sample(x, seed=0), _sample(x, seed=0xDEADBEEF))
    assert not np.array_equal(_sample(x, seed=0), _sample(x, seed=1))


def test_greedy_edges_pick_the_argmax():
    x = np.random.default_rng(1).standard_normal((7, 13)).astype(F)
    arg = np.argmax(x, axis=1).astype(F)
    assert np.array_equal(_sample(x, top_k=1), arg)
    assert np.array_equal(_sample(x, top_p=0.0), arg)      # the first token is always kept
    # temperature 0 is clamped to 1e-6 (no argmax path): logits 1e-6 apart or more
    # become a one-hot softmax
    assert np.array_equal(_sample(x, temperature=0.0, seed=5), arg)


def test_top_k_keeps_every_tie_at_the_cut():
    # k = 1 with two equal maxima: both stay, each with p = 1/2
    r = P.unit_f32(P.words(1234, 8))
    want = [1 if rb <= 0.5 else 3 for rb in r]
    assert _sample(np.tile(F([0, 5, 1, 5]), (8, 1)), top_k=1).tolist() == want


def test_top_p_keeps_the_first_tokens_reaching_p():
    logits = np.log(F([0.1, 0.4, 0.2, 0.3]))
    p = S.probabilities(logits, 0, 0.65, F(1))
    assert (p[[0, 2]] == 0).all() and abs(p[1] - 4 / 7) < 1e-6    # 0.4 + 0.3 >= 0.65
    p = S.probabilities(logits, 0, 0.7, F(1))
    assert np.count_nonzero(p) in (2, 3)    # 0.4 + 0.3 rounds in f32 either side of 0.7
    assert np.count_nonzero(S.probabilities(logits, 0, 1.0, F(1))) == 4
    assert np.count_nonzero(S.probabilities(logits, 0, np.nan, F(1))) == 4   # NaN: off


def test_temperature_sharpens_and_flattens():
    logits = F([0.0, 1.0])
    hot, cold = S.probabilities(logits, 0, 1.0, F(10)), S.probabilities(logits, 0, 1.0, F(0.1))
    assert hot[1] < 0.53 and cold[1] > 0.9999
    assert S.clamp_temperature(np.nan) == S.clamp_temperature(-2.0) == F(1e-6)


def test_sample_edges():
    assert _sample(F([3.0])).tolist() == [0.0]
    assert _sample(np.zeros((0, 4), F), top_k=2).shape == (0,)
    assert _sample(np.zeros((2, 0), F)).tolist() == [0.0, 0.0]      # RLX: vocab 0 gives 0
    with pytest.raises(Exception, match="NaN"):
        _sample(F([[1, np.nan, 0]]), top_k=2)
    g = Graph("bad")
    x = g.input("x", [2, 3, 4])
    with pytest.raises(Exception, match="C2"):
        g.op("Sample", [x], shape=Shape([2], "f32"), top_k=0, top_p=1.0, temperature=1.0,
             seed=1)


# ── passes honour NONDETERMINISTIC ──────────────────────────────────────────

def test_constant_folding_never_folds_the_random_kinds(monkeypatch):
    from rlx_ref.passes.fold_constants import fold_constants

    g = Graph("fold")
    c = g.constant(np.array([[0.0, 1.0, 2.0]], F))
    s = g.op("Sample", [c], shape=Shape([1], "f32"), top_k=0, top_p=1.0, temperature=1.0,
             seed=3)
    u = g.op("RngUniform", [c], shape=Shape([1, 3], "f32"), low=0.0, high=1.0, key=2)
    g.set_outputs([s, u])
    # Even a kind wrongly marked foldable stays when it is NONDETERMINISTIC.
    for kind in ("Sample", "RngUniform"):
        monkeypatch.setattr(get(kind), "caps", Caps.NONDETERMINISTIC | Caps.CONST_FOLDABLE)
    folded = fold_constants(g)
    assert [n.kind for n in folded.nodes if n.id in folded.outputs] == ["Sample", "RngUniform"]
    monkeypatch.setattr(get("Sample"), "caps", Caps.CONST_FOLDABLE)    # the guard is the cap
    assert get("Sample").kind not in [n.kind for n in fold_constants(g).nodes]
