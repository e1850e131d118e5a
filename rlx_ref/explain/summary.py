"""Value summaries of tensors and one-line op docs, for traces and diffs."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

LEADING = 6        # how many leading values a summary keeps


@dataclass(frozen=True)
class ValueSummary:
    """What a learner wants to see of a tensor without printing it all.

    ``min``/``max``/``mean`` are over the finite values (None when there are none; for
    complex tensors they are of the magnitudes, the mean excepted); ``first`` holds the
    leading values in row-major order, as Python scalars.
    """

    shape: tuple
    dtype: str
    size: int
    min: float | None
    max: float | None
    mean: float | complex | None
    nan: int
    inf: int
    zeros: int
    first: tuple

    def stats_text(self) -> str:
        """``min … max … mean …`` plus the NaN/inf/zero counts."""
        if self.size == 0:
            return "empty"
        parts = []
        if self.min is not None:
            parts += [f"min {fmt(self.min)}", f"max {fmt(self.max)}",
                      f"mean {fmt(self.mean)}"]
        parts += [f"nan {self.nan}", f"inf {self.inf}", f"zeros {self.zeros}"]
        return "  ".join(parts)

    def first_text(self) -> str:
        """The leading values, ``...`` when there are more."""
        more = ", ..." if self.size > len(self.first) else ""
        return "[" + ", ".join(fmt(v) for v in self.first) + more + "]"


def fmt(v) -> str:
    """A short, exact-enough rendering of one scalar."""
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, complex):
        return f"{fmt(v.real)}{'+' if v.imag >= 0 else '-'}{fmt(abs(v.imag))}j"
    return f"{float(v):.4g}"


def summarize(arr, leading: int = LEADING) -> ValueSummary:
    """The summary of ``arr`` (any RLX dtype, bf16 and f16 included)."""
    a = np.asarray(arr)
    flat = a.reshape(-1)
    kind = a.dtype.kind
    if kind == "b":
        wide = flat.astype(np.int64)
    elif kind == "c":
        wide = flat.astype(np.complex128)
    elif kind in "iu":
        wide = flat
    else:                                   # f16, f32, f64 and ml_dtypes' bfloat16 ("V")
        wide = flat.astype(np.float64)
    nan = int(np.isnan(wide).sum()) if kind in "fcV" else 0
    inf = int(np.isinf(wide).sum()) if kind in "fcV" else 0
    zeros = int((wide == 0).sum())
    lo = hi = mean = None
    finite = wide[np.isfinite(wide)] if kind in "fcV" else wide
    if finite.size:
        mag = np.abs(finite) if kind == "c" else finite
        lo, hi = _scalar(mag.min()), _scalar(mag.max())
        with np.errstate(all="ignore"):
            mean = _scalar(finite.astype(np.complex128 if kind == "c" else np.float64).mean())
    first = tuple(_scalar(v) for v in (flat[:leading].astype(bool) if kind == "b"
                                        else wide[:leading]))
    return ValueSummary(tuple(a.shape), str(a.dtype), int(a.size), lo, hi, mean, nan, inf,
                        zeros, first)


def _scalar(v):
    v = v.item() if hasattr(v, "item") else v
    return v


def doc_line(kind: str, attrs=None, width: int = 160) -> str:
    """The op's doc reduced to its first sentence; for a table-driven kind (``Activation``,
    ``Binary`` ...) the line of the doc that defines the chosen function is appended."""
    from ..ops.opdef import get

    try:
        doc = get(kind).doc or ""
    except (KeyError, ValueError):
        return ""
    first = re.split(r"(?<=[.!?])\s|\n", doc.strip(), maxsplit=1)[0]
    line = first if len(first) <= width else first[:width - 1] + "…"
    sub = attrs if isinstance(attrs, str) else getattr(attrs, "op", None)
    if isinstance(sub, str):
        m = re.search(r"^\s*[-*]\s*`" + re.escape(sub) + r"`\s*:?\s*(.+)$", doc, re.M)
        if m:
            line += f" ({sub}: {m.group(1).strip()})"
    return line
