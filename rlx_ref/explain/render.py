"""A trace as a readable table: plain or ANSI-coloured text, or one self-contained HTML page."""
from __future__ import annotations

import html
import sys

from ..env_registry import get

TEXT_WIDTH = 96          # op text is cut to this many characters in the table

_ANSI = {"id": "1;36", "kind": "1;33", "shape": "32", "doc": "2", "bad": "1;31",
         "note": "35", "head": "1"}


def use_color(stream=None, mode: str = "auto") -> bool:
    """Colour when asked (``always``), or on ``auto`` when ``stream`` is a terminal and
    ``NO_COLOR`` is unset or empty."""
    if mode in ("always", "never"):
        return mode == "always"
    if get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def _cut(text: str, width: int = TEXT_WIDTH) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _signature(rec) -> str:
    """``(operand shapes) -> declared output``, plus the run's dims where they were dynamic."""
    ins = ", ".join(f"{d} {t}" for d, t in rec.inputs)
    out = f"{rec.out_shape} {rec.out_dtype}"
    ran = str(list(rec.summary.shape)) if rec.summary is not None else rec.out_shape
    if ran != rec.out_shape:
        out += f" (ran as {ran})"
    return f"({ins}) -> {out}" if ins else f"-> {out}"


def _has_bad(rec) -> bool:
    s = rec.summary
    return bool(rec.error or (s is not None and (s.nan or s.inf)))


def text_lines(tr, color: bool = False) -> list[str]:
    """The trace as text: op, text and values lines per node, indented by depth, and the
    op's doc line the first time each (kind, doc) shows."""
    def paint(style, text):
        return f"\x1b[{_ANSI[style]}m{text}\x1b[0m" if color else text

    g = tr.graph
    out = [paint("head", f"trace of @{g.name}: {len(g)} nodes, {len(tr)} records")]
    shown = set()
    for rec in tr:
        pad = "  " * rec.depth
        if rec.elided:
            out.append(pad + paint("note", rec.text))
            continue
        loc = f"{rec.path}"
        if rec.iteration is not None:
            loc += f"  (call {rec.iteration} of @{rec.body})"
        out.append(f"{pad}{paint('id', loc)}  {paint('kind', rec.kind)}  "
                   f"{paint('shape', _signature(rec))}")
        out.append(f"{pad}    {_cut(rec.text)}")
        if rec.error:
            out.append(f"{pad}    {paint('bad', 'ERROR: ' + rec.error)}")
        elif rec.summary is not None:
            stats = rec.summary.stats_text()
            out.append(f"{pad}    " + (paint("bad", stats) if _has_bad(rec) else stats)
                       + f"  first {rec.summary.first_text()}")
        if rec.doc and (rec.kind, rec.doc) not in shown:
            shown.add((rec.kind, rec.doc))
            out.append(f"{pad}    {paint('doc', rec.doc)}")
    if tr.error:
        out.append(paint("bad", f"run failed: {tr.error.splitlines()[0]}"))
    return out


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f0f0f0;position:sticky;top:0}
td.code,pre{font-family:ui-monospace,monospace;font-size:.85em;white-space:pre-wrap;
word-break:break-all;margin:0}
tr.d1 td:first-child{padding-left:1.5em}tr.d2 td:first-child{padding-left:3em}
tr.d3 td:first-child{padding-left:4.5em}tr.nested{background:#fafaf5}
tr.bad td{background:#fde8e8}tr.elided td{color:#666;font-style:italic}
.kind{font-weight:bold}.doc{color:#555;font-size:.9em}
"""


def html_page(tr, title: str | None = None) -> str:
    """The trace as one HTML page: inline CSS, no scripts, no external assets."""
    e = html.escape
    g = tr.graph
    title = title or f"trace of @{g.name}"
    rows = []
    for rec in tr:
        depth = f"d{min(rec.depth, 3)}" + (" nested" if rec.depth else "")
        if rec.elided:
            rows.append(f'<tr class="{depth} elided"><td>{e(rec.path)}</td>'
                        f'<td colspan="5">{e(rec.text)}</td></tr>')
            continue
        cls = depth + (" bad" if _has_bad(rec) else "")
        loc = e(rec.path) + (f"<br><small>call {rec.iteration} of @{e(rec.body)}</small>"
                             if rec.iteration is not None else "")
        if rec.error:
            values = f"<b>ERROR</b>: {e(rec.error)}"
        elif rec.summary is not None:
            values = (f"{e(rec.summary.stats_text())}<br>"
                      f"<code>{e(rec.summary.first_text())}</code>")
        else:
            values = ""
        rows.append(
            f'<tr class="{cls}"><td>{loc}</td><td><span class="kind">{e(rec.kind)}</span>'
            f'<div class="doc">{e(rec.doc)}</div></td><td class="code">{e(rec.text)}</td>'
            f'<td class="code">{e(_signature(rec))}</td><td>{values}</td></tr>')
    failed = f'<p class="bad"><b>run failed:</b> {e(tr.error)}</p>' if tr.error else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{e(title)}</h1><p>{len(g)} nodes, {len(tr)} records, run on the rlx_ref "
            f"oracle.</p>{failed}<table><thead><tr><th>node</th><th>op</th><th>text</th>"
            f"<th>shapes</th><th>values</th></tr></thead><tbody>\n" + "\n".join(rows)
            + "\n</tbody></table></body></html>\n")
