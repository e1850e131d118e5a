"""``rlx-ref gguf inspect FILE`` and ``rlx-ref gguf convert IN OUT --scheme Q4_K``."""
from __future__ import annotations

import argparse
import json

ARRAY_HEAD = 8                    # array items shown before "... (N items)"
STRING_HEAD = 72                  # characters of a long string shown


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="gguf_cmd", required=True)
    s = sub.add_parser("inspect", help="print a GGUF file's header, metadata and tensors")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="print one JSON object instead")
    s.set_defaults(fn=_inspect)
    s = sub.add_parser("convert", help="convert a safetensors file to GGUF, quantizing "
                       "its weight matrices")
    s.add_argument("input", metavar="IN.safetensors")
    s.add_argument("output", metavar="OUT.gguf")
    s.add_argument("--scheme", required=True, help="GGML type for weights: Q4_K, Q8_0, "
                   "... or F16, BF16, F32")
    s.add_argument("--override", action="append", default=[], metavar="PATTERN=SCHEME",
                   help="tensors whose name matches PATTERN (fnmatch) take SCHEME; the "
                   "first matching override wins (repeatable)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--keep-norm-bias", dest="keep_norm_bias", action="store_true",
                   default=True, help="keep norms, biases and 1-D tensors F32 (default)")
    g.add_argument("--quantize-norm-bias", dest="keep_norm_bias", action="store_false",
                   help="give norms, biases and 1-D tensors the scheme like any tensor")
    s.add_argument("--arch", default="llama", help="general.architecture (default llama)")
    s.set_defaults(fn=_convert)


def _text(s: str) -> str:
    """A string safe to print on one line: escapes, undecodable bytes as \\x.., cut."""
    n = len(s)
    s = s[:STRING_HEAD].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    s = s.encode("unicode_escape").decode("ascii") if not s.isprintable() else s
    return s if n <= STRING_HEAD else f"{s}... ({n} chars)"


def _short(value):
    """A metadata value for display: long arrays and strings shortened."""
    if isinstance(value, list):
        head = [_short(v) for v in value[:ARRAY_HEAD]]
        return head if len(value) <= ARRAY_HEAD else head + [f"... ({len(value)} items)"]
    if isinstance(value, str):
        return _text(value)
    return value


def _summary(r) -> dict:
    meta = {}
    for key, (value, vt) in r.metadata(typed=True).items():
        kind = r.value_type(key)
        type_name = f"ARRAY[{vt}]" if kind[0] == "ARRAY" else vt
        meta[key] = {"type": type_name, "value": _short(value)}
        if isinstance(value, list):
            meta[key]["count"] = len(value)
    tensors = [{"name": t.name, "type": t.ggml_type, "shape": list(t.shape),
                "dims": list(t.dims), "offset": t.offset, "bytes": t.n_bytes}
               for t in r.tensor_infos()]
    return {"file": str(r.path), "version": r.version, "architecture": r.architecture,
            "alignment": r.alignment, "data_offset": r.data_offset, "file_bytes": r.size,
            "metadata": meta, "tensors": tensors,
            "tensor_bytes": sum(t["bytes"] for t in tensors)}


def _inspect(args) -> int:
    from .gguf_reader import load_gguf

    with load_gguf(args.file) as r:
        s = _summary(r)
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    print(f"{s['file']}: GGUF v{s['version']}, architecture {s['architecture']}, "
          f"alignment {s['alignment']}, {len(s['metadata'])} keys, {len(s['tensors'])} "
          f"tensors, data at offset {s['data_offset']}, {s['file_bytes']} bytes")
    if s["metadata"]:
        print("\nmetadata:")
        w = max(len(_text(k)) for k in s["metadata"])
        for k, m in s["metadata"].items():
            print(f"  {_text(k):<{w}}  {m['type']:<14} {m['value']}")
    if s["tensors"]:
        w = max([len(_text(t["name"])) for t in s["tensors"]] + [4])
        print(f"\ntensors:\n  {'name':<{w}}  {'type':<8} {'shape':<24} {'bytes':>12}")
        for t in s["tensors"]:
            print(f"  {_text(t['name']):<{w}}  {t['type']:<8} {str(t['shape']):<24} "
                  f"{t['bytes']:>12}")
    print(f"\n{len(s['tensors'])} tensors, {s['tensor_bytes']} bytes of tensor data")
    return 0


def _overrides(items) -> dict:
    out = {}
    for item in items:
        pat, eq, scheme = item.partition("=")
        if not (eq and pat and scheme):
            raise ValueError(f"--override {item!r}: expected PATTERN=SCHEME, e.g. "
                             "'*.ffn_down.weight=Q8_0'")
        out[pat] = scheme
    return out


def _convert(args) -> int:
    from .gguf_convert import convert_to_gguf

    report = convert_to_gguf(args.input, args.output, args.scheme,
                             scheme_overrides=_overrides(args.override),
                             skip_norm_bias=args.keep_norm_bias, architecture=args.arch)
    print(report.table())
    return 0


__all__ = ["add_arguments"]
