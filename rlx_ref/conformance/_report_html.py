"""The op-coverage report's pages, markdown and self-contained HTML, both drawn from the
same blocks (``_report_blocks``).

The markdown keeps RLX's glyphs (✅ ⚠️ ❌ and the superscripts ᵁ ᴰ ᴴ). The HTML draws the
marks as inline SVG and the superscripts as <sup> letters, because a machine without an
emoji font (the usual headless CI box) shows those code points as empty boxes."""
from __future__ import annotations

import html
import re

from ._report_blocks import blocks
from ._report_junit import junit_xml  # noqa: F401 - re-exported
from ._report_text import INTRO, MD_HEADER, TITLE
from ._report_text import first_line, first_sentence  # noqa: F401 - re-exported


# ── markdown ────────────────────────────────────────────────────────────────

def _md(text) -> str:
    """A table cell: pipes escaped; '<' outside `code` escaped so it is never read as HTML."""
    parts = str(text).replace("\n", " ").replace("|", "\\|").split("`")
    parts = [re.sub(r"<(?=[A-Za-z/!?])", "&lt;", p) if i % 2 == 0 else p
             for i, p in enumerate(parts)]
    return "`".join(parts)


def markdown_page(rep: dict) -> str:
    """``docs/op-coverage.md`` text: RLX's layout, deterministic."""
    marks = {"l": "---", "r": "--:", "c": ":--:"}
    lines = [MD_HEADER, f"# {TITLE}", "", INTRO, ""]
    for block in blocks(rep):
        if block[0] == "h":
            lines += ["#" * block[1] + " " + block[2], ""]
        elif block[0] == "p":
            lines += [block[1], ""]
        elif block[0] == "hr":
            lines += ["---", ""]
        elif block[0] == "table":
            _, head, rows, align = block[:4]
            lines += ["| " + " | ".join(head) + " |",
                      "|" + "|".join(marks[a] for a in align) + "|"]
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ── HTML ────────────────────────────────────────────────────────────────────

def _svg(cls: str, label: str, body: str) -> str:
    return (f'<svg class="mk {cls}" viewBox="0 0 16 16" role="img" aria-label="{label}">'
            f"{body}</svg>")


_WHITE = 'fill="none" stroke="#fff" stroke-width="2" stroke-linecap="round"'
MARKS = {   # RLX's glyph -> an inline SVG drawn the same everywhere
    "✅": _svg("mk-pass", "all passed", '<rect x="1" y="1" width="14" height="14" rx="3" '
              f'fill="#1a7f37"/><path d="M4.5 8.5l2.3 2.3 4.7-5" {_WHITE} '
              'stroke-linejoin="round"/>'),
    "⚠": _svg("mk-warn", "some did not pass", '<path d="M8 1.2 15.2 14.6H.8z" '
             f'fill="#bf8700"/><path d="M8 6v4" {_WHITE}/><circle cx="8" cy="12.4" r="1.1" '
             'fill="#fff"/>'),
    "❌": _svg("mk-fail", "none passed", '<rect x="1" y="1" width="14" height="14" rx="3" '
              f'fill="#cf222e"/><path d="M5 5l6 6M11 5l-6 6" {_WHITE}/>'),
}
ANNOTATIONS = {"ᵁ": ("U", "rewritten / unfused before the native path"),
               "ᴰ": ("D", "decomposed into other ops"), "ᴴ": ("H", "host fallback")}
_GLYPH = re.compile("✅|⚠\ufe0f?|❌|[ᵁᴰᴴ]")


def _glyph(m) -> str:
    g = m.group(0).rstrip("\ufe0f")
    if g in ANNOTATIONS:
        letter, title = ANNOTATIONS[g]
        return f'<sup class="ann" title="{title}">{letter}</sup>'
    return MARKS[g]


def _inline(text) -> str:
    """Escape; render `code`, **bold** and *italic* as the markdown does; RLX's glyphs as
    SVG marks and superscript letters."""
    out = html.escape(str(text), quote=False)
    out = re.sub(r"`([^`]*)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"(?<![\w*])\*([^*<>\s][^*<>]*)\*(?![\w*])", r"<i>\1</i>", out)
    return _GLYPH.sub(_glyph, out)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;margin:2em auto;
max-width:1280px;padding:0 1em;color:#1b1f24;background:#fff}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.6em 0 1.2em}
th,td{border:1px solid #d0d7de;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td.r{text-align:right}td.c{text-align:center;white-space:nowrap}
td.pass{background:#dafbe1}td.fail{background:#ffebe9}td.xfail{background:#fff8c5}
td.notrun,td.unsupported{background:#f6f8fa;color:#57606a}td.absent{background:#eaeef2}
tr.gap td:first-child code{color:#cf222e}
svg.mk{display:inline-block;width:1.1em;height:1.1em;vertical-align:-.2em}
sup.ann{font-weight:bold;font-size:.7em;margin-left:1px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,"DejaVu Sans Mono",monospace;
background:#f6f8fa;padding:0 .2em;border-radius:3px}
p.gen{color:#57606a;font-size:.9em}
#filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #d0d7de;
z-index:1}
#filters label{margin-right:1em}#f-count{color:#57606a}
"""

_SHOW = (("all", "every kind"), ("fail", "failing somewhere"),
         ("notpass", "not passing everywhere"), ("unclaimed", "not claimed somewhere"),
         ("pass", "passing everywhere"), ("gap", "not in rlx_ref yet"))

# The filters need a script; without one the bar stays hidden and every row shows.
_SCRIPT = """
(function () {
  var bar = document.getElementById('filters');
  if (!bar) return;
  bar.hidden = false;
  var text = document.getElementById('f-text'), show = document.getElementById('f-show');
  var col = document.getElementById('f-col'), count = document.getElementById('f-count');
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.op'));
  function states(tr) {
    return Array.prototype.slice.call(tr.querySelectorAll('td[data-col]'))
      .filter(function (td) { return !col.value || td.dataset.col === col.value; })
      .map(function (td) { return td.dataset.state; });
  }
  function keep(tr) {
    var q = text.value.trim().toLowerCase();
    if (q && tr.dataset.search.indexOf(q) < 0) return false;
    var want = show.value, st = states(tr), known = tr.dataset.registered === '1';
    if (want === 'gap') return !known;
    if (want === 'fail') return st.indexOf('fail') >= 0;
    if (want === 'notpass') return known && st.some(function (s) { return s !== 'pass'; });
    if (want === 'unclaimed') return known && st.indexOf('unclaimed') >= 0;
    if (want === 'pass') return st.length > 0 && st.every(function (s) { return s === 'pass'; });
    return true;
  }
  function apply() {
    var shown = 0;
    rows.forEach(function (tr) { var k = keep(tr); tr.hidden = !k; if (k) shown++; });
    document.querySelectorAll('section.cat').forEach(function (s) {
      s.hidden = !s.querySelector('tr.op:not([hidden])');
    });
    count.textContent = shown + ' of ' + rows.length + ' kinds shown';
  }
  [text, show, col].forEach(function (el) {
    el.addEventListener('input', apply);
    el.addEventListener('change', apply);
  });
  apply();
})();
"""


def _filters(cols: list) -> str:
    show = "".join(f'<option value="{v}">{t}</option>' for v, t in _SHOW)
    pick = '<option value="">any backend</option>' + "".join(
        f'<option value="{html.escape(c)}">{html.escape(c)}</option>' for c in cols)
    return ('<div id="filters" hidden><label>Kind <input id="f-text" type="search" '
            'placeholder="name or description"></label><label>Show <select id="f-show">'
            f'{show}</select></label><label>in <select id="f-col">{pick}</select></label>'
            '<span id="f-count"></span></div>')


def _html_table(block, cols: list) -> list:
    _, head, rows, align, states, meta = block
    out = ["<table><thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in head)
           + "</tr></thead><tbody>"]
    first_cell = len(head) - len(cols)
    for r, row in enumerate(rows):
        tds = []
        for i, text in enumerate(row):
            state = states[r][i] if states else ""
            cls = " ".join(x for x in (align[i] if align[i] != "l" else "", state) if x)
            attrs = f' class="{cls}"' if cls else ""
            if meta and i >= first_cell:
                attrs += f' data-col="{html.escape(head[i])}" data-state="{state}"'
            tds.append(f"<td{attrs}>{_inline(text)}</td>")
        tr = "<tr>"
        if meta:
            m = meta[r]
            search = html.escape(f"{m['kind']} {row[1]}".lower(), quote=True)
            tr = (f'<tr class="op{"" if m["registered"] else " gap"}" '
                  f'data-registered="{int(m["registered"])}" data-search="{search}">')
        out.append(tr + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    return out


def html_page(rep: dict) -> str:
    """One HTML page: inline CSS, inline SVG marks and one inline script for the matrix
    filters; nothing to fetch."""
    cols = [b["column"] for b in rep["backends"]]
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{TITLE}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
           f'<p class="gen">{_inline(MD_HEADER[5:-4])}</p>', f"<h1>{TITLE}</h1>",
           f"<p>{_inline(INTRO)}</p>"]
    in_matrix = in_section = False
    for block in blocks(rep):
        kind = block[0]
        if in_section and (kind == "hr" or kind == "h" and block[1] <= 3):
            out.append("</section>")
            in_section = False
        if kind == "h":
            if block[2].startswith("Coverage matrix"):
                in_matrix = True
                out.append(f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>")
                out.append(_filters(cols))
                continue
            if in_matrix and block[1] == 3:
                out.append('<section class="cat">')
                in_section = True
            elif block[1] <= 2:
                in_matrix = False
            out.append(f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>")
        elif kind == "p":
            out.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "hr":
            in_matrix = False
            out.append("<hr>")
        else:
            out += _html_table(block, cols)
    if in_section:
        out.append("</section>")
    out += [f"<script>{_SCRIPT}</script>", "</body>", "</html>"]
    return "\n".join(out) + "\n"
