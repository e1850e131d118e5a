"""Oracle self-checks: fused ops == graphs of other registry ops.

Softmax, LayerNorm / RmsNorm / GroupNorm, Attention (masks, GQA, softcap), activations from
other activations, Fma (rounded once) and Clamp (Max then Min, signed zeros), movement ops
as other movement ops (Trilu, Tile, Pad, Slice, Expand), cumulative ops as prefix reduces
(Cumsum also as a triangular MatMul), DotGeneral as Transpose / Reshape / MatMul, and
ElementwiseRegion as its unfused chain. Each check builds ONE graph with both sides and runs
it on the oracle (most of them plain and with ``float64=True``); tests/_oracle_graphs.py
holds the shared helpers and most of the decompositions.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _oracle_graphs import (FAST, RNG, agree, along, att, attention_parts, chains,
                            correctly_rounded_f32, exact_fma, f32, finite, fma_pair, iota,
                            layer_norm_parts, pad_axis, ratio, run, shapes, softmax_parts, ulp,
                            unfused_node)


# ── Softmax ───────────────────────────────────────────────────────────────

@FAST
@given(st.data())
def test_softmax_is_exp_minus_reduce_max_over_reduce_sum(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.one_of(
        st.floats(-30, 30, width=32), st.sampled_from([np.inf, -np.inf, np.nan]))))
    # IEEE edge rows (all -inf, +inf, NaN) must come out NaN on both sides
    agree(lambda g, x: [x.softmax(axis), softmax_parts(x, axis)], x, scale=2)


@FAST
@given(st.data())
def test_softmax_rows_sum_to_one_and_are_shift_invariant(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    # dyadic values and an integer shift: x + c and (x + c) - max are exact, so the
    # shifted softmax must be bit for bit the same
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.integers(-160, 160))) / 8
    c = data.draw(st.integers(-10**6, 10**6))
    sm, sm_shift, total = run(lambda g, x: [x.softmax(axis), (x + float(c)).softmax(axis),
                                            x.softmax(axis).sum(axis)], x)
    np.testing.assert_allclose(total, 1.0, rtol=4e-16 * shape[axis] + 1e-15)
    assert sm_shift.tobytes() == sm.tobytes()


# ── normalization ─────────────────────────────────────────────────────────

@pytest.mark.parametrize("kind", ["LayerNorm", "RmsNorm"])
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 5), -1), ((2, 3, 4), 1),
                                         ((4, 2, 3), 0), ((2, 1, 6), -1)])
def test_axis_norms_are_reduce_binary_rsqrt_graphs(kind, shape, axis):
    x, gamma, beta = f32(*shape) + 1, f32(shape[axis]), f32(shape[axis])
    eps = float(np.float32(1e-3))         # the payload stores eps as f32

    def fn(g, x, gamma, beta):
        fused = getattr(x, "layer_norm" if kind == "LayerNorm" else "rms_norm")(
            gamma, beta, axis=axis, eps=eps)
        return [fused, layer_norm_parts(x, gamma, beta, axis, eps, kind == "RmsNorm")]
    agree(fn, x, gamma, beta, scale=4)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 2), 3), ((1, 4, 5), 2), ((2, 4, 3), 4),
                                           ((3, 5, 2), 1), ((1, 6), 2)])
def test_group_norm_is_reshape_then_reduce(shape, groups):
    x, gamma, beta = f32(*shape) - 1, f32(shape[1]), f32(shape[1])
    eps = float(np.float32(1e-5))

    def fn(g, x, gamma, beta):
        rows = x.reshape(shape[0], groups, -1)          # one row per (sample, group)
        d = rows - rows.mean(2, keep_dim=True)
        y = (d * ((d * d).mean(2, keep_dim=True) + eps).rsqrt()).reshape(shape)
        parts = y * along(gamma, 1, len(shape)) + along(beta, 1, len(shape))
        return [x.group_norm(gamma, beta, num_groups=groups, eps=eps), parts]
    agree(fn, x, gamma, beta, scale=4)


# ── Attention ─────────────────────────────────────────────────────────────

ATT_CASES = {   # id -> (attrs, B, H_kv, S_q, S_k)
    "none": (att(), 2, 2, 3, 5),
    "causal": (att("Causal"), 1, 2, 4, 4),
    "causal-kv-cache": (att("Causal"), 2, 2, 2, 5),        # S_k > S_q: queries at the end
    "causal-sq-gt-sk": (att("Causal"), 1, 2, 5, 3),        # no offset
    "window-1": (att(("SlidingWindow", 1)), 1, 2, 5, 5),
    "window-0-kv-cache": (att(("SlidingWindow", 0)), 1, 2, 2, 6),
    "window-2-softcap-mqa": (att(("SlidingWindow", 2), cap=1.5), 2, 1, 3, 6),
    "custom-all-hidden-nan": (att("Custom"), 2, 2, 3, 4),
    "bias-scale": (att("Bias", scale=0.3), 2, 2, 3, 4),
    "bias-softcap": (att("Bias", cap=0.75), 1, 2, 4, 3),
    "causal-gqa-v-head-dim-softcap": (att("Causal", h=4, vd=3, cap=5.0), 1, 2, 3, 4),
    "negative-scale-gqa": (att(h=6, d=2, scale=-1.25), 1, 3, 2, 3),
}


@pytest.mark.parametrize("a, b, hkv, s_q, s_k", ATT_CASES.values(), ids=ATT_CASES.keys())
def test_attention_is_matmul_transpose_softmax_where_graph(a, b, hkv, s_q, s_k):
    h, d, dv = a.num_heads, a.head_dim, a.v_head_dim or a.head_dim
    q, k, v = f32(b, h, s_q, d), f32(b, hkv, s_k, d), f32(b, hkv, s_k, dv)
    extra = []
    if a.mask_kind == "Custom":        # batch 0 hides every key (uniform weights), NaN keeps
        extra = [np.array([[0, 0.2, 0.49, 0], [1, 0.5, np.nan, 0]][:b], np.float32)]
    elif a.mask_kind == "Bias":
        extra = [f32(b, h, s_q, s_k)]

    def fn(g, q, k, v, *mask):
        parts = attention_parts(g, q, k, v, mask[0] if mask else None, a, s_q, s_k)
        return [g.op("Attention", q, k, v, *mask, **vars(a)), parts]
    agree(fn, q, k, v, *extra, scale=4)


# ── activations from other activations ────────────────────────────────────

def _gelu_tanh(g, x):
    pi = g.scalar(4, x.dtype) * g.scalar(1, x.dtype).atan()
    c = (g.scalar(2, x.dtype) / pi).sqrt()
    inner = c * (x + ratio(g, 44715, 10**6, x) * (x * x * x))
    return 0.5 * x * (1.0 + inner.tanh())


def _sign(g, x):
    one, zero = g.scalar(1, x.dtype), g.scalar(0, x.dtype)
    return g.where_(x > 0.0, one, g.where_(x < 0.0, -one, zero))


# name -> (decomposition, domain lim or (lo, hi)): both sides finite and well-conditioned
ACTIVATION_PARTS = {
    "Gelu": (lambda g, x: 0.5 * x * (1.0 + (x * g.scalar(2, x.dtype).rsqrt()).erf()), 8),
    "GeluApprox": (_gelu_tanh, 8),
    "Silu": (lambda g, x: x * x.sigmoid(), 30),
    "Mish": (lambda g, x: x * x.softplus().tanh(), 30),
    "HardSwish": (lambda g, x: x * (x + 3.0).clamp(min=0.0, max=6.0) / 6.0, 8),
    "HardSigmoid": (lambda g, x: (x / 6.0 + 0.5).clamp(min=0.0, max=1.0), 8),
    "Softplus": (lambda g, x: -(-x).log_sigmoid(), 80),
    "LogSigmoid": (lambda g, x: x.sigmoid().log(), 20),
    "Sigmoid": (lambda g, x: (1.0 + (-x).exp()).recip(), 30),
    "Tanh": (lambda g, x: 2.0 * (2.0 * x).sigmoid() - 1.0, 10),
    "Softsign": (lambda g, x: x / (1.0 + abs(x)), 50),
    "Elu": (lambda g, x: g.where_(x > 0.0, x, x.exp() - 1.0), 10),
    "Relu": (lambda g, x: g.op("Binary", x, g.scalar(0, x.dtype), op="Max"), 50),
    "Rsqrt": (lambda g, x: x.sqrt().recip(), (0, 50)),
    "Tan": (lambda g, x: x.sin() / x.cos(), 1.4),
    "Atan": (lambda g, x: g.op("Binary", x, g.scalar(1, x.dtype), op="Atan2"), 50),
    "Ceil": (lambda g, x: -(-x).floor(), 50),
    "Recip": (lambda g, x: 1.0 / x, 50),
    "Sign": (_sign, 50),
}


@pytest.mark.parametrize("name", list(ACTIVATION_PARTS))
def test_activation_is_its_decomposition(name):
    parts, lim = ACTIVATION_PARTS[name]
    lo, hi = lim if isinstance(lim, tuple) else (-lim, lim)
    x = np.concatenate([np.linspace(lo, hi, 41), RNG.uniform(lo, hi, 40), [0.0]])
    agree(lambda g, x: [x.activation(name), parts(g, x)], x.astype(np.float32), scale=4)


# ── Fma and Clamp ─────────────────────────────────────────────────────────

@FAST
@given(st.data())
def test_fma_rounds_once_and_mul_add_is_within_its_two_roundings(data):
    for dtype, lim in ((np.float64, 2.0**500), (np.float32, 2.0**60)):
        a, b, c = (data.draw(hnp.arrays(dtype, 6, elements=finite(dtype, lim)))
                   for _ in range(3))
        fused, unfused = run(fma_pair, a, b, c)
        want = np.array([float(exact_fma(*t)) for t in zip(a, b, c)])
        if dtype is np.float64:      # float(Fraction) is the correctly rounded f64
            np.testing.assert_array_equal(fused, want)
        else:                        # f64 sees the exact value to 2^-53 relative
            assert (np.abs(fused - want) <= 0.5 * ulp(want, dtype) + 2**-52 * abs(want)).all()
        # Mul + Add: one rounding of a·b (at most half its ulp) and one of the sum
        budget = 0.5 * ulp(a * b, dtype) + ulp(fused, dtype) + ulp(unfused, dtype)
        assert (np.abs(fused.astype(np.float64) - unfused) <= budget).all()


# A double-rounding trap: a·b + c = 1 + 2^-24 + 4688·2^-70 lies just above an f32 midpoint;
# rounding to f64 first lands ON the midpoint, which then ties to even and comes out one ulp
# low (1.0). The oracle rounds to odd in f64 before the final cast, so it gives 1 + 2^-23.
def test_f32_fma_is_correctly_rounded_at_a_double_rounding_case():
    a = np.float32((2**23 + 2896) * 2.0**-23)
    b = np.float32((2**23 - 2895) * 2.0**-47)          # a·b = 2^-24 + 4688·2^-70, exactly
    c = np.float32(1)
    want = correctly_rounded_f32(exact_fma(a, b, c))
    assert want == np.float32(1 + 2**-23)
    got = run(fma_pair, np.array([a]), np.array([b]), np.array([c]))[0][0]
    assert got == want, f"Fma({a!r}, {b!r}, {c!r}) = {got!r}, correctly rounded {want!r}"


@FAST
@given(st.data())
def test_clamp_is_min_of_max_including_nan_and_crossed_bounds(data):
    x = data.draw(hnp.arrays(np.float32, 8, elements=st.floats(width=32)))
    lo, hi = (float(np.float32(data.draw(st.floats(-4, 4)))) for _ in range(2))
    xi = data.draw(hnp.arrays(np.int32, 8, elements=st.integers(-9, 9)))
    lo_i, hi_i = sorted(data.draw(st.integers(-5, 5)) for _ in range(2))

    def fn(g, x, xi):
        mm = [g.op("Binary", g.op("Binary", t, g.scalar(lo_, t.dtype), op="Max"),
                   g.scalar(hi_, t.dtype), op="Min") for t, lo_, hi_ in
              ((x, lo, hi), (xi, lo_i, hi_i))]
        return [x.clamp(min=lo, max=hi), mm[0], xi.clamp(min=lo_i, max=hi_i), mm[1]]
    for f64 in (False, True):
        a, b, ai, bi = run(fn, x, xi, float64=f64)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(ai, bi)


# numpy's fmax/fmin return either zero for Max(+0, -0) depending on the SIMD lane (on an AVX
# machine, f32 arrays of 12 give -0 in the first 8 lanes and +0 in the last 4). The oracle
# orders -0 < +0 (IEEE 754-2019), so its result is a function of its inputs alone.
def test_max_and_min_of_signed_zeros_do_not_depend_on_position_or_dtype():
    for dt in (np.float32, np.float64):
        for n in (3, 12, 20):
            a, b = np.zeros(n, dt), np.full(n, -0.0, dt)
            mx, mn, rmax = run(lambda g, a, b, n=n: [
                g.op("Binary", a, b, op="Max"), g.op("Binary", a, b, op="Min"),
                g.concat([a.reshape(1, n), b.reshape(1, n)], axis=0).max(0)], a, b)
            assert not np.signbit(mx).any(), f"{dt.__name__}[{n}] Max(+0, -0): {mx}"
            assert np.signbit(mn).all(), f"{dt.__name__}[{n}] Min(+0, -0): {mn}"
            assert not np.signbit(rmax).any(), f"{dt.__name__}[{n}] Reduce Max: {rmax}"


# ── movement ops as other movement ops ────────────────────────────────────

@FAST
@given(st.data())
def test_trilu_is_a_mask_multiply_on_finite_values_and_a_where_always(data):
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=3, max_side=5))
    upper, diag = data.draw(st.booleans()), data.draw(st.integers(-5, 5))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-9, 9, width=32)))
    bad = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(width=32)))
    r, c = shape[-2:]

    def fn(g, x):
        off = iota(g, c, (1, c)) - iota(g, r, (r, 1))      # j - i
        keep = off >= float(diag) if upper else off <= float(diag)
        mask = keep.cast(x.dtype)
        return [x.trilu(upper=upper, diagonal=diag), x * mask,
                g.where_(keep, x, g.scalar(0, x.dtype))]
    for f64 in (False, True):
        tri, mul, _ = run(fn, x, float64=f64)
        np.testing.assert_array_equal(tri, mul)
        # NaN/inf in the zeroed region: Mul gives NaN there, Trilu (and Where) give 0
        tri, _, sel = run(fn, bad, float64=f64)
        np.testing.assert_array_equal(tri, sel)


@FAST
@given(st.data())
def test_tile_is_nested_concat(data):
    shape = data.draw(shapes)
    reps = data.draw(st.tuples(*[st.integers(0, 3)] * len(shape)))
    x = RNG.standard_normal(shape).astype(np.float32)

    def fn(g, x):
        y = x
        for ax, n in enumerate(reps):
            y = g.concat([y] * n, axis=ax) if n else y.narrow(axis=ax, start=0, len=0)
        return [x.tile(reps=reps), y]
    agree(fn, x, exact=True)


@FAST
@given(st.data())
def test_pad_is_concat_of_narrow_reverse_expand_or_constant_pieces(data):
    mode = data.draw(st.sampled_from(["Reflect", "Replicate", "Circular", ("Constant", -2.5)]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=5))
    limit = {"Reflect": lambda n: n - 1, "Circular": lambda n: n}.get(
        mode if isinstance(mode, str) else "", lambda n: 4)
    pads = tuple((data.draw(st.integers(0, limit(n))), data.draw(st.integers(0, limit(n))))
                 for n in shape)
    x = RNG.standard_normal(shape).astype(np.float32)

    def fn(g, x):
        y = x
        for ax, (b, a) in enumerate(pads):
            y = pad_axis(g, y, ax, b, a, mode)
        return [x.pad(pads=pads, mode=mode), y]
    agree(fn, x, exact=True)


@FAST
@given(st.data())
def test_slice_is_narrow_and_reverse_or_a_gather_of_strided_indices(data):
    n = data.draw(st.integers(1, 9))
    step = data.draw(st.sampled_from([1, -1, 2, -2, 3, -4]))
    start = data.draw(st.integers(0, n - 1))
    length = data.draw(st.integers(0, (start if step < 0 else n - 1 - start) // abs(step) + 1))
    x = RNG.standard_normal((3, n)).astype(np.float32)

    def fn(g, x):
        idx = g.constant(np.float32(start) + np.float32(step) * np.arange(length,
                                                                         dtype=np.float32))
        out = [x.slice(axis=1, start=start, len=length, step=step), x.gather(idx, axis=1)]
        if step == 1:
            out += [out[0], x.narrow(axis=1, start=start, len=length)]
        elif step == -1:      # x[start - len + 1 : start + 1] read backwards
            out += [out[0], x.narrow(axis=1, start=start - length + 1, len=length)
                    .reverse(axes=(1,))]
        return out
    outs = run(fn, x)
    for got, want in zip(outs[::2], outs[1::2]):
        np.testing.assert_array_equal(got, want)


@FAST
@given(st.data())
def test_expand_is_add_of_negative_zeros(data):
    shape = data.draw(shapes)
    target = tuple(data.draw(st.integers(1, 3)) if d == 1 else d for d in shape)
    target = data.draw(st.lists(st.integers(1, 3), max_size=2)) + list(target)
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(width=32)))
    # x + (-0.0) is x bit for bit, -0 and NaN included
    agree(lambda g, x: [x.expand(target_shape=tuple(target)),
                        x + g.constant(np.full(target, -0.0, np.float32))], x, exact=True)


# ── scans, DotGeneral, fused regions ──────────────────────────────────────

CUM = {"Cumsum": ("Sum", [-1.5, -0.25, 0.0, 0.5, 2.0, 3.75]),      # exact sums
       "CumProd": ("Prod", [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0]),     # exact products
       "CumMax": ("Max", [-np.inf, -1.0, 0.0, 2.5, np.nan])}       # NaN never wins


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("kind", list(CUM))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_cumulative_ops_are_prefix_reduces_and_cumsum_a_triangular_matmul(kind, exclusive,
                                                                          data):
    red, values = CUM[kind]
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.sampled_from(values)))
    n = shape[axis]

    def fn(g, x):
        # prefix j covers x[0..j] (inclusive) or x[0..j) (exclusive; empty → the identity)
        pre = [x.narrow(axis=axis, start=0, len=j + (not exclusive)).reduce(red, axis, True)
               for j in range(n)]
        out = [g.op(kind, x, axis=axis, exclusive=exclusive), g.concat(pre, axis=axis)]
        if kind == "Cumsum":
            tri = np.triu(np.ones((n, n), np.float32), 1 if exclusive else 0)   # i <= j
            perm = [a for a in range(len(shape)) if a != axis] + [axis]
            back = tuple(int(i) for i in np.argsort(perm))
            moved = [shape[a] for a in perm]                 # the scan axis last
            rows = x.transpose(perm).reshape(-1, n) @ g.constant(tri)
            out.append(rows.reshape(moved).transpose(back))
        return out
    for f64 in (False, True):
        got, *wants = run(fn, x, float64=f64)
        for want in wants:
            np.testing.assert_array_equal(got, want)


@FAST
@given(st.data())
def test_dot_general_is_transpose_reshape_matmul(data):
    n_b, n_c = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    n_fl, n_fr = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=n_b + n_c + n_fl + n_fr,
                               max_size=n_b + n_c + n_fl + n_fr))
    bd, cd = sizes[:n_b], sizes[n_b:n_b + n_c]
    fl, fr = sizes[n_b + n_c:n_b + n_c + n_fl], sizes[n_b + n_c + n_fl:]
    # axis placement: logical axis k (batch, contracting, free) sits at lp[k]; free axes
    # keep their order (DotGeneral emits them in operand order)
    lp, rp = (data.draw(st.permutations(range(n_b + n_c + k))) for k in (n_fl, n_fr))
    lp, rp = (p[:n_b + n_c] + sorted(p[n_b + n_c:]) for p in (lp, rp))
    lhs = RNG.standard_normal([(bd + cd + fl)[lp.index(i)] for i in range(len(lp))])
    rhs = RNG.standard_normal([(bd + cd + fr)[rp.index(i)] for i in range(len(rp))])
    attrs = {"lhs_batch": tuple(lp[:n_b]), "rhs_batch": tuple(rp[:n_b]),
             "lhs_contracting": tuple(lp[n_b:n_b + n_c]),
             "rhs_contracting": tuple(rp[n_b:n_b + n_c])}
    nb, nc = math.prod(bd), math.prod(cd)

    def fn(g, a, b):
        am = a.transpose(lp).reshape(nb, nc, math.prod(fl)).transpose(0, 2, 1)   # [B, M, K]
        bm = b.transpose(rp).reshape(nb, nc, math.prod(fr))                      # [B, K, N]
        return [g.op("DotGeneral", a, b, **attrs), (am @ bm).reshape(bd + fl + fr)]
    agree(fn, lhs.astype(np.float32), rhs.astype(np.float32), scale=4)


@FAST
@given(chains(), st.data())
def test_elementwise_region_is_its_unfused_chain_with_trailing_and_scalar_inputs(chain, data):
    from rlx_ref.ops.region import encode_region

    special = st.one_of(st.floats(-4, 4, width=32), st.sampled_from([0.0, -0.0, np.inf,
                                                                      -np.inf, np.nan]))
    xs = [data.draw(hnp.arrays(np.float32, s, elements=special)) for s in ((3, 4), (4,), ())]

    def fn(g, *ins):
        attrs = encode_region(chain, [i.shape for i in ins])
        steps = []
        for step in chain:
            steps.append(unfused_node(g, step, ins, steps))
        return [g.op("ElementwiseRegion", *ins, **vars(attrs)),
                steps[-1] if steps[-1].dims == (3, 4) else
                steps[-1].expand(target_shape=(3, 4))]
    # signed_zero off: Max/Min of ±0 depends on the element's position (see the test
    # test_max_and_min_of_signed_zeros_do_not_depend_on_position_or_dtype)
    agree(fn, *xs, exact=True, signed_zero=False)
