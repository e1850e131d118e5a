"""OpenCL C sources of RngUniform and RngNormal: RLX's Philox4x32-10 (``ops/_philox``).

One work-item computes one Philox block (four words) from its counter, so the stream is
the same for any launch size. Floats follow the oracle operation by operation in f32 with
contraction off (a fused multiply-add would round once where the oracle rounds twice); ln,
sqrt and cos are taken in double and rounded once, as the oracle does.
"""
from __future__ import annotations

from ...ops import _philox
from ._linalg_cl import named

TWO_PI = float(_philox.TWO_PI_F32).hex()
TINY = float(_philox.F32_MIN_POSITIVE).hex()

# the block function is emitted once per kernel (each source holds one kernel), named after it
_PHILOX = """
inline uint4 philox_{name}(ulong b, uint k0, uint k1)
{{
    uint s0 = (uint)b, s1 = (uint)(b >> 32), s2 = 0, s3 = 0;
    for (int r = 0; r < {rounds}; r++) {{
        const ulong p0 = (ulong)s0 * {m0}UL, p1 = (ulong)s2 * {m1}UL;
        const uint n0 = (uint)(p1 >> 32) ^ s1 ^ k0, n2 = (uint)(p0 >> 32) ^ s3 ^ k1;
        s1 = (uint)p1;
        s3 = (uint)p0;
        s0 = n0;
        s2 = n2;
        k0 += {w0}U;
        k1 += {w1}U;
    }}
    return (uint4)(s0, s1, s2, s3);
}}

inline float unit_{name}(uint w) {{ return (float)(w >> 8) * 0x1p-24f; }}
"""

_UNIFORM = """
__kernel void {name}(__global float* out, const long n, const uint k0, const uint k1,
                     const float lo, const float hi)
{{
    #pragma OPENCL FP_CONTRACT OFF
    const long blk = get_global_id(0);
    if (blk * 4 >= n) return;
    const uint4 w = philox_{name}((ulong)blk, k0, k1);
    const uint lane[4] = {{w.x, w.y, w.z, w.w}};
    const float span = hi - lo;
    for (int i = 0; i < 4; i++) {{
        const long j = blk * 4 + i;
        if (j < n) out[j] = lo + unit_{name}(lane[i]) * span;
    }}
}}
"""

# two normals per block: element j reads words 2j, 2j + 1 (lanes 0-1, then 2-3)
_NORMAL = """
__kernel void {name}(__global float* out, const long n, const uint k0, const uint k1,
                     const float mean, const float scale)
{{
    #pragma OPENCL FP_CONTRACT OFF
    const long blk = get_global_id(0);
    if (blk * 2 >= n) return;
    const uint4 w = philox_{name}((ulong)blk, k0, k1);
    const uint lane[4] = {{w.x, w.y, w.z, w.w}};
    for (int h = 0; h < 2; h++) {{
        const long j = blk * 2 + h;
        if (j >= n) break;
        const float u1 = fmax(unit_{name}(lane[2 * h]), {tiny}f);
        const float u2 = unit_{name}(lane[2 * h + 1]);
        const float ln = (float)log((double)u1);
        const float r = (float)sqrt((double)(-2.0f * ln));
        const float theta = {two_pi}f * u2;
        const float z = r * (float)cos((double)theta);
        const float sz = scale * z;
        out[j] = mean + sz;
    }}
}}
"""


def _build(body: str, stem: str) -> tuple[str, str]:
    consts = dict(rounds=_philox.ROUNDS, m0=_philox.M0, m1=_philox.M1, w0=_philox.W0,
                  w1=_philox.W1, tiny=TINY, two_pi=TWO_PI)
    text = (_PHILOX + body).format(name="{name}", **consts)
    name = named(stem, text)
    return name, text.replace("{name}", name)


def uniform_source() -> tuple[str, str]:
    """(name, source) of the RngUniform fill (one work-item per four outputs)."""
    return _build(_UNIFORM, "rng_uniform")


def normal_source() -> tuple[str, str]:
    """(name, source) of the RngNormal fill (one work-item per two outputs; needs fp64)."""
    return _build(_NORMAL, "rng_normal")
