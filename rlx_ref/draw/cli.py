"""``rlx-ref draw FILE -o graph.svg [--passes --backend NAME]``: a text-form graph as a
picture (SVG through Graphviz's ``dot``; ``.dot``/``.gv`` writes the DOT source)."""
from __future__ import annotations

import sys
from pathlib import Path

SOURCE_SUFFIXES = (".dot", ".gv")


def add_arguments(p) -> None:
    """The ``rlx-ref draw`` options."""
    p.add_argument("file", help="a graph in RLX's text form (a file with several graphs, "
                   "such as a pass fixture or a Markdown page, gives its first; see "
                   "--graph), or a Python script with build_graphs(), as examples/*.py")
    p.add_argument("--graph", type=int, metavar="N", help="which graph of the file (0-based)")
    p.add_argument("-o", "--out", help="where to write the picture: .svg (rendered by "
                   "Graphviz's dot) or .dot/.gv (the DOT source); default FILE.svg")
    p.add_argument("--passes", action="store_true",
                   help="draw the graph after the compile pipeline of --backend")
    p.add_argument("--backend", default="numba-cpu",
                   help="the backend whose compile passes --passes runs (default numba-cpu)")
    p.add_argument("--no-clusters", action="store_true",
                   help="draw fused nodes as single nodes, not as clusters of their steps")
    p.add_argument("--rankdir", default="TB", choices=("TB", "LR", "BT", "RL"),
                   help="layout direction (default TB: top to bottom)")
    p.set_defaults(fn=run)


def after_passes(graph, backend: str):
    """``graph`` after ``backend``'s compile pipeline (the graph its kernels are made
    from); no kernel is compiled."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend
    from ..passes import compile_pipeline

    try:
        be = get_backend(backend)
    except BackendUnavailable as e:
        raise ValueError(f"--backend {backend!r}: {e}") from None
    return compile_pipeline(graph, be)[0]


def run(args) -> int:
    from .._atomic import write_text
    from .._readers import FileInputError, describe_os_error
    from ..explain.feeds import read_graph
    from . import render_svg
    from ._dot import build

    graph, note, _ = read_graph(args.file, args.graph)
    if note:
        print(note, file=sys.stderr)
    if args.passes:
        graph = after_passes(graph, args.backend)
    out = Path(args.out) if args.out else Path(args.file).with_suffix(".svg")
    dot, drawer = build(graph, not args.no_clusters, args.rankdir)
    text = dot.source if out.suffix in SOURCE_SUFFIXES else render_svg(dot)
    try:
        write_text(out, text)
    except OSError as e:
        raise FileInputError(out, f"cannot write: {describe_os_error(e)}",
                             "a writable file path") from None
    where = f" after the {args.backend} passes" if args.passes else ""
    print(f"wrote {out}: @{graph.name}{where}, {len(graph)} nodes, "
          f"{drawer.fused_clusters} fused region(s), {drawer.body_clusters} nested body(ies)")
    return 0


__all__ = ["add_arguments", "after_passes", "run"]
