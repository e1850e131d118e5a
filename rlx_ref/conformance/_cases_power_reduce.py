"""Targeted cases for the index, Softmax and column-tile Reduce kernels of numba-cpu.

Each exists because a planted fault (``backends/fault_catalogue/numba_cpu_reduce.py``)
passed the suite without it: ArgMax/ArgMin over a middle axis whose column starts with
NaN (the answer is 0, whatever follows), a middle-axis Softmax whose column holds NaN (the
column is NaN), Softmax rows of logits from 60 to 120 (exp overflows f32 unless the row
max is subtracted first), and a middle-axis Reduce more than 64 columns wide (the parallel
kernel cuts a partial last tile of columns). The Softmax and Reduce cases run with lowered
thresholds, which send these small inputs to the parallel kernels. All are tagged
``power``.
"""
from __future__ import annotations

import numpy as np

from ..backends.variants import LOWERED_TAG
from .rng import CounterRNG

F32 = np.float32


def _binary_mod_rows(seed: int) -> list:
    """[4, 3, 8] · [3, 8]: a suffix operand of several whole rows, read by the row kernel
    (a last axis of 8) one row at a time."""
    from ..ops._elementwise_binary import BinaryAttrs
    from .cases import Spec

    r = _rng(seed, "Binary-mod-rows")
    x = r.standard_normal((4, 3, 8)).astype(F32)
    y = r.standard_normal((3, 8)).astype(F32)
    return [Spec("Binary", BinaryAttrs("Mul"), (x, y), ("power", "mod-rows", "broadcast"),
                 source="power:binary-mod-rows")]


def _rng(seed: int, kind: str):
    return CounterRNG(seed, f"power-reduce:{kind}")


def _nan_first(kind: str, seed: int) -> list:
    from ..ops.opdef import get
    from .cases import Spec

    x = _rng(seed, kind).standard_normal((5, 4)).astype(F32)
    x[0, 1] = np.nan            # first along the axis: the answer is 0
    x[3, 2] = np.nan            # later along the axis: skipped
    y = _rng(seed, kind + "3d").standard_normal((2, 6, 3)).astype(F32)
    y[0, 0, 2] = y[1, 0, 0] = np.nan
    return [Spec(kind, get(kind).attrs(0, False), (x,), ("power", "nan", "nan-first"),
                 source=f"power:{kind}-nan-first"),
            Spec(kind, get(kind).attrs(1, False), (y,), ("power", "nan", "nan-first"),
                 source=f"power:{kind}-nan-first-middle")]


def _softmax(seed: int) -> list:
    from ..ops.opdef import get
    from .cases import Spec

    r = _rng(seed, "Softmax")
    x = r.standard_normal((4, 3)).astype(F32)
    x[2, 1] = np.nan            # column 1 is NaN throughout
    x[0, 2] = np.inf            # column 2 too (inf - inf)
    # logits from 60 to 120: exp overflows f32 above 88.7 unless the row max is subtracted
    # first (rows held entirely above it can come out right by luck: keep both sides)
    big = (60 + 60 * r.random((3, 5))).astype(F32)
    big[:, 0], big[:, 1] = 70.0, 110.0
    return [Spec("Softmax", get("Softmax").attrs(0), (x,), ("power", "nan", LOWERED_TAG),
                 source="power:softmax-nan-column"),
            Spec("Softmax", get("Softmax").attrs(-1), (big,), ("power", "overflow", LOWERED_TAG),
                 source="power:softmax-overflow-rows")]


def _reduce(seed: int) -> list:
    from ..ops.opdef import get
    from .cases import Spec

    # 100 columns: parallel tiles of 64 leave a partial tile of 36
    x = _rng(seed, "Reduce").standard_normal((2, 5, 100)).astype(F32)
    return [Spec("Reduce", get("Reduce").attrs("Sum", (1,), False), (x,),
                 ("power", "partial-tile", LOWERED_TAG), source="power:partial-column-tile")]


BY_KIND = {"Binary": _binary_mod_rows, "ArgMax": lambda seed: _nan_first("ArgMax", seed),
           "ArgMin": lambda seed: _nan_first("ArgMin", seed),
           "Softmax": _softmax, "Reduce": _reduce}
