"""The committed coverage page in a real headless browser (Debian's Chromium driven by
Playwright): it loads without console errors, its filters change the visible rows, and
every glyph it shows renders (no empty "tofu" boxes on a machine without an emoji font).

Skipped when Playwright or /usr/bin/chromium is missing, unless RLX_REF_REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rlx_ref.env_registry import flag

DOCS = Path(__file__).resolve().parents[1] / "docs"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return "" if CHROMIUM.exists() else f"{CHROMIUM} is missing"


if _missing():
    if flag("RLX_REF_REQUIRE_BROWSER"):
        raise RuntimeError(f"RLX_REF_REQUIRE_BROWSER=1 but {_missing()}")
    pytest.skip(_missing(), allow_module_level=True)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):        # keep the test output clean
        pass


@pytest.fixture(scope="module")
def report():
    return json.loads((DOCS / "op-coverage.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def page():
    """The committed op-coverage.html, served over HTTP, open in Chromium; yields the page
    and the console errors and page errors seen while it loaded."""
    from playwright.sync_api import sync_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_Quiet, directory=str(DOCS)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                pg = browser.new_page(viewport={"width": 1400, "height": 900})
                errors = []
                pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else 0)
                pg.on("pageerror", lambda e: errors.append(str(e)))
                pg.goto(f"http://127.0.0.1:{server.server_address[1]}/op-coverage.html")
                pg.wait_for_load_state("load")
                yield pg, errors
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def _visible(pg) -> list:
    return pg.eval_on_selector_all("tr.op", "rs => rs.filter(r => !r.hidden)"
                                             ".map(r => r.querySelector('code').textContent)")


def _show(pg, text="", show="all", col=""):
    pg.fill("#f-text", text)
    pg.select_option("#f-show", show)
    pg.select_option("#f-col", col)


def test_page_loads_without_console_errors(page):
    pg, errors = page
    assert errors == []
    assert pg.title() == "rlx_ref op coverage"
    assert pg.is_visible("#filters")           # the script ran and showed the filter bar


def test_filters_change_the_visible_rows(page, report):
    pg, _ = page
    rows = [op for cat in report["categories"] for op in cat["ops"]]
    _show(pg)
    assert len(_visible(pg)) == len(rows) == report["rows"]
    assert pg.text_content("#f-count") == f"{len(rows)} of {len(rows)} kinds shown"

    _show(pg, text="matmul")
    shown = _visible(pg)
    assert 0 < len(shown) < len(rows) and all("matmul" in k.lower() for k in shown[:1])
    assert "MatMul" in shown and "Conv" not in shown

    _show(pg, show="gap")
    assert _visible(pg) == report["missing_kinds"]
    assert pg.is_hidden("section.cat:has(h3:text-is('Sources & leaves'))")

    col = report["backends"][-1]["column"]
    _show(pg, show="unclaimed", col=col)
    [gaps] = [g for g in report["gaps"] if g["column"] == col]
    assert sorted(_visible(pg)) == sorted(gaps["unclaimed"])

    _show(pg, show="pass", col=col)
    passing = [op["kind"] for op in rows if op["cells"][col]["state"] == "pass"]
    assert _visible(pg) == passing and len(passing) < len(rows)
    _show(pg)
    assert len(_visible(pg)) == len(rows)


# Draw each character (grapheme: an emoji with its presentation selector counts as one) on a
# canvas in the page's own font: a code point no font has draws the same "missing glyph" box
# as any other, so matching that drawing means tofu.
_TOFU = """
() => {
  const font = getComputedStyle(document.body).fontFamily;
  function draw(ch) {
    const c = document.createElement('canvas');
    c.width = 48; c.height = 48;
    const g = c.getContext('2d');
    g.font = '32px ' + font; g.textBaseline = 'top'; g.fillStyle = '#000';
    g.fillText(ch, 4, 4);
    return Array.from(g.getImageData(0, 0, 48, 48).data).join(',');
  }
  const missing = [draw('\\u0378'), draw('\\u0379')];    // unassigned code points
  const graphemes = new Intl.Segmenter('en', {granularity: 'grapheme'});
  const chars = [...new Set(Array.from(graphemes.segment(document.body.innerText),
                                       s => s.segment))]
    .filter(ch => ch.codePointAt(0) > 127 && !/\\s/.test(ch));
  return {consistent: missing[0] === missing[1], plain: missing.includes(draw('A')),
          chars: chars.length, tofu: chars.filter(ch => missing.includes(draw(ch)))};
}
"""


def test_cell_marks_are_drawn_with_width(page):
    pg, _ = page
    _show(pg)
    boxes = pg.eval_on_selector_all(
        "td svg.mk", "ms => ms.map(m => { const r = m.getBoundingClientRect();"
        " return [m.getAttribute('class'), r.width, r.height]; })")
    assert len(boxes) > 100
    assert {c for c, _, _ in boxes} >= {"mk mk-pass"}
    assert all(w >= 8 and h >= 8 for _, w, h in boxes)


def test_no_glyph_on_the_page_renders_as_tofu(page):
    pg, _ = page
    seen = pg.evaluate(_TOFU)
    assert seen["consistent"] and not seen["plain"]      # the detector itself works
    assert seen["chars"] > 0
    assert seen["tofu"] == [], f"characters drawn as empty boxes: {seen['tofu']}"
