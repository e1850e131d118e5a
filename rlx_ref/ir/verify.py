"""The verifier's three layers, as RLX's ``verify.rs``, cheapest first:

1. structure: operands exist and precede their user, arity matches, outputs exist;
2. op-local: the OpDef's ``check`` (leaves take no operands, bodies declare outputs...);
3. shapes: every node's shape is re-inferred and compared with the declared one.

Nested bodies are verified recursively; their errors are prefixed with the body path.
Every error reads ``at %N: message``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ops.opdef import Caps, OpError, get
from .graph import Graph
from .shape import ShapeError


@dataclass
class VerifyError:
    node: int | None
    message: str

    def __str__(self) -> str:
        return f"at %{self.node}: {self.message}" if self.node is not None else self.message


class GraphVerifyError(ValueError):
    """Raised by ``verify_or_raise``; ``errors`` holds every VerifyError found."""

    def __init__(self, graph: Graph, errors: list):
        self.errors = errors
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"graph @{graph.name} failed verification ({len(errors)} "
                         f"error{'s' if len(errors) != 1 else ''}):\n{lines}")


def verify(graph: Graph, shapes: bool = True) -> list[VerifyError]:
    """All errors in ``graph`` (empty list when it is well formed)."""
    errors: list[VerifyError] = []
    n_nodes = len(graph)
    for node in graph.nodes:
        err = lambda msg, _n=node.id: errors.append(VerifyError(_n, msg))  # noqa: E731
        d = get(node.kind)
        bad_ref = False
        for i in node.inputs:
            if not 0 <= i < n_nodes:
                err(f"input %{i} references non-existent node (graph has {n_nodes} nodes)")
                bad_ref = True
            elif i >= node.id:
                err(f"input %{i} is not before %{node.id}: graph is not a DAG")
                bad_ref = True
        arity_ok = _check_arity(d, node, err)
        if Caps.LEAF in d.caps and node.inputs:
            err(f"{node.kind} is a graph leaf but has {len(node.inputs)} operand(s)")
        for bi, body in enumerate(d.bodies(node.attrs)):
            if Caps.NESTED_BODY in d.caps and not body.outputs:
                err(f"{node.kind} body #{bi} declares no outputs")
            for e in verify(body, shapes):
                err(f"in {node.kind} body #{bi}: {e}")
        if bad_ref or not arity_ok:
            continue
        in_shapes = [graph.nodes[i].shape for i in node.inputs]
        if d.check is not None:
            try:
                d.check(in_shapes, node.attrs, node.shape)
            except (OpError, ShapeError) as e:
                err(str(e))
                continue
        if shapes and d.infer is not None:
            try:
                inferred = d.infer(in_shapes, node.attrs)
            except (OpError, ShapeError) as e:
                err(f"{node.kind}: {e}")
                continue
            if inferred is not None and not shapes_compatible(inferred, node.shape):
                err(f"shape mismatch: declared {node.shape}, inferred {inferred} "
                    f"(from {node.kind} of {', '.join(str(s) for s in in_shapes) or 'no inputs'})")
    for o in graph.outputs:
        if not 0 <= o < n_nodes:
            errors.append(VerifyError(None, f"output %{o} references non-existent node"))
    return errors


def shapes_compatible(a, b) -> bool:
    """Equal, or the same dtype with exactly one element each (RLX: ``[]`` == ``[1]``)."""
    return a == b or (a.dtype == b.dtype and a.numel == 1 and b.numel == 1)


def _check_arity(d, node, err) -> bool:
    n = len(node.inputs)
    if d.arity is None:
        if n < d.min_arity:
            err(f"{node.kind} expects at least {d.min_arity} inputs, got {n}")
            return False
        return True
    if n != d.arity:
        err(f"{node.kind} expects {d.arity} inputs, got {n}")
        return False
    return True


def verify_or_raise(graph: Graph, shapes: bool = True) -> Graph:
    """Verify and raise GraphVerifyError listing every problem; returns the graph."""
    errors = verify(graph, shapes)
    if errors:
        raise GraphVerifyError(graph, errors)
    return graph
