"""DeformConv (2-D): every kernel tap sampled bilinearly at its offset position (zeros
outside the image, as ONNX's reference does through GridSample with align_corners), scaled
by the mask, then one MatMul per group with the weights."""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable
from . import converts
from .grid_sample import _resolve


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _sample(ctx, img, py, px, h, w):
    """Bilinear samples of img [N, C, H·W] at positions py, px [N, M]: [N, C, M]."""
    batch, chans, _ = ctx.dims(img)
    m = ctx.dims(py)[1]
    taps = []
    for p, n in ((py, h), (px, w)):
        lo = ctx.act("Floor", p)
        t = ctx.bin("Sub", p, lo)
        one = ctx.like(1.0, t)
        taps.append([(*_resolve(ctx, i, n, "zeros", None), wt)
                     for i, wt in ((lo, ctx.bin("Sub", one, t)), (ctx.bin("Add", lo, one), t))])
    total = None
    for (yi, yok, yw) in taps[0]:
        for (xi, xok, xw) in taps[1]:
            flat = ctx.bin("Add", ctx.bin("Mul", yi, ctx.scalar(w, DType.I64)), xi)
            ok = ctx.cast(ctx.bin("BitAnd", yok, xok), ctx.dt(yw))
            wt = ctx.bin("Mul", ctx.bin("Mul", yw, xw), ok)
            idx = ctx.op("Expand", (ctx.reshape(flat, (batch, 1, m)),),
                         target_shape=(batch, chans, m))
            val = ctx.bin("Mul", ctx.op("GatherElements", (img, idx), axis=2),
                          ctx.cast(ctx.reshape(wt, (batch, 1, m)), ctx.dt(img)))
            total = val if total is None else ctx.bin("Add", total, val)
    return total


@converts("DeformConv")
def deform_conv(ctx, node, ins, attrs):
    x, wgt, off = ctx.id(ins[0]), ctx.id(ins[1]), ctx.id(ins[2])
    xd, wd, od = ctx.dims(x), ctx.dims(wgt), ctx.dims(off)
    if len(xd) != 4:
        raise Unmappable(f"a {len(xd) - 2}-D DeformConv (ONNX's reference defines 2-D)")
    batch, chans, h, w = xd
    kh, kw = attrs.get("kernel_shape", wd[2:])
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    group, ogroup = attrs.get("group", 1), attrs.get("offset_group", 1)
    oh, ow = od[2:]
    if min(h, w) < 2 or chans % ogroup or chans != wd[1] * group or wd[0] % group:
        raise Unmappable(f"DeformConv of {list(xd)} by {list(wd)} in {group} groups")
    k, m = kh * kw, kh * kw * oh * ow
    dt = DType.F32 if ctx.dt(x) is not DType.F64 else DType.F64
    off = ctx.reshape(ctx.cast(off, dt), (batch, ogroup, kh, kw, 2, oh, ow))
    base_y = (-pads[0] + sh * np.arange(oh))[None, None, :, None] + \
        (dh * np.arange(kh))[:, None, None, None] + np.zeros((1, kw, 1, ow))
    base_x = (-pads[1] + sw * np.arange(ow))[None, None, None, :] + \
        (dw * np.arange(kw))[None, :, None, None] + np.zeros((kh, 1, oh, 1))
    mask = None
    if _opt(ins, 4):
        mask = ctx.reshape(ctx.cast(ctx.id(ins[4]), dt), (batch, ogroup, m))
    per = chans // ogroup
    img = ctx.cast(ctx.reshape(x, (batch, chans, h * w)), dt)
    cols = []
    for g in range(ogroup):
        pos = []
        for lane, base in ((0, base_y), (1, base_x)):
            o = ctx.op("Slice", (off,), axis=4, start=lane, len=1, step=1)
            o = ctx.reshape(ctx.op("Slice", (o,), axis=1, start=g, len=1, step=1), (batch, m))
            pos.append(ctx.bin("Add", o, ctx.const(base.reshape(1, m).astype(dt.np), dt)))
        part = ctx.op("Slice", (img,), axis=1, start=g * per, len=per, step=1)
        s = _sample(ctx, part, pos[0], pos[1], h, w)                 # [N, per, M]
        if mask is not None:
            mk = ctx.op("Slice", (mask,), axis=1, start=g, len=1, step=1)
            s = ctx.bin("Mul", s, mk)
        cols.append(s)
    cols = cols[0] if ogroup == 1 else ctx.op("Concat", cols, axis=1)
    cols = ctx.reshape(cols, (batch, chans * k, oh * ow))          # channel, kh, kw order
    wflat = ctx.cast(ctx.reshape(wgt, (wd[0], wd[1] * k)), dt)
    outs, oc = [], wd[0] // group
    for gr in range(group):
        wg = ctx.op("Slice", (wflat,), axis=0, start=gr * oc, len=oc, step=1)
        cg = ctx.op("Slice", (cols,), axis=1, start=gr * wd[1] * k, len=wd[1] * k, step=1)
        outs.append(ctx.op("MatMul", (wg, cg)))                    # [N, oc, oh·ow]
    y = outs[0] if group == 1 else ctx.op("Concat", outs, axis=1)
    if _opt(ins, 3):
        y = ctx.bin("Add", y, ctx.reshape(ctx.cast(ctx.id(ins[3]), dt), (1, wd[0], 1)))
    return [ctx.cast(ctx.reshape(y, (batch, wd[0], oh, ow)), ctx.dt(x))]

