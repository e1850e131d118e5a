"""A minimal SVG writer for the op pages' plots and diagrams: no dependencies, and
byte-for-byte deterministic output (every number printed with a fixed precision), so a
regenerated page is unchanged unless what it shows changed."""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

FONT = "Helvetica, Arial, sans-serif"
INK = "#212529"
PALETTE = ("#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c",
           "#5c940d", "#6741d9", "#868e96")


def num(v: float) -> str:
    """``v`` rounded to 2 decimals, without trailing zeros (``12.5``, ``3``, never ``-0``)."""
    text = f"{round(float(v), 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _attrs(kw: dict) -> str:
    out = []
    for k, v in kw.items():
        if v is None:
            continue
        v = num(v) if isinstance(v, float) else str(v)
        out.append(f"{k.rstrip('_').replace('_', '-')}={quoteattr(v)}")
    return " ".join(out)


class Svg:
    """An SVG canvas: shapes are appended in drawing order; ``text()`` is the document."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    def _add(self, tag: str, body: str | None = None, **kw) -> None:
        attrs = _attrs(kw)
        self.parts.append(f"<{tag} {attrs}/>" if body is None else
                          f"<{tag} {attrs}>{body}</{tag}>")

    def rect(self, x, y, w, h, fill="none", stroke=INK, width=1.0, rx=0.0, dash=None,
             tip: str | None = None) -> None:
        body = None if tip is None else f"<title>{escape(tip)}</title>"
        self._add("rect", body, x=float(x), y=float(y), width=float(w), height=float(h),
                  fill=fill, stroke=stroke, stroke_width=float(width),
                  rx=float(rx) if rx else None, stroke_dasharray=dash)

    def line(self, x1, y1, x2, y2, stroke=INK, width=1.0, dash=None, arrow=False) -> None:
        self._add("line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2),
                  stroke=stroke, stroke_width=float(width), stroke_dasharray=dash,
                  marker_end="url(#arrow)" if arrow else None)

    def polyline(self, points, stroke=INK, width=1.5, dash=None) -> None:
        pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        self._add("polyline", points=pts, fill="none", stroke=stroke,
                  stroke_width=float(width), stroke_dasharray=dash,
                  stroke_linejoin="round")

    def path(self, d: str, stroke=INK, width=1.0, fill="none", dash=None,
             arrow=False) -> None:
        self._add("path", d=d, fill=fill, stroke=stroke, stroke_width=float(width),
                  stroke_dasharray=dash, marker_end="url(#arrow)" if arrow else None)

    def text(self, x, y, s: str, size=10.0, anchor="middle", fill=INK, weight=None,
             family=None) -> None:
        self._add("text", escape(s), x=float(x), y=float(y), font_size=float(size),
                  text_anchor=anchor, fill=fill, font_weight=weight, font_family=family)

    def text_doc(self) -> str:
        """The complete SVG document (with an arrowhead marker for ``arrow=True``)."""
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(self.width)}" '
                f'height="{num(self.height)}" viewBox="0 0 {num(self.width)} '
                f'{num(self.height)}" role="img" font-family={quoteattr(FONT)}>')
        defs = ('<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" '
                'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
                f'<path d="M0,0 L8,4 L0,8 z" fill="{INK}"/></marker></defs>')
        body = "\n".join(self.parts)
        return (f'{head}\n<title>{escape(self.title)}</title>\n{defs}\n'
                f'<rect width="100%" height="100%" fill="#ffffff"/>\n{body}\n</svg>\n')


__all__ = ["FONT", "INK", "PALETTE", "Svg", "num"]
