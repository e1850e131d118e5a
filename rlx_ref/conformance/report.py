"""The op-coverage report: merge conformance results files (several machines, several
backends) and render them as ``docs/op-coverage.md``, JSON, a self-contained HTML page and
JUnit XML; ``--check`` says when the committed report is stale.

Rows are RLX's op kinds in the categories of RLX's own coverage page (``rlx_kinds.toml``);
every renderer reads one data dict (``render_json``), so the four outputs always agree.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .._atomic import write_text
from .._readers import FileInputError, describe_os_error
from ..ops.opdef import Caps
from . import _report_html as _pages
from ._report_data import opdefs as _opdefs, render_json as _render_json
from ._report_extras import ONNX_TESTS_FILE, load_onnx_tests
from ._report_merge import Column, Merged, Seen, _rank, column_label, load_results  # noqa: F401
from ._report_rows import RLX_ONLY_TITLE, rlx_kinds  # noqa: F401 - part of the report API
from ._report_variants import unexercised_problems
from .model import PASSING, CaseResult
from .results_file import FORMAT, read_results_file  # noqa: F401 - FORMAT re-exported


def render_json(merged: Merged, registry=None, onnx: dict | None = None) -> dict:
    """The report as plain data (JSON-ready, deterministic): the source of every page;
    ``onnx``: the ONNX node-test summary (``load_onnx_tests``), None = not measured."""
    return _render_json(merged, registry, onnx)


def render_markdown(merged: Merged, registry=None, onnx: dict | None = None) -> str:
    """``docs/op-coverage.md``: deterministic, so a committed copy can be checked."""
    return _pages.markdown_page(render_json(merged, registry, onnx))


def render_html(merged: Merged, registry=None, onnx: dict | None = None) -> str:
    """The same report as one self-contained HTML page (inline CSS and SVG, one inline
    script for the matrix filters)."""
    return _pages.html_page(render_json(merged, registry, onnx))


def render_junit(results, suite_name: str = "rlx-ref conformance") -> str:
    """JUnit XML: a testsuite per backend column, a testcase per case (classname = op);
    ``results`` is a Merged or CaseResults (or their JSON dicts)."""
    if isinstance(results, Merged):
        results = results.all_results()
    rs = [r if isinstance(r, CaseResult) else CaseResult.from_json(r) for r in results]
    return _pages.junit_xml(rs, suite_name, column_label)


# ── staleness check ─────────────────────────────────────────────────────────

def _normalise_table(table: dict) -> dict:
    """``{kind: frozenset of DType | "all"}`` (or display names) to the results-file form."""
    return {k: v if v == "all" else sorted(str(d) for d in v) for k, v in table.items()}


def _few(items: list, limit: int = 8) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _table_diff(recorded: dict, now: dict) -> str:
    added = sorted(set(now) - set(recorded))
    removed = sorted(set(recorded) - set(now))
    changed = sorted(k for k in set(now) & set(recorded) if now[k] != recorded[k])
    parts = [f"{what}: {_few(ks)}" for what, ks in (("now claims", added),
                                                     ("no longer claims", removed),
                                                     ("dtypes changed for", changed)) if ks]
    return "; ".join(parts)


def _first_difference(old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: committed {x[:80]!r}, fresh {y[:80]!r}"
    return f"line {min(len(a), len(b)) + 1}: the committed copy has {len(a)} lines, " \
           f"a fresh render {len(b)}"


def check_report(md_path, merged: Merged, registry=None, declared_tables=None,
                 onnx: dict | None = None) -> list[str]:
    """Problems that make the committed report stale (empty list: it is up to date)."""
    problems, md_path = [], Path(md_path)
    fresh = render_markdown(merged, registry, onnx)
    regen = f"regenerate it with `rlx-ref coverage RESULTS.json --out {md_path}`"
    if not md_path.exists():
        problems.append(f"{md_path} does not exist; {regen}")
    elif (old := md_path.read_text(errors="replace")) != fresh:
        problems.append(f"{md_path} is stale (differs from a fresh render at "
                        f"{_first_difference(old, fresh)}); {regen}")
    rep = render_json(merged, registry)
    # Leaves (Input, Param) need no cases of their own: every case feeds its inputs by them.
    leaves = {d.kind for d in _opdefs(registry) if Caps.LEAF in getattr(d, "caps", Caps.NONE)}
    for kind in (k for k in rep["not_run"] if k not in leaves):
        problems.append(f"op kind {kind!r} is in the registry but has no results on any "
                        "backend; rerun `rlx-ref conformance` so the report covers it")
    for kind in rep["unknown_ops"]:
        problems.append(f"the results name op kind {kind!r}, which the registry does not "
                        "have; rerun `rlx-ref conformance`")
    for name, entry in sorted((declared_tables or {}).items()):
        table, device = entry if isinstance(entry, tuple) else (entry, None)
        cols = [c for c in merged.columns.values() if c.name == name]
        if not cols:
            problems.append(f"backend {name!r} has a declared op table but no results")
        for col in sorted(cols, key=lambda c: c.label):
            if device is not None and col.devices and device not in col.devices:
                continue        # recorded on another device: its table may differ

            diff = _table_diff(col.declared, _normalise_table(table))
            if diff:
                problems.append(f"backend {col.label!r} declares a different op table than "
                                f"its results record ({diff}); rerun `rlx-ref conformance "
                                f"--backend {name}` and regenerate the report")
    return problems


# ── command line ────────────────────────────────────────────────────────────

def _declared_now(names: list) -> tuple[dict, list]:
    """Each backend's op table as it declares it today, and a problem per unloadable one."""
    tables, problems = {}, []
    try:
        from ..backends import registry as breg
    except ImportError as e:
        return {}, [f"cannot import rlx_ref.backends.registry to read declared op tables: {e}"]
    for name in names:
        try:
            b = breg.get_backend(name)
            # a device backend's table depends on its device (f64 with cl_khr_fp64): only
            # one that is usable here can say what it declares today
            usable = getattr(b, "availability", None)
            if usable is None or usable()[0]:
                tables[name] = (b.supported_ops(), str(getattr(b, "device", "")))
        except Exception as e:  # noqa: BLE001 - any load failure is one reported problem
            problems.append(f"backend {name!r} cannot be loaded to compare its declared op "
                            f"table with the results: {e}")
    return tables, problems


def _compare_file(path: Path, fresh: str, explicit: bool) -> list[str]:
    if not path.exists():
        return [f"{path} does not exist; regenerate the report"] if explicit else []
    if path.read_bytes() != fresh.encode():
        return [f"{path} is stale (differs from a fresh render); regenerate the report"]
    return []


def main_coverage(argv=None) -> int:
    """``rlx-ref coverage RESULTS.json [MORE.json...] [--out] [--json] [--html] [--check]``."""
    p = argparse.ArgumentParser(prog="rlx-ref coverage",
                                description="Write (or --check) the op-coverage report.")
    p.add_argument("results", nargs="+", help="results files from `rlx-ref conformance`")
    p.add_argument("--out", default="docs/op-coverage.md", help="markdown report path")
    p.add_argument("--json", default=None, help="JSON path (default: --out's, ending .json)")
    p.add_argument("--html", default=None, help="HTML path (default: --out's, ending .html)")
    p.add_argument("--junit", default=None, help="also write JUnit XML here")
    p.add_argument("--onnx-tests", default=None, metavar="JSON",
                   help="the `rlx-ref onnx-tests` summary (default: results/"
                   f"{ONNX_TESTS_FILE} beside --out; absent = not measured)")
    p.add_argument("--check", action="store_true",
                   help="compare the committed report instead of writing; exit 1 if stale")
    args = p.parse_args(argv)
    try:
        return _coverage(args)
    except FileInputError as e:
        print(f"rlx-ref: {e}", file=sys.stderr)
    except OSError as e:                    # an output path that cannot be read or written
        print(f"rlx-ref: {e.filename}: {describe_os_error(e)}", file=sys.stderr)
    return 2


def _coverage(args) -> int:
    merged = load_results(args.results)
    from ..ops.opdef import all_opdefs

    registry = all_opdefs()
    md = Path(args.out)
    onnx = load_onnx_tests(args.onnx_tests or md.parent / "results" / ONNX_TESTS_FILE)
    rep = render_json(merged, registry, onnx)
    outputs = {Path(args.json or md.with_suffix(".json")):
               (json.dumps(rep, indent=1, ensure_ascii=False) + "\n", args.json is not None),
               Path(args.html or md.with_suffix(".html")):
               (_pages.html_page(rep), args.html is not None)}
    if args.check:
        names = sorted({c.name for c in merged.columns.values()})
        tables, problems = _declared_now(names)
        problems += check_report(args.out, merged, registry, tables, onnx)
        problems += unexercised_problems(rep["variants"])
        for path, (text, explicit) in outputs.items():
            problems += _compare_file(path, text, explicit)
        for prob in problems:
            print(f"stale: {prob}", file=sys.stderr)
        print(f"op-coverage report: {len(problems)} problem(s)" if problems
              else f"op-coverage report {args.out} is up to date")
        return 1 if problems else 0
    outputs[Path(args.out)] = (_pages.markdown_page(rep), True)
    if args.junit:
        outputs[Path(args.junit)] = (render_junit(merged), True)
    for path, (text, _) in outputs.items():
        write_text(path, text)
    fails = sum(s.result.status not in PASSING for s in merged.results.values())
    print(f"wrote {', '.join(str(p) for p in outputs)} ({len(merged.columns)} column(s), "
          f"{len(merged.results)} result(s), {fails} failing)")
    return 0
