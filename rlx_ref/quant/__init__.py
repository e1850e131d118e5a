"""Quantization: RLX's quant schemes bit for bit, and the GGUF container.

``quantize(w, "Q4_K")`` packs a float array into GGUF blocks; ``dequant(packed, "Q4_K",
num_elements=n)`` decodes them. Each scheme is one ``SchemeDef`` (``scheme.py``).
"""
from __future__ import annotations

import numpy as np

from .scheme import QuantError, SchemeDef, all_schemes, get_scheme, register
from .gguf_format import GGUFError, QuantizedTensor
from .gguf_reader import GGUFReader, load_gguf
from .gguf_writer import write_gguf
from .gguf_convert import ConvertReport, convert_to_gguf


def _as_bytes(packed) -> np.ndarray:
    arr = np.asarray(packed)
    if arr.dtype != np.uint8:
        if arr.dtype.kind not in "iu" or arr.dtype.itemsize != 1:
            raise QuantError(f"packed data must be uint8 bytes, got dtype {arr.dtype}")
        arr = arr.view(np.uint8)
    return arr.reshape(-1)


def dequant(packed, dtype, num_elements: int | None = None) -> np.ndarray:
    """Decode GGUF blocks of scheme ``dtype`` into a flat float32 array.

    ``num_elements`` (default: everything the bytes hold) must be a whole number of
    blocks and fit in the data given.
    """
    sd = get_scheme(dtype)
    if sd.kind != "gguf":
        raise QuantError(f"{sd.name} keeps its scales in side tensors; use its own unpack")
    raw = _as_bytes(packed)
    if raw.size % sd.block_bytes:
        raise QuantError(f"{sd.name}: {raw.size} bytes is not a whole number of "
                         f"{sd.block_bytes}-byte blocks")
    nblocks = raw.size // sd.block_bytes
    if num_elements is not None:
        n = int(num_elements)
        if n < 0 or n % sd.block_size:
            raise QuantError(f"{sd.name}: num_elements={n} must be a non-negative multiple "
                             f"of the block size {sd.block_size}")
        if n // sd.block_size > nblocks:
            raise QuantError(f"{sd.name}: num_elements={n} needs {n // sd.block_size} "
                             f"blocks but the data holds {nblocks}")
        nblocks = n // sd.block_size
    blocks = raw[: nblocks * sd.block_bytes].reshape(nblocks, sd.block_bytes)
    return np.ascontiguousarray(sd.dequantize(blocks), dtype=np.float32).reshape(-1)


def quantize(w, dtype) -> np.ndarray:
    """Pack a float array (size a multiple of the block size) into flat uint8 blocks."""
    sd = get_scheme(dtype)
    if sd.kind != "gguf":
        raise QuantError(f"{sd.name} keeps its scales in side tensors; use its own pack")
    if sd.quantize is None:
        raise QuantError(f"{sd.name}: rlx_ref decodes this scheme but has no quantizer")
    x = np.asarray(w, dtype=np.float32).reshape(-1)
    if x.size % sd.block_size:
        raise QuantError(f"{sd.name}: {x.size} elements is not a multiple of the block "
                         f"size {sd.block_size}")
    out = sd.quantize(x.reshape(-1, sd.block_size))
    return np.ascontiguousarray(out, dtype=np.uint8).reshape(-1)


__all__ = ["QuantError", "SchemeDef", "all_schemes", "get_scheme", "register",
           "dequant", "quantize", "GGUFError", "QuantizedTensor", "GGUFReader",
           "load_gguf", "write_gguf", "ConvertReport", "convert_to_gguf"]
