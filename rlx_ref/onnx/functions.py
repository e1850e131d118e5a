"""ONNX ops that ONNX itself defines as a function of other ops, expanded at import.

Where no converter maps an op (or its converter refuses the attributes given), the op's
function body from its schema (plain, or built for the node's input types) replaces it:
that body is ONNX's own definition, so importing it keeps ONNX's meaning exactly.
"""
from __future__ import annotations


def expand(ctx, node, label: str):
    """``(nodes, opset)``: ``node``'s function body renamed into this graph and the opset
    it is written in, or None when the op has no function at this opset."""
    from onnx import FunctionProto, NodeProto, defs

    version = _version(ctx, node)
    try:
        schema = defs.get_schema(node.op_type, version, node.domain)
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for unknown ops
        return None
    full = NodeProto()
    full.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, a in schema.attributes.items():
        if name not in given and a.default_value.name:
            full.attribute.append(a.default_value)
    text = None
    # a body is written for an opset of the default domain: the model's
    plain = [v for v in schema.function_opset_versions if v <= ctx.opset]
    if plain:
        text = schema.get_function_with_opset_version(max(plain))
    else:
        deps = [v for v in schema.context_dependent_function_opset_versions if v <= ctx.opset]
        types = _input_types(ctx, node)
        if deps and types is not None:
            text = schema.get_context_dependent_function_with_opset_version(
                max(deps), full.SerializeToString(), [t.SerializeToString() for t in types])
    if not text:
        return None
    fn = FunctionProto()
    fn.ParseFromString(text)
    opset = next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")),
                 ctx.opset)
    from onnx.backend.test.case.node import function_expand_helper

    prefix = f"{label}/{node.op_type}/"
    return function_expand_helper(full, fn, prefix), opset


def import_body(ctx, node, label: str) -> list:
    """``node``'s outputs from its function body, each body node imported as any node is
    (converted, folded or expanded in turn), in the body's own opset."""
    import numpy as np

    from .context import Unmappable
    from .load import NO_MAPPING, convert_node

    body = expand(ctx, node, label)
    if body is None:
        raise Unmappable(NO_MAPPING)
    nodes, opset = body
    outer, ctx.opset = ctx.opset, opset
    try:
        for k, sub in enumerate(nodes):
            ctx.producers.update((o, (next(ctx.order), sub)) for o in sub.output if o)
            try:
                outs = convert_node(ctx, sub, list(sub.input), f"{label}/{k}")
            except Unmappable as e:
                raise Unmappable(f"in ONNX's function body of {node.op_type}, "
                                 f"{sub.op_type}: {e.why}", e.attribute) from None
            for oname, out in zip(sub.output, outs):
                if oname and isinstance(out, np.ndarray):
                    ctx.ids.pop(oname, None)
                    ctx.static[oname] = out
                elif oname:
                    ctx.static.pop(oname, None)
                    ctx.ids[oname] = out
    finally:
        ctx.opset = outer
    return [ctx.static[o] if o in ctx.static and o not in ctx.ids else
            (ctx.id(o) if o else None) for o in node.output]


def _version(ctx, node) -> int:
    """The opset the model imports ``node``'s domain at."""
    if node.domain in ("", "ai.onnx"):
        return ctx.opset
    return ctx.domains.get(node.domain, 0)


def has_body(ctx, node) -> bool:
    """Whether ONNX defines ``node``'s op (of any domain) as a function here."""
    from onnx import defs

    try:
        schema = defs.get_schema(node.op_type, _version(ctx, node), node.domain)
    except Exception:  # noqa: BLE001
        return False
    return any(v <= ctx.opset for v in list(schema.function_opset_versions) +
               list(schema.context_dependent_function_opset_versions))


def _input_types(ctx, node):
    """The TypeProtos of the node's inputs (a context-dependent body is built for them)."""
    from onnx import helper

    from .context import ONNX_DTYPES

    code = {dt: c for c, dt in ONNX_DTYPES.items()}
    types = []
    for n in node.input:
        if not n:
            types.append(helper.make_empty_tensor_value_info("").type)
            continue
        try:
            types.append(helper.make_tensor_type_proto(code[ctx.dtype(n)],
                                                       list(ctx.shape(n))))
        except Exception:  # noqa: BLE001 - an input that does not map has no type here
            return None
    return types
