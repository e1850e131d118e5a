"""Plots of every Activation kind and its derivative for the op pages.

The curve is the oracle's value (an Activation node run by ``interpret`` in f64); the
derivative is the project's reverse mode (``grad`` of that node, seeded with ones), so a
plot shows what the VJP rules compute, not a numeric difference. Output is plain SVG with
fixed-precision numbers (``svg.num``), so regeneration is byte-stable.
"""
from __future__ import annotations

import math

import numpy as np

from .svg import PALETTE, Svg

POINTS = 321                    # samples per curve: 0.025 apart on the default [-4, 4]
DEFAULT_DOMAIN = (-4.0, 4.0)
DOMAINS = {"Log": (0.02, 4.0), "Sqrt": (0.0, 4.0), "Rsqrt": (0.05, 4.0), "Exp": (-4.0, 2.0)}
Y_LIMIT = 5.0                   # the view is clipped here: poles and fast growth leave it
WIDTH, HEIGHT = 300.0, 200.0
LEFT, RIGHT, TOP, BOTTOM = 30.0, 10.0, 24.0, 20.0
CURVE, SLOPE = PALETTE[0], PALETTE[1]


def activation_kinds() -> list[str]:
    """Every Activation function, in the table's order."""
    from ..ops.elementwise import ACTIVATIONS

    return list(ACTIVATIONS)


def domain(kind: str) -> tuple:
    return DOMAINS.get(kind, DEFAULT_DOMAIN)


def activation_curves(kind: str, x=None) -> tuple:
    """``(x, f(x), f'(x))`` in f64: f from the oracle, f' from ``grad`` of the node."""
    from ..autodiff import SEED, grad
    from ..interpret import interpret
    from ..ir.graph import Graph

    if x is None:
        x = np.linspace(*domain(kind), POINTS)
    x = np.asarray(x, np.float64)
    g = Graph(f"activation_{kind.lower()}")
    xi = g.input("x", list(x.shape), "f64")
    g.set_outputs([g.op("Activation", [xi], op=kind)])
    with np.errstate(all="ignore"):
        (f,) = interpret(g, {"x": x})
        (df,) = interpret(grad(g, ["x"]), {"x": x, SEED: np.ones_like(x)})
    return x, np.asarray(f, np.float64), np.asarray(df, np.float64)


def view(*ys) -> tuple:
    """The y range shown: the curves' finite values, clipped to ±Y_LIMIT, padded 8%."""
    vals = np.concatenate([y[np.isfinite(y)] for y in ys])
    lo = max(float(vals.min()) if vals.size else -1.0, -Y_LIMIT)
    hi = min(float(vals.max()) if vals.size else 1.0, Y_LIMIT)
    if hi - lo < 1e-6:
        lo, hi = lo - 1.0, hi + 1.0
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


def clipped_runs(x, y, lo: float, hi: float) -> list:
    """Polylines of the points (x, y) clipped to lo <= y <= hi: a segment with a non-finite
    end is dropped, one leaving the band is cut at its edge (so poles break the line)."""
    runs, cur = [], []
    for i in range(len(x) - 1):
        x0, y0, x1, y1 = x[i], y[i], x[i + 1], y[i + 1]
        seg = _clip(x0, y0, x1, y1, lo, hi)
        if seg is None:
            if cur:
                runs.append(cur)
            cur = []
            continue
        a, b = seg
        if cur and cur[-1] == a:
            cur.append(b)
        else:
            if cur:
                runs.append(cur)
            cur = [a, b]
    if cur:
        runs.append(cur)
    return runs


def _clip(x0, y0, x1, y1, lo, hi):
    """The part of segment (x0, y0)-(x1, y1) with lo <= y <= hi, or None (also when it
    jumps from above the band to below it or back: a pole, not a steep curve)."""
    if not (math.isfinite(y0) and math.isfinite(y1)):
        return None
    if (y0 > hi and y1 < lo) or (y0 < lo and y1 > hi):
        return None
    t0, t1 = 0.0, 1.0
    dy = y1 - y0
    for edge, sign in ((lo, 1.0), (hi, -1.0)):
        # keep sign * (y0 + t*dy - edge) >= 0
        p, q = sign * dy, sign * (y0 - edge)
        if p == 0.0:
            if q < 0:
                return None
            continue
        t = -q / p
        if p > 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
    if t0 > t1:
        return None
    dx = x1 - x0
    return (x0 + t0 * dx, y0 + t0 * dy), (x0 + t1 * dx, y0 + t1 * dy)


def _ticks(lo: float, hi: float, most: int = 8) -> list:
    """Round tick values inside [lo, hi], at most ``most`` of them."""
    for step in (0.25, 0.5, 1.0, 2.0, 5.0, 10.0):
        first = math.ceil(lo / step - 1e-9)
        last = math.floor(hi / step + 1e-9)
        if last - first + 1 <= most:
            return [k * step for k in range(first, last + 1)]
    return [lo, hi]


def plot_activation(kind: str) -> str:
    """The SVG plot of ``kind``: f solid, f' (from ``grad``) dashed, on one set of axes."""
    x, f, df = activation_curves(kind)
    ylo, yhi = view(f, df)
    xlo, xhi = float(x[0]), float(x[-1])
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(v):
        return LEFT + (v - xlo) / (xhi - xlo) * pw

    def py(v):
        return TOP + (yhi - v) / (yhi - ylo) * ph

    from ..ops.backward_activation import DERIVATIVES

    s = Svg(WIDTH, HEIGHT, f"Activation {kind}: the function (solid) and its derivative "
                           f"from grad (dashed): dx = {DERIVATIVES[kind][0]}")
    for t in _ticks(xlo, xhi):
        s.line(px(t), TOP, px(t), TOP + ph, stroke="#e9ecef")
        s.text(px(t), HEIGHT - 6, f"{t:g}", size=8)
    for t in _ticks(ylo, yhi, 6):
        s.line(LEFT, py(t), LEFT + pw, py(t), stroke="#e9ecef")
        s.text(LEFT - 3, py(t) + 3, f"{t:g}", size=8, anchor="end")
    if xlo <= 0 <= xhi:
        s.line(px(0), TOP, px(0), TOP + ph, stroke="#adb5bd")
    if ylo <= 0 <= yhi:
        s.line(LEFT, py(0), LEFT + pw, py(0), stroke="#adb5bd")
    s.rect(LEFT, TOP, pw, ph, stroke="#868e96")
    for ys, color, dash in ((df, SLOPE, "4 3"), (f, CURVE, None)):
        for run in clipped_runs(x, ys, ylo, yhi):
            s.polyline([(px(a), py(b)) for a, b in run], stroke=color, dash=dash)
    s.text(LEFT, 15, kind, size=11, anchor="start", weight="bold")
    lx = WIDTH - RIGHT - 112
    s.line(lx, 11, lx + 16, 11, stroke=CURVE, width=1.5)
    s.text(lx + 19, 14, "f(x)", size=9, anchor="start")
    s.line(lx + 48, 11, lx + 64, 11, stroke=SLOPE, width=1.5, dash="4 3")
    s.text(lx + 67, 14, "f\u2032(x)", size=9, anchor="start")
    return s.text_doc()


def image_name(kind: str) -> str:
    return f"activation-{kind.lower()}.svg"


def activation_images() -> dict:
    """File name -> SVG text for every Activation kind."""
    return {image_name(k): plot_activation(k) for k in activation_kinds()}


__all__ = ["activation_curves", "activation_images", "activation_kinds", "clipped_runs",
           "domain", "image_name", "plot_activation", "view"]
