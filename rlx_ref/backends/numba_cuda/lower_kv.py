"""KvAppend as a CUDA kernel: one thread per output element copies it from the cache's
``[outer, pos, inner]`` prefix or from the row. The copy is of device elements (16-bit
floats as their bits), so one kernel shape serves every dtype."""
from __future__ import annotations

from ...ir.dtype import DType
from .device import device_dtype, launch_shape
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

_KV = '''
def {name}(out, cache, row, pos, cap, inner):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    span = (pos + 1) * inner
    while e < out.size:
        o = e // span
        r = e - o * span
        if r < pos * inner:
            out[e] = cache[o * cap * inner + r]
        else:
            out[e] = row[o * inner + r - pos * inner]
        e += step
'''


@lowers("KvAppend", tuple(DType))
def lower_kv_append(node, ins, ctx) -> Step:
    axis, pos = node.attrs.axis, node.attrs.pos
    dims = [int(d) for d in ins[0].dims]
    cap = dims[axis]
    inner = 1
    for d in dims[axis + 1:]:
        inner *= d
    if pos >= cap:          # the verifier's C4; never read past the cache
        raise ValueError(f"KvAppend pos {pos} is past the cache's axis-{axis} capacity {cap}")
    name, source = _render(_KV, "kvappend")
    arr = array_type(device_dtype(node.shape.dtype))
    i64 = int_type()
    launch = Launch(compile_kernel(name, source), (arr, arr, arr, i64, i64, i64))

    def run(out, cache, row):
        if out.size:
            blocks, threads = launch_shape(out.size)
            launch(blocks, threads, out, cache, row, pos, cap, inner)
    return Step(run, [launch])
