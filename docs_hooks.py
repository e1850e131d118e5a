"""MkDocs hooks for the site: RLX's status glyphs drawn as inline SVG on every page.

The Markdown keeps RLX's glyphs (✅ ⚠️ ❌ and the ᵁ ᴰ ᴴ annotations), but a browser without
an emoji font draws ✅ as an empty box; the built pages use the same marks as
docs/op-coverage.html, which render everywhere.
"""
from __future__ import annotations

from rlx_ref.conformance._report_html import _GLYPH, _glyph

_STYLE = ("<style>svg.mk{display:inline-block;width:1.1em;height:1.1em;vertical-align:-.2em}"
          "sup.ann{font-weight:bold;font-size:.7em;margin-left:1px}</style>")


def on_page_content(html: str, page, config, files) -> str:
    """The page's HTML with each glyph replaced by its mark (and the marks' style once)."""
    out = _GLYPH.sub(_glyph, html)
    return out if out == html else _STYLE + out
