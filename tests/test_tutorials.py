"""Every tutorial in docs/tutorials/ (and the reference pages with examples) runs: its code
blocks in order, its shown output checked.

A ```python block runs in one namespace per file; a ```sh block runs in bash with
``rlx-ref`` meaning ``python -m rlx_ref.cli`` (both from the repository root). A ```text
block right after a code block is that block's expected output: lines compared with
trailing spaces ignored, ``...`` matching any text (several lines too). Markers in an HTML
comment just before a block:

    <!-- tutorial: needs MODULE -->    skip the block (and its output) without MODULE
    <!-- tutorial: needs-cmd NAME -->  skip it without the program NAME on PATH
    <!-- tutorial: no-run -->          shown, not run (a command for the reader's machine)
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted(p for p in (ROOT / "docs/tutorials").glob("*.md") if p.stem != "index")
# reference pages whose examples run the same way
PAGES = TUTORIALS + [ROOT / "docs/compile.md", ROOT / "docs/backend-contract.md"]
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*tutorial:\s*([\w-]+)\s*([^\s>]*)\s*-->\s*$")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    marks: list = field(default_factory=list)
    expect: str | None = None


def parse_blocks(text: str) -> list[Block]:
    """The code blocks of a page with their markers and expected output."""
    blocks: list[Block] = []
    last_end = 0
    for m in _FENCE.finditer(text):
        between = text[last_end:m.start()]
        line = text.count("\n", 0, m.start()) + 1
        lang, body = m.group(1), m.group(2)
        if lang == "text" and blocks and not between.strip() and blocks[-1].expect is None:
            blocks[-1].expect = body
        else:
            tail = between.rstrip().splitlines()[-1:] if between.strip() else []
            marks = [mk.groups() for ln in tail if (mk := _MARK.search(ln))]
            blocks.append(Block(lang, body, line, marks))
        last_end = m.end()
    return blocks


def skip_reason(block: Block) -> str | None:
    for mark, arg in block.marks:
        if mark == "no-run":
            return "shown only"
        if mark == "needs" and importlib.util.find_spec(arg) is None:
            return f"needs {arg}"
        if mark == "needs-cmd" and shutil.which(arg) is None:
            return f"needs {arg} on PATH"
    return None


def output_matches(expected: str, got: str) -> bool:
    """``got`` against ``expected`` line by line, ``...`` matching any text."""
    norm = lambda s: "\n".join(ln.rstrip() for ln in s.strip("\n").splitlines())  # noqa: E731
    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(got), re.S) is not None


def _env() -> dict:
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), path) if p))


def run_block(block: Block, ns: dict) -> str:
    """Run one block; its printed output."""
    if block.lang == "python":
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(block.code, f"<tutorial line {block.line}>", "exec"), ns)
        return buf.getvalue()
    if block.lang in ("sh", "bash", "console"):
        script = f'rlx-ref() {{ "{sys.executable}" -m rlx_ref.cli "$@"; }}\n' \
                 f'python() {{ "{sys.executable}" "$@"; }}\nset -e\n{block.code}'
        r = subprocess.run(["bash", "-c", script], cwd=ROOT, env=_env(), capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError(f"exit status {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r.stdout
    return ""


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_runs(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    ns = {"__name__": "__tutorial__"}
    saved_path = list(sys.path)
    try:
        for block in parse_blocks(page.read_text()):
            if block.lang not in ("python", "sh", "bash", "console") or skip_reason(block):
                continue
            try:
                got = run_block(block, ns)
            except Exception as e:
                raise AssertionError(f"{page.name} line {block.line}: {type(e).__name__}: "
                                     f"{e}") from e
            if block.expect is not None and not output_matches(block.expect, got):
                raise AssertionError(f"{page.name} line {block.line}: printed\n{got}\n"
                                     f"expected\n{block.expect}")
    finally:
        sys.path[:] = saved_path


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 6, [p.name for p in TUTORIALS]


def test_runner_parses_markers_and_output():
    text = ("<!-- tutorial: needs no_such_module_here -->\n```python\nprint(1)\n```\n"
            "```text\n1\n```\n\n```sh\necho hi\n```\n")
    a, b = parse_blocks(text)
    assert a.expect == "1\n" and skip_reason(a) == "needs no_such_module_here"
    assert b.lang == "sh" and b.expect is None and skip_reason(b) is None
    assert output_matches("a\n...\nz", "a\nb\nc\nz\n")
    assert not output_matches("a\nz", "a\nb\nz")
