"""The GGUF block layouts as byte maps, read from each scheme's own ``layout`` text (the
record in ``rlx_ref/quant``), so a new block format appears here with its record."""
from __future__ import annotations

import re

from .svg import PALETTE, Svg

SIZES = {"u8": 1, "i8": 1, "f16": 2, "u16": 2, "i16": 2, "f32": 4, "u32": 4}
_T = "|".join(SIZES)
# the layout texts' field forms, most specific first; each gives (name, bytes)
_FORMS = (
    (re.compile(rf"^(\w+)(?:\[(\d+)\])?\s+({_T})\b"),                  # qs[16]   u8   ...
     lambda m: (m[1], int(m[2] or 1) * SIZES[m[3]])),
    (re.compile(rf"^(\d+) x \((\d+) [^,]*bytes[^,]*, ({_T})"),         # 8 x (4 bytes, u32
     lambda m: ("groups", int(m[1]) * (int(m[2]) + SIZES[m[3]]))),
    (re.compile(r"^(\d+) x (\d+) bytes"),                               # 4 x 8 bytes: ...
     lambda m: ("codes", int(m[1]) * int(m[2]))),
    (re.compile(rf"^(\d+) x ({_T})\b"),                                 # 32 x u16: ...
     lambda m: (m[2] + "s", int(m[1]) * SIZES[m[2]])),
    (re.compile(r"^(\d+) bytes"),                                       # 16 bytes: ...
     lambda m: ("bytes", int(m[1]))),
    (re.compile(rf"^({_T})\s+(\w+)"),                                   # f16 d / u8 e: ...
     lambda m: (m[2], SIZES[m[1]])),
    (re.compile(rf"^({_T}):"),                                          # u16: ...
     lambda m: (m[1], SIZES[m[1]])),
)
BYTE_PX = 2.0
ROW = 34.0
LEFT = 84.0


def fields(layout: str, count_bytes: bool = False) -> list | None:
    """``(name, bytes, description)`` per layout line; None if a line has no known form.
    ``count_bytes``: read ``name[n] type`` as n bytes, not n elements (Q5_0's
    ``qh[4] u32`` is one u32 written as its 4 bytes)."""
    out = []
    for line in layout.strip().splitlines():
        text = line.strip()
        for k, (rx, get) in enumerate(_FORMS):
            m = rx.match(text)
            if m:
                name, n = get(m)
                if k == 0 and count_bytes and m[2]:
                    n = int(m[2])
                out.append((name, n, text))
                break
        else:
            return None
    return out


def block_fields(sd) -> list | None:
    """The fields of scheme ``sd``, read whichever way adds up to its block size."""
    for count_bytes in (False, True):
        f = fields(sd.layout, count_bytes)
        if f and sum(n for _, n, _ in f) == sd.block_bytes:
            return f
    return None


def gguf_schemes() -> list:
    """The GGUF block schemes, smallest block first (then by name)."""
    from ..quant.scheme import all_schemes

    return sorted((s for s in all_schemes() if s.kind == "gguf"),
                  key=lambda s: (s.block_size, s.block_bytes, s.name))


def gguf_blocks() -> str:
    """One row per GGUF block format: its fields as spans of its bytes."""
    schemes = [(s, block_fields(s)) for s in gguf_schemes()]
    drawn = [(s, f) for s, f in schemes if f]
    widest = max(s.block_bytes for s, _ in drawn)
    width = LEFT + widest * BYTE_PX + 40
    height = 40 + len(drawn) * ROW + 20
    s = Svg(width, height, "GGUF block layouts: the bytes of one block, field by field")
    s.text(10, 16, "GGUF blocks: one block's bytes, field by field (hover a field for its "
                   "description)", size=11, anchor="start", weight="bold")
    for row, (sd, fs) in enumerate(drawn):
        y = 36 + row * ROW
        s.text(10, y + 11, sd.name, size=9, anchor="start", weight="bold")
        s.text(10, y + 22, f"{sd.block_size} w, {sd.bits_per_weight:g} bpw", size=7,
               anchor="start", fill="#495057")
        x = LEFT
        for k, (name, n, desc) in enumerate(fs):
            w = n * BYTE_PX
            s.rect(x, y, w, 18, fill=PALETTE[k % len(PALETTE)], stroke="#ffffff", width=0.8,
                   tip=f"{sd.name} bytes {int((x - LEFT) / BYTE_PX)}..."
                       f"{int((x - LEFT) / BYTE_PX) + n - 1}: {desc}")
            if w >= 6 * len(name) + 4:
                s.text(x + w / 2, y + 12, name, size=7, fill="#ffffff")
            x += w
        s.text(x + 4, y + 12, f"{sd.block_bytes} B", size=7, anchor="start")
    missing = [sd.name for sd, f in schemes if not f]
    if missing:
        s.text(10, height - 6, "layout text not drawn: " + ", ".join(missing), size=7,
               anchor="start", fill="#c92a2a")
    return s.text_doc()


__all__ = ["block_fields", "fields", "gguf_blocks", "gguf_schemes"]
