"""The programs of the fused kinds: each kind's RLX ``unfuse`` decomposition, written once.

``form(e, attrs, *operands)`` emits primitive registry ops through an emitter (see
``_fused_emit``): on arrays it is the kind's oracle, on a graph its decomposition. The
step order, operand order and intermediate dtypes follow RLX's
``rlx-fusion/src/unfuse/{mod,fused}.rs`` and ``DecomposeFusionRegions``.
"""
from __future__ import annotations

import numpy as np

from .region import ElementwiseRegionAttrs

BHSD = (0, 2, 1, 3)     # [B, S, H, D] <-> [B, H, S, D]


def bias_add(e, y, bias):
    """``y + Expand(bias, dims(y))``: RLX materializes the bias broadcast first."""
    return e.op("Binary", (y, e.op("Expand", (bias,), target_shape=e.dims(y))), op="Add")


def reduce_to(e, t, target: tuple):
    """Sum ``t`` over the axes ``target`` broadcasts along, laid out as ``target``."""
    dims = e.dims(t)
    lead = len(dims) - len(target)
    axes = list(range(lead)) + [lead + i for i, n in enumerate(target)
                                if n == 1 and dims[lead + i] != 1]
    if axes:
        t = e.op("Reduce", (t,), op="Sum", axes=tuple(axes), keep_dim=True)
    if e.dims(t) != tuple(target):
        t = e.op("Reshape", (t,), new_shape=tuple(target))
    return t


def flat(e, t):
    return e.op("Reshape", (t,), new_shape=(-1,))


# ── matmul / conv epilogues ───────────────────────────────────────────────

def matmul_bias_act(e, a, x, w, bias):
    """MatMul → Add(Expand(bias)) → [Activation]."""
    y = bias_add(e, e.op("MatMul", (x, w)), bias)
    return e.op("Activation", (y,), op=a.activation) if a.activation else y


def matmul_residual(e, a, lhs, rhs, residual):
    """MatMul → Add(residual) (RLX's unfuse of FusedMatMulResidual)."""
    return e.op("Binary", (e.op("MatMul", (lhs, rhs)), residual), op="Add")


def conv_bias_act(e, a, x, w, bias, *residual):
    """Conv → Add(Expand(Reshape(bias, [1, C, 1...]))) → [Add(residual)] → [Activation]."""
    y = e.op("Conv", (x, w), kernel_size=a.kernel_size, stride=a.stride, padding=a.padding,
             dilation=a.dilation, groups=a.groups)
    dims = e.dims(y)
    b = e.op("Reshape", (bias,), new_shape=(1, dims[1]) + (1,) * (len(dims) - 2))
    y = bias_add(e, y, b)
    if residual:
        y = e.op("Binary", (y, residual[0]), op="Add")
    return e.op("Activation", (y,), op=a.activation) if a.activation else y


# ── residual + norm ───────────────────────────────────────────────────────

def _residual(e, a, x, res, rest):
    r = e.op("Binary", (x, res), op="Add")
    if a.has_bias:
        r = bias_add(e, r, rest[0])
        rest = rest[1:]
    return r, rest


def residual_ln(e, a, x, res, *rest):
    """Add(x, residual) → [Add(Expand(bias))] → LayerNorm(axis -1)."""
    r, (gamma, beta) = _residual(e, a, x, res, rest)
    return e.op("LayerNorm", (r, gamma, beta), axis=-1, eps=a.eps)


def residual_rms(e, a, x, res, *rest):
    """Add(x, residual) → [Add(Expand(bias))] → RmsNorm(axis -1)."""
    r, (gamma, beta) = _residual(e, a, x, res, rest)
    return e.op("RmsNorm", (r, gamma, beta), axis=-1, eps=a.eps)


# ── SwiGLU ────────────────────────────────────────────────────────────────

def swiglu(e, a, packed):
    """Narrow the last axis into halves, Silu(gate) · up, [Cast]."""
    dims = e.dims(packed)
    axis, n = len(dims) - 1, dims[-1] // 2
    lo = e.op("Narrow", (packed,), axis=axis, start=0, len=n)
    hi = e.op("Narrow", (packed,), axis=axis, start=n, len=n)
    gate, up = (lo, hi) if a.gate_first else (hi, lo)
    y = e.op("Binary", (e.op("Activation", (gate,), op="Silu"), up), op="Mul")
    return e.op("Cast", (y,), to=a.cast_to) if a.cast_to is not None else y


# ── attention block and transformer layer ────────────────────────────────

def _heads(e, t, b, s, nh, dh):
    r = e.op("Reshape", (t,), new_shape=(b, s, nh, dh))
    return e.op("Transpose", (r,), perm=BHSD)


def attend(e, hidden, qkv_w, qkv_b, out_w, out_b, mask, nh, dh, rope=None):
    """QKV MatMul [+ bias] → Narrow ×3 → [B, H, S, D] → [Rope] → Attention(Custom) →
    [B, S, H·D] → output MatMul [+ bias] (RLX's ``expand_attention_block``)."""
    b, s = e.dims(hidden)[:2]
    hd = nh * dh
    qkv = e.op("MatMul", (hidden, qkv_w))
    if qkv_b is not None:
        qkv = bias_add(e, qkv, qkv_b)
    q, k, v = (_heads(e, e.op("Narrow", (qkv,), axis=2, start=i * hd, len=hd), b, s, nh, dh)
               for i in range(3))
    if rope is not None:
        cos, sin = rope
        q, k = (e.op("Rope", (t, cos, sin), head_dim=dh, n_rot=dh, style="NeoX")
                for t in (q, k))
    att = e.op("Attention", (q, k, v, mask), num_heads=nh, head_dim=dh, mask_kind="Custom")
    back = e.op("Reshape", (e.op("Transpose", (att,), perm=BHSD),), new_shape=(b, s, hd))
    out = e.op("MatMul", (back, out_w))
    return bias_add(e, out, out_b) if out_b is not None else out


def attention_block(e, a, hidden, qkv_w, out_w, mask, *rest):
    """Operands: hidden, qkv_w, out_w, mask, [qkv_b, out_b], [rope_cos, rope_sin]."""
    qkv_b = out_b = rope = None
    if a.has_bias:
        (qkv_b, out_b), rest = rest[:2], rest[2:]
    if a.has_rope:
        rope = tuple(rest[:2])
    return attend(e, hidden, qkv_w, qkv_b, out_w, out_b, mask, a.num_heads, a.head_dim, rope)


def layer_operands(e, a, ops):
    """The 14 named operands of FusedTransformerLayer (None where absent; the two
    LayerNorm betas of the bias-free form become zero Constants, as RLX's unfuse does)."""
    if a.has_bias:
        names = ("hidden", "qkv_w", "qkv_b", "out_w", "out_b", "ln1_g", "ln1_b", "fc1_w",
                 "fc1_b", "fc2_w", "fc2_b", "ln2_g", "ln2_b", "mask")
        return dict(zip(names, ops))
    names = ("hidden", "qkv_w", "out_w", "ln1_g", "fc1_w", "fc2_w", "ln2_g", "mask")
    got = dict(zip(names, ops))
    zero = e.constant(np.zeros(e.dims(ops[0])[-1]), e.dtype(ops[0]))
    got.update(qkv_b=None, out_b=None, fc1_b=None, fc2_b=None, ln1_b=zero, ln2_b=zero)
    return got


def transformer_layer(e, a, *ops):
    """Post-norm BERT layer: h1 = LN(attn(h) + h); out = LN(FFN(h1) + h1)."""
    o = layer_operands(e, a, ops)
    att = attend(e, o["hidden"], o["qkv_w"], o["qkv_b"], o["out_w"], o["out_b"], o["mask"],
                 a.num_heads, a.head_dim)
    r1 = e.op("Binary", (att, o["hidden"]), op="Add")
    h1 = e.op("LayerNorm", (r1, o["ln1_g"], o["ln1_b"]), axis=-1, eps=a.eps1)
    f = e.op("MatMul", (h1, o["fc1_w"]))
    if o["fc1_b"] is not None:
        f = bias_add(e, f, o["fc1_b"])
    f = e.op("MatMul", (e.op("Activation", (f,), op=a.activation), o["fc2_w"]))
    if o["fc2_b"] is not None:
        f = bias_add(e, f, o["fc2_b"])
    r2 = e.op("Binary", (f, h1), op="Add")
    return e.op("LayerNorm", (r2, o["ln2_g"], o["ln2_b"]), axis=-1, eps=a.eps2)


# ── DiT modulation ────────────────────────────────────────────────────────

def _plain_norm(e, a, x):
    """The affine-free norm over the last axis (unit gamma, zero beta)."""
    d, dt = e.dims(x)[-1], e.dtype(x)
    ones, zeros = e.constant(np.ones(d), dt), e.constant(np.zeros(d), dt)
    kind = "LayerNorm" if a.norm == "LayerNorm" else "RmsNorm"
    return e.op(kind, (x, ones, zeros), axis=-1, eps=a.eps), ones, zeros


def _one_plus(e, scale):
    return e.op("Binary", (scale, e.constant(1.0, e.dtype(scale))), op="Add")


def ada_layer_norm(e, a, x, scale, shift):
    """norm(x) · (1 + scale) + shift."""
    n, _, _ = _plain_norm(e, a, x)
    m = e.op("Binary", (n, _one_plus(e, scale)), op="Mul")
    return e.op("Binary", (m, shift), op="Add")


def ada_layer_norm_backward(e, a, x, scale, shift, dy):
    """[dx ∥ dscale ∥ dshift]: dshift = Σ dy, dscale = Σ dy·n over the broadcast axes;
    dx is the norm's input gradient of dn = dy · (1 + scale)."""
    n, ones, zeros = _plain_norm(e, a, x)
    target = e.dims(scale)
    dshift = reduce_to(e, dy, target)
    dscale = reduce_to(e, e.op("Binary", (dy, n), op="Mul"), target)
    dn = e.op("Binary", (dy, _one_plus(e, scale)), op="Mul")
    if a.norm == "LayerNorm":
        dx = e.op("LayerNormBackwardInput", (x, ones, dn), axis=-1, eps=a.eps)
    else:
        dx = e.op("RmsNormBackwardInput", (x, ones, zeros, dn), axis=-1, eps=a.eps)
    return e.op("Concat", [flat(e, t) for t in (dx, dscale, dshift)], axis=0)


def gated_residual(e, a, x, y, gate):
    """x + gate · y."""
    return e.op("Binary", (x, e.op("Binary", (gate, y), op="Mul")), op="Add")


def gated_residual_backward(e, a, x, y, gate, dy):
    """[dx ∥ dy ∥ dgate] = [dy ∥ dy · gate ∥ Σ dy · y over gate's broadcast axes]."""
    dyy = e.op("Binary", (dy, gate), op="Mul")
    dgate = reduce_to(e, e.op("Binary", (dy, y), op="Mul"), e.dims(gate))
    return e.op("Concat", [flat(e, t) for t in (dy, dyy, dgate)], axis=0)


# ── region kinds (DecomposeFusionRegions) ─────────────────────────────────

def transform_region(e, a, x):
    """One ResizeNearest2x per step, each reading the previous one's result."""
    for _ in a.steps:
        x = e.op("ResizeNearest2x", (x,))
    return x


def batch_region(e, a, *slices):
    """Per slice: [ResizeNearest2x] → a one-input ElementwiseRegion; Concat on axis 0."""
    inner = ElementwiseRegionAttrs(a.chain, 1, a.scalar_input_mask, a.input_modulus,
                                   "None", 0)
    outs = []
    for x in slices:
        if a.prologue == "ResizeNearest2x":
            x = e.op("ResizeNearest2x", (x,))
        outs.append(e.op("ElementwiseRegion", (x,), inner))
    return e.op("Concat", outs, axis=0)
