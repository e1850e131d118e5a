"""Report sections drawn from the registry and side files rather than from case results:
op variations (the payload enums), the quant-scheme table, and ONNX's node tests."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .._readers import FileInputError
from ._report_rows import rlx_kinds

ONNX_TESTS_FILE = "onnx-node-tests.json"      # beside the committed results files
ONNX_FORMAT_KEYS = ("onnx_version", "max_opset", "total", "backends")
ONNX_OUTCOMES = ("pass", "fail", "differs", "not_mappable")
SUMMARY = "an ONNX node-test summary (`rlx-ref onnx-tests`)"


def _enum_codecs(codec):
    """The Enum codecs a field codec holds (through Optional, ListOf and TupleOf)."""
    from ..ops.codec import Enum

    if isinstance(codec, Enum):
        yield codec
    for inner in [getattr(codec, "item", None), *getattr(codec, "items", ())]:
        if inner is not None:
            yield from _enum_codecs(inner)


def op_variations(defs) -> list:
    """One row per payload enum of the registry: its variants and the fields that use it
    (``Kind.field``), so one kind's many behaviours are visible (RLX's "Op variations")."""
    table: dict = {}
    for d in defs:
        attrs = getattr(d, "attrs", None)
        if attrs is None or not dataclasses.is_dataclass(attrs):
            continue
        for f in dataclasses.fields(attrs):
            for enum in _enum_codecs(f.metadata.get("codec")):
                row = table.setdefault((enum.name, enum.variants),
                                       {"enum": enum.name, "variants": list(enum.variants),
                                        "used_by": []})
                row["used_by"].append(f"{d.kind}.{f.name}")
    return [table[k] for k in sorted(table, key=lambda k: (k[0], k[1]))]


def quant_table() -> list:
    """RLX's quant schemes by family beside rlx_ref's scheme records (blank where rlx_ref
    has none), then any scheme rlx_ref has that RLX's list lacks."""
    from ..quant.scheme import all_schemes

    by_rlx = {s.rlx: s for s in all_schemes() if s.rlx}
    rows, listed = [], set()
    for family, schemes in rlx_kinds().quant_families:
        for name in schemes:
            listed.add(name)
            rows.append(_scheme_row(family, name, by_rlx.get(name)))
    for s in sorted(all_schemes(), key=lambda s: s.name):
        if s.rlx not in listed:
            rows.append(_scheme_row("rlx_ref only", s.rlx or "—", s))
    return rows


def _scheme_row(family: str, rlx_name: str, s) -> dict:
    if s is None:
        return {"family": family, "scheme": rlx_name, "name": "", "bpw": "", "block": "",
                "encode": ""}
    if s.kind == "linear":     # scales live in side tensors; pack_linear writes all three
        block, encode = "per element, side scales", "`pack_linear`"
    else:
        block = f"{s.block_size} in {s.block_bytes} B"
        encode = s.quantize_source or ("yes" if s.quantize else "decode only")
    return {"family": family, "scheme": rlx_name, "name": s.name,
            "bpw": f"{s.bits_per_weight:g}", "block": block, "encode": encode}


def load_onnx_tests(path) -> dict | None:
    """The ONNX node-test summary at ``path`` (None when the file is absent); a file that
    is not that summary is an error naming what is missing."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FileInputError(path, f"cannot read: {e}", SUMMARY) from None
    missing = [k for k in ONNX_FORMAT_KEYS if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise FileInputError(path, f"no {', '.join(missing)}", SUMMARY)
    return doc


def onnx_summary(doc: dict | None) -> dict | None:
    """The report's view of the summary: per backend the outcome counts, the share passed
    of the mappable cases, and the unmappable ONNX ops, most frequent first."""
    if doc is None:
        return None
    total = int(doc.get("total") or 0)
    backends = []
    for name in sorted(doc["backends"], key=lambda n: (n != "reference", n)):
        counts = {k: int(doc["backends"][name].get(k, 0)) for k in ONNX_OUTCOMES}
        mappable = counts["pass"] + counts["fail"] + counts["differs"]
        backends.append({"backend": name, **counts, "mappable": mappable,
                         "pass_pct": counts["pass"] * 100 // mappable if mappable else None,
                         "mappable_pct": mappable * 100 // total if total else None})
    ops = sorted((doc.get("not_mappable_ops") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return {"onnx_version": str(doc["onnx_version"]), "max_opset": doc["max_opset"],
            "total": total, "backends": backends, "not_mappable_ops": [list(o) for o in ops],
            "cases": len(doc.get("cases") or {})}
