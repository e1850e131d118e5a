"""Derive the coefficients of the vectorizable erf in ``rlx_ref/backends/numba_cpu/_vmath.py``.

    python scripts/derive_erf.py        # needs mpmath (a development tool, not a dependency)

Two pieces, both interpolated at Chebyshev nodes in 60-digit arithmetic:
- |x| < 1: erf(x) = x·P(x²), P of degree 12 in s = x² on [0, 1], printed as monomial
  coefficients of s (they alternate and shrink, so Horner's rule is stable);
- 1 <= |x| < 6: erf(|x|) = 1 - exp(-x²)·R(|x|) with R = erfc·exp(x²) (the scaled
  complementary error function), degree 28 in t = (2|x| - 7)/5, printed as monomial
  coefficients of t (all below 0.16 in magnitude: the series converges fast enough that
  the monomial form does not cancel; evaluated in f64 its relative error is 3.3e-16).
Both are evaluated by Estrin's scheme (a shallow tree of multiply-adds) in the kernel.
Beyond 6, erfc(x) < 2^-55 and erf rounds to ±1. The script prints each piece's largest
relative error on a fine grid (before the f64 rounding of the coefficients).
"""
import mpmath as mp

mp.mp.dps = 60


def chebyshev(f, a, b, deg):
    """Chebyshev coefficients of the interpolant of f on [a, b] at deg + 1 nodes."""
    n = deg + 1
    ts = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    fs = [f((b - a) / 2 * t + (a + b) / 2) for t in ts]
    c = [2 * mp.fsum(fs[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n)) / n
         for j in range(n)]
    c[0] /= 2
    return c


def clenshaw(c, t):
    b1 = b2 = 0
    for cj in reversed(c[1:]):
        b1, b2 = 2 * t * b1 - b2 + cj, b1
    return t * b1 - b2 + c[0]


def monomials(c, a, b):
    """Chebyshev coefficients on [a, b] → coefficients of powers of the original variable."""
    deg = len(c) - 1
    poly = [mp.mpf(0)] * (deg + 1)             # in t
    tk_prev, tk = [mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]
    for j, cj in enumerate(c):
        tj = tk_prev if j == 0 else tk if j == 1 else None
        if j >= 2:
            nxt = [mp.mpf(0)] * (j + 1)
            for i, v in enumerate(tk):
                nxt[i + 1] += 2 * v
            for i, v in enumerate(tk_prev):
                nxt[i] -= v
            tk_prev, tk = tk, nxt
            tj = tk
        for i, v in enumerate(tj):
            poly[i] += cj * v
    # t = (2s - a - b)/(b - a): expand powers of t into powers of s
    alpha, beta = 2 / (b - a), -(a + b) / (b - a)
    out = [mp.mpf(0)] * (deg + 1)
    for k, pk in enumerate(poly):
        for i in range(k + 1):
            out[i] += pk * mp.binomial(k, i) * alpha ** i * beta ** (k - i)
    return out


def worst(f, g, a, b):
    return max(abs(g(x) / f(x) - 1) for x in (a + (b - a) * mp.mpf(i) / 2000 for i in range(2001)))


def main():
    small = lambda s: mp.erf(mp.sqrt(s)) / mp.sqrt(s) if s else 2 / mp.sqrt(mp.pi)
    p = monomials(chebyshev(small, mp.mpf(0), mp.mpf(1), 12), mp.mpf(0), mp.mpf(1))
    horner = lambda s: mp.fsum(pk * s ** k for k, pk in enumerate(p))
    print("# |x| < 1: erf(x) = x * P(x*x), P's coefficients of s^0..s^12; "
          f"worst relative error {float(worst(small, horner, mp.mpf(0), mp.mpf(1))):.2e}")
    print("_VERF_P = (" + ", ".join(repr(float(v)) for v in p) + ")")
    scaled = lambda x: mp.erfc(x) * mp.exp(x * x)
    c = chebyshev(scaled, mp.mpf(1), mp.mpf(6), 28)
    fit = lambda x: clenshaw(c, (2 * x - 7) / 5)
    r = monomials(c, mp.mpf(-1), mp.mpf(1))
    print("# 1 <= |x| < 6: erfc(x)*exp(x*x), coefficients of t^0..t^28, t = (2|x| - 7)/5; "
          f"worst relative error {float(worst(scaled, fit, mp.mpf(1), mp.mpf(6))):.2e}")
    print("_VERF_R = (" + ", ".join(repr(float(v)) for v in r) + ")")


if __name__ == "__main__":
    main()
