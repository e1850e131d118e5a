"""GGUF ternary block formats TQ1_0 and TQ2_0: weights in {-1, 0, 1} times an f16 scale.

TQ2_0 spends 2 bits per trit; TQ1_0 packs 5 trits per byte (3**5 = 243 <= 256) as a
fixed-point base-3 fraction, so that multiplying a byte by 3**k (mod 256) and taking the
top bits of 3 * byte reads its k-th trit without a division.
"""
from __future__ import annotations

import numpy as np

from ._blockfields import f16_at, f16_bytes, quiet
from .scheme import SchemeDef, register

_POW3 = (3 ** np.arange(5)).astype(np.uint8)        # 1, 3, 9, 27, 81


def _trits(x: np.ndarray):
    """Rows of f32 -> (trit codes 0/1/2 for -1/0/+1, the f32 scale amax).

    A weight's trit is round-half-away(x * (1 / amax)), the product taken in f32 as
    gguf-py takes it. Where 1 / amax overflows (amax below 2**-128), x / amax is used.
    """
    x = np.asarray(x, np.float32)
    d = np.abs(x).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
        v = np.where(np.isfinite(inv), x * inv, x / d)
    a = np.abs(v)
    fl = np.floor(a)
    mag = fl + (a - fl >= 0.5)
    q = np.clip(np.sign(v) * mag, -1, 1)
    return (q + 1).astype(np.uint8), d[:, 0]


def _dequant_tq2_0(blocks):
    n = blocks.shape[0]
    qs = blocks[:, :64].reshape(n, 2, 1, 32)
    t = (qs >> (2 * np.arange(4, dtype=np.uint8))[:, None]) & 3     # [n, 2, 4, 32]
    q = t.reshape(n, 256).astype(np.int8) - np.int8(1)
    return f16_at(blocks, 64)[:, None] * q.astype(np.float32)


def _quantize_tq2_0(x):
    n = x.shape[0]
    t, d = _trits(x)
    t = t.reshape(n, 2, 4, 32) << (2 * np.arange(4, dtype=np.uint8))[:, None]
    qs = np.bitwise_or.reduce(t, axis=2).reshape(n, 64)
    return np.concatenate([qs, f16_bytes(d)], axis=1)


# TQ1_0 trit planes: (first weight, bytes, trits per byte) of the 32-, 16- and 4-byte runs.
_TQ1_RUNS = ((0, 32, 5), (160, 16, 5), (240, 4, 4))


def _dequant_tq1_0(blocks):
    n = blocks.shape[0]
    parts, at = [], 0
    for _, nbytes, ntrits in _TQ1_RUNS:
        b = blocks[:, None, at:at + nbytes] * _POW3[:ntrits, None]      # mod 256
        parts.append(((b.astype(np.uint16) * 3) >> 8).reshape(n, -1))
        at += nbytes
    q = np.concatenate(parts, axis=1).astype(np.int8) - np.int8(1)
    return f16_at(blocks, 52)[:, None] * q.astype(np.float32)


def _quantize_tq1_0(x):
    n = x.shape[0]
    t, d = _trits(x)
    out = []
    for first, nbytes, ntrits in _TQ1_RUNS:
        run = t[:, first:first + nbytes * ntrits].reshape(n, ntrits, nbytes)
        v = (run.astype(np.uint16) * _POW3[::-1][:ntrits, None]).sum(axis=1, dtype=np.uint16)
        # the byte is ceil(v * 256 / 243): the trits as a base-3 fraction of 256
        out.append(((v * 256 + 242) // 243).astype(np.uint8))
    return np.concatenate([*out, f16_bytes(d)], axis=1)


_QDOC = ("Quantizer: d = max |w| (stored as f16), trit = round-half-away(w / d), bit for "
         "bit as gguf-py quantizes.")
register(SchemeDef(
    name="TQ1_0", block_size=256, block_bytes=54, rlx="GgufTQ1_0", ggml_type=34, gpu_id=8,
    dequantize=quiet(_dequant_tq1_0), quantize=_quantize_tq1_0, quantize_source="gguf-py",
    layout="32 bytes: 5 trits each, byte i = weights i, 32+i, .., 128+i\n"
           "16 bytes: 5 trits each, byte i = weights 160+i, 176+i, .., 224+i\n"
           "4 bytes: 4 trits each, byte i = weights 240+i, 244+i, 248+i, 252+i\n"
           "f16 d",
    doc="1.6875 bpw ternary: w = d * (trit - 1). A byte holds its trits t0..t4 (t0 of the "
        "lowest weight) as ceil(256 * sum(t_k 3**(4-k)) / 243); trit k reads back as "
        "((byte * 3**k) mod 256) * 3 >> 8. " + _QDOC,
))
register(SchemeDef(
    name="TQ2_0", block_size=256, block_bytes=66, rlx="GgufTQ2_0", ggml_type=35, gpu_id=9,
    dequantize=quiet(_dequant_tq2_0), quantize=_quantize_tq2_0, quantize_source="gguf-py",
    layout="64 bytes: 2-bit codes, byte i of half h = weights 128h + 32k + i at bits 2k\n"
           "f16 d",
    doc="2.0625 bpw ternary: w = d * (code - 1), code in 0..2 (3 decodes to 2d). " + _QDOC,
))
