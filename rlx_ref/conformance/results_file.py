"""Reading a results file (``rlx-ref conformance --out``) with its shape checked.

A results file is read by ``rlx-ref coverage``, possibly one from another machine or an
older version; every field the report uses is checked here, so a malformed file is one
``FileInputError`` naming the file and the field rather than a traceback mid-render.
"""
from __future__ import annotations

from dataclasses import fields

from .._readers import FileInputError, read_json
from .model import CaseResult

FORMAT = "rlx-ref-conformance/1"
EXPECTED = f"a results file of format {FORMAT!r} written by `rlx-ref conformance --out`"

_NUM = (int, float)
# CaseResult field -> (accepted types, readable name); None is accepted where the default is.
_RESULT_FIELDS = {
    "case_id": (str, "a string"), "op": (str, "a string"), "dtype": (str, "a string"),
    "backend": (str, "a string"), "status": (str, "a string"),
    "message": (str, "a string"), "max_abs": (_NUM, "a number"),
    "max_rel": (_NUM, "a number"), "max_ulp": (_NUM, "a number"),
    "worst_index": (list, "a list of ints"), "budget_ratio": (_NUM, "a number"),
    "seconds": (_NUM, "a number"), "repro": (str, "a string"),
    "emulated": (bool, "true or false"), "path": (str, "a string"),
    "contract": (str, "a string"),
    "tags": (list, "a list of strings"), "variants": (list, "a list of strings"),
}
_REQUIRED = ("case_id", "op", "dtype", "backend", "status")
_NULLABLE = {f.name for f in fields(CaseResult) if f.default is None} | {"message"}


def _fail(path, what: str) -> None:
    raise FileInputError(path, what, EXPECTED)


def _is(value, types) -> bool:
    return isinstance(value, types) and not (types is _NUM and isinstance(value, bool))


def _check_result(path, i: int, d) -> None:
    where = f"results[{i}]"
    if not isinstance(d, dict):
        _fail(path, f"{where} is {type(d).__name__}, not an object")
    for name in _REQUIRED:
        if name not in d:
            _fail(path, f"{where} has no {name!r}")
    for name, value in d.items():
        spec = _RESULT_FIELDS.get(name)
        if spec is None:
            _fail(path, f"{where} has an unknown field {name!r}")
        types, readable = spec
        if value is None and name in _NULLABLE:
            continue
        if not _is(value, types):
            _fail(path, f"{where}.{name} is {value!r:.40}, not {readable}")
    for name in ("tags", "variants"):
        if not all(isinstance(t, str) for t in d.get(name, ())):
            _fail(path, f"{where}.{name} holds a non-string")
    idx = d.get("worst_index") or ()
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in idx):
        _fail(path, f"{where}.worst_index holds a non-integer")


def _check_backend(path, name: str, info) -> None:
    where = f"backends[{name!r}]"
    if not isinstance(info, dict):
        _fail(path, f"{where} is {type(info).__name__}, not an object")
    if not isinstance(info.get("emulated", False), bool):
        _fail(path, f"{where}.emulated is not true or false")
    if not isinstance(info.get("device", ""), (str, type(None))):
        _fail(path, f"{where}.device is not a string")
    declared = info.get("declared") or {}
    if not isinstance(declared, dict) or not all(
            v == "all" or (isinstance(v, list) and all(isinstance(t, str) for t in v))
            for v in declared.values()):
        _fail(path, f"{where}.declared is not a map of kind -> \"all\" or a dtype list")
    types = info.get("device_types") or []
    if not isinstance(types, list) or not all(t in ("cpu", "gpu") for t in types):
        _fail(path, f"{where}.device_types is not a list of \"cpu\" / \"gpu\"")
    if info.get("kernels", "gpu") not in ("cpu", "gpu"):
        _fail(path, f"{where}.kernels is not \"cpu\" or \"gpu\"")
    paths = info.get("paths") or {}
    if not isinstance(paths, dict) or not all(isinstance(v, str) for v in paths.values()):
        _fail(path, f"{where}.paths is not a map of kind -> path name")
    promises = info.get("accumulation") or []
    if not isinstance(promises, list) or not all(
            isinstance(p, dict) and isinstance(p.get("kind"), str) and
            isinstance(p.get("text", ""), str) for p in promises):
        _fail(path, f"{where}.accumulation is not a list of promises with a kind and text")


def read_results_file(path) -> dict:
    """The document in results file ``path``; FileInputError saying what is malformed."""
    doc = read_json(path, EXPECTED)
    if not isinstance(doc, dict):
        _fail(path, f"holds a JSON {type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT:
        _fail(path, f"has format {doc.get('format')!r}")
    machine = doc.get("machine")
    if machine is not None and not isinstance(machine, dict):
        _fail(path, f"machine is {type(machine).__name__}, not an object")
    backends = doc.get("backends")
    if backends is not None and not isinstance(backends, dict):
        _fail(path, f"backends is {type(backends).__name__}, not an object")
    for name, info in (backends or {}).items():
        _check_backend(path, name, info)
    results = doc.get("results", [])
    if not isinstance(results, list):
        _fail(path, f"results is {type(results).__name__}, not a list")
    for i, d in enumerate(results):
        _check_result(path, i, d)
    return doc
