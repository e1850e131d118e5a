"""The movement kinds as one gather kernel over an index map computed once on the host.

Which input element lands at each output position depends only on shapes and attrs, so
the map is computed at lowering time by running the op's own registry reference on an
array of element numbers (1-based, so the references' zero fill means "padding"): the
map is then exact by construction, for every kind. The kernel moves raw elements
(16-bit floats as their bits, bool as bytes): ``out[e] = x[map[e]]``, or the fill value
where the map is -1 (Pad's constant, Trilu's zeros). Concat scatters each input into
the output with the inverse map. Reshape is a plain copy.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from ...ir.dtype import DType
from ...ir.shape import Shape
from ...ops.opdef import RefCtx, get
from .device import DeviceConst, device_dtype, launch_shape
from .kernels import Launch, array_type, compile_kernel
from .prelude import PRELUDE

MOVE_DTYPES = tuple(d for d in DType if not d.is_complex)
from .lowering import Step, lowers

_GATHER = PRELUDE + '''
def move_gather(out, x, index_map, fill):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        j = index_map[i]
        out[i] = x[j] if j >= 0 else fill[0]
        i += stride
'''
_SCATTER = PRELUDE + '''
def move_scatter(out, x, positions):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < x.size:
        out[positions[i]] = x[i]
        i += stride
'''


def gather_launch(dt: DType) -> Launch:
    arr = array_type(device_dtype(dt))
    return Launch(compile_kernel("move_gather", _GATHER),
                  (arr, arr, array_type(np.int64), arr))


def scatter_launch(dt: DType) -> Launch:
    arr = array_type(device_dtype(dt))
    return Launch(compile_kernel("move_scatter", _SCATTER), (arr, arr, array_type(np.int64)))


def index_map(node, ins) -> np.ndarray:
    """For each output element, the flat index of the input element it copies (-1: fill);
    several inputs are numbered one after the other."""
    starts = np.cumsum([1] + [s.numel for s in ins])
    numbered = [np.arange(a, a + s.numel, dtype=np.int64).reshape(tuple(s.dims))
                for a, s in zip(starts, ins)]
    attrs = node.attrs
    if node.kind == "Pad" and isinstance(attrs.mode, tuple) and attrs.mode[0] == "Constant":
        attrs = dataclasses.replace(attrs, mode=("Constant", 0.0))
    ctx = RefCtx(attrs, Shape(node.shape.dims, DType.I64), node=node)
    return np.asarray(get(node.kind).reference(ctx, *numbered), np.int64).reshape(-1) - 1


def _fill(node) -> np.ndarray:
    """The value a -1 in the map stands for: Pad's constant (cast like Cast), else 0."""
    dt = node.shape.dtype
    value = 0.0
    mode = getattr(node.attrs, "mode", None)
    if node.kind == "Pad" and isinstance(mode, tuple) and mode[0] == "Constant":
        value = mode[1]
    from ...ops.elementwise import cast_array

    host = np.asarray(cast_array(np.float32(value), dt), dt.np).reshape(1)
    return host.view(np.uint16) if dt in (DType.F16, DType.BF16) else host


class MapStep:
    """``out = x[map]`` with the map and fill on the device (uploaded on first use)."""

    def __init__(self, dt: DType, mapping: np.ndarray, fill: np.ndarray):
        self.launch = gather_launch(dt)
        self.map, self.fill = DeviceConst(mapping), DeviceConst(fill)
        self.n = mapping.size

    def __call__(self, out, x) -> None:
        if self.n:
            blocks, threads = launch_shape(self.n)
            self.launch(blocks, threads, out, x, self.map.get(), self.fill.get())


def _lower_map(node, ins, ctx) -> Step:
    step = MapStep(node.shape.dtype, index_map(node, ins), _fill(node))
    return Step(step, [step.launch])


for _kind in ("Reshape", "Transpose", "Narrow", "Slice", "Expand", "Reverse", "Tile",
              "ResizeNearest2x", "Pad", "Trilu"):
    lowers(_kind, MOVE_DTYPES)(_lower_map)


@lowers("Concat", MOVE_DTYPES)
def _concat(node, ins, ctx) -> Step:
    where = index_map(node, ins)            # output position -> element of the inputs
    order = np.argsort(where, kind="stable")    # element -> output position
    offsets = np.cumsum([0] + [s.numel for s in ins])
    launch = scatter_launch(node.shape.dtype)
    positions = [DeviceConst(order[a:b]) for a, b in itertools.pairwise(offsets)]
    sizes = [s.numel for s in ins]

    def run(out, *xs):
        for x, pos, n in zip(xs, positions, sizes):
            if n:
                blocks, threads = launch_shape(n)
                launch(blocks, threads, out, x, pos.get())
    return Step(run, [launch])


def permute_step(shape: Shape, perm: tuple):
    """A callable ``x -> x transposed by perm`` into its own device buffer (Reduce over
    axes that are not adjacent); ``.launches`` lists its kernel."""
    dims = tuple(shape.dims)
    numbered = np.arange(shape.numel, dtype=np.int64).reshape(dims)
    mapping = np.ascontiguousarray(numbered.transpose(perm)).reshape(-1)
    step = MapStep(shape.dtype, mapping, np.zeros(1, device_dtype(shape.dtype)))
    buf = {}

    def run(x):
        if "out" not in buf:
            from .device import import_cuda

            buf["out"] = import_cuda().device_array(math.prod(dims), device_dtype(shape.dtype))
        step(buf["out"], x)
        return buf["out"]
    run.launches = [step.launch]
    return run
