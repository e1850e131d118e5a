"""The report page as blocks, in RLX's section order then rlx_ref's measured extras; the
markdown and HTML renderers draw the same blocks, so the two pages cannot disagree.

Blocks: ("h", level, text), ("p", text), ("hr",) and
("table", head, rows, align, states, meta): ``states`` is a per-cell style state (or None),
``meta`` per-row data for the HTML filters (or None)."""
from __future__ import annotations

from collections import Counter

from . import _report_text as T
from ._report_rows import source_note
from ._report_variants import variant_blocks


GAP_LIMIT = 16          # kinds named per cell of the gaps table (the JSON has them all)


def _table(head, rows, align, states=None, meta=None) -> tuple:
    return ("table", head, rows, align, states, meta)


def _codes(kinds, limit: int | None = None) -> str:
    """Kinds as code spans; past ``limit``, the first ones and how many more."""
    kinds = list(kinds)
    if limit is None or len(kinds) <= limit:
        return ", ".join(f"`{k}`" for k in kinds)
    return ", ".join(f"`{k}`" for k in kinds[:limit]) + f" and {len(kinds) - limit} more"


def _cells_table(head: list, rows: list, cols: list, lead: list, meta=None) -> tuple:
    """A table whose last columns are backend cells: text plus a state for styling."""
    body = [lead_row + [r["cells"][c]["text"] for c in cols] for lead_row, r in zip(lead, rows)]
    states = [[""] * len(head) + [r["cells"][c]["state"] for c in cols] for r in rows]
    return _table(head + cols, body, "l" * len(head) + "c" * len(cols), states, meta)


def blocks(rep: dict) -> list:
    """The whole page: RLX's sections, then the measured extras."""
    return (_truth(rep) + _backends(rep) + _glance(rep) + [("hr",)] + _matrix(rep)
            + [("hr",)] + _gaps(rep) + _variations(rep) + _quant(rep) + [("hr",)]
            + _measured(rep))


def _truth(rep: dict) -> list:
    rows = [[f"**{what}**", where.format(source=source_note())] for what, where in T.TRUTH]
    return [("h", 2, "Where the truth lives"), _table(["Concept", "Source of truth"], rows,
                                                      "ll"), ("p", T.TRUTH_NOTE)]


def _backends(rep: dict) -> list:
    rows = [[f"**{b['column']}**", f"`{b['name']}`", "emulated" if b["emulated"] else "real",
             b["device"] or "—", ", ".join(b["machines"]),
             str(b["cases"]) + (f" ({b['selection']})" if b["selection"] else "")]
            for b in rep["backends"]]
    return [("h", 2, "Backends"),
            _table(["Col", "Backend", "Hardware", "Device", "Machines", "Cases run"], rows,
                   "llllll"),
            ("p", T.LEGEND)]


def _glance(rep: dict) -> list:
    n = rep["rows"]
    rows = [[f"**{g['column']}**", f"**{g['claimed']}**", str(n), str(g["kinds_passing"]),
             f"{g['ok']}/{g['ran']}", str(g["failing"]), str(g["xfail"]),
             str(g["unsupported"])] for g in rep["glance"]]
    missing, extra = rep["missing_kinds"], rep["rlx_only_kinds"]
    text = (f"{n} rows: the {rep['rlx_kinds']} kinds of RLX's `OpKind`"
            + (f" and {len(extra)} kinds only rlx_ref defines" if extra else "")
            + f". rlx_ref's registry defines {rep['registry_kinds']}"
            + (f"; the {len(missing)} it lacks are rows with blank cells: {_codes(missing)}"
               if missing else "; it lacks none") + ".")
    return [("h", 3, "Coverage at a glance"),
            _table(["Backend", "Kinds claimed", f"of {n}", "Kinds ✅", "Cases passed",
                    "Failing", "xfail", "Unsupported"], rows, "lrrrrrrr"), ("p", text)]


def _matrix(rep: dict) -> list:
    cols = [b["column"] for b in rep["backends"]]
    out = [("h", 2, "Coverage matrix (by category)")]
    for cat in rep["categories"]:
        ops = cat["ops"]
        lead = [[f"`{op['kind']}`", op["description"] if op["registered"] else
                 f"*({T.ABSENT_NOTE})*"] for op in ops]
        meta = [{"kind": op["kind"], "registered": op["registered"]} for op in ops]
        out.append(("h", 3, cat["title"]))
        if cat["rlx_only"]:
            out.append(("p", "Kinds rlx_ref registers that RLX's list (above) lacks."))
        out.append(_cells_table(["Op", "Description"], ops, cols, lead, meta))
    return out


def _gaps(rep: dict) -> list:
    out = [("h", 2, "Notable gaps"), ("p", T.GAPS_NOTE)]
    if rep["missing_kinds"]:
        out.append(("p", f"**Kinds of RLX's IR that rlx_ref does not define** "
                    f"({len(rep['missing_kinds'])}): {_codes(rep['missing_kinds'])}."))
    rows = [[f"**{g['column']}**"] + [_codes(ks, GAP_LIMIT) or "—" for ks in (
             g["unclaimed"], g["paths"]["host"], g["paths"]["decomposed"],
             g["paths"]["rewritten"], g["failing"])] for g in rep["gaps"]]
    if rows:
        out.append(_table(["Backend", "Defined but not claimed", "Host fallback ᴴ",
                           "Decomposed ᴰ", "Rewritten ᵁ", "Failing cases"], rows, "llllll"))
    if rep["not_run"]:
        out.append(("p", "Registry kinds with no results on any backend: "
                    + _codes(rep["not_run"]) + "."))
    if rep["unknown_ops"]:
        out.append(("p", "Results name kinds the registry does not have: "
                    + _codes(rep["unknown_ops"]) + "."))
    return out


def _variations(rep: dict) -> list:
    rows = [[f"`{v['enum']}`", ", ".join(f"`{x}`" for x in v["variants"]),
             ", ".join(v["used_by"])] for v in rep["variations"]]
    return [("h", 2, "Op variations"), ("p", T.VARIATIONS_NOTE),
            _table(["Enum", "Variants", "Payload fields"], rows, "lll")]


def _quant(rep: dict) -> list:
    rows = [[q["family"], f"`{q['scheme']}`", f"`{q['name']}`" if q["name"] else "",
             q["bpw"], q["block"], q["encode"]] for q in rep["quant_schemes"]]
    return [("h", 3, "QuantScheme"), ("p", T.QUANT_NOTE),
            _table(["Family", "RLX scheme", "rlx_ref", "Bits/weight", "Block", "Encode"],
                   rows, "lllrll")]


def _measured(rep: dict) -> list:
    cols = [b["column"] for b in rep["backends"]]
    out = []
    for title, key, what in (("Pass rate by dtype", "dtypes", "Dtype"),
                             ("Pass rate by edge tag", "tags", "Tag")):
        out += [("h", 2, title), ("p", T.RATE_NOTE),
                _cells_table([what], rep[key], cols, [[f"`{r['name']}`"] for r in rep[key]])]
    out += [("h", 2, "Error cases"), ("p", T.ERRORS_NOTE)]
    out.append(_cells_table(["Op"], rep["errors"], cols,
                            [[f"`{r['name']}`"] for r in rep["errors"]])
               if rep["errors"] else ("p", "No error cases in these results."))
    out += _onnx(rep.get("onnx"))
    out.append(("h", 2, "Accumulation contracts"))
    acc = rep["accumulation"]
    out += [("p", T.ACCUMULATION_NOTE),
            _table(["Backend", "Op", "Promise", "Cases held", "Passed"],
                   [[f"**{a['column']}**", f"`{a['kind']}`", a["promise"], str(a["cases"]),
                     f"{a['ok']}/{a['cases']}"] for a in acc], "lllrr")
            ] if acc else [("p", "No backend in these results declares an accumulation "
                                 "contract.")]
    out.append(("h", 2, "Multi-op cases"))
    out.append(_cells_table(["Case", "Dtypes"], rep["multi"], cols,
                            [[f"`{m['name']}`", ", ".join(m["dtypes"])] for m in rep["multi"]])
               if rep["multi"] else ("p", "No multi-op cases in these results."))
    out += variant_blocks(rep["variants"])
    out += [("h", 2, "Failures")] + _failures(rep["failures"])
    out += [("h", 2, "Machines"),
            _table(["Host", "Platform", "Python", "NumPy"],
                   [[m.get(k, "") for k in ("host", "platform", "python", "numpy")]
                    for m in rep["machines"]], "llll")]
    return out


def _onnx(s: dict | None) -> list:
    out = [("h", 2, "ONNX node tests")]
    if s is None:
        return out + [("p", T.ONNX_ABSENT)]
    rows = []
    for b in s["backends"]:
        pct = "—" if b["pass_pct"] is None else f"{b['pass_pct']}%"
        rows.append([f"**{b['backend']}**", str(b["pass"]), str(b["fail"]), str(b["differs"]),
                     str(b["not_mappable"]), f"{b['mappable']}/{s['total']}", pct])
    out += [("p", f"{T.ONNX_NOTE} ONNX {s['onnx_version']}, opsets up to {s['max_opset']}, "
                  f"{s['total']} cases."),
            _table(["Backend", "Pass", "Fail", "Differs (ledger)", "Not mappable", "Mappable",
                    "Passed of mappable"], rows, "lrrrrrr")]
    if s["not_mappable_ops"]:
        ops = ", ".join(f"`{op}` ({n})" for op, n in s["not_mappable_ops"])
        out.append(("p", f"ONNX ops not mapped onto RLX kinds (cases): {ops}."))
    return out


def _failures(failures: list) -> list:
    """The failures table, at most PAGE_FAILURES rows per op and backend so one broken op
    cannot crowd out the rest (the JSON has them all)."""
    if not failures:
        return [("p", "None: every case that ran passed or failed as the ledger expects.")]
    shown, per_op, per_column = [], Counter(), Counter()
    for f in failures:
        per_column[f["column"]] += 1
        per_op[f["column"], f["op"]] += 1
        if per_op[f["column"], f["op"]] <= T.PAGE_FAILURES:
            shown.append(f)
    rows = [[f"`{f['case_id']}`", f["column"], f"`{f['op']}`", f["dtype"], f["status"],
             f["message"], f"`{f['repro']}`" if f["repro"] else "—",
             ", ".join(f"{h} ({s})" for h, s in f["machines"].items())] for f in shown]
    out = [_table(["Case", "Backend", "Op", "Dtype", "Status", "Message", "Repro",
                   "Machines"], rows, "l" * 8)]
    if len(shown) < len(failures):
        counts = ", ".join(f"{n} on {c}" for c, n in per_column.items())
        out.append(("p", f"Showing at most {T.PAGE_FAILURES} failures per op and backend "
                    f"({counts} in all); the JSON report lists every one."))
    return out
