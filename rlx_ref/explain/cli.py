"""``rlx-ref explain`` (trace a graph on the oracle) and ``rlx-ref diff`` (find where a
backend departs from it): parsers and handlers."""
from __future__ import annotations

import sys


def _common(p) -> None:
    p.add_argument("file", help="a graph in RLX's text form (a file with several graphs, "
                   "such as a pass fixture, gives its first; see --graph), or a Python "
                   "script with build_graphs(), as examples/*.py")
    p.add_argument("--input", action="append", metavar="NAME=PATH.npy",
                   help="one input's value (repeatable)")
    p.add_argument("--inputs", metavar="FILE.npz", help="every input by name, e.g. a "
                   "conformance repro's inputs.npz")
    p.add_argument("--params", metavar="FILE.npz", help="the params by name")
    p.add_argument("--random-inputs", type=int, metavar="SEED", help="fill every input "
                   "and param not given from this seed (floats ~ N(0, 1), integers 0..2, "
                   "indices 0..1, SPD matrices for `A` operands and the SPD ops)")
    p.add_argument("--graph", type=int, metavar="N", help="which graph of the file (0-based)")


def add_explain_arguments(p) -> None:
    """``rlx-ref explain FILE ...``: print the trace as a table, optionally as HTML."""
    _common(p)
    p.add_argument("--html", metavar="OUT.html", help="also write a self-contained page")
    p.add_argument("--max-iterations", type=int, default=3, metavar="N",
                   help="trace each nested body's first N calls per node (default 3)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="ANSI colours (auto: when stdout is a terminal and NO_COLOR is unset)")
    p.set_defaults(fn=_explain)


def add_diff_arguments(p) -> None:
    """``rlx-ref diff FILE --backend NAME ...``: the first node departing from the oracle."""
    _common(p)
    p.add_argument("--backend", required=True, help="backend name or spec (numba-cpu, "
                   "opencl, numba-cpu+fault:NAME, module:object ...)")
    p.add_argument("--repro-dir", default="repros",
                   help="where the first departing node's one-op repro is written")
    p.add_argument("--all", action="store_true",
                   help="judge every node, not only up to the first departure")
    p.set_defaults(fn=_diff)


def _load(args):
    """(graph, inputs, params) from the command line; UsageError names what is missing."""
    from .._readers import FileInputError, load_npz
    from ..cli import UsageError, _check_array, _feeds, _params
    from .feeds import random_feeds, read_graph
    from .tracing import missing_feeds

    g, note, built = read_graph(args.file, args.graph)
    if note:
        print(note, file=sys.stderr)
    args.float64 = False
    inputs = {}
    if args.inputs:
        decl = {n.attrs.name: n for n in g.input_nodes()}
        for name, arr in load_npz(args.inputs).items():
            if name not in decl:
                raise FileInputError(args.inputs, f"holds {name!r}, which graph @{g.name} "
                                     f"does not declare", f"inputs named "
                                     f"{', '.join(sorted(decl)) or '(none)'}")
            _check_array(args.inputs, f"input {name!r}", arr, decl[name], False)
            inputs[name] = arr
    inputs.update(_feeds(args, g))
    params = _params(args, g) if args.params or built is None else dict(built)
    if args.random_inputs is not None:
        inputs, params = random_feeds(g, args.random_inputs, inputs, params)
    missing = missing_feeds(g, inputs, params)
    if missing:
        raise UsageError(f"graph @{g.name} needs {'; '.join(missing)}: pass each "
                         f"(--input NAME=FILE.npy, --inputs FILE.npz, --params FILE.npz) or "
                         f"fill them from a seed with --random-inputs SEED")
    return g, inputs, params


def _explain(args) -> int:
    from .._atomic import write_text
    from .render import html_page, text_lines, use_color
    from .tracing import trace

    if args.max_iterations < 0:
        from ..cli import UsageError

        raise UsageError(f"--max-iterations must be >= 0, got {args.max_iterations}")
    g, inputs, params = _load(args)
    tr = trace(g, inputs, params, max_iterations=args.max_iterations, raise_errors=False)
    color = use_color(sys.stdout, args.color)
    print("\n".join(text_lines(tr, color)))
    if args.html:
        write_text(args.html, html_page(tr, f"trace of @{g.name} ({args.file})"))
        print(f"wrote {args.html}")
    return 1 if tr.error else 0


def _diff(args) -> int:
    from .differ import diff

    g, inputs, params = _load(args)
    report = diff(g, inputs, params, args.backend, repro_dir=args.repro_dir,
                  all_nodes=args.all)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1
