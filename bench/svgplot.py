"""A dependency-free grouped bar chart in SVG (log-scale ratios)."""
from __future__ import annotations

import math

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def bar_chart(rows: dict, series: tuple, title: str) -> str:
    """rows: label → {series: ratio or None}. Bars are log10(ratio) around 1×."""
    bar_h, gap, left, width = 8, 10, 230, 420
    vals = [v for r in rows.values() for v in r.values() if v]
    lo = min([0.1] + vals)
    hi = max([10.0] + vals)
    span = math.log10(hi) - math.log10(lo)

    def x(v):
        return left + (math.log10(v) - math.log10(lo)) / span * width

    height = 40 + len(rows) * (len(series) * bar_h + gap) + 20 * len(series)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="10" y="16" font-size="13">{title}</text>']
    y = 30
    one = x(1.0)
    for label, r in rows.items():
        out.append(f'<text x="{left - 6}" y="{y + len(series) * bar_h / 2 + 4}" '
                   f'text-anchor="end">{label}</text>')
        for k, s in enumerate(series):
            v = r.get(s)
            if v:
                x0, x1 = sorted((one, x(v)))
                out.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" '
                           f'height="{bar_h - 1}" fill="{COLORS[k % len(COLORS)]}"/>')
            y += bar_h
        y += gap
    out.append(f'<line x1="{one:.1f}" y1="26" x2="{one:.1f}" y2="{y}" stroke="black"/>')
    for k, s in enumerate(series):
        out.append(f'<rect x="{left}" y="{y + 8 + 18 * k}" width="10" height="10" '
                   f'fill="{COLORS[k % len(COLORS)]}"/><text x="{left + 14}" '
                   f'y="{y + 17 + 18 * k}">{s}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
