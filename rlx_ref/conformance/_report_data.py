"""The report as plain data (``render_json``): RLX's kinds as rows in RLX's categories, a
cell per backend column, and the measured extras. Every page renders this dict."""
from __future__ import annotations

from collections import Counter

from ._report_extras import onnx_summary, op_variations, quant_table
from ._report_merge import _PATH_RANK, Merged
from ._report_rows import RLX_ONLY_TITLE, rlx_kinds, row_plan
from ._report_text import first_line, first_sentence
from ._report_variants import variant_coverage
from .errors import TAG as ERROR_TAG
from .model import OK, PASSING, STATUSES, UNSUPPORTED, XFAIL

COVERAGE_FORMAT = "rlx-ref-coverage/2"
_ANNOTATION = {"native": "", "rewritten": "ᵁ", "decomposed": "ᴰ", "host": "ᴴ"}
ABSENT = "absent"               # the cell of a kind rlx_ref's registry lacks


def opdefs(registry) -> list:
    """The registry's OpDefs by kind (the real registry when ``registry`` is None)."""
    if registry is None:
        from ..ops.opdef import all_opdefs

        registry = all_opdefs()
    defs = registry.values() if isinstance(registry, dict) else registry
    return sorted(defs, key=lambda d: d.kind)


def _status_order(s: str) -> tuple:
    return (STATUSES.index(s) if s in STATUSES else len(STATUSES), s)


def _counts(statuses) -> dict:
    c = Counter(statuses)
    failing = sum(n for s, n in c.items() if s not in PASSING)
    return {"cases": sum(c.values()), "ok": c[OK], "ran": sum(c.values()) - c[UNSUPPORTED],
            "failing": failing, "xfail": c[XFAIL], "unsupported": c[UNSUPPORTED],
            "statuses": {s: c[s] for s in sorted(c, key=_status_order)}}


def cell(statuses: list, claimed: bool, path: str = "native") -> dict:
    """One matrix cell: counts, a state for styling and the text (RLX's glyphs) it shows."""
    c = _counts(statuses)
    ann = _ANNOTATION.get(path, "") if claimed else ""
    if not claimed and not c["failing"]:     # a failure shows even where nothing is claimed
        state, text = "unclaimed", ""
    elif c["cases"] == 0:
        state, text = "notrun", "—"
    elif c["ran"] == 0:
        state, text = "unsupported", "unsupported"
    elif c["ok"] == c["ran"]:
        state, text = "pass", "✅" + ann
    else:
        bad = ", ".join(f"{n} {s}" for s, n in c["statuses"].items() if s not in (OK,
                                                                                UNSUPPORTED))
        state = "fail" if c["failing"] else "xfail"
        mark = "❌" if state == "fail" and c["ok"] == 0 else "⚠️"
        text = f"{mark}{ann} {c['ok']}/{c['ran']} ({bad})"
    return {**c, "claimed": claimed, "path": path, "state": state, "text": text}


def rate(statuses: list) -> dict:
    """A pass-rate cell: ok out of the cases that ran (declared-unsupported ones did not)."""
    c = _counts(statuses)
    ok, ran = c["ok"], c["ran"]
    if ran == 0:
        return {**c, "state": "notrun", "text": "—"}
    pct = ok * 100 // ran           # floor: 99.9% must not print as 100%
    state = "pass" if ok == ran else "fail" if c["failing"] else "xfail"
    mark = {"pass": "✅", "fail": "❌" if ok == 0 else "⚠️", "xfail": "⚠️"}[state]
    return {**c, "state": state, "text": f"{mark} {ok}/{ran} ({pct}%)"}


def columns(merged: Merged) -> list:
    # The oracle first (RLX's ground-truth column), then by name, hardware before emulated.
    return sorted(merged.columns.values(),
                  key=lambda c: (c.name != "reference", c.name, c.emulated, c.kernels))


def _path(col, kind: str, rows: list) -> str:
    """The least native path the backend declares or any of its results took."""
    paths = [col.paths.get(kind, "native")] + [r.path or "native" for r in rows]
    return max(paths, key=lambda p: _PATH_RANK.get(p, -1))


def _dtype_order(name: str) -> tuple:
    """RLX's dtype order (f32, f16, bf16, f64, ints...); names it does not know go last."""
    from ..ir.dtype import DType

    try:
        return (list(DType).index(DType.parse(name)), name)
    except ValueError:
        return (len(DType), name)


def render_json(merged: Merged, registry=None, onnx: dict | None = None) -> dict:
    """The report as plain data (JSON-ready, deterministic): the source of every page.
    ``onnx`` is the ONNX node-test summary (``load_onnx_tests``), None when not measured."""
    defs, cols = opdefs(registry), columns(merged)
    by_kind = {d.kind: d for d in defs}
    by_col_op: dict = {}
    for (label, _), seen in sorted(merged.results.items()):
        by_col_op.setdefault((label, seen.result.op), []).append(seen.result)
    ops_seen = {op for _, op in by_col_op}

    def statuses(label, op):
        return [r.status for r in by_col_op.get((label, op), [])]

    rk, cats = rlx_kinds(), []
    for title, kinds in row_plan(list(by_kind)):
        ops = []
        for kind, registered in kinds:
            d = by_kind.get(kind)
            cells = {c.label: cell(statuses(c.label, kind), kind in c.declared,
                                   _path(c, kind, by_col_op.get((c.label, kind), [])))
                     if registered else {**cell([], False), "state": ABSENT} for c in cols}
            ops.append({"kind": kind, "family": d.family if d else "",
                        "description": first_sentence(d.doc) if d else "",
                        "registered": registered, "on_rlx_page": kind in rk.on_page,
                        "cells": cells})
        cats.append({"title": title, "rlx_only": title == RLX_ONLY_TITLE, "ops": ops})
    rows = sum(len(c["ops"]) for c in cats)
    per_col = Counter(label for label, _ in merged.results)

    glance = []
    for c in cols:
        results = [s.result for (label, _), s in merged.results.items() if label == c.label]
        passing = sum(op["cells"][c.label]["state"] == "pass"
                      for cat in cats for op in cat["ops"])
        glance.append({"column": c.label, "claimed": len(set(by_kind) & set(c.declared)),
                       "kinds_passing": passing, **_counts(r.status for r in results)})

    def rates(key_of, order=lambda k: k) -> list:
        table: dict = {}
        for (label, _), seen in merged.results.items():
            for key in key_of(seen.result):
                table.setdefault(key, {}).setdefault(label, []).append(seen.result.status)
        return [{"name": k, "cells": {c.label: rate(table[k].get(c.label, [])) for c in cols}}
                for k in sorted(table, key=order)]

    multi = []
    for op in sorted(o for o in ops_seen if o.startswith("multi:")):
        rs = [r for c in cols for r in by_col_op.get((c.label, op), [])]
        multi.append({"name": op.partition(":")[2], "op": op,
                      "dtypes": sorted({r.dtype for r in rs}),
                      "cells": {c.label: cell(statuses(c.label, op), True) for c in cols}})

    held = []       # per backend, the kinds held to a declared accumulation contract
    for c in cols:
        for kind in sorted(c.promises):
            rs = [r for r in by_col_op.get((c.label, kind), []) if "accumulates" in r.contract]
            held.append({"column": c.label, "kind": kind, "promise": "; ".join(c.promises[kind]),
                         "cases": len(rs), "ok": sum(r.status == OK for r in rs)})
    return {
        "format": COVERAGE_FORMAT,
        "rows": rows,
        "rlx_kinds": len(rk.kinds),
        "registry_kinds": len(defs),
        "source": rk.source,
        "backends": [{"column": c.label, "name": c.name, "emulated": c.emulated,
                      "device": ", ".join(sorted(c.devices)), "machines": sorted(c.machines),
                      "cases": per_col[c.label], "selection": "; ".join(sorted(c.selections)),
                      "declared": dict(sorted(c.declared.items())),
                      "paths": dict(sorted(c.paths.items()))} for c in cols],
        "glance": glance,
        "categories": cats,
        "missing_kinds": [op["kind"] for cat in cats for op in cat["ops"]
                          if not op["registered"]],
        "rlx_only_kinds": [op["kind"] for cat in cats if cat["rlx_only"] for op in cat["ops"]],
        "gaps": _gaps(cats, cols),
        "variations": op_variations(defs),
        "quant_schemes": quant_table(),
        "dtypes": rates(lambda r: [r.dtype], _dtype_order),
        "tags": rates(lambda r: sorted(set(r.tags))),
        "errors": rates(lambda r: [r.op] if ERROR_TAG in r.tags else []),
        "multi": multi,
        "accumulation": held,
        "variants": variant_coverage(cols),
        "onnx": onnx_summary(onnx),
        "failures": _failures(merged, cols),
        "not_run": sorted(set(by_kind) - ops_seen),
        "unknown_ops": sorted(o for o in ops_seen - set(by_kind) if not o.startswith("multi:")),
        "machines": [merged.machines[h] for h in sorted(merged.machines)],
    }


def _gaps(cats: list, cols: list) -> list:
    """Per backend column: registered kinds it does not claim, kinds it runs off its native
    path (by path), and kinds with a failing case."""
    out = []
    for c in cols:
        row = {"column": c.label, "unclaimed": [], "failing": [],
               "paths": {p: [] for p in ("rewritten", "decomposed", "host")}}
        for cat in cats:
            for op in cat["ops"]:
                x = op["cells"][c.label]
                if not op["registered"]:
                    continue
                if not x["claimed"]:
                    row["unclaimed"].append(op["kind"])
                elif x["path"] in row["paths"]:
                    row["paths"][x["path"]].append(op["kind"])
                if x.get("failing"):
                    row["failing"].append(op["kind"])
        out.append(row)
    return out


def _failures(merged: Merged, cols: list) -> list:
    failures, order = [], {c.label: i for i, c in enumerate(cols)}
    for (label, case_id), seen in sorted(merged.results.items(), key=lambda kv: (
            order[kv[0][0]], kv[1].result.op, kv[1].result.dtype, kv[0][1])):
        r = seen.result
        if r.status not in PASSING:
            failures.append({"case_id": case_id, "column": label, "op": r.op,
                             "dtype": r.dtype, "status": r.status,
                             "message": first_line(r.message), "repro": r.repro or "",
                             "max_abs": r.max_abs, "max_rel": r.max_rel, "max_ulp": r.max_ulp,
                             "worst_index": r.worst_index, "budget_ratio": r.budget_ratio,
                             "machines": {h: seen.by_machine[h] for h in seen.machines}})
    return failures
