"""Numba source of numba-cpu's fused kernels: FusedSwiGLU, GatedResidual and
FusedResidualRmsNorm. Each reads its f32/f64 operands, computes in f64 and rounds once
into the output (the decomposition rounds after every step; one rounding is within the
kinds' contracts). A serial kernel and its prange twin per family."""
from __future__ import annotations

_KERNELS = '''
@njit(cache=True{par})
def swiglu{sfx}(out, packed, rows, n, gate_first):
    for r in {rng}(rows):
        base = r * 2 * n
        for j in range(n):
            lo = np.float64(packed[base + j])
            hi = np.float64(packed[base + n + j])
            g = lo if gate_first else hi
            u = hi if gate_first else lo
            out[r * n + j] = g / (1.0 + math.exp(-g)) * u


@njit(cache=True{par})
def gated{sfx}(out, x, y, gate, gate_row, rows, d):
    for r in {rng}(rows):
        gr = gate_row[r] * d
        for j in range(d):
            i = r * d + j
            out[i] = np.float64(x[i]) + np.float64(gate[gr + j]) * np.float64(y[i])


@njit(cache=True{par})
def residual_rms{sfx}(out, x, res, bias, gamma, beta, rows, d, eps, has_bias):
    for r in {rng}(rows):
        ss = 0.0
        for j in range(d):
            v = np.float64(x[r * d + j]) + np.float64(res[r * d + j])
            if has_bias:
                v += np.float64(bias[j])
            ss += v * v
        inv = 1.0 / math.sqrt(ss / d + eps)
        for j in range(d):
            v = np.float64(x[r * d + j]) + np.float64(res[r * d + j])
            if has_bias:
                v += np.float64(bias[j])
            out[r * d + j] = v * inv * np.float64(gamma[j]) + np.float64(beta[j])
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of the fused kernels."""
    parts = [_KERNELS.format(sfx=sfx, rng=rng, par=par)
             for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True"))]
    parts.append("fused = swiglu\n")     # the module's named entry (compile_kernel)
    return "fused", "\n".join(parts)
