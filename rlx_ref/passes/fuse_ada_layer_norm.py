"""RLX's ``FuseAdaLayerNorm``: DiT adaLN-Zero into one AdaLayerNorm, emitted where the
final Add was. Two forms, with ``n`` an affine-free LayerNorm/RmsNorm of x (gamma a
Constant of ones, beta of zeros, each possibly under one Reshape):

- ``Add(Mul(n, Add(1, [Expand] scale)), [Expand] shift)`` (operands in any order);
- the unfuse identity ``Add(Add(n, Mul(n, [Expand] scale)), [Expand] shift)``.

As in RLX: each absorbed intermediate has one reader and is no graph output (``n`` two in
the identity form); the "1" and the unit/zero affine are f32 (or f16) Constants filled
with exactly that value; a broadcast wrapper is an Expand or a Reshape that keeps the
element count and does not lower the rank. Beyond RLX: the norm must normalize the last
axis, a peeled Reshape may only add leading 1s (otherwise the bare tensor would
broadcast along other axes), and the node must pass AdaLayerNorm's rules.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.dtype import DType
from ._fuse import Match, fusion_pass, gated, make_op, use_counts


def _static_numel(s):
    return math.prod(s.dims) if all(isinstance(d, int) for d in s.dims) else None


def _leading_ones_only(inner, outer) -> bool:
    """Right-aligned, ``inner`` and ``outer`` hold the same dims (outer only adds 1s)."""
    a, b = tuple(inner.dims), tuple(outer.dims)
    r = max(len(a), len(b))
    return (1,) * (r - len(a)) + a == (1,) * (r - len(b)) + b


def peel_broadcast(graph, nid: int):
    """``(source, wrapper id)`` through an Expand or a broadcast Reshape."""
    n = graph.nodes[nid]
    if n.kind == "Expand":
        return n.inputs[0], nid
    if n.kind == "Reshape":
        inner = graph.shape(n.inputs[0])
        a, b = _static_numel(inner), _static_numel(n.shape)
        if a is not None and a == b and n.shape.rank >= inner.rank \
                and _leading_ones_only(inner, n.shape):
            return n.inputs[0], nid
    return nid, None


def filled(graph, nid: int, value: float) -> bool:
    """An f32/f16 Constant whose every element is exactly ``value`` (+0.0 for 0)."""
    n = graph.nodes[nid]
    if n.kind != "Constant" or n.shape.dtype not in (DType.F32, DType.F16):
        return False
    raw = bytes(n.attrs.data)
    want = np.array([value], dtype=n.shape.dtype.np).tobytes()
    k = len(want)
    return len(raw) > 0 and len(raw) % k == 0 and \
        all(raw[i:i + k] == want for i in range(0, len(raw), k))


def _peel_reshape(graph, nid: int):
    n = graph.nodes[nid]
    return (n.inputs[0], nid) if n.kind == "Reshape" else (nid, None)


def affine_free_norm(graph, nid: int):
    """``(x, kind, eps, reshape ids)`` for an affine-free last-axis norm node, or None."""
    n = graph.nodes[nid]
    if n.kind not in ("LayerNorm", "RmsNorm") or len(n.inputs) != 3:
        return None
    if n.attrs.axis % max(n.shape.rank, 1) != n.shape.rank - 1:
        return None
    (gamma, rg), (beta, rb) = (_peel_reshape(graph, i) for i in n.inputs[1:])
    if not (filled(graph, gamma, 1.0) and filled(graph, beta, 0.0)):
        return None
    return n.inputs[0], n.kind, n.attrs.eps, tuple(r for r in (rg, rb) if r is not None)


def _one_plus(graph, uses, nid: int):
    """``(scale, expand id, add id)`` for ``Add(1, [Expand] scale)``, or None."""
    n = graph.nodes[nid]
    if n.kind != "Binary" or n.attrs.op != "Add" or uses[nid] != 1:
        return None
    a, b = n.inputs
    for one, other in ((a, b), (b, a)):
        if filled(graph, one, 1.0):
            scale, exp = peel_broadcast(graph, other)
            return scale, exp, nid
    return None


def _single_wrappers(uses, *ids) -> bool:
    return all(i is None or uses[i] == 1 for i in ids)


def _norm_times_mod(graph, uses, norm_id, mod_id, scaled_id):
    norm = affine_free_norm(graph, norm_id)
    if norm is None or uses[norm_id] != 1:
        return None
    hit = _one_plus(graph, uses, mod_id)
    if hit is None:
        return None
    x, kind, eps, reshapes = norm
    scale, scale_exp, one_plus = hit
    # RLX absorbs the affine Reshapes too; one another node still reads must stay
    reshapes = tuple(r for r in reshapes if uses[r] == 1)
    return x, kind, eps, scale, scale_exp, (norm_id, scaled_id, mod_id, one_plus) + reshapes


def _form_a(graph, uses, scaled_id):
    s = graph.nodes[scaled_id]
    if s.kind != "Binary" or s.attrs.op != "Mul":
        return None
    a, b = s.inputs
    return _norm_times_mod(graph, uses, a, b, scaled_id) or \
        _norm_times_mod(graph, uses, b, a, scaled_id)


def _n_plus_n_scale(graph, uses, n_id, ns_id, m_id):
    norm = affine_free_norm(graph, n_id)
    if norm is None or uses[n_id] != 2:
        return None
    ns = graph.nodes[ns_id]
    if ns.kind != "Binary" or ns.attrs.op != "Mul" or uses[ns_id] != 1:
        return None
    p, q = ns.inputs
    if n_id not in (p, q):
        return None
    scale, scale_exp = peel_broadcast(graph, q if p == n_id else p)
    x, kind, eps, _ = norm
    return x, kind, eps, scale, scale_exp, (n_id, ns_id, m_id)


def _form_b(graph, uses, m_id):
    m = graph.nodes[m_id]
    if m.kind != "Binary" or m.attrs.op != "Add":
        return None
    a, b = m.inputs
    return _n_plus_n_scale(graph, uses, a, b, m_id) or \
        _n_plus_n_scale(graph, uses, b, a, m_id)


def _shift_add(graph, uses, out, scaled_id, shift_id, table):
    if uses[scaled_id] != 1:
        return None
    shift, shift_exp = peel_broadcast(graph, shift_id)
    hit = _form_a(graph, uses, scaled_id) or _form_b(graph, uses, scaled_id)
    if hit is None:
        return None
    x, kind, eps, scale, scale_exp, interior = hit
    if not _single_wrappers(uses, scale_exp, shift_exp):
        return None
    op = make_op("AdaLayerNorm", norm=kind, eps=eps)
    if not gated(graph, table, op, (x, scale, shift), out.shape):
        return None
    extra = tuple(i for i in (shift_exp, scale_exp) if i is not None)
    absorbed = tuple(dict.fromkeys(interior + extra))
    return Match(out.id, absorbed, [(op, (x, scale, shift), out.shape)])


def _match(graph, out, uses, table) -> Match | None:
    if out.kind != "Binary" or out.attrs.op != "Add":
        return None
    a, b = out.inputs
    return _shift_add(graph, uses, out, a, b, table) or \
        _shift_add(graph, uses, out, b, a, table)


@fusion_pass("fuse_ada_layer_norm")
def fuse_ada_layer_norm(graph, table) -> list:
    """Matches of ``norm(x)·(1 + scale) + shift`` (and ``n + n·scale + shift``)."""
    uses = use_counts(graph)
    return [m for m in (_match(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["affine_free_norm", "filled", "fuse_ada_layer_norm", "peel_broadcast"]
