"""ONNX DFT onto RLX's Fft (rows in the 2N real block layout along the last axis)."""
from __future__ import annotations

import numpy as np

from ..context import Unmappable, norm_axis
from . import converts


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _part(ctx, x, i, dims):
    """Real (i = 0) or imaginary (i = 1) lane of ONNX's trailing [re, im] axis."""
    r = len(dims)
    return ctx.reshape(ctx.op("Slice", (x,), axis=r - 1, start=i, len=1, step=1), dims[:-1])


@converts("DFT")
def dft(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    r = len(dims)
    if ctx.opset >= 20:
        axis = int(ctx.need(ins[2], "DFT's axis")) if _opt(ins, 2) else -2
    else:
        axis = attrs.get("axis", 1)
    ax = norm_axis(axis, r)
    if ax == r - 1 or dims[-1] not in (1, 2):
        raise Unmappable(f"DFT axis {axis} of {list(dims)}: the last axis holds [re, im]")
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    m = dims[ax]
    n = 2 * (m - 1) if inverse and onesided else m
    if _opt(ins, 1) and int(ctx.need(ins[1], "DFT's dft_length")) != n:
        raise Unmappable("a dft_length other than the signal's length (zero padding or "
                         "truncation)")
    # the signal axis moves last: RLX transforms rows of the last axis
    perm = [i for i in range(r - 1) if i != ax] + [ax]
    back = tuple(int(i) for i in np.argsort(perm)) + (r - 1,)
    re = ctx.op("Transpose", (_part(ctx, x, 0, dims),), perm=tuple(perm))
    if dims[-1] == 2:
        im = ctx.op("Transpose", (_part(ctx, x, 1, dims),), perm=tuple(perm))
    else:
        im = ctx.const(np.zeros(ctx.dims(re), ctx.dt(re).np), ctx.dt(re))
    last = r - 2
    if inverse and onesided:
        # the Hermitian half: X[N-k] = conj(X[k]); the imaginary parts of the DC and
        # Nyquist bins only reach the (discarded) imaginary output, as in numpy's irfft
        mirror = [ctx.op("Slice", (t,), axis=last, start=n - m, len=n - m, step=-1)
                  for t in (re, im)]
        re = ctx.op("Concat", (re, mirror[0]), axis=last)
        im = ctx.op("Concat", (im, ctx.act("Neg", mirror[1])), axis=last)
    y = ctx.op("Fft", (ctx.op("Concat", (re, im), axis=last),), inverse=inverse,
               norm="Forward" if inverse else "Backward")
    keep = n // 2 + 1 if onesided and not inverse else n
    lanes = [ctx.op("Slice", (y,), axis=last, start=s, len=keep, step=1) for s in (0, n)]
    if inverse and onesided:
        lanes = lanes[:1]       # irfft's output is real
    out_dims = ctx.dims(lanes[0]) + (1,)
    lanes = [ctx.reshape(t, out_dims) for t in lanes]
    z = lanes[0] if len(lanes) == 1 else ctx.op("Concat", lanes, axis=r - 1)
    return [ctx.op("Transpose", (z,), perm=back)]


@converts("MelWeightMatrix")
def mel_weight_matrix(ctx, node, ins, attrs):
    """A table of its (import-time) operands: evaluated once with ONNX's reference."""
    from ..load import _fold

    for n in ins:
        if n:
            ctx.need(n, "MelWeightMatrix's operands")
    attrs.get("output_datatype")
    return _fold(ctx, node, ins)


@converts("STFT")
def stft(ctx, node, ins, attrs):
    """Frames gathered at import-time offsets, windowed, and transformed by RLX's Fft."""
    onesided = attrs.get("onesided", 1)
    x = ctx.id(ins[0])
    batch, length, lanes = ctx.dims(x)
    step = int(ctx.need(ins[1], "STFT's frame_step"))
    window = ctx.id(ins[2]) if _opt(ins, 2) else None
    if _opt(ins, 3):
        n = int(ctx.need(ins[3], "STFT's frame_length"))
    else:
        n = ctx.dims(window)[0] if window is not None else length
    if window is not None and ctx.dims(window) != (n,):
        raise Unmappable(f"a window of {list(ctx.dims(window))} for frames of {n}")
    if step <= 0 or n > length:
        raise Unmappable(f"frame_step {step} and frame_length {n} over {length} samples")
    frames = 1 + (length - n) // step
    idx = ctx.const((np.arange(frames)[:, None] * step + np.arange(n)[None, :]).astype(
        np.int64))
    parts = []
    for i in range(2):
        if i < lanes:
            lane = _part(ctx, x, i, (batch, length, lanes))
            t = ctx.op("Gather", (lane, idx), axis=1)               # [batch, frames, n]
            if window is not None:
                t = ctx.bin("Mul", t, ctx.reshape(ctx.cast(window, ctx.dt(t)), (1, 1, n)))
        else:
            t = ctx.const(np.zeros((batch, frames, n), ctx.dt(x).np), ctx.dt(x))
        parts.append(t)
    y = ctx.op("Fft", (ctx.op("Concat", parts, axis=2),), inverse=False, norm="Backward")
    keep = n // 2 + 1 if onesided else n
    out = [ctx.reshape(ctx.op("Slice", (y,), axis=2, start=s, len=keep, step=1),
                       (batch, frames, keep, 1)) for s in (0, n)]
    return [ctx.op("Concat", out, axis=3)]
