"""RLX's FKL-style region passes (``fk_fusion.rs``), run by name (RLX runs them only with
its ``fk_fusion`` option, which rlx_ref's pipeline does not have):

- ``mark_transform_regions``: a chain of ResizeNearest2x, each but the first reading the
  previous one, which is read only by it, becomes one TransformRegion at the chain's
  tail; a resize that is the prologue candidate of a region (or unary op) is skipped.
  RLX rescans from every chain member and keys chains by their tail, so a later, shorter
  chain overwrites the longer one (a 3-resize chain ends as two resizes and a 1-step
  region); here the first, longest chain is kept;
- ``fuse_region_prologue``: a ResizeNearest2x read only by a prologue-free
  ElementwiseRegion (or by a unary Activation / same-dtype Cast) moves into that region
  as its ``ResizeNearest2x`` prologue on input 0 (the inputs, chain operands, scalar mask
  and moduli are swapped when the resize was another input);
- ``mark_batch_slice_regions``: a Concat on axis 0 of two or more identical unary ops,
  each read once and reading a Narrow on axis 0 of one tensor, turns each unary op into a
  one-step ElementwiseRegion;
- ``fuse_batch_preprocess``: one-input ElementwiseRegions with one signature reading
  axis-0 Narrows of one tensor, all read only by one Concat on axis 0 of exactly them,
  become one BatchElementwiseRegion over the Narrows (sorted by start).

A table (``supported``) that does not claim the kind a pass creates leaves the graph
alone; every created node must pass its kind's rules and reproduce the shape it replaces.
"""
from __future__ import annotations

from ..ir.graph import Op
from ._fuse import Match, fits, fusion_pass, use_counts

RESIZE = "ResizeNearest2x"


def _claimed(graph, table, op, operands, shape) -> bool:
    return table.supports(op.kind, shape.dtype) and fits(graph, op, operands, shape)


def _unary_step(graph, node):
    """The one-step chain of a unary Activation or same-dtype Cast reading Input(0)."""
    if len(node.inputs) != 1:
        return None
    if node.kind == "Activation":
        return ("Activation", (node.attrs.op, ("Input", 0)))
    if node.kind == "Cast" and node.attrs.to == graph.shape(node.inputs[0]).dtype:
        return ("Cast", (node.attrs.to, ("Input", 0)))
    return None


def _sole_reader(graph, nid):
    return next((n for n in graph.nodes if nid in n.inputs), None)


def _prologue_candidate(graph, rid, uses) -> bool:
    if uses[rid] != 1:
        return False
    reader = _sole_reader(graph, rid)
    if reader is None:
        return False
    if reader.kind == "ElementwiseRegion" and reader.attrs.prologue == "None":
        return True
    return list(reader.inputs) == [rid] and _unary_step(graph, reader) is not None


@fusion_pass("mark_transform_regions")
def mark_transform_regions(graph, table) -> list:
    """Maximal single-reader ResizeNearest2x chains."""
    uses = use_counts(graph)
    found = []
    for node in graph.nodes:
        if node.kind != RESIZE or _prologue_candidate(graph, node.id, uses):
            continue
        members, cur = [node.id], node
        while uses[cur.id] == 1:
            nxt = next((n for n in graph.nodes
                        if list(n.inputs) == [cur.id] and n.kind == RESIZE), None)
            if nxt is None or uses[nxt.id] != 1 or _prologue_candidate(graph, nxt.id, uses):
                break
            members.append(nxt.id)
            cur = nxt
        tail = graph.nodes[members[-1]]
        op = Op("TransformRegion", _transform_attrs(len(members)))
        if _claimed(graph, table, op, (node.inputs[0],), tail.shape):
            found.append(Match(tail.id, tuple(members[:-1]),
                               [(op, (node.inputs[0],), tail.shape)]))
    return found


def _transform_attrs(n: int):
    from ..ops.region_batch import TransformRegionAttrs

    return TransformRegionAttrs(((RESIZE, ("Input", 0)),) * n, 1)


def _swap_operand(o, a: int, b: int):
    if o[0] == "Input" and o[1] in (a, b):
        return ("Input", b if o[1] == a else a)
    return o


def _swap_step(step, a: int, b: int):
    kind, (head, *rest) = step
    if kind in ("Activation", "Cast"):
        return kind, (head, _swap_operand(rest[0], a, b))
    if kind == "Where":
        return kind, tuple(_swap_operand(o, a, b) for o in (head, *rest))
    return kind, (head,) + tuple(_swap_operand(o, a, b) for o in rest)


def _with_prologue(attrs, slot: int):
    """``attrs`` with inputs 0 and ``slot`` swapped and the resize prologue on input 0."""
    chain, mask, modulus = attrs.chain, attrs.scalar_input_mask, list(attrs.input_modulus)
    if slot:
        chain = tuple(_swap_step(s, 0, slot) for s in chain)
        bit0, bits = mask & 1, (mask >> slot) & 1
        mask = (mask & ~(1 | 1 << slot)) | bits | bit0 << slot
        modulus[0], modulus[slot] = modulus[slot], modulus[0]
    return type(attrs)(chain, attrs.num_inputs, mask, tuple(modulus), RESIZE, 0)


def _prologue_match(graph, node, uses, table):
    from ..ops.region import ElementwiseRegionAttrs

    if node.kind == "ElementwiseRegion":
        if node.attrs.prologue != "None" or not node.inputs:
            return None
        slot = next((i for i, r in enumerate(node.inputs)
                     if graph.nodes[r].kind == RESIZE and uses[r] == 1), None)
        if slot is None:
            return None
        attrs, inputs = _with_prologue(node.attrs, slot), list(node.inputs)
        inputs[0], inputs[slot] = inputs[slot], inputs[0]
    else:
        step = _unary_step(graph, node)
        if step is None or graph.nodes[node.inputs[0]].kind != RESIZE \
                or uses[node.inputs[0]] != 1:
            return None
        attrs = ElementwiseRegionAttrs((step,), 1, 0, (0,) * 16, RESIZE, 0)
        inputs = list(node.inputs)
    resize = inputs[0]
    inputs[0] = graph.nodes[resize].inputs[0]
    op = Op("ElementwiseRegion", attrs)
    if not _claimed(graph, table, op, inputs, node.shape):
        return None
    return Match(node.id, (resize,), [(op, tuple(inputs), node.shape)])


@fusion_pass("fuse_region_prologue")
def fuse_region_prologue(graph, table) -> list:
    """Single-reader resizes folded into their region (or unary op) as its prologue."""
    uses = use_counts(graph)
    return [m for m in (_prologue_match(graph, n, uses, table) for n in graph.nodes) if m]


def _batch_slice(graph, nid):
    """``(parent, start)`` of an axis-0 Narrow, else None."""
    n = graph.nodes[nid]
    if n.kind != "Narrow" or n.attrs.axis != 0:
        return None
    return n.inputs[0], n.attrs.start


@fusion_pass("mark_batch_slice_regions")
def mark_batch_slice_regions(graph, table) -> list:
    """Identical unary ops on axis-0 batch slices feeding one Concat, as regions."""
    from ..ops.region import ElementwiseRegionAttrs

    uses = use_counts(graph)
    found = []
    for node in graph.nodes:
        if node.kind != "Concat" or node.attrs.axis != 0 or len(node.inputs) < 2:
            continue
        plan, parent, template = [], None, None
        for i in node.inputs:
            u = graph.nodes[i]
            step = _unary_step(graph, u)
            sl = _batch_slice(graph, u.inputs[0]) if step and uses[i] == 1 else None
            if sl is None or (parent is not None and sl[0] != parent) \
                    or (template is not None and step != template):
                plan = []
                break
            parent, template = sl[0], step
            plan.append(u)
        if len(plan) < 2:
            continue
        attrs = ElementwiseRegionAttrs((template,), 1, 0, (0,) * 16, "None", 0)
        op = Op("ElementwiseRegion", attrs)
        for u in plan:
            if _claimed(graph, table, op, u.inputs, u.shape):
                found.append(Match(u.id, (), [(op, tuple(u.inputs), u.shape)]))
    return found


def _signature(a):
    return len(a.chain), a.num_inputs, a.scalar_input_mask, a.prologue, a.input_modulus


@fusion_pass("fuse_batch_preprocess")
def fuse_batch_preprocess(graph, table) -> list:
    """Same-signature regions on batch slices of one tensor, joined by one Concat."""
    from ..ops.region_batch import BatchElementwiseRegionAttrs

    uses = use_counts(graph)
    groups: dict = {}
    for n in graph.nodes:
        if n.kind == "ElementwiseRegion" and len(n.inputs) == 1:
            sl = _batch_slice(graph, n.inputs[0])
            if sl is not None:
                groups.setdefault((_signature(n.attrs), sl[0]), []).append((sl[1], n.id))
    found = []
    for entries in groups.values():
        if len(entries) < 2:
            continue
        ids = [i for _, i in sorted(entries)]
        readers = [graph.users(i) for i in ids]
        # RLX counts node readers only; a region the graph also returns must stay
        if any(len(r) != 1 or uses[i] != 1 for r, i in zip(readers, ids)) \
                or len({r[0] for r in readers}) != 1:
            continue
        concat = graph.nodes[readers[0][0]]
        if concat.kind != "Concat" or concat.attrs.axis != 0 \
                or len(concat.inputs) != len(ids) or set(concat.inputs) != set(ids):
            continue
        t = graph.nodes[ids[0]].attrs
        op = Op("BatchElementwiseRegion", BatchElementwiseRegionAttrs(
            t.chain, len(ids), t.scalar_input_mask, t.input_modulus, t.prologue, 0))
        narrows = tuple(graph.nodes[i].inputs[0] for i in ids)
        if _claimed(graph, table, op, narrows, concat.shape):
            # emitted where the first slice's region was, as RLX does
            found.append(Match(ids[0], tuple(ids[1:]) + (concat.id,),
                               [(op, narrows, concat.shape)]))
    return found


__all__ = ["fuse_batch_preprocess", "fuse_region_prologue", "mark_batch_slice_regions",
           "mark_transform_regions"]
