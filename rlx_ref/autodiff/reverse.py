"""Reverse mode: ``grad_with_loss`` and ``grad`` (graph in, graph out), as RLX.

The gradient graph holds a copy of the (prepared) forward graph, so every value a rule
needs is recomputed from the inputs, then the backward nodes. A new Input ``d_output``
with the loss's shape seeds the cotangent (feed ones to differentiate the loss itself).
The walk visits nodes in reverse order; a node's cotangent is the sum of its consumers'
contributions, and only nodes that both depend on a ``wrt`` and reach the loss are
differentiated, so ops off that path need no rule.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.verify import verify_or_raise
from ._build import AutodiffError, add_all, zeros
from .prepare import prepare_for_ad
from .vjp import VjpContext, rule_for

SEED = "d_output"


def _label_wrt(graph: Graph, wrt) -> tuple[Graph, list]:
    """A copy of ``graph`` whose wrt nodes carry unique labels (they survive the prepass's
    rebuilds), and those labels; ``wrt`` holds Input/Param names or node ids."""
    if isinstance(wrt, (str, int)):
        wrt = [wrt]
    g = graph.copy()
    by_name = {n.attrs.name: n.id for n in g.nodes if n.kind in ("Input", "Param")}
    labels = []
    for i, w in enumerate(wrt):
        if isinstance(w, str):
            if w not in by_name:
                raise AutodiffError(f"wrt {w!r} names no Input or Param of @{graph.name}; "
                                    f"it has {sorted(by_name) or 'none'}")
            nid = by_name[w]
        else:
            nid = int(getattr(w, "id", w))
            if not 0 <= nid < len(g.nodes):
                raise AutodiffError(f"wrt %{nid} does not exist in @{graph.name} "
                                    f"({len(g.nodes)} nodes)")
        if not (g.nodes[nid].shape.dtype.is_float or g.nodes[nid].shape.dtype.is_complex):
            raise AutodiffError(f"wrt %{nid} has dtype {g.nodes[nid].shape.dtype}; only "
                                "float and complex values have gradients")
        label = f"__wrt_{i}__"
        g.nodes[nid].name = label
        labels.append((label, nid, graph.nodes[nid].name))
    return g, labels


def _on_path(g: Graph, sources: set, loss: int) -> set:
    """Nodes that depend on a source and reach the loss."""
    down = set(sources)
    for n in g.nodes:
        if any(i in down for i in n.inputs):
            down.add(n.id)
    up, stack = set(), [loss]
    while stack:
        i = stack.pop()
        if i in up:
            continue
        up.add(i)
        stack.extend(g.nodes[i].inputs)
    return down & up


def _differentiable(shape) -> bool:
    return shape.dtype.is_float or shape.dtype.is_complex


def grad_with_loss(graph: Graph, wrt) -> Graph:
    """The gradient graph of ``graph``'s one output: outputs ``[loss, d_wrt...]``.

    ``wrt``: Input/Param names or node ids. Adds the Input ``d_output`` (the loss's
    shape). A wrt the loss does not depend on gets zeros. AutodiffError names the node
    and kind when an op on the path has no rule.
    """
    if len(graph.outputs) != 1:
        raise AutodiffError(f"grad needs a graph with exactly one output (the loss); "
                            f"@{graph.name} has {len(graph.outputs)}")
    if any(n.kind == "Input" and n.attrs.name == SEED for n in graph.nodes):
        raise AutodiffError(f"@{graph.name} already has an Input named {SEED!r}, the name "
                            "the gradient graph gives its seed; rename it")
    labelled, labels = _label_wrt(graph, wrt)
    fwd = prepare_for_ad(labelled)
    where_is = {n.name: n.id for n in fwd.nodes if n.name}
    wrt_ids = [where_is.get(label) for label, _, _ in labels]
    for wid, (_, orig, _) in zip(wrt_ids, labels):
        if wid is None:
            raise AutodiffError(f"wrt %{orig} ({graph.nodes[orig].kind}) does not survive "
                                "the autodiff pre-pass (it is inside an unfused region or a "
                                "decomposed node); differentiate with respect to its inputs")
    loss = fwd.outputs[0]
    if not _differentiable(fwd.nodes[loss].shape):
        raise AutodiffError(f"the loss %{loss} has dtype {fwd.nodes[loss].shape.dtype}; "
                            "only a float or complex output can be differentiated")
    bwd = Graph(f"{graph.name}_grad")
    for n in fwd.nodes:
        bwd.add_node(n.op, n.inputs, n.shape, n.name)
    seed = bwd.input(SEED, fwd.nodes[loss].shape.dims, fwd.nodes[loss].shape.dtype)
    path = frozenset(_on_path(fwd, {i for i in wrt_ids if i is not None}, loss))
    parts: dict = {loss: [seed]}
    for n in reversed(fwd.nodes):
        if n.id not in parts or n.kind in ("Input", "Param", "Constant") or \
                not any(i in path for i in n.inputs):
            continue
        where = f"at %{n.id} ({n.kind})"
        dy = parts[n.id][0] if len(parts[n.id]) == 1 else add_all(bwd, parts[n.id])
        parts[n.id] = [dy]
        ctx = VjpContext(bwd, n, n.inputs, n.id, tuple(fwd.nodes[i].shape for i in n.inputs),
                         where, path)
        got = list(rule_for(n.kind, where)(ctx, dy))
        if len(got) != len(n.inputs):
            raise AutodiffError(f"{where}: its VJP rule gave {len(got)} cotangents for "
                                f"{len(n.inputs)} operands")
        for i, (src, ct) in enumerate(zip(n.inputs, got)):
            if ct is None or src not in path or not _differentiable(fwd.nodes[src].shape):
                continue
            want, have = fwd.nodes[src].shape, bwd.shape(ct)
            if have != want:
                raise AutodiffError(f"{where}: its VJP rule gave operand {i} a cotangent of "
                                    f"{have}, expected {want}")
            parts.setdefault(src, []).append(ct)
    outs = [loss]
    for wid, (label, orig, orig_name) in zip(wrt_ids, labels):
        got = parts.get(wid)
        outs.append(add_all(bwd, got) if got else
                    zeros(bwd, graph.nodes[orig].shape))
    for label, _, orig_name in labels:              # the wrt nodes get their labels back
        for n in bwd.nodes:
            if n.name == label:
                n.name = orig_name
    bwd.set_outputs(outs)
    verify_or_raise(bwd)
    return bwd


def grad(graph: Graph, wrt) -> Graph:
    """``grad_with_loss`` without the loss: outputs ``[d_wrt...]``."""
    g = grad_with_loss(graph, wrt)
    g.set_outputs(g.outputs[1:])
    return g
