"""AxialRope2d: the oracle against a literal port of RLX's per-token loop, rotation
invariants and the verifier's payload rules."""
import math

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.attention_axial import AxialRope2dAttrs
from rlx_ref.ops.single import run_single, verify_single

RNG = np.random.default_rng(5)


def literal(x, a):
    """RLX's apply_axial_rope2d, token by token and pair by pair (f64)."""
    q4, half, rep = a.head_dim // 4, a.head_dim // 2, max(a.repeat_factor, 1)
    out = x.copy()
    for b in range(x.shape[0]):
        for tok in range(x.shape[1]):
            pos = tok // rep
            tx, ty = pos % a.end_x, pos // a.end_x
            for h in range(a.num_heads):
                base = h * a.head_dim
                for c in range(q4):
                    f = 1.0 / a.theta ** (4 * c / a.head_dim)
                    for off, t in ((0, tx), (half, ty)):
                        i0, i1 = base + off + 2 * c, base + off + 2 * c + 1
                        x0, x1 = x[b, tok, i0], x[b, tok, i1]
                        co, si = math.cos(t * f), math.sin(t * f)
                        out[b, tok, i0], out[b, tok, i1] = x0 * co - x1 * si, x0 * si + x1 * co
    return out


@pytest.mark.parametrize("a", [AxialRope2dAttrs(3, 2, 8, 2, 100.0),
                               AxialRope2dAttrs(2, 2, 12, 1, 10000.0, 3),
                               AxialRope2dAttrs(4, 1, 4, 3, 7.0, 0)])
def test_matches_literal_loop(a):
    seq = a.end_x * a.end_y * max(a.repeat_factor, 1)
    x = RNG.standard_normal((2, seq, a.num_heads * a.head_dim))
    got = run_single("AxialRope2d", a, x)
    np.testing.assert_allclose(got, literal(x, a), rtol=1e-12, atol=1e-12)


def test_rotation_keeps_pair_norms_and_token_zero():
    a = AxialRope2dAttrs(3, 3, 8, 2)
    x = RNG.standard_normal((1, 9, 16))
    y = run_single("AxialRope2d", a, x)
    pairs = lambda v: np.hypot(v[..., 0::2], v[..., 1::2])  # noqa: E731
    np.testing.assert_allclose(pairs(y), pairs(x), rtol=1e-12)
    np.testing.assert_allclose(y[:, 0], x[:, 0], rtol=0, atol=0)   # position (0, 0)


def test_f32_oracle_forms_angles_in_f32():
    a = AxialRope2dAttrs(64, 1, 4, 1, 10000.0)
    x = np.ones((1, 64, 4), np.float32)
    y = run_single("AxialRope2d", a, x)
    tx = np.arange(64, dtype=np.float32)
    np.testing.assert_allclose(y[0, :, 0], np.cos(tx) - np.sin(tx), atol=2e-6)


@pytest.mark.parametrize("a,shape,needle", [
    (AxialRope2dAttrs(2, 2, 6, 1), (1, 4, 6), "(C1)"),
    (AxialRope2dAttrs(2, 2, 4, 2), (1, 4, 4), "(C2)"),
    (AxialRope2dAttrs(2, 2, 4, 1), (1, 5, 4), "(C3)"),
    (AxialRope2dAttrs(2, 2, 4, 1), (4, 4), "(C2)"),
])
def test_verifier_rejects(a, shape, needle):
    msgs = verify_single("AxialRope2d", a, [Shape(shape, DType.F32)], Shape(shape, DType.F32))
    assert any(needle in m for m in msgs), msgs
