"""Samples of MaxPool2dBackward, Conv2dBackwardInput and Conv2dBackwardWeight: the forward
conv/pool geometries (stride, padding, dilation, groups, rank 3) plus ties, padding-only
windows, floor remainders and hand-computed cases."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .backward_conv import MaxPoolBackwardAttrs
from .conv import ConvAttrs, PoolAttrs, _pool_geometry
from .opdef import Sample

_F = np.float32


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(_F)


def _pool_out(x, a):
    """The forward Max pool's output dims for ``x`` (dy's shape)."""
    s = _pool_geometry([Shape(x.shape, DType.of(x))],
                       PoolAttrs("Max", a.kernel_size, a.stride, a.padding))
    return s.dims


def maxpool_backward_samples(rng):
    A = MaxPoolBackwardAttrs
    x16 = np.arange(16, dtype=_F).reshape(1, 1, 4, 4)
    x9 = np.arange(1, 10, dtype=_F).reshape(1, 1, 3, 3)
    special = _f32(rng, 1, 2, 4, 4)
    special[0, 0, 0, 0], special[0, 1, 2, 3] = np.nan, -np.inf
    special[0, 1, :2, :2] = -np.inf                       # a window of -inf only
    ties = rng.integers(0, 3, (1, 2, 5, 5)).astype(_F)    # small integers: many ties

    def dy_for(x, a, scale=1.0):
        return (_f32(rng, *_pool_out(x, a)) * scale).astype(x.dtype)

    one = np.ones((1, 1, 2, 2), _F)
    out = [
        Sample((x16, one), A((2, 2), (2, 2)), tags=("hand",),
               expect=np.array([[[[0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0], [0, 1, 0, 1]]]],
                               _F)),
        # 3x3 windows, stride 2, padding 1 on 1..9: the winners are 5, 6, 8, 9
        Sample((x9, np.array([[[[1, 2], [3, 4]]]], _F)), A((3, 3), (2, 2), (1, 1)),
               tags=("hand", "padding"),
               expect=np.array([[[[0, 0, 0], [0, 1, 2], [0, 3, 4]]]], _F)),
        # overlapping windows: one element wins several and receives their sum
        Sample((-x9, np.ones((1, 1, 4, 4), _F)), A((2, 2), (1, 1), (1, 1)),
               tags=("hand", "padding", "overlap"),
               expect=np.array([[[[4, 2, 2], [2, 1, 1], [2, 1, 1]]]], _F)),
        # 1x1 window with padding 1: the border windows hold only padding and route nothing
        Sample((np.full((1, 1, 1, 1), 5, _F), np.arange(9, dtype=_F).reshape(1, 1, 3, 3)),
               A((1, 1), (1, 1), (1, 1)), tags=("hand", "padding-only-window"),
               expect=np.full((1, 1, 1, 1), 4, _F)),
        # all ties: the first element of the window in row-major order wins
        Sample((np.array([[[[1, 1], [1, 0]]]], _F), np.array([[[[7]]]], _F)), A((2, 2)),
               tags=("hand", "ties"), expect=np.array([[[[7, 0], [0, 0]]]], _F)),
        Sample((ties, dy_for(ties, A((3, 3), (1, 1), (1, 1)))), A((3, 3), (1, 1), (1, 1)),
               tags=("ties", "overlap", "padding", "prime-length")),
        Sample((special, dy_for(special, A((2, 2), (2, 2)))), A((2, 2), (2, 2)),
               tags=("nan", "inf")),
        Sample((_f32(rng, 2, 3, 7, 5), dy_for(_f32(rng, 2, 3, 7, 5), A((3, 2), (2, 3), (1, 1)))),
               A((3, 2), (2, 3), (1, 1)), tags=("odd", "stride", "floor-remainder")),
        Sample((_f32(rng, 1, 2, 5, 5), dy_for(np.zeros((1, 2, 5, 5), _F), A((2, 2))),),
               A((2, 2)), tags=("defaults",)),
        Sample((np.zeros((0, 2, 4, 4), _F), np.zeros((0, 2, 2, 2), _F)), A((2, 2), (2, 2)),
               tags=("empty",)),
        Sample((rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((1, 2, 3, 3))),
               A((2, 2), (2, 2), (1, 1)), tags=("f64", "padding")),
        Sample((_f32(rng, 1, 2, 4, 4).astype(np.float16),
                _f32(rng, 1, 2, 3, 3).astype(np.float16)), A((2, 2), (1, 1)),
               tags=("f16", "overlap")),
    ]
    return out


def _conv_cases(rng):
    """(x, w, attrs, tags) of the forward Conv geometries the backward kinds cover."""
    A = ConvAttrs
    r = lambda *s: _f32(rng, *s)  # noqa: E731
    return [
        (r(1, 2, 5, 5), r(3, 2, 3, 3), A((3, 3), (1, 1), (1, 1)), ("same-padding",)),
        (r(2, 3, 7, 7), r(4, 3, 3, 2), A((3, 2), (2, 3), (1, 2), (2, 1)),
         ("prime-length", "odd", "stride", "dilation")),
        (r(1, 4, 5, 6), r(6, 2, 3, 3), A((3, 3), (1, 1), (1, 1), (1, 1), 2), ("groups",)),
        (r(1, 3, 4, 4), r(3, 1, 2, 2), A((2, 2), groups=3), ("depthwise",)),
        (r(1, 1, 8, 6), r(2, 1, 3, 3), A((3, 3), (2, 2)), ("stride", "floor-remainder")),
        (r(2, 3, 7), r(4, 3, 3), A((1, 3), (1, 2), (0, 1)), ("rank-3", "1-d")),
        (r(1, 3, 2, 3), r(5, 3, 1, 1), A((1, 1)), ("1x1",)),
        (r(1, 2, 3, 3), r(2, 2, 3, 3), A((3, 3)), ("size-1",)),
        (r(1, 2, 4, 5), r(2, 2, 2, 2), A((2, 2), (2,), ()), ("defaults", "floor-remainder")),
        (np.zeros((0, 2, 4, 4), _F), r(3, 2, 3, 3), A((3, 3)), ("empty",)),
        (rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((2, 2, 3, 3)),
         A((3, 3), padding=(1, 1)), ("f64",)),
        (r(1, 2, 4, 4).astype(np.float16), r(2, 2, 3, 3).astype(np.float16), A((3, 3)),
         ("f16",)),
    ]


def _conv_dy(rng, x, w, a):
    from .single import single_op_graph

    g = single_op_graph("Conv", a, [x, w])
    dims = g.nodes[-1].shape.static_dims()
    return rng.standard_normal(dims).astype(x.dtype)


def conv_backward_input_samples(rng):
    x9 = np.zeros((1, 1, 3, 3), _F)
    out = [Sample((np.ones((1, 1, 2, 2), _F), np.ones((1, 1, 2, 2), _F)), ConvAttrs((2, 2)),
                  Shape(x9.shape, DType.F32), tags=("hand",),
                  expect=np.array([[[[1, 2, 1], [2, 4, 2], [1, 2, 1]]]], _F))]
    for x, w, a, tags in _conv_cases(rng):
        out.append(Sample((_conv_dy(rng, x, w, a), w), a, Shape(x.shape, DType.of(x)),
                          tags=tags))
    dy = _f32(rng, 1, 1, 2, 2)
    dy[0, 0, 0, 1], dy[0, 0, 1, 0] = np.nan, np.inf
    out.append(Sample((dy, np.ones((1, 1, 2, 2), _F)), ConvAttrs((2, 2)),
                      Shape((1, 1, 3, 3), DType.F32), tags=("nan", "inf")))
    return out


def conv_backward_weight_samples(rng):
    x9 = np.arange(9, dtype=_F).reshape(1, 1, 3, 3)
    out = [Sample((x9, np.ones((1, 1, 2, 2), _F)), ConvAttrs((2, 2)),
                  Shape((1, 1, 2, 2), DType.F32), tags=("hand",),
                  expect=np.array([[[[8, 12], [20, 24]]]], _F))]
    for x, w, a, tags in _conv_cases(rng):
        out.append(Sample((x, _conv_dy(rng, x, w, a)), a, Shape(w.shape, DType.of(w)),
                          tags=tags))
    x = _f32(rng, 1, 1, 3, 3)
    x[0, 0, 1, 1], x[0, 0, 0, 2] = np.nan, np.inf
    out.append(Sample((x, _f32(rng, 1, 1, 2, 2)), ConvAttrs((2, 2)),
                      Shape((1, 1, 2, 2), DType.F32), tags=("nan", "inf")))
    return out
