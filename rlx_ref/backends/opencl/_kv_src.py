"""OpenCL C source of KvAppend: a raw copy of the cache prefix and the row (any dtype)."""
from __future__ import annotations

from ._linalg_cl import named

# an element moves as one unsigned word of its size (c128: two ulongs)
WORD = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}

_SRC = """
__kernel void {name}(__global {w}* out, __global const {w}* cache, __global const {w}* row,
                     const long total, const long cap, const long pos, const long inner)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const long i = o % inner, t = o / inner;
    const long k = t % (pos + 1), r = t / (pos + 1);
    out[o] = k < pos ? cache[(r * cap + k) * inner + i] : row[r * inner + i];
}}
"""


def kv_append_source(size: int) -> tuple[str, str]:
    """(name, source) of KvAppend over elements of ``size`` bytes."""
    text = _SRC.format(name="{name}", w=WORD[size])
    name = named("kv_append", text)
    return name, text.replace("{name}", name)
