"""The ``rlx-ref`` command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


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


def _verify(args) -> int:
    from .ir.text import parse
    from .ir.verify import verify

    g = parse(Path(args.file).read_text())
    errs = verify(g)
    for e in errs:
        print(e)
    print(f"@{g.name}: {len(g)} nodes, {len(errs)} error(s)")
    return 1 if errs else 0


def _run(args) -> int:
    import numpy as np

    from .interpret import interpret
    from .ir.text import parse

    g = parse(Path(args.file).read_text())
    feeds = {}
    for item in args.input or []:
        name, _, path = item.partition("=")
        feeds[name] = np.load(path)
    params = dict(np.load(args.params)) if args.params else {}
    ins = {n.attrs.name for n in g.input_nodes()}
    outs = interpret(g, {k: v for k, v in feeds.items() if k in ins}, params,
                     float64=args.float64)
    for o, v in zip(g.outputs, outs):
        print(f"%{o}: {g.nodes[o].shape}\n{v}")
    if args.out:
        np.savez(args.out, **{f"out{i}": v for i, v in enumerate(outs)})
    return 0


def _docs(args) -> int:
    from .docgen import render

    path = Path(args.out)
    text = render()
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is stale: run `rlx-ref docs`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0


def _conformance(args) -> int:
    from .conformance.cli import run

    return run(args)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["coverage"]:
        from .conformance.report import main_coverage

        return main_coverage(argv[1:])
    p = argparse.ArgumentParser(prog="rlx-ref", description="RLX reference stack")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("selfcheck", help="run every op's samples on the oracle")
    s.add_argument("--op", help="only kinds containing this text")
    s.set_defaults(fn=_selfcheck)
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
    s = sub.add_parser("coverage", help="render docs/op-coverage.md from results files",
                       add_help=False)
    s.set_defaults(fn=None)
    s = sub.add_parser("docs", help="regenerate docs/ops.md from the registry")
    s.add_argument("--out", default="docs/ops.md")
    s.add_argument("--check", action="store_true", help="fail if the file is stale")
    s.set_defaults(fn=_docs)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:                 # e.g. `rlx-ref ops | head`: not an error
        sys.stderr.close()
        return 0
    except (OSError, ValueError, RuntimeError) as e:
        print(f"rlx-ref {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
