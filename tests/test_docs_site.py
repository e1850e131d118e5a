"""The documentation site: `mkdocs build --strict` passes, and in headless Chromium every page
loads without console errors, every internal link resolves and every glyph renders.

Skips without mkdocs (unless RLX_REF_REQUIRE_DOCS=1) and without playwright or
/usr/bin/chromium (unless RLX_REF_REQUIRE_BROWSER=1). Serve the site yourself with
`mkdocs serve`.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from rlx_ref.env_registry import flag

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Pages whose glyphs are known not to render without an emoji font, and which (none: the
# coverage marks are inline SVG, docs_hooks.py). A listed glyph that renders fails the test.
KNOWN_TOFU: dict = {}


def _need(modules, required: bool, name: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        if required:
            pytest.fail(f"{name}=1 but {', '.join(missing)} cannot be imported")
        pytest.skip(f"needs {', '.join(missing)} (the docs extra)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _need(["mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"],
          flag("RLX_REF_REQUIRE_DOCS"), "RLX_REF_REQUIRE_DOCS")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT),
                                                      os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                        str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    return out


def test_site_builds_strict(site):
    for page in ("index.html", "glossary/index.html", "tutorials/index.html",
                 "api/index.html", "dsl/index.html", "ops/index.html"):
        assert (site / page).is_file(), page
    text = re.sub(r"<[^>]+>", "", (site / "index.html").read_text())   # code is highlighted
    assert "mkdocs serve" in text
    assert "rlx_ref.runtime.options.CompileOptions" in (site / "api/index.html").read_text()


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):      # keep pytest's output to the failures
        pass


@pytest.fixture(scope="module")
def browser():
    required = flag("RLX_REF_REQUIRE_BROWSER")
    _need(["playwright"], required, "RLX_REF_REQUIRE_BROWSER")
    if not os.access(CHROMIUM, os.X_OK):
        if required:
            pytest.fail(f"RLX_REF_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
        pytest.skip(f"needs {CHROMIUM} (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


# A glyph the page's font cannot draw falls back to .notdef (a box or nothing): compare each
# character's canvas rendering, in the font of the element holding it, with a code point
# no font has.
_GLYPH_JS = r"""
() => {
  const seen = new Map();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!el || !el.offsetParent) continue;
    const font = getComputedStyle(el).font;
    for (const ch of node.textContent) {
      if (ch.codePointAt(0) > 0x7e && !/\s/.test(ch) && !seen.has(ch)) seen.set(ch, font);
    }
  }
  const c = document.createElement("canvas"); c.width = 64; c.height = 64;
  const ctx = c.getContext("2d", {willReadFrequently: true});
  const draw = (ch, font) => {
    ctx.clearRect(0, 0, 64, 64); ctx.font = font.replace(/\d+(\.\d+)?px/, "40px");
    ctx.fillText(ch, 4, 48); return ctx.getImageData(0, 0, 64, 64).data.join(",");
  };
  const missing = [];
  for (const [ch, font] of seen) {
    if (draw(ch, font) === draw("\u{10FFFD}", font)) missing.push(ch);
  }
  return missing.join("");
}
"""


def _internal(url: str, base: str) -> bool:
    return url.startswith(base)


def _resolves(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status < 400
    except urllib.error.URLError:
        return False


def test_every_page_loads_links_resolve_and_glyphs_render(server, browser):
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    # a request cut short by the next navigation (ERR_ABORTED) is not the page's fault
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} {r.failure}")
            if "ERR_ABORTED" not in (r.failure or "") else None)
    todo, seen, broken, tofu, pages = [server], {server}, [], {}, 0
    while todo:
        url = todo.pop()
        errors.clear()
        resp = page.goto(url, wait_until="load")
        assert resp is not None and resp.status < 400, f"{url}: HTTP {resp and resp.status}"
        pages += 1
        assert not errors, f"{url}:\n" + "\n".join(errors)
        rel = url[len(server):]
        missing = page.evaluate(_GLYPH_JS)
        known = KNOWN_TOFU.get(rel, "")
        if set(missing) - set(known):
            tofu[rel] = "".join(sorted(set(missing) - set(known)))
        healed = set(known) - set(missing)
        assert not healed, f"{rel}: {''.join(healed)} now render; drop them from KNOWN_TOFU"
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            target = urldefrag(href)[0]
            if not _internal(target, server) or target in seen:
                continue
            seen.add(target)
            path = urlparse(target).path
            if path.endswith("/") or path.endswith(".html"):
                todo.append(target)
            elif not _resolves(target):
                broken.append(f"{rel} -> {target}")
    page.close()
    assert pages > 20, f"crawled only {pages} pages"
    assert not broken, "broken links:\n" + "\n".join(broken)
    assert not tofu, f"glyphs that do not render: {tofu}"
