"""``rlx-ref import`` (ONNX → text form + .npz) and ``rlx-ref onnx-tests``."""
from __future__ import annotations

import sys
from pathlib import Path


def _need_onnx() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("rlx-ref: this command needs the onnx package (pip install 'rlx_ref[onnx]')",
              file=sys.stderr)
        return False
    return True


def import_cli(args) -> int:
    """Write the imported graph's text form, and its params as an .npz beside it."""
    if not _need_onnx():
        return 2
    import numpy as np

    from .._atomic import atomic_open, write_text
    from .load import OnnxImportError, import_model

    try:
        imp = import_model(args.model, opset=args.opset, weights=args.weights)
    except OnnxImportError as e:
        print(f"rlx-ref import: {e}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else Path(args.model).with_suffix(".rlx")
    write_text(out, imp.graph.to_text() + "\n")
    print(f"wrote {out} ({len(imp.graph)} nodes)")
    if imp.params:
        npz = out.with_suffix(".npz")
        with atomic_open(npz) as f:
            np.savez(f, **imp.params)
        print(f"wrote {npz} ({len(imp.params)} params)")
    return 0


def add_import_arguments(p) -> None:
    """The ``rlx-ref import`` options."""
    p.add_argument("model", help="an .onnx file")
    p.add_argument("-o", "--out", help="the text-form graph to write (default: MODEL.rlx); "
                   "params go to the same name with .npz")
    p.add_argument("--opset", type=int, help="read the model under this opset")
    p.add_argument("--weights", choices=("params", "constants"), default="params",
                   help="float initializers as Params (default) or Constants")
    p.set_defaults(fn=import_cli)


def tests_cli(args) -> int:
    """Run ONNX's node tests on the oracle and backends; print counts, write the JSON."""
    if not _need_onnx():
        return 2
    from .node_suite import RESULTS, load_ledger, run_suite, stale_entries, write_summary

    backends = tuple(b.strip() for b in args.backend.split(",") if b.strip())
    if "reference" not in backends:
        backends = ("reference",) + backends        # the oracle always runs: it is the bar
    done = [0]

    def progress(name, res):
        done[0] += 1
        if args.verbose:
            print(f"{done[0]:5d} {name}: " + ", ".join(f"{b}={s}" for b, (s, _) in
                                                     res.items()), flush=True)

    data, results = run_suite(backends, args.op, args.subset, args.jobs, progress)
    for b, c in data["backends"].items():
        mappable = data["total"] - c["not_mappable"]
        rate = 100.0 * (c["pass"] + c["differs"]) / mappable if mappable else 0.0
        print(f"{b:12s} pass {c['pass']:5d}  fail {c['fail']:4d}  differs {c['differs']:4d}"
              f"  not mappable {c['not_mappable']:5d}  ({rate:.1f}% of mappable ok)")
    top = sorted(data["not_mappable_ops"].items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    print("not mappable: " + ", ".join(f"{op} {n}" for op, n in top))
    for name, per in sorted(data["failures"].items()):
        for b, why in per.items():
            print(f"FAIL {name} [{b}]: {why}")
    out = args.out or (RESULTS if not args.op and not args.subset else None)
    if out:
        write_summary(out, data)
        print(f"wrote {out}")
    if not args.op and not args.subset:
        stale = stale_entries(results, load_ledger(), backends)
        for p in stale:
            print(f"stale ledger entry (no failing case): {p}")
    return 1 if any(c["fail"] for c in data["backends"].values()) else 0


def add_tests_arguments(p) -> None:
    """The ``rlx-ref onnx-tests`` options."""
    p.add_argument("--backend", default="reference",
                   help="comma-separated backends besides the oracle (e.g. numba-cpu)")
    p.add_argument("--op", help="only cases with an ONNX op matching this glob")
    p.add_argument("--subset", choices=("fast",), help="about 150 cases spread evenly")
    p.add_argument("--out", help="results JSON (default: docs/results/onnx-node-tests.json "
                   "for a full run; nothing for a filtered one)")
    p.add_argument("--jobs", "-j", type=int, default=1, help="worker processes")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    p.set_defaults(fn=tests_cli)
