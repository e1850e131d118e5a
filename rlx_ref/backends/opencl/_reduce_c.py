"""C building blocks shared by the reduction and normalization kernels.

Every kernel of these families sees its input as ``[outer, K, inner]`` (K the reduced,
scanned or normalized extent) and is rendered from a template whose dtype-specific parts
are macros defined just above it and undefined just after it, so kernels of different
dtypes live side by side in one program. Loads convert to the compute type (float for
f32/f16/bf16, double for f64, long or ulong for integers); stores round once into the
output dtype. CPU devices get a contiguous run per work-item with vector accumulators of
``VW`` lanes (``vec_width``: 8, or 4 for 64-bit lanes on devices without 512-bit vectors);
GPUs get one work-group per row and a tree in local memory. A template line holding
``@h`` is repeated per ``VW``-wide part of an 8-lane value (``@h``: the part, ``@O``: its
first lane), then a line holding ``@s`` once per lane (``@s``: ``s0``, ``s1``, ...).
"""
from __future__ import annotations

import hashlib
import math

from ...ir.dtype import DType, int_range
from ..codegen.literal import c_literal
from ..layout import split3, strides_of  # noqa: F401 - split3: the family's geometry
from .launch import bind_nd, round_up
from .lowering import C_TYPE

WIDE_TYPES = ("double", "long", "ulong")     # 64-bit lanes
FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)
BUFFER = {**C_TYPE, DType.F16: "half", DType.BF16: "ushort"}


def compute_type(dt: DType, unsigned: bool = False) -> str:
    """The C type values of ``dt`` are computed in (``unsigned``: wrapping integer math)."""
    if dt is DType.F64:
        return "double"
    if dt.is_float:
        return "float"
    return "ulong" if unsigned else "long"


def load(dt: DType, ptr: str, idx: str, ct: str) -> str:
    """A scalar load of ``ptr[idx]`` as a ``ct`` value."""
    if dt is DType.F16:
        v = f"vload_half({idx}, {ptr})"
    elif dt is DType.BF16:
        v = f"rlx_bf16_load({ptr}[{idx}])"
    else:
        v = f"{ptr}[{idx}]"
    return f"(({ct})({v}))"


def vec_width(device, ct: str) -> int:
    """Lanes of the CPU kernels' ``ct`` vectors on ``device``: 8, or 4 for 64-bit lanes
    where 8 of them would be wider than the device's vector registers."""
    # PoCL 3.0's LLVM 14 cannot select some 8-wide double/long operations for AVX2 targets
    # (Zen 3: "Cannot select ... X86ISD::VFPROUND", "i64 = fsqrt", "Cannot emit physreg
    # copy") and aborts the process; 4 lanes are one AVX2 register and compile everywhere
    if ct in WIDE_TYPES and device.vector_bytes < 64:
        return 4
    return 8


def load_vec(dt: DType, ptr: str, idx: str, ct: str, n: int) -> str:
    """An ``n``-wide load of ``ptr[idx .. idx+n)`` as a ``ct``n vector."""
    if dt is DType.F16:     # PoCL miscompiles vload_half8 at offsets not a multiple of 8
        parts = ", ".join(f"vload_half({idx} + {j}, {ptr})" for j in range(n))
        v, have = f"((float{n})({parts}))", "float"
    elif dt is DType.BF16:
        v, have = f"as_float{n}(convert_uint{n}(vload{n}(0, {ptr} + {idx})) << 16)", "float"
    else:
        v, have = f"vload{n}(0, {ptr} + {idx})", C_TYPE[dt]
    return v if have == ct else f"convert_{ct}{n}({v})"


def store(dt: DType, ptr: str, idx: str, val: str) -> str:
    """A statement storing ``val`` into ``ptr[idx]``, rounded once to ``dt``."""
    if dt is DType.F16:
        return f"vstore_half_rte((float)({val}), {idx}, {ptr})"
    if dt is DType.BF16:
        return f"{ptr}[{idx}] = rlx_bf16_bits(rlx_rnd_bf16((float)({val})))"
    return f"{ptr}[{idx}] = ({C_TYPE[dt]})({val})"


def store_vec(dt: DType, ptr: str, idx: str, val: str, n: int) -> str:
    """A statement storing the ``n``-vector ``val`` (float or double lanes) at ``ptr[idx]``."""
    if dt is DType.F16:     # lane by lane, as the loads
        stores = " ".join(f"vstore_half_rte(h_.s{j}, {idx} + {j}, {ptr});" for j in range(n))
        return f"{{ float{n} h_ = convert_float{n}({val}); {stores} }}"
    if dt is DType.BF16:        # nearest bfloat16, ties to even; NaN kept as is
        u = f"uint{n}"
        return (f"{{ {u} u_ = as_{u}(convert_float{n}({val})); "
                f"{u} r_ = u_ + ({u})0x7fffu + ((u_ >> 16) & ({u})1u); "
                f"r_ = select(r_, u_, (u_ & ({u})0x7fffffffu) > ({u})0x7f800000u); "
                f"vstore{n}(convert_ushort{n}(r_ >> 16), 0, {ptr} + {idx}); }}")
    return f"vstore{n}(convert_{C_TYPE[dt]}{n}({val}), 0, {ptr} + {idx})"


def vec_defs(device, ct: str, dts: dict, out_dt: DType | None) -> dict:
    """The lane count ``VW`` and the vector macros of a CPU kernel computing in ``ct``:
    ``LD<X>V(i)`` for each ``name: dtype`` of ``dts`` and ``STOV(i, v)`` into ``out_dt``."""
    n = vec_width(device, ct)
    defs = {"VW": str(n)}
    for name, dt in dts.items():
        defs[f"LD{name.upper()}V(i)"] = load_vec(dt, name, "(i)", ct, n)
    if out_dt is not None:
        defs["STOV(i, v)"] = store_vec(out_dt, "out", "(i)", "(v)", n)
    return defs


def lowest(dt: DType) -> str:
    """The identity of a running max in C: -inf, or the dtype's smallest integer."""
    return c_literal(-math.inf, dt) if dt.is_float else c_literal(int_range(dt)[0], dt)


def highest(dt: DType) -> str:
    """The identity of a running min in C: +inf, or the dtype's largest integer."""
    return c_literal(math.inf, dt) if dt.is_float else c_literal(int_range(dt)[1], dt)


# clang notes that 8-wide double/long vectors passed to builtins change the AVX ABI;
# nothing crosses a compilation unit here, so the note is noise
_QUIET = '#ifdef __clang__\n#pragma clang diagnostic ignored "-Wpsabi"\n#endif\n'


# quotient and remainder without ``%``: a ``/`` and ``%`` pair on one work-item id becomes
# an LLVM ``freeze`` that Oclgrind's checks cannot run
_DIVMOD = "long q = (t) / (n), r = (t) - q * (n)"


def repeat_lines(text: str, marks: tuple, rows: list) -> str:
    """Each line holding one of ``marks`` once per row of ``rows``, the marks replaced by
    the row's items."""
    out = []
    for line in text.split("\n"):
        if not any(m in line for m in marks):
            out.append(line)
            continue
        for row in rows:
            new = line
            for m, v in zip(marks, row):
                new = new.replace(m, str(v))
            out.append(new)
    return "\n".join(out)


def render(prefix: str, defs: dict, body: str) -> tuple[str, str]:
    """(name, source): ``body`` (``KNAME`` for its name) between ``defs``' #define/#undef;
    ``@h`` lines repeated per part, then ``@s`` lines per lane, of ``defs["VW"]``."""
    if "VW" in defs:
        n = int(defs["VW"])
        body = repeat_lines(body, ("@h", "@O"), [(h, n * h) for h in range(8 // n)])
        body = repeat_lines(body, ("@s",), [(f"s{j:x}",) for j in range(n)])
    defs = {**defs, "DIVMOD(t, n, q, r)": _DIVMOD}
    head = _QUIET + "".join(f"#define {k} {v}\n" for k, v in defs.items())
    tail = "".join(f"#undef {k.split('(')[0]}\n" for k in defs)
    key = hashlib.sha256((head + body).encode()).hexdigest()[:12]
    name = f"{prefix}_{key}"
    return name, head + body.replace("KNAME", name) + tail


def wg_size(device, want: int = 256) -> int:
    """The work-group size of the tree kernels: a power of two the device accepts."""
    top = max(1, min(want, device.max_work_group))
    return 1 << (top.bit_length() - 1)


def gpu_style(device) -> bool:
    """Whether to render work-group trees (GPUs) rather than runs per work-item (CPUs):
    the one rule every lowering reads for its kernel choice."""
    # A style forced per backend (``opencl/gpu-kernels``) wins: PoCL runs barriers and
    # local memory right, so a CPU device can check the GPU kernels. Oclgrind counts as a
    # GPU: it is there to check the work-group kernels real GPUs run (barriers, local-memory
    # races); PoCL runs the CPU ones, whose vectors its uninitialized-value checker cannot
    # follow
    if device.kernels != "auto":
        return device.kernels == "gpu"
    return not device.is_cpu or "oclgrind" in device.platform.lower()


def cpu_local(device, n: int) -> int:
    """Work-items per group of the CPU kernels that give each work-item a run."""
    # PoCL runs a group as one loop: single-item groups spread few rows over the cores
    return 1 if n < 64 * max(device.compute_units, 1) else 4


def item_local(device, n: int) -> int:
    """Work-group size of the kernels that give each work-item its own line or row."""
    return min(64, wg_size(device)) if gpu_style(device) else cpu_local(device, n)


def launcher(ref, queue, n_items: int, local: int, args: list):
    """Bind ``ref`` over ``n_items`` work-items (rounded up to ``local``)."""
    return bind_nd(ref, queue, (round_up(n_items, local),), (local,), args)


def reduce_layout(dims, axes) -> tuple[tuple[int, int, int] | None, list]:
    """``((outer, K, inner), [])``, or ``(None, runs)`` when the reduced axes are apart."""
    # Size-1 axes are dropped and neighbours that are both reduced or both kept merged.
    # One reduced run left (none: K = 1) reads in place as [outer, K, inner]; otherwise
    # the merged runs (size, stride, reduced), outermost first, feed the strided kernel.
    dims = [int(d) for d in dims]
    red = set(axes)
    strides = strides_of(dims)
    runs: list[list] = []
    for i, d in enumerate(dims):
        if d == 1:
            continue
        if runs and runs[-1][2] == (i in red):      # C order: neighbours merge
            runs[-1][0] *= d
            runs[-1][1] = strides[i]
        else:
            runs.append([d, strides[i], i in red])
    flags = [r[2] for r in runs]
    if True not in flags:
        return (math.prod(dims), 1, 1), []
    if flags.count(True) == 1:
        j = flags.index(True)
        return (math.prod(r[0] for r in runs[:j]), runs[j][0],
                math.prod(r[0] for r in runs[j + 1:])), []
    return None, [tuple(r) for r in runs]


def kernel(ctx, named: tuple[str, str]):
    """The handle of a ``(name, source)`` pair in the node's program."""
    name, src = named
    return ctx.kernel(src, name)


def sequence(launchers: list, keep: tuple = ()):
    """One launcher running ``launchers`` in order, holding the ``keep`` buffers alive."""
    # a kernel argument does not keep its buffer from being released: scratch buffers
    # live as long as the launcher that uses them
    def launch():
        for f in launchers:
            f()
    launch.keep = keep
    return launch


def unroll(text: str, nv: int, vw: int) -> str:
    """Repeat each line holding ``@j`` (vector j) or ``@o`` (its offset vw·j) ``nv`` times."""
    # blocks of vw·nv columns in nv named vectors: private arrays of vectors are not kept
    # in registers by every compiler (PoCL's ran 3x slower)
    return repeat_lines(text, ("@j", "@o"), [(j, vw * j) for j in range(nv)])


def template_source(prefix: str, templates: dict, kernel: str, defs: dict,
                    wg: int = 0) -> tuple[str, str]:
    """(name, source) of ``templates[kernel]`` rendered with ``defs``: ``rows_gpu`` gets
    its work-group size (WG), ``cols_cpu`` its column block (CB; the ``@j`` lines unrolled
    for the accumulator type ``defs["ACC"]``)."""
    extra = {"WG": str(wg)} if kernel == "rows_gpu" else {}
    text = templates[kernel]
    if kernel == "cols_cpu":
        vw = int(defs["VW"])
        nv = block_vectors(defs["ACC"], vw)
        extra, text = {"CB": str(vw * nv)}, unroll(text, nv, vw)
    return render(f"{prefix}_{kernel}", {**defs, **extra}, text)


def block_vectors(ct: str, vw: int) -> int:
    """Vectors per column block of the CPU column kernels (accumulators: ``ct``vw)."""
    # 256 bytes of accumulators (64 floats, 32 doubles): what 16 AVX registers hold with
    # room for the loads
    size = 8 if ct in WIDE_TYPES else 4
    return max(1, 256 // (vw * size))


def column_block(defs: dict) -> int:
    """Columns per work-item of a ``cols_cpu`` kernel rendered with ``defs``."""
    vw = int(defs["VW"])
    return vw * block_vectors(defs["ACC"], vw)
