"""RLX's textual IR: print and parse, exact inverses (RLX ``text.rs`` grammar).

    graph      := "graph" "@" ident "{" node* return? "}"
    node       := "%" int "=" op operands? ":" shape name?
    operands   := "(" ("%" int),* ")"
    shape      := "[" dim,* "]" dtype
    dim        := int | "?" int
    name       := "#" json-string
    return     := "return" ("%" int),*
    op         := ident | json        (unit ops bare; others externally tagged JSON)

Blank lines and ``//`` comment lines are ignored; ids are labels (sparse, any order
that defines before use). Errors are ``TextParseError`` formatted ``line N: message``.
"""
from __future__ import annotations

import json
import re

from ..ops.codec import CodecError, attrs_from_json, attrs_to_json, dumps
from .dtype import DType
from .graph import Graph, Node, Op
from .shape import Dyn, Shape, ShapeError


class TextParseError(ValueError):
    """Malformed textual IR; ``line`` is 1-based."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line, self.message = line, message


# ── op <-> serde JSON ──────────────────────────────────────────────────────

def op_to_json(op: Op):
    d = op.opdef
    if d.payload == "unit":
        return op.kind
    if d.payload == "newtype":
        (f,) = _fields(d.attrs)
        return {op.kind: f.metadata["codec"].to_json(getattr(op.attrs, f.name))}
    return {op.kind: attrs_to_json(op.attrs)}


def op_from_json(j) -> Op:
    from ..ops.opdef import get

    if isinstance(j, str):
        kind, payload = j, None
    elif isinstance(j, dict) and len(j) == 1:
        (kind, payload), = j.items()
    else:
        raise CodecError(f"an op is a string or a one-key object, got {dumps(j)}")
    try:
        d = get(kind)
    except KeyError as e:
        raise CodecError(str(e.args[0])) from None
    if d.payload == "unit":
        if payload is not None or not isinstance(j, str):
            raise CodecError(f"{kind} takes no payload; write it bare as {kind}")
        return Op(kind)
    if isinstance(j, str):
        raise CodecError(f"{kind} needs a payload: {{\"{kind}\": ...}}")
    if d.payload == "newtype":
        (f,) = _fields(d.attrs)
        try:
            return Op(kind, d.attrs(**{f.name: f.metadata["codec"].from_json(payload)}))
        except CodecError as e:
            raise CodecError(f"{kind}: {e}") from None
    return Op(kind, attrs_from_json(d.attrs, payload, kind))


def _fields(cls):
    import dataclasses

    return dataclasses.fields(cls)


def print_op(op: Op) -> str:
    j = op_to_json(op)
    if isinstance(j, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", j):
        return j
    return dumps(j)


# ── Graph <-> serde JSON (bodies of control-flow ops) ──────────────────────

def shape_to_json(s: Shape):
    dims = [{"Dynamic": d.sym} if isinstance(d, Dyn) else {"Static": d} for d in s.dims]
    return {"dims": dims, "dtype": s.dtype.value}


def shape_from_json(j) -> Shape:
    if not isinstance(j, dict) or "dims" not in j or "dtype" not in j:
        raise CodecError(f"a shape is {{\"dims\":[...],\"dtype\":...}}, got {dumps(j)}")
    dims = []
    for d in j["dims"]:
        if isinstance(d, dict) and len(d) == 1 and "Static" in d:
            dims.append(d["Static"])
        elif isinstance(d, dict) and len(d) == 1 and "Dynamic" in d:
            if not isinstance(d["Dynamic"], (int, str)) or isinstance(d["Dynamic"], bool):
                raise CodecError(f"a dynamic dim names its symbol by number, got {dumps(d)}")
            dims.append(Dyn(int(d["Dynamic"])))
        else:
            raise CodecError(f"a dim is {{\"Static\":n}} or {{\"Dynamic\":s}}, got {dumps(d)}")
    try:
        return Shape(dims, DType(j["dtype"]))
    except (ValueError, ShapeError) as e:
        raise CodecError(f"bad shape {dumps(j)}: {e}") from None


def graph_to_json(g: Graph):
    nodes = [
        {"id": n.id, "op": op_to_json(n.op), "inputs": list(n.inputs),
         "shape": shape_to_json(n.shape), "name": n.name, "origin": n.origin}
        for n in g.nodes
    ]
    return {"name": g.name, "nodes": nodes, "outputs": list(g.outputs)}


def graph_from_json(j) -> Graph:
    if not isinstance(j, dict) or not {"name", "nodes", "outputs"} <= set(j):
        raise CodecError("a graph body is {\"name\":...,\"nodes\":[...],\"outputs\":[...]}")
    g = Graph(j["name"])
    if not isinstance(j["nodes"], list) or not isinstance(j["outputs"], list):
        raise CodecError(f"body @{g.name}: \"nodes\" and \"outputs\" must be lists")
    for k, nj in enumerate(j["nodes"]):
        if not isinstance(nj, dict) or not {"op", "shape"} <= set(nj):
            raise CodecError(f"body @{g.name}: node {k} is not an object with \"op\" and "
                             "\"shape\"")
        if nj.get("id", k) != k:
            raise CodecError(f"body @{g.name}: node {k} has id {nj.get('id')}, expected {k}")
        if not _int_list(nj.get("inputs", [])):
            raise CodecError(f"body @{g.name}: node {k} \"inputs\" is not a list of node ids")
        g.add_node_unchecked(op_from_json(nj["op"]), [int(i) for i in nj.get("inputs", [])],
                             shape_from_json(nj["shape"]), nj.get("name"), nj.get("origin"))
    if not _int_list(j["outputs"]):
        raise CodecError(f"body @{g.name}: \"outputs\" is not a list of node ids")
    g.outputs = [int(o) for o in j["outputs"]]
    return g


def _int_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                       for i in v)


# ── printing ───────────────────────────────────────────────────────────────

def print_node(n: Node) -> str:
    s = f"%{n.id} = {print_op(n.op)}"
    if n.inputs:
        s += "(" + ", ".join(f"%{i}" for i in n.inputs) + ")"
    s += f" : {n.shape}"
    if n.name is not None:
        s += " #" + json.dumps(n.name, ensure_ascii=False)
    return s


def print_graph(g: Graph) -> str:
    lines = [f"graph @{g.name} {{"]
    lines += ["  " + print_node(n) for n in g.nodes]
    if g.outputs:
        lines.append("  return " + ", ".join(f"%{o}" for o in g.outputs))
    lines.append("}")
    return "\n".join(lines) + "\n"


# ── parsing ────────────────────────────────────────────────────────────────

class _Cursor:
    def __init__(self, text: str, line: int):
        self.rest, self.line = text, line

    def err(self, msg: str):
        raise TextParseError(self.line, msg)

    def ws(self):
        self.rest = self.rest.lstrip(" \t")

    def eat(self, tok: str) -> bool:
        self.ws()
        if self.rest.startswith(tok):
            self.rest = self.rest[len(tok):]
            return True
        return False

    def expect(self, tok: str):
        if not self.eat(tok):
            self.err(f"expected `{tok}`, found `{self.rest[:24]}`")

    def take(self, pattern: str) -> str:
        self.ws()
        m = re.match(pattern, self.rest)
        if not m:
            return ""
        self.rest = self.rest[m.end():]
        return m.group(0)

    def integer(self) -> int:
        d = self.take(r"[0-9]+")
        if not d:
            self.err(f"expected an integer, found `{self.rest[:24]}`")
        return int(d)

    def node_id(self) -> int:
        self.expect("%")
        return self.integer()

    def json_value(self) -> str:
        """One balanced JSON object, array or string (strings may hold braces)."""
        self.ws()
        if not self.rest or self.rest[0] not in "{[\"":
            self.err(f"expected a JSON value, found `{self.rest[:24]}`")
        depth, in_str, esc = 0, False, False
        for i, c in enumerate(self.rest):
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
                    if depth == 0:
                        taken, self.rest = self.rest[: i + 1], self.rest[i + 1:]
                        return taken
                continue
            if c == '"':
                in_str = True
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    taken, self.rest = self.rest[: i + 1], self.rest[i + 1:]
                    return taken
        self.err("unterminated JSON value")

    def op(self) -> Op:
        self.ws()
        if self.rest[:1] in ("{", "[", '"'):
            text = self.json_value()
            try:
                j = json.loads(text)
            except json.JSONDecodeError as e:
                self.err(f"not a valid op: {e} (in `{text}`)")
        else:
            ident = self.take(r"[A-Za-z0-9_]+")
            if not ident:
                self.err(f"expected an op, found `{self.rest[:24]}`")
            j, text = ident, ident
        try:
            return op_from_json(j)
        except (CodecError, TypeError, ValueError, KeyError, IndexError, AttributeError,
                OverflowError, RecursionError) as e:   # a payload of the wrong JSON shape
            self.err(f"not a valid op: {e} (in `{text}`)")

    def shape(self) -> Shape:
        self.expect("[")
        dims = []
        if not self.eat("]"):
            while True:
                dims.append(Dyn(self.integer()) if self.eat("?") else self.integer())
                if self.eat(","):
                    continue
                self.expect("]")
                break
        word = self.take(r"[A-Za-z0-9]+")
        try:
            dt = DType.parse(word) if word and word == word.lower() else None
        except ValueError:
            dt = None
        if dt is None:
            self.err(f"unknown dtype `{word}`")
        return Shape(dims, dt)


def parse(text: str) -> Graph:
    """Parse textual IR into a Graph (ids remapped densely in definition order)."""
    # Only "\n" ends a line (as Rust's `lines()`); str.splitlines would also split on
    # characters such as U+2028 that may legally appear inside a JSON string label.
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    pos, graph = 0, None
    while pos < len(lines):
        line = lines[pos].strip()
        pos += 1
        if not line or line.startswith("//"):
            continue
        cur = _Cursor(line, pos)
        cur.expect("graph")
        cur.expect("@")
        name = cur.take(r"[A-Za-z0-9_.]+")
        if not name:
            cur.err("expected a graph name after `@`")
        cur.expect("{")
        if cur.rest.strip():
            cur.err(f"trailing input `{cur.rest.strip()[:24]}`")
        graph = Graph(name)
        break
    if graph is None:
        raise TextParseError(1, "empty input: expected `graph @name {`")
    ids: dict[int, int] = {}
    outputs: list[int] = []
    closed = False
    while pos < len(lines):
        line = lines[pos].strip()
        pos += 1
        if not line or line.startswith("//"):
            continue
        if line == "}":
            closed = True
            break
        cur = _Cursor(line, pos)
        if cur.rest.startswith("return") and not re.match(r"return\w", cur.rest):
            cur.eat("return")
            while True:
                outputs.append(_resolve(ids, cur.node_id(), cur))
                if not cur.eat(","):
                    break
            if cur.rest.strip():
                cur.err(f"trailing input `{cur.rest.strip()[:24]}`")
            continue
        declared = cur.node_id()
        cur.expect("=")
        op = cur.op()
        inputs = []
        if cur.eat("("):
            if not cur.eat(")"):
                while True:
                    inputs.append(_resolve(ids, cur.node_id(), cur))
                    if cur.eat(","):
                        continue
                    cur.expect(")")
                    break
        cur.expect(":")
        shape = cur.shape()
        label = None
        if cur.eat("#"):
            raw = cur.json_value()
            try:
                label = json.loads(raw)
            except json.JSONDecodeError as e:
                cur.err(f"bad node name: {e}")
            if not isinstance(label, str):
                cur.err("bad node name: expected a JSON string")
        if cur.rest.strip():
            cur.err(f"trailing input `{cur.rest.strip()[:24]}`")
        if declared in ids:
            cur.err(f"%{declared} is defined twice")
        ids[declared] = graph.add_node_unchecked(op, inputs, shape, label)
    if not closed:
        raise TextParseError(max(len(lines), 1), "unexpected end of input: missing `}`")
    for rest in lines[pos:]:
        pos += 1
        if rest.strip() and not rest.strip().startswith("//"):
            raise TextParseError(pos, f"trailing input after `}}`: `{rest.strip()[:24]}`")
    graph.outputs = outputs
    return graph


def _resolve(ids: dict, declared: int, cur: _Cursor) -> int:
    if declared not in ids:
        cur.err(f"%{declared} is used before it is defined")
    return ids[declared]
