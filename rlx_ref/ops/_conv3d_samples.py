"""Samples of the NCDHW kinds: Conv3d, ConvTranspose3d, Interpolate3d and the 3-D backward
kinds. Volumes stay at a few hundred elements; hand-computed cases carry ``expect``."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .backward_conv3d import Conv3dBackwardAttrs, MaxPool3dBackwardAttrs
from .conv3d import Conv3dAttrs, ConvTranspose3dAttrs, Interpolate3dAttrs, conv3d_geometry
from .opdef import Sample

_F = np.float32


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(_F)


def conv3d_samples(rng):
    A = Conv3dAttrs
    box = np.ones((1, 1, 2, 2, 2), _F)
    x27 = np.arange(27, dtype=_F).reshape(1, 1, 3, 3, 3)
    return [
        # a 2x2x2 box sum over 0..26: window (0,0,0) holds 0+1+3+4+9+10+12+13 = 52
        Sample((x27, box), A(), tags=("hand",),
               expect=np.array([52, 60, 76, 84, 124, 132, 148, 156], _F).reshape(
                   1, 1, 2, 2, 2)),
        # 1x1x1 kernel with padding 1: a zero border around a scaled copy
        Sample((np.ones((1, 1, 1, 1, 1), _F), np.full((1, 1, 1, 1, 1), 3, _F)),
               A(padding=(1, 0, 1)), tags=("hand", "padding"),
               expect=np.array([0, 0, 0, 0, 3, 0, 0, 0, 0], _F).reshape(1, 1, 3, 1, 3)),
        Sample((_f32(rng, 2, 2, 4, 3, 5), _f32(rng, 3, 2, 2, 2, 3)), A(),
               tags=("batch", "odd")),
        Sample((_f32(rng, 1, 2, 5, 5, 4), _f32(rng, 2, 2, 3, 3, 2)),
               A((2, 1, 2), (1, 1, 0), (1, 2, 1)), tags=("stride", "padding", "dilation")),
        Sample((_f32(rng, 1, 4, 3, 3, 3), _f32(rng, 4, 2, 2, 1, 2)), A(groups=2),
               tags=("groups",)),
        Sample((_f32(rng, 1, 2, 4, 4, 4), _f32(rng, 2, 1, 3, 3, 3)),
               A((2, 2, 2), (1, 1, 1), groups=2), tags=("groups", "stride", "floor")),
        Sample((_f32(rng, 0, 1, 2, 2, 2), _f32(rng, 1, 1, 1, 1, 1)), A(), tags=("empty",)),
    ]


def conv_transpose3d_samples(rng):
    A = ConvTranspose3dAttrs
    one = np.ones((1, 1, 1, 1, 1), _F)
    return [
        # one input voxel stamps the kernel: the output is the 2x2x2 weight itself
        Sample((np.full((1, 1, 1, 1, 1), 2, _F), np.arange(8, dtype=_F).reshape(
            1, 1, 2, 2, 2)), A(), tags=("hand",),
            expect=2 * np.arange(8, dtype=_F).reshape(1, 1, 2, 2, 2)),
        # stride 2 spreads a 1x1x1 kernel out, leaving zeros between the voxels
        Sample((np.array([1, 2], _F).reshape(1, 1, 1, 1, 2), 3 * one), A((1, 1, 2)),
               tags=("hand", "stride"), expect=np.array([3, 0, 6], _F).reshape(1, 1, 1, 1, 3)),
        Sample((_f32(rng, 2, 2, 2, 3, 2), _f32(rng, 2, 3, 2, 2, 2)), A(), tags=("batch",)),
        Sample((_f32(rng, 1, 2, 3, 2, 3), _f32(rng, 2, 2, 3, 2, 3)),
               A((2, 2, 1), (1, 0, 1), (1, 1, 2), (1, 1, 0)),
               tags=("stride", "padding", "dilation", "output_padding")),
        Sample((_f32(rng, 1, 4, 2, 2, 2), _f32(rng, 4, 1, 2, 2, 2)), A((2, 2, 2), groups=2),
               tags=("groups", "stride")),
        Sample((_f32(rng, 0, 2, 2, 1, 2), _f32(rng, 2, 1, 1, 1, 1)), A(), tags=("empty",)),
    ]


def interpolate3d_samples(rng):
    A = Interpolate3dAttrs
    x = np.arange(8, dtype=_F).reshape(1, 1, 2, 2, 2)
    return [
        Sample((x,), A((4, 4, 4)), tags=("hand", "upsample"),
               expect=x.repeat(2, axis=2).repeat(2, axis=3).repeat(2, axis=4)),
        # 5 -> 2 picks floor(0·5/2) = 0 and floor(1·5/2) = 2
        Sample((np.arange(5, dtype=_F).reshape(1, 1, 1, 1, 5),), A((1, 1, 2)),
               tags=("hand", "downsample"), expect=np.array([0, 2], _F).reshape(1, 1, 1, 1, 2)),
        Sample((_f32(rng, 2, 3, 3, 2, 5),), A((5, 3, 2)), tags=("mixed", "odd")),
        Sample((_f32(rng, 1, 2, 1, 3, 1),), A((3, 7, 2)), tags=("size-1", "prime")),
        Sample((_f32(rng, 1, 1, 2, 2, 2),), A((2, 2, 2)), tags=("identity",)),
        Sample((np.array([np.nan, np.inf, -np.inf, -0.0], _F).reshape(1, 1, 1, 2, 2),),
               A((2, 3, 3)), tags=("nan", "inf")),
        Sample((_f32(rng, 0, 2, 2, 2, 2),), A((3, 1, 2)), tags=("empty",)),
    ]


# ── backward kinds ─────────────────────────────────────────────────────────

def _conv_out(x_dims, w_dims, a, dtype=DType.F32):
    fwd = Conv3dAttrs(a.stride, a.padding, a.dilation, a.groups)
    return conv3d_geometry([Shape(x_dims, dtype), Shape(w_dims, dtype)], fwd, False).dims


_GEOMS = (
    # x dims, w dims, attrs, tags
    ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), Conv3dBackwardAttrs((2, 2, 2)), ("basic",)),
    ((2, 2, 4, 3, 5), (3, 2, 2, 1, 3),
     Conv3dBackwardAttrs((2, 1, 3), (2, 1, 2), (1, 0, 1), (1, 1, 1)),
     ("batch", "stride", "padding", "floor")),
    ((1, 4, 3, 4, 3), (2, 2, 2, 2, 1),
     Conv3dBackwardAttrs((2, 2, 1), (1, 1, 1), (0, 1, 0), (1, 2, 1), 2),
     ("groups", "dilation")),
)


def conv3d_backward_input_samples(rng):
    out = []
    for xd, wd, a, tags in _GEOMS:
        dy = _f32(rng, *_conv_out(xd, wd, a))
        out.append(Sample((dy, _f32(rng, *wd)), a, out=Shape(xd, DType.F32), tags=tags))
    # a 1x1x1 kernel of weight 2: dx is 2·dy
    dy = np.arange(8, dtype=_F).reshape(1, 1, 2, 2, 2)
    out.append(Sample((dy, np.full((1, 1, 1, 1, 1), 2, _F)), Conv3dBackwardAttrs((1, 1, 1)),
                      out=Shape((1, 1, 2, 2, 2), DType.F32), tags=("hand",), expect=2 * dy))
    return out


def conv3d_backward_weight_samples(rng):
    out = []
    for xd, wd, a, tags in _GEOMS:
        dy = _f32(rng, *_conv_out(xd, wd, a))
        out.append(Sample((_f32(rng, *xd), dy), a, out=Shape(wd, DType.F32), tags=tags))
    # a 1x1x1 kernel: dw = Σ x·dy = 0·1 + 1·1 + ... + 7·1 = 28
    x = np.arange(8, dtype=_F).reshape(1, 1, 2, 2, 2)
    out.append(Sample((x, np.ones_like(x)), Conv3dBackwardAttrs((1, 1, 1)),
                      out=Shape((1, 1, 1, 1, 1), DType.F32), tags=("hand",),
                      expect=np.full((1, 1, 1, 1, 1), 28, _F)))
    return out


def _pool_out(x, a):
    from .conv import PoolAttrs, _pool_geometry

    s = _pool_geometry([Shape(x.shape, DType.of(x))],
                       PoolAttrs("Max", a.kernel_size, a.stride, a.padding))
    return s.dims


def maxpool3d_backward_samples(rng):
    A = MaxPool3dBackwardAttrs
    x8 = np.arange(8, dtype=_F).reshape(1, 1, 2, 2, 2)
    ties = rng.integers(0, 3, (1, 2, 3, 4, 3)).astype(_F)   # small integers: many ties
    special = _f32(rng, 1, 1, 2, 3, 3)
    special[0, 0, 0, 0, 0], special[0, 0, 1, :, :2] = np.nan, -np.inf

    def case(x, a, tags, expect=None):
        dy = _f32(rng, *_pool_out(x, a)) if expect is None else np.ones(_pool_out(x, a), _F)
        return Sample((x, dy), a, tags=tags, expect=expect)

    hand = np.zeros_like(x8)
    hand[0, 0, 1, 1, 1] = 1
    return [
        case(x8, A((2, 2, 2)), ("hand",), expect=hand),
        # overlapping 2x2x2 windows with padding 1 on -x: voxel 0 wins all 8 windows
        case(-x8, A((2, 2, 2), (1, 1, 1), (1, 1, 1)), ("hand", "padding", "overlap"),
             expect=np.array([8, 4, 4, 2, 4, 2, 2, 1], _F).reshape(1, 1, 2, 2, 2)),
        case(ties, A((2, 2, 2), (1, 2, 1), (1, 0, 1)), ("ties", "padding", "stride")),
        case(_f32(rng, 2, 1, 4, 3, 5), A((3, 2, 2), (1, 1, 2)), ("batch", "floor")),
        case(special, A((2, 2, 2), (1, 1, 1), (0, 1, 1)), ("nan", "inf")),
    ]
