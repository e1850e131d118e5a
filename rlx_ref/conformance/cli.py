"""``rlx-ref conformance``: run the cases on backends, write results, repros and JUnit."""
from __future__ import annotations

import argparse
import os
import sys
import time

from .._readers import FileInputError
from ..env_registry import get


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", help="NAME[,NAME...] or module:object (default: every "
                   "available backend)")
    p.add_argument("--op", help="only ops matching this kind or glob (e.g. 'Reduce', "
                   "'Conv*', 'multi:*')")
    p.add_argument("--dtype", help="only these case dtypes, e.g. f32,f16")
    p.add_argument("--case", help="only this case id")
    p.add_argument("--tag", help="only cases with one of these tags, e.g. chain,bcast,offset,"
                                 "cancel,fp16-exact,boundary")
    p.add_argument("--shard", help="run shard i/n of the cases (1-based i)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--case-timeout", type=float, default=None, metavar="SECONDS",
                   help="kill a worker whose case runs longer and record `timeout` "
                   "(default 300; a worker's first case gets twice this for its start)")
    p.add_argument("--in-process", action="store_true",
                   help="run cases in this process, not in isolated workers (debugging: a "
                   "backend that aborts or hangs then takes the run with it)")
    p.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    p.add_argument("--tier", choices=("default", "full"), default="default",
                   help="full: add the cases tagged 'large', above the real kernel "
                        "thresholds (slow; the default tier reaches the same kernels "
                        "with lowered thresholds)")
    p.add_argument("--out", help="write the results JSON here")
    p.add_argument("--repro-dir", default="repros", help="where failing cases leave repros")
    p.add_argument("--ledger", help="expectations file (default: the packaged one)")
    p.add_argument("--junit", help="also write JUnit XML here")
    p.add_argument("--machine", help="record this label instead of the host details "
                   "(for reports that must not depend on the machine)")
    p.add_argument("--list", action="store_true", help="list the selected cases and stop")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--power", action="store_true",
                   help="measure the suite's power: run each planted fault of the catalogue "
                   "(backends/fault_catalogue/) on its selection and report the share "
                   "caught (exit 1 when one is missed, known gaps aside); --backend limits the "
                   "faults to numba-cpu and/or opencl")
    p.add_argument("--fault", help="with --power: only these faults (NAME[,NAME...])")
    add_cluster_arguments(p)


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("runs on a Dask cluster (the `dist` extra)")
    g.add_argument("--scheduler", metavar="ADDR",
                   help="send the cases to the dask.distributed scheduler at ADDR (e.g. "
                   "tcp://HOST:8786); each case goes to a worker that advertises its backend "
                   "(start workers with `rlx-ref worker --scheduler ADDR`)")
    g.add_argument("--retries", type=int, default=2,
                   help="with --scheduler: tries again per failed task (default 2)")
    g.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="with --scheduler: how long to try reaching it (default 10)")
    g.add_argument("--worker-wait", type=float, default=30.0, metavar="SECONDS",
                   help="with --scheduler: how long to wait for a first worker, and for a "
                   "backend whose workers all left mid-run (default 30)")


def _backends(spec: str | None) -> list:
    from ..backends.base import BackendUnavailable
    from ..backends.registry import available_backends, backend_names, get_backend

    if not spec:
        usable = available_backends()
        for name in sorted(set(backend_names()) - {b.name for b in usable}):
            try:                        # a backend known but unusable here says why, once
                b = get_backend(name)
                why = "" if getattr(b, "test_only", False) else b.availability()[1]
            except BackendUnavailable as e:
                why = str(e)
            if why:
                print(f"{name}: unavailable: {why}", file=sys.stderr)
        return [(b.name, b) for b in usable]
    out = []
    for name in spec.split(","):
        b = get_backend(name.strip())
        ok, why = b.availability()
        if not ok:
            raise RuntimeError(f"backend {name!r} is unavailable here: {why}")
        twin = next((s for s, o in out if o.name == b.name), None)
        if twin is not None:    # results and the results file's backends are keyed by name
            raise RuntimeError(f"backends {twin!r} and {name.strip()!r} both record results "
                               f"as {b.name!r}: run each with its own --out and merge the "
                               "files with `rlx-ref coverage A.json B.json`")
        out.append((name.strip(), b))
    return out


def run_power_cli(args) -> int:
    """``--power``: each catalogued fault on its selection; exit 1 when any is missed."""
    from ..backends.fault_catalogue import select_faults
    from ..backends.faults import FaultError
    from .ledger import load_ledger
    from .power import passed, run_power, summary, variant_reach

    try:
        faults = select_faults(args.fault, args.backend)
    except FaultError as e:
        print(str(e), file=sys.stderr)
        return 2
    if not faults:
        print(f"no catalogued fault is planted in {args.backend!r} (faults exist for "
              "numba-cpu and opencl)", file=sys.stderr)
        return 2
    usable = {b: _usable(b)[0] for b in {f.run_spec for f in faults}}
    faults = [f for f in faults if usable[f.run_spec]]
    if not faults:
        print("no backend with catalogued faults is usable here", file=sys.stderr)
        return 2
    from .workers import start_server

    start_server([])
    t0 = time.perf_counter()
    rows = run_power(faults, load_ledger(args.ledger), seed=args.seed, jobs=args.jobs,
                     case_timeout=args.case_timeout)
    if args.out:
        from .._atomic import write_json

        write_json(args.out, {"format": "rlx-ref-power/1", "faults": rows}, indent=1)
    print(f"{summary(rows)} in {time.perf_counter() - t0:.1f}s")
    print(variant_reach(sorted({r["backend"] for r in rows})))
    return 0 if passed(rows) else 1


def _usable(name: str) -> tuple[bool, str]:
    """(usable, why not) of backend ``name``; says why on stderr when it is not."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    try:
        ok, why = get_backend(name).availability()
    except BackendUnavailable as e:
        ok, why = False, str(e)
    if not ok:
        print(f"{name}: unavailable, its faults are skipped: {why}", file=sys.stderr)
    return ok, why


def run(args) -> int:
    from .cases import build_cases, filter_cases
    from .ledger import load_ledger, warn_name_mismatch
    from .runner import failing, results_document, run_backend, shard_cases, summarize
    from .runner import write_results

    if args.jobs < 1:
        print(f"--jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    if args.case_timeout is not None and not args.case_timeout > 0:
        print(f"--case-timeout must be a positive number of seconds, got {args.case_timeout}",
              file=sys.stderr)
        return 2
    for flag, path in (("--out", args.out), ("--junit", args.junit)):
        if path is not None and (not path or os.path.isdir(path)):
            raise FileInputError(path or "''", f"({flag}) is a directory",
                                 "a file path to write, e.g. build/results.json")
    from ..backends import variants

    try:        # a bad RLX_REF_THRESHOLDS would fail every case: refuse it once, up front
        variants.check_values(variants.parse_values(get(variants.ENV) or ""),
                              variants.ENV)
    except variants.VariantError as e:
        print(str(e), file=sys.stderr)
        return 2
    if args.power and args.scheduler:
        print("--power runs here; it cannot be sent to a Dask cluster (--scheduler)",
              file=sys.stderr)
        return 2
    if args.power:
        return run_power_cli(args)
    if args.fault:
        print("--fault needs --power", file=sys.stderr)
        return 2
    if args.retries < 0:
        print(f"--retries must be 0 or more, got {args.retries}", file=sys.stderr)
        return 2
    if args.scheduler and (args.in_process or args.jobs != 1):
        print("--in-process and --jobs are for local runs; a run with --scheduler runs as "
              "many cases at once as its workers have threads", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    backends = [] if args.list or args.scheduler else _backends(args.backend)
    client = None
    if args.scheduler and not args.list:        # an unreachable scheduler fails at once
        from .distributed import connect

        client = connect(args.scheduler, args.connect_timeout)
    if backends and not args.in_process:
        from .workers import start_server

        start_server(sorted({type(b).__module__ for _, b in backends}))
    try:
        cases = build_cases(kinds=args.op, seed=args.seed, tier=args.tier)  # --op: only those
        dtypes = args.dtype.split(",") if args.dtype else None
        cases = shard_cases(filter_cases(cases, args.op, dtypes, args.case, args.tag),
                            args.shard)
    except BaseException:
        if client is not None:
            client.close()
        raise
    if not cases:
        if client is not None:
            client.close()
        print("no cases match the selection", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c.id}  {c.op:<24} {c.dtype:<5} {','.join(c.tags)}")
        return 0
    ledger = load_ledger(args.ledger)
    results = []
    if args.scheduler:
        from .distributed import run_from_cli

        backends, results = run_from_cli(args, cases, ledger, client)
    for spec, b in [] if args.scheduler else backends:
        warn_name_mismatch(ledger, spec, b.name)
        results += run_backend(b, cases, ledger, jobs=args.jobs, repro_dir=args.repro_dir,
                               spec=spec, progress=not args.quiet,
                               in_process=args.in_process, case_timeout=args.case_timeout)
    doc = results_document([b for _, b in backends], results, args.machine)
    if args.out:
        write_results(doc, args.out)
    if args.junit:
        from .._atomic import write_text
        from .report import render_junit

        write_text(args.junit, render_junit(results, "rlx-ref conformance"))
    took = time.perf_counter() - t0
    for _, b in backends:
        mine = [r for r in results if r["backend"] == b.name]
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summarize(mine).items()))
        print(f"{b.name}: {len(mine)} cases: {counts}")
    bad = failing(results)
    for r in bad[:50]:
        first = (r["message"] or "").splitlines()[0] if r["message"] else ""
        print(f"FAIL {r['backend']} {r['case_id']} {r['status']}: {first}"
              + (f"\n     repro: {r['repro']}/repro.py" if r.get("repro") else ""))
    if len(bad) > 50:
        print(f"... and {len(bad) - 50} more failing cases (see --out)")
    print(f"{len(cases)} cases x {len(backends)} backend(s) in {took:.1f}s; "
          f"{len(bad)} failing")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="rlx-ref conformance")
    add_arguments(p)
    return run(p.parse_args(argv))
