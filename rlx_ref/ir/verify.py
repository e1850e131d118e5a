"""The verifier's three layers, as RLX's ``verify.rs``, cheapest first:

1. structure: operands exist and precede their user, arity matches, outputs exist;
2. op-local: the OpDef's ``check`` (leaves take no operands, bodies declare outputs...);
3. shapes: every node's shape is re-inferred and compared with the declared one.

Nested bodies are verified recursively; their errors are prefixed with the body path.
Every error reads ``at %N: message``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ops.codec import payload_problems
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
        payload_bad = _payload_errors(d, node, err)
        for bi, body in enumerate(() if payload_bad else d.bodies(node.attrs)):
            if Caps.NESTED_BODY in d.caps and not body.outputs:
                err(f"{node.kind} body #{bi} declares no outputs")
            for e in verify(body, shapes):
                err(f"in {node.kind} body #{bi}: {e}")
        too_big = _too_big(node.shape, "declared", err)
        if bad_ref or not arity_ok or payload_bad or too_big:
            continue
        in_shapes = [graph.nodes[i].shape for i in node.inputs]
        if d.check is not None:
            try:
                d.check(in_shapes, node.attrs, node.shape)
            except (OpError, ShapeError) as e:
                err(str(e))
                continue
            except _UNEXPECTED as e:     # a rule that did not foresee this payload
                err(f"{node.kind} check failed on this payload: {type(e).__name__}: {e}")
                continue
        if shapes and d.infer is not None:
            try:
                inferred = d.infer(in_shapes, node.attrs)
            except (OpError, ShapeError) as e:
                err(f"{node.kind}: {e}")
                continue
            except _UNEXPECTED as e:
                err(f"{node.kind} shape inference failed: {type(e).__name__}: {e}")
                continue
            if inferred is not None and _too_big(inferred, "inferred", err):
                continue
            if inferred is not None and not shapes_compatible(inferred, node.shape):
                err(f"shape mismatch: declared {node.shape}, inferred {inferred} "
                    f"(from {node.kind} of {', '.join(str(s) for s in in_shapes) or 'no inputs'})")
    for o in graph.outputs:
        if not 0 <= o < n_nodes:
            errors.append(VerifyError(None, f"output %{o} references non-existent node"))
    return errors


# The most elements one tensor may declare: 2**40 (4 TiB of f32) is far past any device
# and any graph RLX builds, yet far below where a dim product or an i64 index overflows.
MAX_ELEMENTS = 2**40

# Errors a family rule may raise on payloads it never expected (a huge int in a numpy
# call, say); the verifier reports them on the node instead of letting them escape.
_UNEXPECTED = (TypeError, ValueError, IndexError, KeyError, OverflowError, ZeroDivisionError,
               AttributeError, MemoryError, RecursionError)


def _payload_errors(d, node, err) -> bool:
    """Report payload values outside their fields' RLX types; True when any was found."""
    if d.attrs is None:
        if node.attrs is not None:
            err(f"{node.kind} takes no payload, got {type(node.attrs).__name__}")
            return True
        return False
    if not isinstance(node.attrs, d.attrs):
        err(f"{node.kind} payload must be {d.attrs.__name__}, got {type(node.attrs).__name__}")
        return True
    problems = payload_problems(node.attrs)
    for p in problems:
        err(f"{p} in {node.kind}'s payload")
    return bool(problems)


def _too_big(shape, which: str, err) -> bool:
    n = shape.numel
    if n is not None and n > MAX_ELEMENTS:
        err(f"{which} shape {_short_shape(shape)} has {n} elements, more than the "
            f"{MAX_ELEMENTS} (2**40) one tensor may hold")
        return True
    return False


def _short_shape(shape) -> str:
    text = str(shape)
    return text if len(text) <= 60 else text[:57] + "..."


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
