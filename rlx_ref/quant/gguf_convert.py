"""Convert a safetensors checkpoint to a GGUF file, quantizing its weight matrices.

Each tensor's target is decided before anything is written: norms, biases and 1-D
tensors stay F32 (``skip_norm_bias``, as llama.cpp's quantizer keeps them); other float
tensors take the first ``scheme_overrides`` pattern (fnmatch) that matches their name, else
``scheme``; a tensor whose row length is not a multiple of its scheme's block size falls
back to F16 (F32 where F16 would overflow) and the report says so. Rows are the last
axis (GGUF's ``ne0``), so each row is a whole number of blocks. Tensors are read from the
mapped input and quantized one at a time, as the output is written.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .gguf_format import GGUFError, ggml_type, is_plain
from .gguf_writer import TensorEntry, check_alignment, metadata_bytes, write_entries
from .safetensors import load_safetensors
from .scheme import QuantError

_PLAIN_TARGETS = ("F32", "F16", "BF16")
_INT_SOURCES = {"I8": "I8", "I16": "I16", "I32": "I32", "I64": "I64"}
_FLOAT_SOURCES = ("F64", "F32", "F16", "BF16")
_F16_MAX = 65504.0
_NORM_BIAS = re.compile(r"norm|(^|[._])bias$", re.IGNORECASE)


class TensorReport(NamedTuple):
    """One converted tensor: numpy-order shape, the GGML type written, bytes in and out."""

    name: str
    shape: tuple
    scheme: str
    bytes_in: int
    bytes_out: int


@dataclass
class ConvertReport:
    """What ``convert_to_gguf`` wrote: per tensor, in total, and why any tensor fell
    back from the scheme asked for (``notes``)."""

    path: str
    tensors: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    file_bytes: int = 0

    @property
    def compression_ratio(self) -> float:
        return self.bytes_in / self.bytes_out if self.bytes_out else float("inf")

    def table(self) -> str:
        """The report as a text table, one tensor a line, then the totals."""
        w = max([len(t.name) for t in self.tensors] + [4])
        lines = [f"{'name':<{w}}  {'scheme':<8} {'shape':<20} {'bytes in':>12} "
                 f"{'bytes out':>12}"]
        for t in self.tensors:
            note = f"  ({self.notes[t.name]})" if t.name in self.notes else ""
            lines.append(f"{t.name:<{w}}  {t.scheme:<8} {str(list(t.shape)):<20} "
                         f"{t.bytes_in:>12} {t.bytes_out:>12}{note}")
        lines.append(f"{len(self.tensors)} tensors: {self.bytes_in} bytes in, "
                     f"{self.bytes_out} bytes out, compression {self.compression_ratio:.2f}x; "
                     f"wrote {self.path} ({self.file_bytes} bytes)")
        return "\n".join(lines)


def _target_scheme(name: str):
    """Check a scheme name up front: a plain float type or a quantizer that exists."""
    if not isinstance(name, str):
        raise GGUFError(f"scheme {name!r} must be a name such as 'Q8_0' or 'F16'")
    if name.upper() in _PLAIN_TARGETS:
        return name.upper()
    from . import get_scheme

    try:
        sd = get_scheme(name)
    except QuantError as e:
        raise GGUFError(f"scheme {name!r}: {e}") from None
    if sd.kind != "gguf" or sd.quantize is None:
        raise GGUFError(f"scheme {sd.name}: not a GGUF block format with a quantizer")
    t = ggml_type(sd.name)
    if (t.block_size, t.type_size) != (sd.block_size, sd.block_bytes):
        raise GGUFError(f"scheme {sd.name}: its blocks ({sd.block_size} in "
                        f"{sd.block_bytes} bytes) disagree with GGUF's")
    return sd.name


def _choose(name, dtype, shape, src, default, overrides, skip_norm_bias):
    """(GGML type name, note) for one source tensor."""
    if dtype in _INT_SOURCES:
        return _INT_SOURCES[dtype], ""
    if dtype not in _FLOAT_SOURCES:
        raise GGUFError(f"tensor {name!r}: dtype {dtype} has no GGML type")
    if skip_norm_bias and (len(shape) <= 1 or _NORM_BIAS.search(name)):
        return "F32", ""
    scheme = next((s for pat, s in overrides if fnmatch.fnmatchcase(name, pat)), default)
    if scheme in _PLAIN_TARGETS:
        return scheme, ""
    block = ggml_type(scheme).block_size
    if shape and shape[-1] % block == 0:
        return scheme, ""
    why = (f"a 0-d tensor cannot be {scheme}" if not shape else
           f"row length {shape[-1]} is not a multiple of {scheme}'s block size {block}")
    big = src.size and float(np.max(np.abs(src.astype(np.float32)))) > _F16_MAX
    fallback = "F32" if big else "F16"
    return fallback, f"{why}; wrote {fallback}" + (" (values exceed F16)" if big else "")


def _producer(name: str, src: np.ndarray, target: str):
    def produce() -> np.ndarray:
        if target in _INT_SOURCES.values():
            return np.ascontiguousarray(src, dtype=src.dtype.newbyteorder("<"))
        x = np.asarray(src, dtype=np.float32)
        if target == "F32":
            return x.astype("<f4")
        if target == "F16":
            return x.astype("<f2")
        if target == "BF16":
            import ml_dtypes

            return x.astype(ml_dtypes.bfloat16).view("<u2")
        if x.size == 0:
            return np.zeros(0, np.uint8)
        from . import quantize

        try:
            return quantize(x.reshape(-1), target)
        except QuantError as e:
            raise GGUFError(f"tensor {name!r}: quantizing to {target}: {e}") from None

    return produce


def convert_to_gguf(safetensors_path, out_path, scheme: str, scheme_overrides=None,
                    skip_norm_bias: bool = True, *, architecture: str = "llama",
                    metadata: dict | None = None, alignment: int = 32) -> ConvertReport:
    """Convert a safetensors file to GGUF v3; returns a ``ConvertReport``.

    scheme: the GGML type for weights (``"Q4_K"``, ``"Q8_0"``, or ``"F16"`` / ``"BF16"``
    / ``"F32"``); scheme_overrides: {fnmatch pattern: scheme}, first match wins; names
    are kept as they are in the input.
    """
    alignment = check_alignment(alignment)
    default = _target_scheme(scheme)
    overrides = [(str(p), _target_scheme(s)) for p, s in dict(scheme_overrides or {}).items()]
    report = ConvertReport(str(out_path))
    entries = []
    with load_safetensors(safetensors_path) as st:
        for name in st.names():
            dtype, shape, src = st.dtype(name), st.shape(name), st.tensor(name)
            if len(shape) > 4:
                raise GGUFError(f"tensor {name!r}: {len(shape)} dims exceed GGUF's 4")
            target, note = _choose(name, dtype, shape, src, default, overrides,
                                   skip_norm_bias)
            e = TensorEntry(name, tuple(reversed(shape)), ggml_type(target),
                            _producer(name, src, target))
            entries.append(e)
            report.tensors.append(TensorReport(name, shape, target, st.n_bytes(name),
                                               e.n_bytes))
            if note:
                report.notes[name] = note
        meta = dict(metadata or {})
        if any(not is_plain(ggml_type(t.scheme)) for t in report.tensors):
            meta.setdefault("general.quantization_version", (2, "UINT32"))
        write_entries(out_path, metadata_bytes(architecture, meta, alignment), entries,
                      alignment)
    report.bytes_in = sum(t.bytes_in for t in report.tensors)
    report.bytes_out = sum(t.bytes_out for t in report.tensors)
    report.file_bytes = os.path.getsize(out_path)
    return report


__all__ = ["convert_to_gguf", "ConvertReport", "TensorReport"]
