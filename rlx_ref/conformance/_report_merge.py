"""Merging conformance results files (several machines, several backends) into report
columns: one column per backend, emulated runs and forced kernel styles in their own; a case
seen twice keeps its worse status and records every machine that ran it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .model import CRASH, ERROR, MISMATCH, MISSING, OK, TIMEOUT, UNSUPPORTED, XFAIL, XPASS
from .model import CaseResult
from .results_file import read_results_file

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
    selections: set = field(default_factory=set)    # the subsets run, where not all cases


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
    if info.get("selection"):               # e.g. "shards 1-3 of 100" for a partial run
        col.selections.add(str(info["selection"]))
    return col


def column_label(name: str, emulated: bool, kernels: str = "") -> str:
    """The report column of a backend: emulated runs never share a column with hardware,
    nor runs with a forced kernel style (``kernels``) with the device's own style."""
    notes = ["emulated"] * bool(emulated) + [f"{kernels} kernels"] * bool(kernels)
    return f"{name} ({', '.join(notes)})" if notes else name
