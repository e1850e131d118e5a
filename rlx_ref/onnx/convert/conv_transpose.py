"""ONNX ConvTranspose onto RLX's ConvTranspose2d/3d, with ONNX's output windows."""
from __future__ import annotations

from ..context import Unmappable
from . import converts
from .nn import _bias, _explicit_pad


@converts("ConvTranspose")
def conv_transpose(ctx, node, ins, attrs):
    x, w = ctx.id(ins[0]), ctx.id(ins[1])
    n = len(ctx.dims(x)) - 2
    kernel = list(attrs.get("kernel_shape", ctx.dims(w)[2:]))
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    outp = list(attrs.get("output_padding", [0] * n))
    auto = attrs.only("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    pads = list(attrs.get("pads", [0] * (2 * n))) if auto == "NOTSET" else [0] * (2 * n)
    groups = attrs.get("group", 1)
    shape = attrs.get("output_shape")
    if auto == "NOTSET" and shape is None and pads[:n] == pads[n:]:
        return [_bias(ctx, _ct(ctx, x, w, n, kernel, strides, pads[:n], dil, outp, groups),
                      ins, n)]
    # otherwise: the uncropped result, then ONNX's window of it (zeros past its end)
    full = _ct(ctx, x, w, n, kernel, strides, [0] * n, dil, [0] * n, groups)
    ins_dims = ctx.dims(x)[2:]
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    size = [s * (i - 1) + p + sp for s, i, p, sp in zip(strides, ins_dims, outp, span)]
    if auto.startswith("SAME"):
        want = list(shape) if shape is not None else [i * s for i, s in
                                                      zip(ins_dims, strides)]
        total = [sz - o for sz, o in zip(size, want)]
        small = [t // 2 for t in total]
        begin = small if auto == "SAME_UPPER" else [t - h for t, h in zip(total, small)]
    elif shape is not None:    # ONNX's reference keeps the origin and sizes the output
        want, begin = list(shape)[-n:], [0] * n
    else:
        begin = pads[:n]
        want = [sz - b - e for sz, b, e in zip(size, pads[:n], pads[n:])]
    y = _window(ctx, full, begin, want)
    return [_bias(ctx, y, ins, n)]


def _ct(ctx, x, w, n, kernel, strides, pads, dil, outp, groups):
    """RLX's ConvTranspose2d/3d with symmetric crop ``pads`` (1-D runs as 2-D)."""
    if n == 1:
        return ctx.op("ConvTranspose2d", (x, w), kernel_size=(1, kernel[0]),
                      stride=(1, strides[0]), padding=(0, pads[0]), dilation=(1, dil[0]),
                      output_padding=(0, outp[0]), groups=groups)
    if n == 2:
        return ctx.op("ConvTranspose2d", (x, w), kernel_size=tuple(kernel),
                      stride=tuple(strides), padding=tuple(pads), dilation=tuple(dil),
                      output_padding=tuple(outp), groups=groups)
    if n == 3:
        return ctx.op("ConvTranspose3d", (x, w), stride=tuple(strides), padding=tuple(pads),
                      dilation=tuple(dil), output_padding=tuple(outp), groups=groups)
    raise Unmappable(f"a {n}-D transposed convolution")


def _window(ctx, y, begin, want):
    """y's spatial window [begin, begin + want) per axis, zero outside y."""
    dims = ctx.dims(y)[2:]
    grow = [(max(0, -b), max(0, b + o - d)) for b, o, d in zip(begin, want, dims)]
    y = _explicit_pad(ctx, y, grow)
    for ax, (b, o, (pre, _)) in enumerate(zip(begin, want, grow)):
        if o <= 0:
            raise Unmappable(f"an empty output along spatial axis {ax}")
        y = ctx.op("Slice", (y,), axis=ax + 2, start=b + pre, len=o, step=1)
    return y
