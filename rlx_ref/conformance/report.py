"""The op-coverage report: merge conformance results files (several machines, several
backends) and render them as ``docs/op-coverage.md``, JSON, a self-contained HTML page and
JUnit XML; ``--check`` says when the committed report is stale.

Every renderer reads one data dict (``render_json``), so the four outputs always agree.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .._atomic import write_text
from .._readers import FileInputError, describe_os_error
from ..ops.opdef import Caps
from . import _report_html as _pages
from .model import CRASH, ERROR, MISMATCH, MISSING, OK, PASSING, STATUSES, TIMEOUT, UNSUPPORTED
from .model import XFAIL, XPASS
from .errors import TAG as ERROR_TAG
from .model import CaseResult
from ._report_variants import unexercised_problems, variant_coverage
from .results_file import FORMAT, read_results_file  # noqa: F401 - FORMAT re-exported

# How bad a status is when two machines disagree about one case: the worse one is kept.
_RANK = {s: i for i, s in enumerate((OK, UNSUPPORTED, XFAIL, XPASS, MISSING,
                                     MISMATCH, ERROR, TIMEOUT, CRASH))}
_PATH_RANK = {"native": 0, "rewritten": 1, "decomposed": 2, "host": 3}


@dataclass
class Column:
    """One report column: a backend on real hardware, or the same backend emulated (each
    also with its kernel style forced, e.g. OpenCL's GPU kernels on a CPU device)."""

    label: str
    name: str
    emulated: bool
    kernels: str = ""                               # the kernel style forced, if any
    devices: set = field(default_factory=set)
    machines: set = field(default_factory=set)
    declared: dict = field(default_factory=dict)   # kind -> sorted dtype names | "all"
    paths: dict = field(default_factory=dict)      # kind -> native|rewritten|decomposed|host
    promises: dict = field(default_factory=dict)   # kind -> accumulation promise texts
    device_types: set = field(default_factory=set)  # "cpu"/"gpu" the results ran on
    variants: set = field(default_factory=set)      # kernel variants any result used


@dataclass
class Seen:
    """The kept result of one (column, case) and the status every machine reported."""

    result: CaseResult
    host: str                                       # the machine the kept result came from
    by_machine: dict = field(default_factory=dict)  # host -> worst status seen there

    @property
    def machines(self) -> list:
        return sorted(self.by_machine)


@dataclass
class Merged:
    """Several results files merged: columns by label, results by (label, case id)."""

    columns: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    machines: dict = field(default_factory=dict)    # host -> machine dict

    def all_results(self) -> list:
        """The kept results, sorted by column then case id."""
        return [self.results[k].result for k in sorted(self.results)]


def _rank(status: str) -> int:
    return _RANK.get(status, len(_RANK))     # a status we do not know counts as the worst


def _key(r: CaseResult, host: str) -> tuple:
    """Order of badness; the later fields only break ties, so file order never matters."""
    ratio = r.budget_ratio if r.budget_ratio is not None else -1.0
    return (_rank(r.status), ratio, r.message or "", host)


def _merge_declared(have: dict, new: dict) -> None:
    for kind, dts in new.items():
        old = have.get(kind)
        if old == "all" or dts == "all":
            have[kind] = "all"
        else:
            have[kind] = sorted(set(old or ()) | set(dts))


def _merge_paths(have: dict, new: dict) -> None:
    # The least native path wins: an annotation must not hide a fallback on any machine.
    for kind, path in new.items():
        if _PATH_RANK.get(path, 9) > _PATH_RANK.get(have.get(kind, "native"), 9):
            have[kind] = path
        else:
            have.setdefault(kind, path)


def load_results(paths) -> Merged:
    """Merge results files: one column per backend (emulated runs in their own column);
    a case seen twice keeps the worse status and records every machine that ran it."""
    merged = Merged()
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        doc = read_results_file(path)
        machine = doc.get("machine") or {}
        host = str(machine.get("host", "unknown"))
        info = dict(sorted((k, str(v)) for k, v in machine.items()))
        merged.machines[host] = max(merged.machines.get(host, info), info, key=json.dumps)
        backends = doc.get("backends") or {}
        for d in doc.get("results", ()):
            r = CaseResult.from_json(d)         # read_results_file checked every field
            info = backends.get(r.backend, {})
            r.emulated = bool(r.emulated or info.get("emulated", False))
            col = _column(merged, r.backend, r.emulated, info, host)
            col.variants.update(r.variants)
            key, seen = (col.label, r.case_id), merged.results.get((col.label, r.case_id))
            if seen is None:
                merged.results[key] = Seen(r, host, {host: r.status})
                continue
            before = seen.by_machine.get(host)
            if before is None or _rank(r.status) > _rank(before):
                seen.by_machine[host] = r.status
            if _key(r, host) > _key(seen.result, seen.host):
                seen.result, seen.host = r, host
        for name, info in backends.items():     # backends with no results still get a column
            _column(merged, name, bool(info.get("emulated", False)), info, host)
    return merged


def _column(merged: Merged, name: str, emulated: bool, info: dict, host: str) -> Column:
    kernels = str(info.get("kernels") or "")
    label = column_label(name, emulated, kernels)
    col = merged.columns.get(label)
    if col is None:
        col = merged.columns[label] = Column(label, name, emulated, kernels)
    col.machines.add(host)
    if info.get("device"):
        col.devices.add(str(info["device"]))
    _merge_declared(col.declared, info.get("declared") or {})    # unions: merging is
    _merge_paths(col.paths, info.get("paths") or {})             # idempotent
    for p in info.get("accumulation") or ():
        texts = col.promises.setdefault(p["kind"], [])
        text = p.get("text") or p["kind"]
        if text not in texts:
            texts.append(text)
    col.device_types.update(info.get("device_types") or ())
    return col


# ── the report data (every renderer reads this) ──────────────────────────────

# RLX's docs/op-coverage.md categories, in its order; families map onto them, a few kinds
# are placed by name where RLX puts them elsewhere than our family files do.
CATEGORIES = (
    ("Sources & leaves", ("leaves",)),
    ("Elementwise & predication", ("elementwise",)),
    ("Fusion regions", ("region",)),
    ("Linear algebra", ("linalg", "linalg_decomp")),
    ("Normalization", ("normalization",)),
    ("Attention & positional", ("attention",)),
    ("Shape & data movement", ("movement", "indexing")),
    ("Reduction & indexing", ("reduction", "sort")),
    ("Random number generation", ("random",)),
    ("Convolution & pooling", ("conv",)),
    ("Quantization — inference", ("quant", "scaled")),
    ("Fused composites", ("fused",)),
    ("Control flow", ("control",)),
    ("3D Gaussian splatting", ("splat",)),
    ("Complex (C64 / Wirtinger AD)", ("complex",)),
    ("FFT & signal", ("spectral",)),
    ("Custom", ("custom",)),
    ("Riemannian / SPD manifold", ("spd",)),   # op.rs's section; RLX's page lists none yet
    ("Quantization — training", ("fake_quant",)),
    ("Backward / training ops", ("backward",)),
    ("Sequence models (SSM / RNN / linear-attention)", ("sequence",)),
)
KIND_CATEGORY = {"CustomFn": "Custom",     # RLX lists CustomFn beside Custom
                 "GroupedMatMul": "Linear algebra", "LoraMatMul": "Linear algebra",
                 "Sample": "Reduction & indexing",   # RLX: beside TopK, not with the RNGs
                 "AdaLayerNormBackward": "Backward / training ops",
                 "GatedResidualBackward": "Backward / training ops"}
OTHER = "Other"                            # a family no category names yet
_ANNOTATION = {"native": "", "rewritten": "ᵁ", "decomposed": "ᴰ", "host": "ᴴ"}


def column_label(name: str, emulated: bool, kernels: str = "") -> str:
    """The report column of a backend: emulated runs never share a column with hardware,
    nor runs with a forced kernel style (``kernels``) with the device's own style."""
    notes = ["emulated"] * bool(emulated) + [f"{kernels} kernels"] * bool(kernels)
    return f"{name} ({', '.join(notes)})" if notes else name


def category_of(family: str, kind: str) -> str:
    if kind in KIND_CATEGORY:
        return KIND_CATEGORY[kind]
    return next((t for t, fams in CATEGORIES if family in fams), OTHER)


def _opdefs(registry) -> list:
    if registry is None:
        from ..ops.opdef import all_opdefs

        registry = all_opdefs()
    defs = registry.values() if isinstance(registry, dict) else registry
    return sorted(defs, key=lambda d: d.kind)


def _counts(statuses) -> dict:
    c = Counter(statuses)
    failing = sum(n for s, n in c.items() if s not in PASSING)
    return {"cases": sum(c.values()), "ok": c[OK], "ran": sum(c.values()) - c[UNSUPPORTED],
            "failing": failing, "xfail": c[XFAIL], "unsupported": c[UNSUPPORTED],
            "statuses": {s: c[s] for s in sorted(c, key=_status_order)}}


def _status_order(s: str) -> tuple:
    return (STATUSES.index(s) if s in STATUSES else len(STATUSES), s)


def _cell(statuses: list, claimed: bool, path: str = "native") -> dict:
    """One matrix cell: counts, a state for styling and the text both pages show."""
    cell = _counts(statuses)
    ann = _ANNOTATION.get(path, "") if claimed else ""
    if not claimed and not cell["failing"]:     # a failure shows even where nothing is claimed
        state, text = "unclaimed", ""
    elif cell["cases"] == 0:
        state, text = "notrun", "—"
    elif cell["ran"] == 0:
        state, text = "unsupported", "unsupported"
    elif cell["ok"] == cell["ran"]:
        state, text = "pass", "✅" + ann
    else:
        bad = ", ".join(f"{n} {s}" for s, n in cell["statuses"].items()
                        if s not in (OK, UNSUPPORTED))
        state = "fail" if cell["failing"] else "xfail"
        text = f"⚠️{ann} {cell['ok']}/{cell['ran']} ({bad})"
    return {**cell, "claimed": claimed, "path": path, "state": state, "text": text}


def _rate(statuses: list) -> dict:
    """A pass-rate cell: ok out of the cases that ran (declared-unsupported ones did not)."""
    cell = _counts(statuses)
    ok, ran = cell["ok"], cell["ran"]
    if ran == 0:
        return {**cell, "state": "notrun", "text": "—"}
    pct = ok * 100 // ran           # floor: 99.9% must not print as 100%
    mark = "✅" if ok == ran else "⚠️"
    return {**cell, "state": "pass" if ok == ran else "fail",
            "text": f"{mark} {ok}/{ran} ({pct}%)"}


def _columns(merged: Merged) -> list:
    # The oracle first (RLX's ground-truth column), then by name, hardware before emulated.
    return sorted(merged.columns.values(),
                  key=lambda c: (c.name != "reference", c.name, c.emulated, c.kernels))


def render_json(merged: Merged, registry=None) -> dict:
    """The report as plain data (JSON-ready, deterministic): the source of every page."""
    defs, cols = _opdefs(registry), _columns(merged)
    kinds = {d.kind for d in defs}
    by_col_op: dict = {}
    for (label, _), seen in sorted(merged.results.items()):
        by_col_op.setdefault((label, seen.result.op), []).append(seen.result)
    ops_seen = {op for _, op in by_col_op}

    def statuses(label, op):
        return [r.status for r in by_col_op.get((label, op), [])]

    categories: dict = {}
    for d in defs:
        cells = {c.label: _cell(statuses(c.label, d.kind), d.kind in c.declared,
                                _path(c, d.kind, by_col_op.get((c.label, d.kind), [])))
                 for c in cols}
        categories.setdefault(category_of(d.family, d.kind), []).append(
            {"kind": d.kind, "family": d.family, "description": _pages.first_sentence(d.doc),
             "cells": cells})
    titles = [t for t, _ in CATEGORIES] + [OTHER]
    cats = [{"title": t, "ops": categories[t]} for t in titles if t in categories]

    glance = []
    for c in cols:
        rows = [s.result for (label, _), s in merged.results.items() if label == c.label]
        passing = sum(op["cells"][c.label]["state"] == "pass"
                      for cat in cats for op in cat["ops"])
        glance.append({"column": c.label, "claimed": len(kinds & set(c.declared)),
                       "kinds_passing": passing, **_counts(r.status for r in rows)})

    def rates(key_of, order=lambda k: k) -> list:
        table: dict = {}
        for (label, _), seen in merged.results.items():
            for key in key_of(seen.result):
                table.setdefault(key, {}).setdefault(label, []).append(seen.result.status)
        return [{"name": k, "cells": {c.label: _rate(table[k].get(c.label, [])) for c in cols}}
                for k in sorted(table, key=order)]

    multi = []
    for op in sorted(o for o in ops_seen if o.startswith("multi:")):
        rows = [r for c in cols for r in by_col_op.get((c.label, op), [])]
        multi.append({"name": op.partition(":")[2], "op": op,
                      "dtypes": sorted({r.dtype for r in rows}),
                      "cells": {c.label: _cell(statuses(c.label, op), True) for c in cols}})

    held = []       # per backend, the kinds held to a declared accumulation contract
    for c in cols:
        for kind in sorted(c.promises):
            rows = [r for r in by_col_op.get((c.label, kind), []) if "accumulates" in r.contract]
            held.append({"column": c.label, "kind": kind, "promise": "; ".join(c.promises[kind]),
                         "cases": len(rows), "ok": sum(r.status == "ok" for r in rows)})

    failures, order = [], {c.label: i for i, c in enumerate(cols)}
    for (label, case_id), seen in sorted(merged.results.items(), key=lambda kv: (
            order[kv[0][0]], kv[1].result.op, kv[1].result.dtype, kv[0][1])):
        r = seen.result
        if r.status not in PASSING:
            failures.append({"case_id": case_id, "column": label, "op": r.op,
                             "dtype": r.dtype, "status": r.status,
                             "message": _pages.first_line(r.message), "repro": r.repro or "",
                             "max_abs": r.max_abs, "max_rel": r.max_rel, "max_ulp": r.max_ulp,
                             "worst_index": r.worst_index, "budget_ratio": r.budget_ratio,
                             "machines": {h: seen.by_machine[h] for h in seen.machines}})
    return {
        "format": "rlx-ref-coverage/1",
        "registry_kinds": len(defs),
        "backends": [{"column": c.label, "name": c.name, "emulated": c.emulated,
                      "device": ", ".join(sorted(c.devices)), "machines": sorted(c.machines),
                      "declared": dict(sorted(c.declared.items())),
                      "paths": dict(sorted(c.paths.items()))} for c in cols],
        "glance": glance,
        "categories": cats,
        "dtypes": rates(lambda r: [r.dtype], _dtype_order),
        "tags": rates(lambda r: sorted(set(r.tags))),
        "errors": rates(lambda r: [r.op] if ERROR_TAG in r.tags else []),
        "multi": multi,
        "accumulation": held,
        "variants": variant_coverage(cols),
        "failures": failures,
        "not_run": sorted(kinds - ops_seen),
        "unknown_ops": sorted(o for o in ops_seen - kinds if not o.startswith("multi:")),
        "machines": [merged.machines[h] for h in sorted(merged.machines)],
    }


def _dtype_order(name: str) -> tuple:
    """RLX's dtype order (f32, f16, bf16, f64, ints...); names it does not know go last."""
    from ..ir.dtype import DType

    try:
        return (list(DType).index(DType.parse(name)), name)
    except ValueError:
        return (len(DType), name)


def _path(col: Column, kind: str, rows: list) -> str:
    """The least native path the backend declares or any of its results took."""
    paths = [col.paths.get(kind, "native")] + [r.path or "native" for r in rows]
    return max(paths, key=lambda p: _PATH_RANK.get(p, -1))


def render_markdown(merged: Merged, registry=None) -> str:
    """``docs/op-coverage.md``: deterministic, so a committed copy can be checked."""
    return _pages.markdown_page(render_json(merged, registry))


def render_html(merged: Merged, registry=None) -> str:
    """The same report as one self-contained HTML page (inline CSS, no scripts)."""
    return _pages.html_page(render_json(merged, registry))


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


def check_report(md_path, merged: Merged, registry=None, declared_tables=None) -> list[str]:
    """Problems that make the committed report stale (empty list: it is up to date)."""
    problems, md_path = [], Path(md_path)
    fresh = render_markdown(merged, registry)
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
    outputs = {Path(args.json or md.with_suffix(".json")):
               (json.dumps(render_json(merged, registry), indent=1, ensure_ascii=False)
                + "\n", args.json is not None),
               Path(args.html or md.with_suffix(".html")):
               (render_html(merged, registry), args.html is not None)}
    if args.check:
        names = sorted({c.name for c in merged.columns.values()})
        tables, problems = _declared_now(names)
        problems += check_report(args.out, merged, registry, tables)
        problems += unexercised_problems(render_json(merged, registry)["variants"])
        for path, (text, explicit) in outputs.items():
            problems += _compare_file(path, text, explicit)
        for prob in problems:
            print(f"stale: {prob}", file=sys.stderr)
        print(f"op-coverage report: {len(problems)} problem(s)" if problems
              else f"op-coverage report {args.out} is up to date")
        return 1 if problems else 0
    outputs[Path(args.out)] = (render_markdown(merged, registry), True)
    if args.junit:
        outputs[Path(args.junit)] = (render_junit(merged), True)
    for path, (text, _) in outputs.items():
        write_text(path, text)
    fails = sum(s.result.status not in PASSING for s in merged.results.values())
    print(f"wrote {', '.join(str(p) for p in outputs)} ({len(merged.columns)} column(s), "
          f"{len(merged.results)} result(s), {fails} failing)")
    return 0
