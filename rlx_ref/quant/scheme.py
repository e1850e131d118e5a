"""The quant-scheme record and its registry: every block format is defined once.

A GGUF block format (Q4_0, Q4_K, IQ4_NL...) stores ``block_size`` elements in
``block_bytes`` bytes with its scales inside the block; a linear scheme (Int8Block,
Fp8E4m3...) keeps its scales in side tensors. Both are one ``SchemeDef`` each, registered
from one ``blocks_*.py`` (GGUF) or ``linear*.py`` module; everything else (the quant ops,
the GGUF reader and writer, the kernels' decode tables, the docs) reads these records.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np


class QuantError(ValueError):
    """Bad quantized data or a bad request: names what is wrong and what was expected."""


@dataclass(frozen=True)
class SchemeDef:
    """One quantization scheme.

    name: the GGUF/ggml type name (``Q4_K``) or the linear scheme's RLX name
    (``Int8Block``); rlx: RLX's ``QuantScheme`` variant (``GgufQ4K``) or None where RLX
    has none; ggml_type: the GGML type id in GGUF files; gpu_id: RLX's shared
    ``dequant_gguf`` scheme id. dequantize(blocks u8 [n, block_bytes]) -> f32
    [n, block_size]; quantize(f32 [n, block_size]) -> u8 [n, block_bytes] or None where
    only decoding is defined. quantize_source says whose quantizer this one matches bit
    for bit: ``gguf-py``, ``llama.cpp`` (its reference quantizer, tested by error
    bounds), or ``""``.
    """

    name: str
    block_size: int
    block_bytes: int
    dequantize: Callable[[np.ndarray], np.ndarray]
    quantize: Callable[[np.ndarray], np.ndarray] | None = None
    rlx: str | None = None
    ggml_type: int | None = None
    gpu_id: int | None = None
    quantize_source: str = ""
    kind: str = "gguf"            # gguf | linear
    doc: str = ""
    layout: str = ""              # the block's byte layout, one line per field, for docs

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.block_bytes / self.block_size


_SCHEMES: dict[str, SchemeDef] = {}
_LOCK = threading.RLock()
_LOADED = False


def register(sd: SchemeDef) -> SchemeDef:
    """Add a scheme; a name, an RLX variant or a GGML id may be registered only once."""
    with _LOCK:
        if sd.name in _SCHEMES:
            raise ValueError(f"quant scheme {sd.name!r} is already registered")
        for other in _SCHEMES.values():
            if sd.rlx is not None and other.rlx == sd.rlx:
                raise ValueError(f"RLX scheme {sd.rlx} is already {other.name}")
            if sd.ggml_type is not None and other.ggml_type == sd.ggml_type:
                raise ValueError(f"GGML type {sd.ggml_type} is already {other.name}")
        _SCHEMES[sd.name] = sd
    return sd


def _ensure_loaded() -> None:
    """Import every ``blocks_*`` and ``linear*`` module once (each registers its schemes)."""
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        import importlib
        import pkgutil
        from pathlib import Path

        here = [str(Path(__file__).parent)]
        for name in sorted(m.name for m in pkgutil.iter_modules(here)):
            if name.startswith(("blocks_", "linear")):
                importlib.import_module(f"{__package__}.{name}")
        _LOADED = True


def all_schemes() -> list[SchemeDef]:
    _ensure_loaded()
    return list(_SCHEMES.values())


def get_scheme(key) -> SchemeDef:
    """A scheme by GGUF name (``"Q4_K"``), RLX variant (``"GgufQ4K"``) or GGML id (12)."""
    _ensure_loaded()
    if isinstance(key, SchemeDef):
        return key
    for sd in _SCHEMES.values():
        if key in (sd.name, sd.rlx) or (isinstance(key, int) and key == sd.ggml_type):
            return sd
    names = ", ".join(sorted(_SCHEMES))
    raise QuantError(f"unknown quant scheme {key!r}; expected one of: {names}")
