"""Host-side geometry shared by the reduction and normalization lowerings.

Every kernel of these families sees its input as a C-contiguous ``[outer, K, inner]``
block: K the reduced (scanned, normalized) extent, ``inner`` the contiguous run after it.
The triple comes from ``backends/layout.py`` (shared with the other backends); this
file converts 16-bit floats to
their f32 shadows on the host (Numba has no f16/bf16 arithmetic), and routes 16-bit
outputs through an f64 buffer rounded once on the host.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..layout import reduce_layout, split3  # noqa: F401 - the family's geometry
from .variant_table import th, use_par

SIXTEEN = (DType.F16, DType.BF16)
SHADOW_NOTE = "f16/bf16 run through f32 shadows converted on the host"
_SIXTEEN_NP = tuple(d.np for d in SIXTEEN)
THREADS_TILES = 8            # parallel tiles per thread when a kernel splits rows itself
TILE = 1024                  # columns per task in the *_cols kernels (f64 acc: 8 KiB)


def shadow(x: np.ndarray) -> np.ndarray:
    """``x`` flattened, with f16/bf16 converted to f32 (exact) for the kernel."""
    if x.dtype in _SIXTEEN_NP:
        x = x.astype(np.float32)
    return x.reshape(-1)


def kernel_out(out: np.ndarray) -> tuple[np.ndarray, bool]:
    """(flat buffer the kernel writes, whether it must be rounded back into ``out``)."""
    if out.dtype in _SIXTEEN_NP:
        return np.empty(out.size, np.float64), True
    return out.reshape(-1), False


def finish(out: np.ndarray, buf: np.ndarray, rounded: bool) -> None:
    """Round an f64 buffer into a 16-bit ``out`` once (overflow to ±inf is the rounding)."""
    if rounded:
        with np.errstate(over="ignore"):
            out[...] = buf.astype(out.dtype).reshape(out.shape)


def pick(kernel, base: str, parallel: bool, family: str):
    """The serial kernel ``base`` or its prange twin ``base_par`` (recorded as variant
    ``family.serial`` / ``family.par``)."""
    use_par(family, parallel)
    return kernel.get(base + "_par" if parallel else base)


def is_parallel(total: int) -> bool:
    """Whether a kernel over ``total`` elements is worth the thread start-up."""
    return total >= th("par_elements")


def threads() -> int:
    import numba

    return numba.get_num_threads()


def tile_columns(outer: int, inner: int, par: bool) -> int:
    """Columns per task: at most TILE, fewer when a few rows must still feed every thread."""
    ib = min(inner, TILE)
    if par:
        want = -(-4 * threads() // max(outer, 1))          # tiles per row for 4/thread
        ib = min(ib, max(64, -(-inner // want)))
    return max(ib, 1)


def row_tasks(rows: int, par: bool) -> int:
    """Row ranges a *_rows kernel splits into (each allocates its scratch once)."""
    return max(1, min(rows, THREADS_TILES * threads())) if par else 1


def check_vector(v: np.ndarray, size: int, name: str, kind: str) -> None:
    """A per-feature operand must hold exactly ``size`` elements (dynamic dims re-check)."""
    if v.size != size:
        raise ValueError(f"{kind} operand `{name}` has {v.size} elements (shape "
                         f"{list(v.shape)}), expected {size} (the normalized axis)")
