"""What a drawn node says and how it looks: kind plus key attrs, shapes on edges, and one
style per role (input, param, constant, output, op)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir.graph import Graph

MAX_VALUE = 28          # longer attr values are cut: a label is a summary, the text is exact
MAX_ATTRS = 5           # attrs shown per node; the rest are counted

STYLES = {
    "Input": dict(shape="ellipse", style="filled", fillcolor="#d8f3dc", color="#2d6a4f"),
    "Param": dict(shape="cylinder", style="filled", fillcolor="#fff3bf", color="#8d6e00"),
    "Constant": dict(shape="box", style="filled,dashed", fillcolor="#f1f3f5",
                     color="#868e96"),
    "op": dict(shape="box", style="rounded,filled", fillcolor="#ffffff", color="#343a40"),
}
OUTPUT = dict(peripheries="2", color="#c92a2a", penwidth="1.6")
FUSED_CLUSTER = dict(style="rounded,filled", fillcolor="#e7f5ff", color="#1c7ed6")
BODY_CLUSTER = dict(style="dashed", color="#7048e8")


def short(value) -> str:
    """One attr value as a short string (tuples as lists, long ones cut with "…")."""
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, (tuple, list)):
        text = "[" + ", ".join(short(v) for v in value) + "]"
    elif isinstance(value, bytes):
        text = f"<{len(value)} bytes>"
    else:
        text = str(value)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"


def _constant_text(node) -> str:
    """``= value`` for a small Constant (up to 4 values), else its element count."""
    try:
        n = node.shape.numel
        if n is not None and n <= 4:
            arr = np.frombuffer(node.attrs.data, node.shape.dtype.np)
            vals = [f"{v:.4g}" if arr.dtype.kind in "fc" else str(v) for v in arr.tolist()]
            return "= " + (vals[0] if node.shape.rank == 0 and vals else
                           "[" + ", ".join(vals) + "]")
    except (TypeError, ValueError, AttributeError):
        pass
    return f"{node.shape.numel} values"


def attr_lines(node) -> list[str]:
    """``field=value`` for the payload's non-default fields (nested bodies left out)."""
    a = node.attrs
    if a is None:
        return []
    if not dataclasses.is_dataclass(a):
        return [short(a)]
    lines = []
    for f in dataclasses.fields(a):
        v = getattr(a, f.name)
        if isinstance(v, Graph) or v is None:
            continue
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        lines.append(f"{f.name}={short(v)}")
    if len(lines) == 1 and len(dataclasses.fields(a)) == 1:
        lines = [lines[0].split("=", 1)[1]]         # a newtype reads as its value
    if len(lines) > MAX_ATTRS:
        lines = lines[:MAX_ATTRS] + [f"(+{len(lines) - MAX_ATTRS} more)"]
    return lines


def node_label(node, numbered: bool = True) -> str:
    """The label: ``%id Kind`` (or the name of an Input/Param) then key attrs; a fused
    region's steps are not ``numbered`` (their ids are not the graph's)."""
    ref = f"%{node.id} " if numbered else ""
    if node.kind in ("Input", "Param"):
        head = [f"{node.kind.lower()} {node.attrs.name}", str(node.shape)]
    elif node.kind == "Constant":
        head = [f"{ref}Constant", _constant_text(node)]
    else:
        head = [f"{ref}{node.kind}"] + attr_lines(node)
    if node.name and node.kind not in ("Input", "Param"):
        head.insert(1, f'"{node.name}"')
    return "\n".join(head)


def node_style(node, is_output: bool) -> dict:
    style = dict(STYLES.get(node.kind, STYLES["op"]))
    if is_output:
        style.update(OUTPUT)
    return style


def edge_label(graph: Graph, src: int) -> str:
    """The value's shape and dtype, as the text form prints it."""
    return str(graph.shape(src))


__all__ = ["BODY_CLUSTER", "FUSED_CLUSTER", "attr_lines", "edge_label", "node_label",
           "node_style", "short"]
