"""RLX's ``MarkElementwiseRegions``: maximal chains of elementwise ops → ElementwiseRegion.

Walking the graph in order, a region-fusable node extends the chain of an operand when
that operand is the chain's tail and this node is its only reader (a value read twice, or
a graph output, must materialize); otherwise it starts a chain of its own. As in RLX:

- fusable: Activation and Binary ops in RLX's ``region_fusable`` sets, Compare, Where, and
  Cast to the operand's own dtype; never complex values;
- a node whose operand comes from a FUSION_BOUNDARY op (BLAS, ...) starts a new chain;
- caps: at most ``max_elementwise_steps`` steps and ``max_elementwise_inputs`` distinct
  external inputs; a chain at a cap ends and the next node starts a new one (RLX drops a
  region over the input cap instead of cutting it);
- chains of at least ``min_ops`` steps become one region, emitted where the tail was.

Broadcast is by suffix/modulus only: every operand of a member must be a trailing block of
the member's result (leading 1s dropped), so reading element ``gid % numel`` is what numpy
broadcasting reads (the ElementwiseRegion's C5; RLX accepts any divisor, which is wrong
for e.g. [3, 1] over [3, 4]). Regions are formed only for dtypes the backend claims
ElementwiseRegion for (every step's dtype). Bodies are fused recursively.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..ir.graph import Graph, Op
from ..ops.elementwise import ACTIVATIONS
from ..ops.opdef import Caps, OpError, get
from ..ops.region import Input, Step, activation, binary, cast, compare, encode_region, where
from ..runtime.options import FusionOptions
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies

# RLX's Activation::region_fusable / BinaryOp::region_fusable (rlx-ir op.rs): the ops its
# region kernels carry opcodes for.
NOT_REGION_FUSABLE_ACTIVATIONS = frozenset({
    "Floor", "Ceil", "Sign", "Softplus", "Elu", "Erf", "HardSwish", "HardSigmoid", "Mish",
    "Softsign", "LogSigmoid"})
REGION_FUSABLE_ACTIVATIONS = frozenset(ACTIVATIONS) - NOT_REGION_FUSABLE_ACTIVATIONS
REGION_FUSABLE_BINARIES = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"})


def trailing_block(dims: tuple, out: tuple) -> bool:
    """``dims`` without leading 1s equal the last dims of ``out``."""
    core = list(dims)
    while core and core[0] == 1:
        core.pop(0)
    return len(core) <= len(out) and tuple(core) == tuple(out[len(out) - len(core):])


def region_fusable(node, graph: Graph) -> bool:
    """May ``node`` be a step of an ElementwiseRegion (kind, sub-op, dtypes, shapes)?"""
    kind, a = node.kind, node.attrs
    if kind == "Activation":
        ok = a.op in REGION_FUSABLE_ACTIVATIONS
    elif kind == "Binary":
        ok = a.op in REGION_FUSABLE_BINARIES
    elif kind == "Cast":
        ok = a.to == graph.shape(node.inputs[0]).dtype
    else:
        ok = kind in ("Compare", "Where")
    if not ok or not node.shape.is_static:
        return False
    shapes = [graph.shape(i) for i in node.inputs]
    if node.shape.dtype.is_complex or any(s.dtype.is_complex for s in shapes):
        return False
    return all(s.is_static and trailing_block(s.dims, node.shape.dims) for s in shapes)


@dataclass
class Chain:
    """A run of nodes, each reading the previous one; ``externals`` in first-read order."""

    members: list = field(default_factory=list)
    externals: dict = field(default_factory=dict)

    def externals_with(self, node) -> dict:
        ext = dict(self.externals)
        for i in node.inputs:
            if i not in self.members:
                ext.setdefault(i, None)
        return ext


def _boundary(graph: Graph, node) -> bool:
    return any(Caps.FUSION_BOUNDARY in get(graph.nodes[i].kind).caps for i in node.inputs)


def find_chains(graph: Graph, opts: FusionOptions, table: SupportTable) -> list[Chain]:
    """The chains (``min_ops`` steps or more) that become regions."""
    uses = Counter(i for n in graph.nodes for i in n.inputs)
    uses.update(graph.outputs)
    chain_of: dict[int, Chain] = {}
    chains: list[Chain] = []
    for node in graph.nodes:
        if not (region_fusable(node, graph)
                and table.supports("ElementwiseRegion", node.shape.dtype)):
            continue
        parents = {id(chain_of[i]): chain_of[i] for i in node.inputs if i in chain_of}
        extend = None
        if len(parents) == 1 and not _boundary(graph, node) and all(
                uses[i] == 1 for i in node.inputs if i in chain_of):
            extend = next(iter(parents.values()))
            ext = extend.externals_with(node)
            if len(extend.members) >= opts.max_elementwise_steps or \
                    len(ext) > opts.max_elementwise_inputs:
                extend = None
        if extend is None:
            extend = Chain()
            chains.append(extend)
        extend.externals = extend.externals_with(node)
        extend.members.append(node.id)
        chain_of[node.id] = extend
    return [c for c in chains if len(c.members) >= opts.min_ops]


def _step(node, operand) -> tuple:
    a, ins = node.attrs, [operand(i) for i in node.inputs]
    if node.kind == "Activation":
        return activation(a.op, ins[0])
    if node.kind == "Cast":
        return cast(a.to, ins[0])
    if node.kind == "Binary":
        return binary(a.op, *ins)
    if node.kind == "Compare":
        return compare(a.op, *ins)
    return where(*ins)


def region_op(graph: Graph, chain: Chain) -> Op | None:
    """The ElementwiseRegion op computing ``chain`` (None if the region check refuses it)."""
    pos = {m: k for k, m in enumerate(chain.members)}
    ext = {e: k for k, e in enumerate(chain.externals)}
    steps = [_step(graph.nodes[m], lambda i: Step(pos[i]) if i in pos else Input(ext[i]))
             for m in chain.members]
    shapes = [graph.shape(e) for e in chain.externals]
    tail = graph.nodes[chain.members[-1]]
    try:
        attrs = encode_region(steps, shapes, tail.shape)
        d = get("ElementwiseRegion")
        d.check(shapes, attrs, tail.shape)
        if d.infer(shapes, attrs) != tail.shape:
            return None
    except OpError:
        return None
    return Op("ElementwiseRegion", attrs)


def _fuse(graph: Graph, opts: FusionOptions, table: SupportTable, log) -> Graph:
    regions = {}        # tail id -> (chain, op)
    for chain in find_chains(graph, opts, table):
        op = region_op(graph, chain)
        if op is not None:
            regions[chain.members[-1]] = (chain, op)
    inner = {m for chain, _ in regions.values() for m in chain.members[:-1]}
    rb = Rebuilder(graph)
    changed = bool(regions)
    for node in graph.nodes:
        if node.id in inner:
            continue            # read only by the next member: lives inside the region
        if node.id in regions:
            chain, op = regions[node.id]
            rb.map(node.id, rb.new.add_node(op, [rb.ids[e] for e in chain.externals],
                                            node.shape, node.name, node.origin))
            if log is not None:
                kinds = [graph.nodes[m].kind for m in chain.members]
                for k in set(kinds):
                    log.made(["ElementwiseRegion"], k)
                    log.rewrote(k, "fused into ElementwiseRegion")
                log.note("mark_elementwise_regions",
                         f"@{graph.name} %{chain.members[0]}..%{node.id}: {len(kinds)} steps "
                         f"({', '.join(kinds)}), {len(chain.externals)} inputs")
            continue
        op = with_bodies(node, lambda body: _fuse(body, opts, table, log))
        changed |= op is not node.op
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("mark_elementwise_regions")
def fuse_elementwise(graph: Graph, options: FusionOptions | None = None,
                     supported: SupportTable | None = None,
                     log: PassLog | None = None) -> Graph:
    """``graph`` with its elementwise chains fused into ElementwiseRegion nodes."""
    opts = options or FusionOptions()
    if not opts.enable:
        return graph
    return _fuse(graph, opts, supported or SupportTable(None), log)


__all__ = [
    "NOT_REGION_FUSABLE_ACTIVATIONS",
    "REGION_FUSABLE_ACTIVATIONS",
    "REGION_FUSABLE_BINARIES",
    "find_chains",
    "fuse_elementwise",
    "region_fusable",
    "region_op",
    "trailing_block",
]
