"""Every graph the docs and examples show, for checking that explain and diff handle them.

Text-form graphs come from ``docs/**/*.md`` code blocks and ``docs/**/*.rlx``,
``tests/fixtures/**/*.rlx`` files (each graph of a file); example graphs from each
``examples/*.py`` module's ``build_graphs()`` (name -> (graph, params or None)), which
builds them without running the example.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ..ir.graph import Graph
from .feeds import markdown_graphs, split_graphs

ROOT = Path(__file__).resolve().parents[2]          # the source checkout


@dataclass
class Entry:
    """One graph: where it comes from, its text (text-form graphs) or graph and params."""

    label: str
    text: str | None = None
    graph: Graph | None = None
    params: dict | None = None

    def load(self) -> Graph:
        if self.graph is None:
            from ..ir.text import parse

            self.graph = parse(self.text)
        return self.graph


def text_graphs(root: Path = ROOT) -> list[Entry]:
    """The text-form graphs of the docs' code blocks and .rlx files, and the fixtures."""
    out = []
    docs = root / "docs"
    for md in sorted(docs.rglob("*.md")):
        for i, b in enumerate(markdown_graphs(md.read_text())):
            out.append(Entry(f"{md.relative_to(root)}#{i}", b))
    files = sorted(docs.rglob("*.rlx")) + sorted((root / "tests/fixtures").rglob("*.rlx"))
    for f in files:
        for i, b in enumerate(split_graphs(f.read_text())):
            out.append(Entry(f"{f.relative_to(root)}#{i}", b))
    return out


def script_graphs(path, label: str | None = None) -> list[Entry]:
    """The graphs a Python script lists in its ``build_graphs()`` (name -> (graph, params));
    the script is imported, so only what runs outside ``if __name__ == "__main__"`` runs."""
    f = Path(path)
    spec = importlib.util.spec_from_file_location(f"rlx_ref_example_{f.stem}", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    build = getattr(mod, "build_graphs", None)
    if build is None:
        raise ValueError(f"{f} has no build_graphs() returning name -> (graph, params)")
    return [Entry(f"{label or f}:{name}", None, graph, params)
            for name, (graph, params) in build().items()]


def example_graphs(root: Path = ROOT) -> list[Entry]:
    """The graphs ``examples/*.py`` build, from each module's ``build_graphs()``."""
    return [e for f in sorted((root / "examples").glob("*.py"))
            for e in script_graphs(f, str(f.relative_to(root)))]


def all_graphs(root: Path = ROOT) -> list[Entry]:
    return text_graphs(root) + example_graphs(root)
