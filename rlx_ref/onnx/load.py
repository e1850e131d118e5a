"""ONNX model → RLX Graph: the driver that walks the nodes and calls one converter each."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..ir.graph import Graph
from .context import Attrs, Ctx, Unmappable, dtype_of, input_shape
from .convert import CONVERTERS, FOLDABLE
from .functions import has_body

MIN_OPSET = 13


class OnnxImportError(ValueError):
    """The model cannot be imported; ``problems`` lists every node that does not map."""

    def __init__(self, message: str, problems=()):
        super().__init__(message)
        self.problems = list(problems)


@dataclass(frozen=True)
class Problem:
    """One node that does not map: its name, op type, attribute (if one) and why."""

    node: str
    op_type: str
    attribute: str | None
    why: str

    def __str__(self) -> str:
        attr = f" attribute {self.attribute!r}:" if self.attribute else ""
        return f"node {self.node!r} ({self.op_type}):{attr} {self.why}"


@dataclass
class Imported:
    """An imported model: the graph, its Params' values, and which inputs were folded."""

    graph: Graph
    params: dict = field(default_factory=dict)
    folded_inputs: tuple = ()


def max_opset() -> int:
    """The newest default-domain opset the installed onnx package knows."""
    import onnx

    return int(onnx.defs.onnx_opset_version())


def read_model(path_or_model):
    """A ModelProto from a path, bytes or a ModelProto; OnnxImportError when unreadable."""
    import onnx

    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    try:
        if isinstance(path_or_model, (bytes, bytearray)):
            return onnx.load_from_string(bytes(path_or_model))
        path = Path(path_or_model)
        data = path.read_bytes()
        if not data:
            raise OnnxImportError(f"{path}: the file is empty, not an ONNX model")
        model = onnx.load_from_string(data)
    except OnnxImportError:
        raise
    except OSError as e:
        raise OnnxImportError(f"cannot read {path_or_model}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError family
        raise OnnxImportError(f"{path_or_model}: not a valid ONNX model (the protobuf does "
                              f"not decode: {type(e).__name__}: {e}); is the file truncated "
                              "or corrupt?") from None
    if not model.HasField("graph") or not model.opset_import:
        raise OnnxImportError(f"{path_or_model}: decodes, but holds no graph or opset "
                              "(is it an ONNX model? a truncated file can decode this way)")
    return model


def model_opset(model, opset: int | None) -> int:
    """The default-domain opset the model is read under (``opset`` overrides it)."""
    found = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    v = opset if opset is not None else (found[0] if found else None)
    if v is None:       # only other domains: their nodes are reported one by one
        if any(n.domain in ("", "ai.onnx") for n in model.graph.node):
            raise OnnxImportError("the model imports no default-domain (ai.onnx) opset")
        return max_opset()
    if not MIN_OPSET <= v <= max_opset():
        raise OnnxImportError(f"opset {v} is outside the supported range {MIN_OPSET}.."
                              f"{max_opset()}", [Problem("(model)", "(opset)", None,
                                                         f"opset {v} is not supported")])
    return int(v)


def import_model(path_or_model, *, opset=None, weights: str = "params",
                 static_inputs: dict | None = None, name: str | None = None) -> Imported:
    """Import a model (see ``rlx_ref.onnx.load``); every unmappable node in one error."""
    from onnx import numpy_helper

    if weights not in ("params", "constants"):
        raise ValueError(f"weights must be 'params' or 'constants', got {weights!r}")
    model = read_model(path_or_model)
    ver = model_opset(model, opset)
    og = model.graph
    g = Graph(_graph_name(name or og.name))
    ctx = Ctx(g, ver, static_inputs)
    ctx.domains = {o.domain: o.version for o in model.opset_import
                   if o.domain not in ("", "ai.onnx")}
    problems: list[Problem] = []
    inits = {t.name: t for t in og.initializer}
    for t in og.sparse_initializer:
        problems.append(Problem(t.values.name, "(sparse initializer)", None,
                                "sparse initializers are not supported"))
    for vi in og.input:
        if vi.name in inits:
            continue
        try:
            ctx.pending[vi.name] = input_shape(vi)
        except Unmappable as e:
            problems.append(Problem(vi.name, _input_kind(e.why), None, e.why))
    for tname, t in inits.items():
        arr = numpy_helper.to_array(t)
        try:
            dt = dtype_of(t.data_type, f"initializer {tname!r}")
        except Unmappable as e:
            problems.append(Problem(tname, "(initializer)", None, e.why))
            continue
        if weights == "constants" or arr.dtype.kind in "iub":
            # integer initializers are shapes, axes and indices far more often than
            # weights, and RLX payloads need those at import time
            ctx.static[tname] = arr
        else:
            ctx.weights[tname] = arr.astype(dt.np)
    poisoned: set = set(p.node for p in problems)
    for i, node in enumerate(og.node):
        label = node.name or f"{node.op_type}_{i}"
        ins = list(node.input)
        ctx.producers.update((o, (next(ctx.order), node)) for o in node.output if o)
        if node.domain not in ("", "ai.onnx") and not has_body(ctx, node):
            problems.append(Problem(label, f"{node.domain}.{node.op_type}", None,
                                    f"domain {node.domain!r} is not supported"))
            poisoned.update(node.output)
            continue
        static = bool(ins) and all(not n or n in ctx.static for n in ins)
        if node.op_type not in CONVERTERS and not (static and _foldable(node)) and \
                not has_body(ctx, node):
            problems.append(Problem(label, node.op_type, None, NO_MAPPING))
            poisoned.update(node.output)
            continue
        if any(n in poisoned for n in ins if n):
            poisoned.update(node.output)
            continue
        try:
            outs = convert_node(ctx, node, ins, label)
        except Unmappable as e:
            kind = node.op_type if node.domain in ("", "ai.onnx") else \
                f"{node.domain}.{node.op_type}"
            problems.append(Problem(label, kind, e.attribute, e.why))
            poisoned.update(node.output)
            continue
        for oname, out in zip(node.output, outs):
            if not oname:
                continue
            if isinstance(out, np.ndarray):
                ctx.static[oname] = out
            else:
                ctx.ids[oname] = out
    outputs = []
    for vo in og.output:
        if vo.name in poisoned:
            continue
        if not vo.type.HasField("tensor_type"):
            kind = vo.type.WhichOneof("value").replace("_type", "")
            problems.append(Problem(vo.name, f"(output {kind})", None,
                                    f"graph output {vo.name!r} is not a tensor ({kind})"))
            continue
        try:
            outputs.append(ctx.id(vo.name))
        except Unmappable as e:
            problems.append(Problem(vo.name, "(graph output)", None, e.why))
    if problems:
        lines = "\n  ".join(map(str, problems))
        raise OnnxImportError(f"{len(problems)} node(s) of the ONNX model do not map onto "
                              f"RLX:\n  {lines}", problems)
    g.set_outputs(outputs)
    from ..ir.verify import verify_or_raise

    verify_or_raise(g)
    return Imported(g, dict(ctx.params), tuple(sorted(ctx.folded)))


NO_MAPPING = "no RLX kind or decomposition for this op"


def convert_node(ctx: Ctx, node, ins: list, label: str) -> list:
    """A node's outputs: its converter's, folded, or (for an op no converter maps) its
    ONNX function body's, imported node by node. A converter's refusal stands: it names
    what RLX cannot express, or an attribute value ONNX does not define."""
    from .functions import import_body

    static = bool(ins) and all(not n or n in ctx.static for n in ins)
    default = node.domain in ("", "ai.onnx")
    if default and (node.op_type in CONVERTERS or (static and _foldable(node))):
        try:
            return _convert(ctx, node, ins)
        except Unmappable:
            raise
        except Exception as e:  # noqa: BLE001 - a builder error is this node's problem
            raise Unmappable(f"RLX rejects the mapping: {type(e).__name__}: {e}") from None
    return import_body(ctx, node, label)


def _convert(ctx: Ctx, node, ins: list) -> list:
    attrs = Attrs(node)
    static = bool(ins) and all(not n or n in ctx.static for n in ins)
    if static and _foldable(node) and (node.op_type in FOLDABLE or
                                       node.op_type not in CONVERTERS):
        return _fold(ctx, node, ins)
    outs = CONVERTERS[node.op_type](ctx, node, ins, attrs)
    left = attrs.unread()
    if left:
        raise Unmappable(f"attribute {left[0]!r} is not supported by the importer", left[0])
    if len(outs) < len([o for o in node.output if o]):
        raise Unmappable(f"only the first {len(outs)} output(s) of {node.op_type} map")
    return outs


def _input_kind(why: str) -> str:
    """The report's key for a graph input that does not map: its dtype or its kind."""
    import re

    m = re.search(r"element type (\w+)", why)
    if m:
        return f"(input dtype {m.group(1)})"
    m = re.search(r"not a tensor \((\w+)_type\)", why)
    if m:
        return f"(input {m.group(1)})"
    return "(graph input)"


def _foldable(node) -> bool:
    """Static operands fold for the shape ops, and for any op without randomness or a
    body (constant subexpressions are ONNX's values, whatever RLX maps)."""
    if node.op_type in FOLDABLE:
        return True
    random = node.op_type.startswith("Random") or node.op_type in ("Bernoulli", "Multinomial")
    return not random and not any(a.type in (5, 10) for a in node.attribute)  # GRAPH(S)


def _fold(ctx: Ctx, node, ins: list) -> list:
    """Evaluate a node whose operands are all static with ONNX's own reference."""
    from onnx.reference import ReferenceEvaluator

    feeds = {n: ctx.static[n] for n in ins if n}
    try:
        outs = ReferenceEvaluator(node, opsets={"": ctx.opset}).run(None, feeds)
    except Exception as e:  # noqa: BLE001
        raise Unmappable(f"constant folding failed: {type(e).__name__}: {e}") from None
    res = []
    for o in outs:
        if not isinstance(o, (np.ndarray, np.generic)):
            # a sequence or optional: RLX values are tensors, and an array made of a
            # list would silently change the value's type
            kind = "an empty optional" if o is None else f"a {type(o).__name__}"
            raise Unmappable(f"{node.op_type} folds to {kind}, not a tensor")
        arr = np.asarray(o)
        dtype_of(_elem_type(arr), f"folded output of {node.op_type}")
        res.append(arr)
    return res


def _elem_type(arr: np.ndarray) -> int:
    from onnx import helper

    try:
        return helper.np_dtype_to_tensor_dtype(arr.dtype)
    except Exception:  # noqa: BLE001
        return 0


def _graph_name(name: str) -> str:
    import re

    clean = re.sub(r"[^A-Za-z0-9_]", "_", name or "")
    return clean or "onnx"
