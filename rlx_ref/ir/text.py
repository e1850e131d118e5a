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
        raise CodecError(f"an op is a string or a one-key object, got {_snippet(j)}")
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


def _snippet(j) -> str:
    text = dumps(j) if isinstance(j, (dict, list, str, int, float, bool, type(None))) else repr(j)
    return text if len(text) <= 48 else text[:45] + "..."


def print_op(op: Op) -> str:
    j = op_to_json(op)
    if isinstance(j, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", j):
        return j
    return dumps(j)


# ── Graph <-> serde JSON (bodies of control-flow ops) ──────────────────────

USIZE_MAX = 2**64 - 1        # RLX's Dim::Static(usize) on 64-bit targets
U32_MAX = 2**32 - 1          # RLX's NodeId(u32) and Dim::Dynamic(u32)


def shape_to_json(s: Shape):
    dims = [{"Dynamic": d.sym} if isinstance(d, Dyn) else {"Static": d} for d in s.dims]
    return {"dims": dims, "dtype": s.dtype.value}


def _uint(j, hi: int, what: str) -> int:
    if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j <= hi:
        raise CodecError(f"{what} must be an integer in [0, {hi}], got {_snippet(j)}")
    return j


def shape_from_json(j) -> Shape:
    if not isinstance(j, dict) or "dims" not in j or "dtype" not in j \
            or not isinstance(j["dims"], list):
        raise CodecError(f"a shape is {{\"dims\":[...],\"dtype\":...}}, got {_snippet(j)}")
    dims = []
    for d in j["dims"]:
        if isinstance(d, dict) and len(d) == 1 and "Static" in d:
            dims.append(_uint(d["Static"], USIZE_MAX, "a Static dim"))
        elif isinstance(d, dict) and len(d) == 1 and "Dynamic" in d:
            dims.append(Dyn(_uint(d["Dynamic"], U32_MAX, "a Dynamic symbol")))
        else:
            raise CodecError(f"a dim is {{\"Static\":n}} or {{\"Dynamic\":s}}, got {_snippet(d)}")
    if not isinstance(j["dtype"], str):
        raise CodecError(f"a dtype is a name such as \"F32\", got {_snippet(j['dtype'])}")
    try:
        return Shape(dims, DType(j["dtype"]))
    except (ValueError, ShapeError) as e:
        raise CodecError(f"bad shape {_snippet(j)}: {e}") from None


def graph_to_json(g: Graph):
    nodes = [
        {"id": n.id, "op": op_to_json(n.op), "inputs": list(n.inputs),
         "shape": shape_to_json(n.shape), "name": n.name, "origin": n.origin}
        for n in g.nodes
    ]
    return {"name": g.name, "nodes": nodes, "outputs": list(g.outputs)}


def graph_from_json(j) -> Graph:
    if not isinstance(j, dict) or not {"name", "nodes", "outputs"} <= set(j) \
            or not isinstance(j["name"], str) or not isinstance(j["nodes"], list) \
            or not isinstance(j["outputs"], list):
        raise CodecError("a graph body is {\"name\":\"...\",\"nodes\":[...],\"outputs\":[...]}")
    g = Graph(j["name"])
    for k, nj in enumerate(j["nodes"]):
        where = f"body @{g.name} node {k}"
        if not isinstance(nj, dict) or "op" not in nj or "shape" not in nj:
            raise CodecError(f"{where}: a node is an object with \"op\" and \"shape\" "
                             f"(and \"id\", \"inputs\", \"name\", \"origin\"), got {_snippet(nj)}")
        nid = nj.get("id", k)
        if isinstance(nid, bool) or not isinstance(nid, int) or nid != k:
            raise CodecError(f"{where} has id {_snippet(nid)}, expected {k}")
        inputs = nj.get("inputs", [])
        if not isinstance(inputs, list):
            raise CodecError(f"{where}: inputs must be a list of node ids, got {_snippet(inputs)}")
        name = nj.get("name")
        if name is not None and not isinstance(name, str):
            raise CodecError(f"{where}: name must be a string or null, got {_snippet(name)}")
        try:
            op = op_from_json(nj["op"])
            ids = [_uint(i, U32_MAX, "a node id") for i in inputs]
            shape = shape_from_json(nj["shape"])
        except CodecError as e:
            raise CodecError(f"{where}: {e}") from None
        g.add_node_unchecked(op, ids, shape, name, nj.get("origin"))
    g.outputs = [_uint(o, U32_MAX, f"body @{g.name} output") for o in j["outputs"]]
    return g


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

# serde_json's default recursion limit: RLX rejects deeper payloads the same way, and
# bounding it here keeps every later recursive step (decoding, bodies) far from Python's.
MAX_JSON_DEPTH = 128

_WS = re.compile(r"[ \t]*")
_INT = re.compile(r"[0-9]+")
_IDENT = re.compile(r"[A-Za-z0-9_]+")
_NAME = re.compile(r"[A-Za-z0-9_.]+")
_WORD = re.compile(r"[A-Za-z0-9]+")
_OPERANDS = re.compile(r"\([ \t]*(?:%[0-9]+(?:[ \t]*,[ \t]*%[0-9]+)*)?[ \t]*\)")
_OPERAND = re.compile(r"(?<=%)[0-9]+")
_JSON_MARK = re.compile(r'[][{}"]')
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON (write the string \"inf\", \"-inf\" or \"nan\")")


def _finite_float(text: str) -> float:
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:24]} is out of range for f64")
    return v


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


class _Cursor:
    """One line being parsed. ``pos`` moves forward only: slicing the rest of the line at
    every token copied it each time, which made a long operand list quadratic."""

    def __init__(self, text: str, line: int):
        self.text, self.pos, self.line = text, 0, line

    def err(self, msg: str):
        raise TextParseError(self.line, msg)

    def snippet(self) -> str:
        return self.text[self.pos:self.pos + 24]

    def ws(self):
        self.pos = _WS.match(self.text, self.pos).end()

    def at_end(self) -> bool:
        self.ws()
        return self.pos >= len(self.text)

    def eat(self, tok: str) -> bool:
        self.ws()
        if self.text.startswith(tok, self.pos):
            self.pos += len(tok)
            return True
        return False

    def expect(self, tok: str):
        if not self.eat(tok):
            self.err(f"expected `{tok}`, found `{self.snippet()}`")

    def take(self, pattern: re.Pattern) -> str:
        self.ws()
        m = pattern.match(self.text, self.pos)
        if not m:
            return ""
        self.pos = m.end()
        return m.group(0)

    def integer(self, what: str = "an integer", hi: int = USIZE_MAX) -> int:
        d = self.take(_INT)
        if not d:
            self.err(f"expected {what}, found `{self.snippet()}`")
        if len(d) > 20 or int(d) > hi:
            self.err(f"{what} {d[:24]} is out of range [0, {hi}]")
        return int(d)

    def node_id(self) -> int:
        self.expect("%")
        return self.integer("a node id")

    def json_value(self) -> str:
        """One balanced JSON object, array or string (strings may hold braces)."""
        self.ws()
        start, text = self.pos, self.text
        if start >= len(text) or text[start] not in '{["':
            self.err(f"expected a JSON value, found `{self.snippet()}`")
        depth, i = 0, start
        while True:
            m = _JSON_MARK.search(text, i)
            if m is None:
                self.err("unterminated JSON value")
            c = m.group(0)
            if c == '"':
                sm = _JSON_STRING.match(text, m.start())
                if sm is None:
                    self.err("unterminated JSON value (a string is not closed)")
                i = sm.end()
            elif c in "{[":
                depth, i = depth + 1, m.end()
                if depth > MAX_JSON_DEPTH:
                    self.err(f"JSON nested deeper than {MAX_JSON_DEPTH} levels "
                             f"(serde_json's recursion limit)")
            else:
                depth, i = depth - 1, m.end()
            if depth <= 0:
                self.pos = i
                return text[start:i]

    def decode(self, raw: str, what: str):
        try:
            return _DECODER.decode(raw)
        except ValueError as e:       # JSONDecodeError, or a number json cannot hold
            self.err(f"{what}: {e} (in `{raw[:48]}`)")

    def op(self) -> Op:
        self.ws()
        if self.text[self.pos:self.pos + 1] in ("{", "[", '"'):
            text = self.json_value()
            j = self.decode(text, "not a valid op")
        else:
            ident = self.take(_IDENT)
            if not ident:
                self.err(f"expected an op, found `{self.snippet()}`")
            j, text = ident, ident
        try:
            return op_from_json(j)
        except (CodecError, ShapeError) as e:
            self.err(f"not a valid op: {e} (in `{text[:48]}`)")

    def shape(self) -> Shape:
        self.expect("[")
        dims = []
        if not self.eat("]"):
            while True:
                if self.eat("?"):
                    dims.append(Dyn(self.integer("a dynamic symbol", U32_MAX)))
                else:
                    dims.append(self.integer("a dim"))
                if self.eat(","):
                    continue
                self.expect("]")
                break
        word = self.take(_WORD)
        try:
            dt = DType.parse(word) if word and word == word.lower() else None
        except ValueError:
            dt = None
        if dt is None:
            self.err(f"unknown dtype `{word[:24]}` (expected f32, f16, bf16, f64, i8, i16, "
                     f"i32, i64, u8, u32, bool, c64 or c128)")
        return Shape(dims, dt)

    def done(self):
        if not self.at_end():
            self.err(f"trailing input `{self.snippet().strip()}`")


def parse(text: str) -> Graph:
    """Parse textual IR into a Graph (ids remapped densely in definition order)."""
    if not isinstance(text, str):
        raise TextParseError(1, f"expected text (str), got {type(text).__name__}")
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
        name = cur.take(_NAME)
        if not name:
            cur.err("expected a graph name after `@`")
        cur.expect("{")
        cur.done()
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
        if line.startswith("return") and not re.match(r"return\w", line):
            cur.eat("return")
            while True:
                outputs.append(_resolve(ids, cur.node_id(), cur))
                if not cur.eat(","):
                    break
            cur.done()
            continue
        _parse_node(cur, graph, ids)
    if not closed:
        raise TextParseError(max(len(lines), 1), "unexpected end of input: missing `}`")
    for rest in lines[pos:]:
        pos += 1
        if rest.strip() and not rest.strip().startswith("//"):
            raise TextParseError(pos, f"trailing input after `}}`: `{rest.strip()[:24]}`")
    graph.outputs = outputs
    return graph


def _parse_node(cur: _Cursor, graph: Graph, ids: dict) -> None:
    """``%id = op(operands) : shape #"label"`` appended to ``graph``."""
    declared = cur.node_id()
    cur.expect("=")
    op = cur.op()
    inputs = []
    cur.ws()
    m = _OPERANDS.match(cur.text, cur.pos)
    if m:       # the common, well-formed list in one step; the loop below explains errors
        cur.pos = m.end()
        for tok in _OPERAND.findall(m.group(0)):
            if len(tok) > 20:
                cur.err(f"a node id {tok[:24]} is out of range [0, {USIZE_MAX}]")
            inputs.append(_resolve(ids, int(tok), cur))
    elif cur.eat("("):
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
        label = cur.decode(cur.json_value(), "bad node name")
        if not isinstance(label, str):
            cur.err("bad node name: expected a JSON string")
    cur.done()
    if declared in ids:
        cur.err(f"%{declared} is defined twice")
    ids[declared] = graph.add_node_unchecked(op, inputs, shape, label)


def _resolve(ids: dict, declared: int, cur: _Cursor) -> int:
    if declared not in ids:
        cur.err(f"%{declared} is used before it is defined")
    return ids[declared]
