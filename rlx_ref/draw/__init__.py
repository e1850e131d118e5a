"""Pictures of graphs (Graphviz) and of ops (plain SVG for the op pages).

``draw(graph)`` returns a ``graphviz.Digraph``: one node per IR node labelled with its
kind and key attrs, each value's shape and dtype on its edges, inputs, params, constants
and outputs styled apart, every fused region (an ElementwiseRegion or a FUSED kind) as a
cluster holding its steps, and every nested body (If, While, Scan, CustomFn) as a
sub-cluster. ``draw_svg(graph)`` renders it with Graphviz's ``dot``; ``write_svg`` writes
it atomically. The ``graphviz`` Python package (the ``docs`` extra) and the ``dot``
program are needed only here, and a missing one is a ``DrawError`` saying how to install
it. The op-page plots and diagrams (``plots``, ``diagrams``) need neither.

This package is callable: ``rlx_ref.draw(graph)`` is ``rlx_ref.draw.draw(graph)``.
"""
from __future__ import annotations

import sys
import types

DOT_HINT = ("install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), "
            "`brew install graphviz` (macOS) or `conda install -c conda-forge graphviz`")
PACKAGE_HINT = ("drawing graphs needs the `graphviz` Python package: "
                "`pip install 'rlx_ref[docs]'` (the docs extra) or `pip install graphviz`")


class DrawError(RuntimeError):
    """A graph cannot be drawn here; the message says what to install."""


def require_graphviz():
    """The ``graphviz`` module, or DrawError naming the ``docs`` extra."""
    try:
        import graphviz
    except ImportError:
        raise DrawError(PACKAGE_HINT) from None
    return graphviz


def draw(graph, expand_fused: bool = True, rankdir: str = "TB"):
    """``graph`` as a ``graphviz.Digraph`` (render it, or show it in Jupyter).

    ``expand_fused=False`` draws fused nodes as single nodes instead of clusters;
    ``rankdir`` is Graphviz's direction (``TB`` top to bottom, ``LR`` left to right).
    """
    from ._dot import build

    return build(graph, expand_fused, rankdir)[0]


def draw_svg(graph, expand_fused: bool = True, rankdir: str = "TB") -> str:
    """``graph`` rendered to SVG text by Graphviz's ``dot``.

    Raises ``DrawError`` when the ``graphviz`` package or the ``dot`` program is missing.
    """
    return render_svg(draw(graph, expand_fused, rankdir))


def render_svg(dot) -> str:
    """A ``graphviz.Digraph`` rendered to SVG text; DrawError when ``dot`` is missing."""
    graphviz = require_graphviz()
    try:
        return dot.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise DrawError(f"Graphviz's `dot` program was not found on PATH; {DOT_HINT}") \
            from None
    except graphviz.CalledProcessError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise DrawError(f"Graphviz's `dot` failed on {dot.name}: "
                        f"{err[-1] if err else e}") from None


def write_svg(graph, path, expand_fused: bool = True, rankdir: str = "TB") -> str:
    """Render ``graph`` and write the SVG to ``path`` atomically; returns the SVG text."""
    from .._atomic import write_text

    svg = draw_svg(graph, expand_fused, rankdir)
    write_text(path, svg)
    return svg


class _CallableModule(types.ModuleType):
    """``rlx_ref.draw`` is both this package and the function: importing the package
    rebinds the name ``rlx_ref.draw`` to it, so calling it must still draw."""

    def __call__(self, graph, expand_fused: bool = True, rankdir: str = "TB"):
        return draw(graph, expand_fused, rankdir)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["DOT_HINT", "DrawError", "PACKAGE_HINT", "draw", "draw_svg", "render_svg",
           "require_graphviz", "write_svg"]
