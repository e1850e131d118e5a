"""Shared helpers for the oracle self-checks: graph building, running and comparing,
inputs and strategies, and the decompositions into other registry ops that the checks in
tests/test_oracle_decompositions.py and tests/test_oracle_identities.py compare with.

Every check builds ONE graph holding both sides (the op under test and its decomposition
into other registry ops) and runs it on the oracle, plain and with ``float64=True``, so the
two sides share inputs and run through the same interpreter. The per-op tests
(tests/test_ops_*.py) compare ops with numpy and loops; these compare ops with each other.
Constants that are not exact in f32 (1/√2, π, 0.044715) are computed in the graph from exact
ones (Rsqrt(2), 4·Atan(1), 44715/10⁶), so the float64 run sees the f64 value on both sides.

A plain module, not collected (no test functions, leading underscore): the test files
import it as ``from _oracle_graphs import ...``; tests/ has no __init__.py, so pytest's
default "prepend" import mode puts tests/ on sys.path.
"""
from fractions import Fraction

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rlx_ref
from rlx_ref import DType, interpret

FAST = settings(max_examples=25, deadline=None)
# (rtol, atol) for ops that round differently on each side (a few roundings apart)
TOL = {False: (5e-6, 2e-6), True: (1e-12, 1e-13)}
RNG = np.random.default_rng(2024)


def build(fn, *arrays, name="selfcheck"):
    """A verified graph with inputs x0.. shaped like ``arrays``; ``fn(g, *xs)`` gives outputs."""
    with rlx_ref.graph(name) as g:
        xs = [g.input(f"x{i}", a.shape, DType.of(a)) for i, a in enumerate(arrays)]
        g.output(*fn(g, *xs))
    return g.graph


def run(fn, *arrays, float64=False):
    """Outputs of ``build(fn, *arrays)`` on the oracle."""
    feeds = {f"x{i}": np.asarray(a) for i, a in enumerate(arrays)}
    return interpret(build(fn, *arrays), feeds, float64=float64)


def same_bits(got, want, signed_zero=True) -> bool:
    """Bit for bit (-0 vs +0 counts unless ``signed_zero`` is off), except NaN sign and
    payload, which IEEE leaves open."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind == "f":
        nan = np.isnan(got)
        if not (nan == np.isnan(want)).all():
            return False
        got, want = np.where(nan, np.nan, got), np.where(nan, np.nan, want)
        if not signed_zero:
            got, want = got + 0, want + 0          # -0 + 0 is +0
    return got.tobytes() == want.tobytes()


def agree(fn, *arrays, scale=1.0, exact=False, signed_zero=True):
    """``fn`` returns (op, decomposition); they agree in both interpreter modes (``exact``:
    ``same_bits``, else within ``TOL`` times ``scale``)."""
    for f64 in (False, True):
        got, want = run(fn, *arrays, float64=f64)
        assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
        if exact:
            assert same_bits(got, want, signed_zero), f"float64={f64}: {got} != {want}"
        else:
            rtol, atol = TOL[f64]
            np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale,
                                       err_msg=f"float64={f64}")


def ratio(g, p, q, like):
    """p/q computed in the graph from two exact literals (rounded once, in the run dtype)."""
    return g.scalar(p, like.dtype) / g.scalar(q, like.dtype)


def f32(*shape, spread=2.0):
    return (RNG.standard_normal(shape) * spread).astype(np.float32)


shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)


def iota(g, n, shape):
    """0..n-1 as an f32 Constant reshaped to ``shape``."""
    return g.constant(np.arange(n, dtype=np.float32).reshape(shape))


def body_graph(name, fn, *shapes):
    """A body graph with one f32 Input per shape (bound in order); ``fn`` gives outputs."""
    with rlx_ref.graph(name) as g:
        ins = [g.input(f"{name}{i}", s) for i, s in enumerate(shapes)]
        out = fn(g, *ins)
        g.output(*(out if isinstance(out, (list, tuple)) else [out]))
    return g.graph


# ── decompositions: softmax, normalization, attention ─────────────────────

def softmax_parts(x, axis):
    """Exp(x - ReduceMax) / ReduceSum, the max and sum kept as size-1 axes."""
    e = (x - x.max(axis, keep_dim=True)).exp()
    return e / e.sum(axis, keep_dim=True)


def along(v, axis, rank):
    """A [C] vector reshaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    return v.reshape([v.dims[0]] + [1] * (rank - 1 - axis))


def layer_norm_parts(x, gamma, beta, axis, eps, rms=False):
    """(x - mean) · Rsqrt(var + eps) · gamma + beta from Reduce/Binary/Activation."""
    ax = axis % len(x.dims)
    d = x if rms else x - x.mean(ax, keep_dim=True)
    var = (d * d).mean(ax, keep_dim=True)
    y = d * (var + eps).rsqrt()
    return y * along(gamma, ax, len(x.dims)) + along(beta, ax, len(x.dims))


def visible(g, mask_kind, s_q, s_k):
    """[S_q, S_k] bool from iota compares: queries sit at the end of the keys."""
    ki, qi = iota(g, s_k, (1, s_k)), iota(g, s_q, (s_q, 1)) + float(max(s_k - s_q, 0))
    if mask_kind == "Causal":
        return ki <= qi
    if isinstance(mask_kind, tuple):                       # SlidingWindow(w)
        return (ki <= qi) & (ki >= qi - float(mask_kind[1]))
    return None


def attention_parts(g, q, k, v, mask, a, s_q, s_k):
    """softmax(cap(QKᵀ·scale + bias) with hidden keys set to -1e9)·V on [B, H, S, D]."""
    b, hkv = k.dims[0], k.dims[1]
    if hkv != a.num_heads:                                 # GQA: repeat each K/V head
        grp = a.num_heads // hkv
        k, v = (t.reshape(b, hkv, 1, s_k, t.dims[3])
                .expand(target_shape=(b, hkv, grp, s_k, t.dims[3]))
                .reshape(b, a.num_heads, s_k, t.dims[3]) for t in (k, v))
    scale = (g.scalar(a.score_scale, q.dtype) if a.score_scale is not None
             else g.scalar(a.head_dim, q.dtype).rsqrt())
    s = (q @ k.transpose(0, 1, 3, 2)) * scale
    if a.mask_kind == "Bias":
        s = s + mask
    if a.attn_logit_softcap is not None:
        cap = g.scalar(a.attn_logit_softcap, q.dtype)
        s = cap * (s / cap).tanh()
    fill = g.scalar(-1e9, q.dtype)
    allowed = visible(g, a.mask_kind, s_q, s_k)
    if allowed is not None:
        s = g.where_(allowed, s, fill)
    if a.mask_kind == "Custom":                            # NaN < 0.5 is false: NaN keeps
        s = g.where_(mask.reshape(b, 1, 1, s_k) < 0.5, fill, s)
    return s.softmax(-1) @ v


def att(mask="None", h=2, d=4, vd=None, scale=None, cap=None):
    return rlx_ref.opdef("Attention").make_attrs(
        num_heads=h, head_dim=d, v_head_dim=vd, mask_kind=mask, score_scale=scale,
        attn_logit_softcap=cap)


# ── Fma: the pair and exact references ────────────────────────────────────

def fma_pair(g, a, b, c):
    return [g.op("Fma", a, b, c), a * b + c]


def exact_fma(a, b, c):
    return Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))


def ulp(x, dtype):
    x = np.abs(np.asarray(x, dtype))
    return (np.nextafter(x, np.asarray(np.inf, dtype)) - x).astype(np.float64)


def finite(dtype, lim):
    return st.floats(-lim, lim, width=np.dtype(dtype).itemsize * 8, allow_subnormal=False)


def correctly_rounded_f32(q: Fraction) -> np.float32:
    """The f32 nearest to the rational ``q`` (ties to even), found among three neighbours."""
    r = np.float32(float(q))
    near = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    return min(near, key=lambda v: (abs(Fraction(float(v)) - q),
                                    int(np.array(v).view(np.uint32)) & 1))


# ── movement: Pad from other movement ops ─────────────────────────────────

def pad_axis(g, x, ax, before, after, mode):
    """One axis of Pad from Narrow / Reverse / Expand / Constant pieces and a Concat."""
    n, dims = x.dims[ax], list(x.dims)

    def piece(start, length):
        return x.narrow(axis=ax, start=start, len=length)
    if mode == "Reflect":
        lo = piece(1, before).reverse(axes=(ax,))
        hi = piece(n - 1 - after, after).reverse(axes=(ax,))
    elif mode == "Replicate":
        lo, hi = (piece(e, 1).expand(target_shape=dims[:ax] + [k] + dims[ax + 1:])
                  for e, k in ((0, before), (n - 1, after)))
    elif mode == "Circular":
        lo, hi = piece(n - before, before), piece(0, after)
    else:
        lo, hi = (g.constant(np.full(dims[:ax] + [k] + dims[ax + 1:], mode[1], np.float32))
                  for k in (before, after))
    return g.concat([lo, x, hi], axis=ax)


# ── fused regions: random chains and their standalone ops ─────────────────

REGION_ACTS = ["Exp", "Tanh", "Sigmoid", "Abs", "Neg", "Sqrt", "Gelu", "Floor", "Relu"]


@st.composite
def chains(draw):
    """A random well-typed chain over 3 float inputs; ('f' | 'b') types keep it valid."""
    from rlx_ref.ops.region import Input, Step, activation, binary, compare, where

    vals, steps = [("f", Input(i)) for i in range(3)], []
    for j in range(draw(st.integers(1, 6))):
        fs = [v for t, v in vals if t == "f"]
        bs = [v for t, v in vals if t == "b"]
        kinds = ["act", "bin", "cmp"] + (["where"] * 2 if bs else [])
        kind = draw(st.sampled_from(kinds))
        pick = st.sampled_from(fs)
        if kind == "act":
            steps.append(activation(draw(st.sampled_from(REGION_ACTS)), draw(pick)))
        elif kind == "bin":
            steps.append(binary(draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Max",
                                                      "Min"])), draw(pick), draw(pick)))
        elif kind == "cmp":
            steps.append(compare(draw(st.sampled_from(["Lt", "Ge", "Eq", "Ne"])),
                                 draw(pick), draw(pick)))
        else:
            steps.append(where(draw(st.sampled_from(bs)), draw(pick), draw(pick)))
        vals.append(("b" if kind == "cmp" else "f", Step(j)))
    return steps


def unfused_node(g, step, ins, steps):
    """The standalone op of one chain step; operands are region inputs or earlier steps."""
    tag, args = step
    val = [(steps if a[0] == "Step" else ins)[a[1]] if isinstance(a, tuple) else a
           for a in args]
    if tag == "Activation":
        return val[1].activation(val[0])
    if tag == "Where":
        return g.where_(*val)
    return g.op(tag, val[1], val[2], op=val[0])
