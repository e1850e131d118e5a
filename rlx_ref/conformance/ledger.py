"""The ledger (``expectations.toml``): declared unsupported ops, expected failures and
tolerance overrides, each with a reason. It drives both test outcomes and the report."""
from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .._readers import read_text

DEFAULT_PATH = Path(__file__).with_name("expectations.toml")
SECTIONS = ("unsupported", "xfail", "tolerance")
_KEYS = {"backend", "op", "dtype", "case", "tags", "payload", "reason"}
_EXTRA = {"unsupported": set(), "xfail": {"status", "error"},
          "tolerance": {"ulps", "c"}}
_STATUSES = {"MISMATCH", "MISSING", "error", "crash", "timeout"}


class LedgerError(ValueError):
    """The ledger file is malformed; the message names the file, line and key."""


class LedgerWarning(UserWarning):
    """Ledger entries that can never apply to the run at hand."""


@dataclass
class Entry:
    section: str
    backend: str
    op: str
    reason: str
    dtype: str | None = None
    case: str | None = None
    tags: tuple = ()
    status: str | None = None
    error: str | None = None
    override: dict = field(default_factory=dict)
    lines: tuple = (0, 0)
    path: str = ""
    payload: dict = field(default_factory=dict)

    def matches(self, backend: str, case) -> bool:
        # a planted-fault backend (``opencl+fault:NAME``) answers to its real backend's
        # entries, so a case the real one is expected to fail does not count as a catch
        backend = backend.partition("+fault:")[0]
        if self.backend not in ("*", backend):
            return False
        if not fnmatch.fnmatchcase(case.op, self.op):
            return False
        if self.dtype is not None and self.dtype != case.dtype:
            return False
        if self.case is not None and self.case != case.id:
            return False
        if self.payload and not _payload_matches(self.op, self.payload, case.graph):
            return False
        return set(self.tags) <= set(case.tags)

    def where(self) -> str:
        a, b = self.lines
        return f"{Path(self.path).name} lines {a}-{b}" if b > a else \
            f"{Path(self.path).name} line {a}"

    def describe(self) -> str:
        keys = [f"backend={self.backend!r}", f"op={self.op!r}"]
        keys += [f"{k}={getattr(self, k)!r}" for k in ("dtype", "case", "payload", "status")
                 if getattr(self, k)]
        return f"[[{self.section}]] " + " ".join(keys)


def name_mismatch(ledger: "Ledger", spec: str, name: str) -> str | None:
    """A warning when a backend selected as ``spec`` (an entry-point name, ``module:object``)
    reports as another ``name`` while ledger entries are written under ``spec``.

    Results and ledger matching use the backend's own ``name`` (the same whichever way it
    was selected), so entries under the selection name would silently never apply.
    """
    sel = spec.partition("+fault:")[0]
    real = name.partition("+fault:")[0]
    stray = [e for e in ledger.entries if e.backend == sel and sel != real]
    if not stray:
        return None
    shown = "; ".join(f"{e.describe()} ({e.where()})" for e in stray[:3])
    more = f" and {len(stray) - 3} more" if len(stray) > 3 else ""
    return (f"backend selected as {sel!r} reports as {real!r} (its `name`), so "
            f"{len(stray)} ledger entr{'y' if len(stray) == 1 else 'ies'} under "
            f"backend = {sel!r} never apply: {shown}{more}; write backend = {real!r}")


def warn_name_mismatch(ledger: "Ledger", spec: str, name: str) -> None:
    """``name_mismatch`` as a ``LedgerWarning`` (no-op when the names agree)."""
    import warnings

    msg = name_mismatch(ledger, spec, name)
    if msg:
        warnings.warn(msg, LedgerWarning, stacklevel=2)


def _payload_matches(op: str, want: dict, graph) -> bool:
    """Some node of a kind matching ``op`` has every field of ``want`` (``op = "Binary"``,
    ``payload = {op = "Mod"}``: the Mod cases of the Binary kind)."""
    for node in graph.nodes:
        if not fnmatch.fnmatchcase(node.kind, op) or node.op.attrs is None:
            continue
        if all(hasattr(node.op.attrs, k) and _same(getattr(node.op.attrs, k), v)
               for k, v in want.items()):
            return True
    return False


def _same(have, want) -> bool:
    """A field equals the entry's value; a list against a name is "any of" (op = [...])."""
    if isinstance(have, tuple) and isinstance(want, list):
        return list(have) == want
    if isinstance(have, str) and isinstance(want, list):
        return have in want
    return have == want or str(have) == str(want)


@dataclass
class Ledger:
    entries: list

    def find(self, section: str, backend: str, case) -> Entry | None:
        for e in self.entries:
            if e.section == section and e.matches(backend, case):
                return e
        return None

    def overrides(self, backend: str, case) -> dict:
        out: dict = {}
        for e in self.entries:
            if e.section == "tolerance" and e.matches(backend, case):
                out.update(e.override)
        return out


def _block_lines(text: str) -> dict:
    """Line spans of each ``[[section]]`` block, in order, per section."""
    spans: dict = {s: [] for s in SECTIONS}
    lines = text.splitlines()
    starts = [(i + 1, m.group(1)) for i, ln in enumerate(lines)
              if (m := re.match(r"\s*\[\[(\w+)\]\]", ln))]
    for k, (start, sec) in enumerate(starts):
        end = starts[k + 1][0] - 1 if k + 1 < len(starts) else len(lines)
        while end > start and (not lines[end - 1].strip() or lines[end - 1].lstrip()
                               .startswith("#")):
            end -= 1
        spans.setdefault(sec, []).append((start, end))
    return spans


def load_ledger(path: str | Path | None = None) -> Ledger:
    """Parse and validate a ledger file (the packaged one by default)."""
    path = Path(path) if path else DEFAULT_PATH
    text = read_text(path, "a ledger TOML file of [[unsupported]], [[xfail]] and "
                     "[[tolerance]] entries")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LedgerError(f"{path}: {e}") from None
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise LedgerError(f"{path}: unknown section {sorted(unknown)[0]!r}; expected "
                          f"[[unsupported]], [[xfail]] or [[tolerance]]")
    spans = _block_lines(text)
    entries = []
    for sec in SECTIONS:
        if not (isinstance(data.get(sec, []), list)
                and all(isinstance(raw, dict) for raw in data.get(sec, []))):
            raise LedgerError(f"{path}: {sec!r} is not a list of [[{sec}]] tables")
        for k, raw in enumerate(data.get(sec, [])):
            lines = spans[sec][k] if k < len(spans[sec]) else (0, 0)
            entries.append(_entry(sec, raw, lines, str(path)))
    return Ledger(entries)


def _entry(sec: str, raw: dict, lines: tuple, path: str) -> Entry:
    where = f"{Path(path).name} line {lines[0]} ([[{sec}]])"
    bad = set(raw) - _KEYS - _EXTRA[sec]
    if bad:
        raise LedgerError(f"{where}: unknown key {sorted(bad)[0]!r}; allowed: "
                          f"{', '.join(sorted(_KEYS | _EXTRA[sec]))}")
    for key in ("backend", "op", "reason"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise LedgerError(f"{where}: {key!r} is required (a non-empty string)")
    status = raw.get("status")
    if sec == "xfail" and status not in _STATUSES:
        raise LedgerError(f"{where}: status must be one of {sorted(_STATUSES)}, got {status!r}")
    payload = raw.get("payload", {})
    if "payload" in raw and (not isinstance(payload, dict) or not payload):
        raise LedgerError(f"{where}: 'payload' must be a non-empty table of payload fields, "
                          "e.g. payload = { op = \"Mod\" }")
    if payload:
        _check_payload_fields(where, raw["op"], payload)
    override = {k: raw[k] for k in ("ulps", "c") if k in raw}
    if sec == "tolerance" and not override:
        raise LedgerError(f"{where}: a tolerance entry needs `ulps` or `c`")
    return Entry(sec, raw["backend"], raw["op"], raw["reason"], raw.get("dtype"),
                 raw.get("case"), tuple(raw.get("tags", ())), status, raw.get("error"),
                 override, lines, path, payload)


def _check_payload_fields(where: str, op: str, payload: dict) -> None:
    """A payload key the kind does not have can never match: say so while loading."""
    import dataclasses

    from ..ops.opdef import all_opdefs

    kinds = [d for d in all_opdefs() if fnmatch.fnmatchcase(d.kind, op)]
    names = {f.name for d in kinds if d.attrs for f in dataclasses.fields(d.attrs)}
    bad = sorted(set(payload) - names)
    if kinds and bad:
        raise LedgerError(f"{where}: {op} has no payload field {bad[0]!r}; fields: "
                          f"{', '.join(sorted(names)) or 'none'}")
