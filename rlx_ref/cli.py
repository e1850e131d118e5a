"""The ``rlx-ref`` command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _gradcheck(args) -> int:
    from .conformance.gradcheck import main

    return main(args.op)


def _selfcheck(args) -> int:
    """Run every registered op's samples on the oracle (plain and float64), verified."""
    import numpy as np

    from .ir.text import parse
    from .ir.verify import verify
    from .ops.opdef import all_opdefs
    from .ops.single import run_sample, single_op_graph

    failures, total = [], 0
    for d in all_opdefs():
        if args.op and args.op not in d.kind:
            continue
        ok = 0
        samples = d.samples(np.random.default_rng(0))
        for s in samples:
            total += 1
            try:
                g = single_op_graph(d.kind, s.attrs, s.inputs, s.out)
                errs = verify(g)
                if errs:
                    raise ValueError("; ".join(map(str, errs)))
                if parse(g.to_text()) != g:
                    raise ValueError("text form does not round-trip")
                if d.kind not in ("Input", "Param"):
                    out = run_sample(d.kind, s)
                    run_sample(d.kind, s, float64=True)
                    if s.expect is not None and not np.array_equal(
                            out, np.asarray(s.expect), equal_nan=out.dtype.kind in "fc"):
                        raise ValueError(f"expected {s.expect}, got {out}")
                ok += 1
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                failures.append(f"{d.kind} {list(s.tags)}: {e}")
        print(f"{d.kind:<22} {ok:>3}/{len(samples)} samples ok")
    from . import hotpaths

    print(f"\n{total - len(failures)}/{total} samples passed on the oracle "
          f"(core: {'compiled' if hotpaths.COMPILED else 'pure Python'})")
    for f in failures:
        print("FAIL", f, file=sys.stderr)
    return 1 if failures else 0


def _ops(args) -> int:
    from .ops.opdef import all_opdefs

    for d in sorted(all_opdefs(), key=lambda d: (d.family, d.kind)):
        arity = "var" if d.arity is None else d.arity
        print(f"{d.family:<14} {d.kind:<22} arity={arity:<4} caps={','.join(d.caps.names())}")
    return 0


GRAPH = "a graph in RLX's text form: graph @name { %0 = ... return %N }"


class UsageError(ValueError):
    """A command-line argument that cannot be used (its message says which and why)."""


def _graph_file(path):
    """The graph in text file ``path``; FileInputError naming the file and line if bad."""
    from ._readers import FileInputError, read_text
    from .ir.text import parse

    text = read_text(path, GRAPH)
    try:
        return parse(text)
    except (ValueError, RecursionError) as e:
        raise FileInputError(path, str(e), GRAPH) from None


def _verify(args) -> int:
    from .ir.verify import verify

    g = _graph_file(args.file)
    errs = verify(g)
    for e in errs:
        print(e)
    print(f"@{g.name}: {len(g)} nodes, {len(errs)} error(s)")
    return 1 if errs else 0


def _check_array(path, what: str, arr, node, float64: bool) -> None:
    """``arr`` (read from ``path``) against the graph's declaration of it."""
    from ._readers import FileInputError
    from .ir.dtype import DType
    from .ir.shape import Dyn

    want = f"{node.shape} as the graph declares {what}"
    try:
        dt = DType.of(arr)
    except TypeError:
        raise FileInputError(path, f"holds dtype {arr.dtype}, which RLX has no type for",
                             want) from None
    dims = node.shape.dims
    if dt != node.shape.dtype and not (float64 and arr.dtype == "float64"
                                       and node.shape.dtype.is_float):
        raise FileInputError(path, f"holds dtype {dt}", want)
    if len(dims) != arr.ndim or any(not isinstance(d, Dyn) and d != n
                                    for d, n in zip(dims, arr.shape)):
        raise FileInputError(path, f"holds shape {list(arr.shape)}", want)


def _feeds(args, g) -> dict:
    """``--input NAME=path.npy`` arrays, each checked against the graph's input."""
    from ._readers import load_npy

    decl = {n.attrs.name: n for n in g.input_nodes()}
    feeds = {}
    for item in args.input or []:
        name, eq, path = item.partition("=")
        if not (eq and name and path):
            raise UsageError(f"--input {item!r}: expected NAME=path.npy")
        if name not in decl:
            raise UsageError(f"--input {item!r}: graph @{g.name} has no input {name!r} "
                             f"(expected one of: {', '.join(sorted(decl)) or 'none'})")
        feeds[name] = load_npy(path)
        _check_array(path, f"input {name!r}", feeds[name], decl[name], args.float64)
    return feeds


def _params(args, g) -> dict:
    """``--params file.npz`` arrays, each checked against the graph's param."""
    from ._readers import FileInputError, load_npz

    if not args.params:
        return {}
    decl = {n.attrs.name: n for n in g.param_nodes()}
    params = load_npz(args.params)
    unknown = sorted(set(params) - set(decl))
    if unknown:
        raise FileInputError(args.params, f"holds {', '.join(map(repr, unknown))}, which "
                             f"graph @{g.name} does not declare",
                             f"params named {', '.join(sorted(decl)) or '(none)'}")
    for name, arr in params.items():
        _check_array(args.params, f"param {name!r}", arr, decl[name], args.float64)
    return params


def _out_path(text: str) -> Path:
    """Where ``run --out`` writes: a .npz file path (``.npz`` added when missing)."""
    from ._readers import FileInputError

    path = Path(text)
    if not text or text.endswith(("/", "\\")) or path.is_dir():
        raise FileInputError(text or "''", "is a directory", "a file path for the .npz "
                             "of outputs, e.g. out.npz")
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def _run(args) -> int:
    import numpy as np

    from ._atomic import atomic_open
    from ._readers import FileInputError, describe_os_error, one_line
    from .interpret import interpret
    from .ir.verify import verify

    g = _graph_file(args.file)
    errs = verify(g)
    if errs:
        more = f" (and {len(errs) - 1} more; see `rlx-ref verify`)" if len(errs) > 1 else ""
        raise FileInputError(args.file, f"does not verify: {errs[0]}{more}",
                             "a graph that `rlx-ref verify` accepts")
    out = _out_path(args.out) if args.out is not None else None
    feeds, params = _feeds(args, g), _params(args, g)
    try:
        outs = interpret(g, feeds, params, float64=args.float64)
    except (ValueError, RuntimeError) as e:
        raise RuntimeError(f"{args.file}: {one_line(e)}") from None
    for o, v in zip(g.outputs, outs):
        print(f"%{o}: {g.nodes[o].shape}\n{v}")
    if out is not None:
        try:
            with atomic_open(out) as f:
                np.savez(f, **{f"out{i}": v for i, v in enumerate(outs)})
        except OSError as e:
            raise FileInputError(out, f"cannot write: {describe_os_error(e)}",
                                 "a writable file path") from None
        print(f"wrote {out}")
    return 0


def _docs(args) -> int:
    from ._atomic import write_text
    from ._readers import FileInputError, read_text
    from .docgen import render, render_images
    from .draw import pages as pictures
    from .dsl_docgen import render_dsl

    path = Path(args.out)
    pages = {path: render(), path.with_name("dsl.md"): render_dsl()}
    images = render_images()
    if args.check:
        problems = [f"{p} is stale" for p, text in pages.items()
                    if not p.exists() or read_text(p, "a generated reference page") != text]
        problems += pictures.stale(path.parent, images)
        for p in problems:
            print(f"{p}: run `rlx-ref docs`", file=sys.stderr)
        if problems:
            return 1
        print(f"{', '.join(map(str, pages))} and {len(images)} pictures are up to date")
        return 0
    try:
        for p, text in pages.items():
            write_text(p, text)
        written = pictures.write(path.parent, images)
    except OSError as e:
        raise FileInputError(e.filename or path, f"cannot write: {e.strerror or e}",
                             "a writable file path") from None
    print(f"wrote {', '.join(map(str, pages))} ({len(written)} of {len(images)} pictures "
          "changed)")
    return 0


def _conformance(args) -> int:
    from .conformance.cli import run

    return run(args)


def _variants(args) -> int:
    """Print each backend's kernel variants (rule, threshold, device) and thresholds."""
    from .backends import variants

    names = args.backend.split(",") if args.backend else variants.backends()
    for name in names:
        table = variants.declared(name)
        if not table:
            raise ValueError(f"backend {name!r} declares no kernel variants; those that do: "
                             f"{', '.join(variants.backends())}")
        print(f"{name}: {len(table)} kernel variants")
        for v in table.values():
            extra = "".join(f" [{x}]" for x in (v.threshold, v.device) if x)
            print(f"  {v.name:<40} {v.rule}{extra}")
        for t in variants.thresholds(name).values():
            now = variants.threshold(t.name)
            shown = f"{now} (default {t.default})" if now != t.default else str(now)
            print(f"  threshold {t.name} = {shown}, floor {t.floor}: {t.rule}")
    return 0


def main(argv=None) -> int:
    from ._atomic import exit_on_sigterm

    exit_on_sigterm()                       # a killed run still removes its temp files
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["coverage"]:
        from .conformance.report import main_coverage

        return main_coverage(argv[1:])
    p = argparse.ArgumentParser(prog="rlx-ref", description="RLX reference stack")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("selfcheck", help="run every op's samples on the oracle")
    s.add_argument("--op", help="only kinds containing this text")
    s.set_defaults(fn=_selfcheck)
    s = sub.add_parser("gradcheck", help="check every op's derivatives on the oracle by "
                       "finite differences (reverse, forward, and their consistency)")
    s.add_argument("--op", help="only kinds containing this text")
    s.set_defaults(fn=_gradcheck)
    sub.add_parser("ops", help="list registered op kinds").set_defaults(fn=_ops)
    s = sub.add_parser("verify", help="parse and verify a text-form graph")
    s.add_argument("file")
    s.set_defaults(fn=_verify)
    s = sub.add_parser("run", help="run a text-form graph on the oracle")
    s.add_argument("file")
    s.add_argument("--input", action="append", help="NAME=path.npy")
    s.add_argument("--params", help="a .npz of params by name")
    s.add_argument("--float64", action="store_true")
    s.add_argument("--out", help="write outputs to this .npz")
    s.set_defaults(fn=_run)
    s = sub.add_parser("conformance", help="check backends against the oracle")
    from .conformance.cli import add_arguments

    add_arguments(s)
    s.set_defaults(fn=_conformance)
    s = sub.add_parser("worker", help="serve conformance cases as a Dask worker that "
                       "advertises the backends usable here")
    from .conformance.dask_worker import add_arguments as add_worker_arguments

    add_worker_arguments(s)
    s = sub.add_parser("coverage", help="render docs/op-coverage.md from results files",
                       add_help=False)
    s.set_defaults(fn=None)
    s = sub.add_parser("variants", help="list backends' kernel variants and thresholds")
    s.add_argument("--backend", help="NAME[,NAME...] (default: every declaring backend)")
    s.set_defaults(fn=_variants)
    s = sub.add_parser("gguf", help="inspect GGUF files; convert safetensors to GGUF")
    from .quant.gguf_cli import add_arguments as add_gguf_arguments

    add_gguf_arguments(s)
    s = sub.add_parser("env", help="the environment variables rlx_ref reads, with their "
                       "values now; --write regenerates docs/env-vars.md")
    from .env_catalog import add_arguments as add_env_arguments

    add_env_arguments(s)
    s = sub.add_parser("draw", help="draw a text-form graph as SVG (Graphviz)")
    from .draw.cli import add_arguments as add_draw_arguments

    add_draw_arguments(s)
    from .explain.cli import add_diff_arguments, add_explain_arguments

    add_explain_arguments(sub.add_parser("explain", help="trace a graph on the oracle, node "
                                         "by node (a table; --html for a page)"))
    add_diff_arguments(sub.add_parser("diff", help="find the first node where a backend "
                                      "departs from the oracle"))
    from .onnx.cli import add_import_arguments, add_tests_arguments

    add_import_arguments(sub.add_parser("import", help="import an ONNX model as text + .npz"))
    add_tests_arguments(sub.add_parser("onnx-tests", help="run ONNX's node tests"))
    s = sub.add_parser("docs", help="regenerate docs/ops.md, docs/dsl.md and the pictures "
                       "under docs/img/ops/ from the registry")
    s.add_argument("--out", default="docs/ops.md")
    s.add_argument("--check", action="store_true",
                   help="fail if ops.md or one of its pictures is stale")
    s.set_defaults(fn=_docs)
    args = p.parse_args(argv)
    from ._readers import FileInputError, describe_os_error, one_line

    try:
        return args.fn(args)
    except BrokenPipeError:                 # e.g. `rlx-ref ops | head`: not an error
        sys.stderr.close()
        return 0
    except FileInputError as e:
        print(f"rlx-ref: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"rlx-ref: {e.filename}: " if e.filename else f"rlx-ref {args.cmd}: "
        print(where + (describe_os_error(e) if e.filename else one_line(e)), file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as e:
        print(f"rlx-ref {args.cmd}: {one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
