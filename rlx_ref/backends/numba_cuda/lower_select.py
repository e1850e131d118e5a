"""ArgMax, ArgMin and TopK as CUDA kernels.

ArgMax/ArgMin give each row one block: every thread scans its strided share of the row
keeping its best (value, index), then the block folds the pairs through a shared-memory
tree. A pair beats another when its value is larger (smaller) or equal with a lower
index, and NaN never wins, so the fold finds the first NaN-ignoring extreme whatever
its order; a row whose element 0 is NaN then gives 0, as RLX's scan from element 0.

TopK ranks instead of sorting: one block per row, each thread takes a candidate element
and counts the elements that come before it in the stable descending order (larger, or
equal with a lower index; NaN after every number, NaNs by index), reading the row in
block-sized tiles staged in shared memory; the candidate with rank r < k writes its index
to slot r. Ranks are exact and distinct, so ties and NaNs need no extra pass and any
row length works, at O(n²/threads) comparisons per row (fine up to tens of thousands;
a per-row bitonic sort would be the next step for longer rows).
"""
from __future__ import annotations

from .device import block_threads, device_dtype, rows_shape
from .geometry import acc_np, read_expr, split3, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import FLOAT_KINDS, _render
from .lowering import INTS, SIXTEEN_NOTE, Step, lowers

_ARG = '''
def {name}(out, x, k_len, inner):
    sv = cuda.shared.array({T}, {acc})
    si = cuda.shared.array({T}, np.int64)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    while r < out.size:
        o = r // inner
        base = o * k_len * inner + (r - o * inner)
        bv = {acc}(0)
        bi = -1
        k = t
        while k < k_len:
            v = {read}
            if v == v and (bi < 0 or v {op} bv):
                bv = v
                bi = k
            k += {T}
        sv[t] = bv
        si[t] = bi
        cuda.syncthreads()
        s = {T} // 2
        while s > 0:
            if t < s:
                v = sv[t + s]
                j = si[t + s]
                bi = si[t]
                if j >= 0 and (bi < 0 or v {op} sv[t] or (v == sv[t] and j < bi)):
                    sv[t] = v
                    si[t] = j
            cuda.syncthreads()
            s //= 2
        if t == 0:
            v = {read0}
            idx = max(si[0], 0) if v == v else 0     # RLX: a NaN at element 0 wins
            out[r] = {store}
        cuda.syncthreads()
        r += cuda.gridDim.x
'''


def _index_store(dt) -> str:
    """``idx`` (an i64) stored as an index value of ``dt`` (floats hold it exactly)."""
    return store_expr(dt, "np.float64(idx)" if dt.is_float else "idx")


@lowers("ArgMax", FLOAT_KINDS + INTS, reason=SIXTEEN_NOTE)
@lowers("ArgMin", FLOAT_KINDS + INTS, reason=SIXTEEN_NOTE)
def lower_arg(node, ins, ctx) -> Step:
    src, dt = ins[0].dtype, node.shape.dtype
    outer, k, inner = split3(ins[0].dims, node.attrs.axis, node.attrs.axis + 1)
    threads = block_threads()
    name, source = _render(_ARG, "arg", T=threads, acc=acc_np(src),
                           read=read_expr(src, "x[base + k * inner]"),
                           read0=read_expr(src, "x[base]"),
                           op=">" if node.kind == "ArgMax" else "<", store=_index_store(dt))
    launch = Launch(compile_kernel(name, source),
                    (array_type(device_dtype(dt)), array_type(device_dtype(src)),
                     int_type(), int_type()))
    rows = outer * inner

    def run(out, x):
        if rows and k:
            blocks, t = rows_shape(rows, threads)
            launch(blocks, t, out, x, k, inner)
    return Step(run, [launch])


_TOPK = '''
def {name}(out, x, n, k):
    sx = cuda.shared.array({T}, {acc})
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    while r < out.size // k:
        base = r * n
        i0 = 0
        while i0 < n:
            i = i0 + t
            vi = {acc}(0)
            if i < n:
                vi = {read_i}
            rank = 0
            j0 = 0
            while j0 < n:
                vj = {acc}(0)
                if j0 + t < n:
                    vj = {read_j}
                sx[t] = vj
                cuda.syncthreads()
                if i < n:
                    for jj in range(min({T}, n - j0)):
                        vj = sx[jj]
                        j = j0 + jj
                        if vj > vi or (vj == vi and j < i) or (vi != vi and (vj == vj or j < i)):
                            rank += 1
                cuda.syncthreads()
                j0 += {T}
            if i < n and rank < k:
                idx = i
                out[r * k + rank] = {store}
            i0 += {T}
        r += cuda.gridDim.x
'''


@lowers("TopK", FLOAT_KINDS + INTS, reason=SIXTEEN_NOTE)
def lower_topk(node, ins, ctx) -> Step:
    src, dt = ins[0].dtype, node.shape.dtype
    n, k = int(ins[0].dims[-1]), node.attrs.k
    threads = block_threads()
    name, source = _render(_TOPK, "topk", T=threads, acc=acc_np(src),
                           read_i=read_expr(src, "x[base + i]"),
                           read_j=read_expr(src, "x[base + j0 + t]"), store=_index_store(dt))
    launch = Launch(compile_kernel(name, source),
                    (array_type(device_dtype(dt)), array_type(device_dtype(src)),
                     int_type(), int_type()))
    rows = node.shape.numel // k if k else 0

    def run(out, x):
        if rows:
            blocks, t = rows_shape(rows, threads)
            launch(blocks, t, out, x, n, k)
    return Step(run, [launch])
