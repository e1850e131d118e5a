"""RLX's ``FuseAttentionBlock`` and ``FuseTransformerLayer``: BERT-style blocks, read in
the shape the earlier fusions leave them in, into one fused node each.

``fuse_attention_block``: ``FusedMatMulBiasAct(hidden, qkv_w, qkv_b)`` (no activation)
→ three last-axis Narrows at 0, H·D, 2·H·D of width H·D → Attention (Custom mask, no
score_scale, no softcap, V as wide as K) → ``FusedMatMulBiasAct(·, out_w, out_b)`` (no
activation) becomes ``FusedAttentionBlock{has_bias, no rope}(hidden, qkv_w, out_w, mask,
qkv_b, out_b)``, emitted where the output projection was. Each Narrow and the Attention
have one reader, the QKV product exactly three. As RLX, the pass runs only when some
rank >= 2 Input has ``dims[0]·dims[1] <= RLX_FUSE_ATTN_THRESHOLD`` (64).

``fuse_transformer_layer``: FusedAttentionBlock → ``FusedResidualLN(attn, hidden)`` (h1,
read twice) → ``FusedMatMulBiasAct(h1, fc1_w, fc1_b, act)`` → ``FusedMatMulBiasAct(·,
fc2_w, fc2_b)`` → ``FusedResidualLN(ffn, h1)`` becomes the 14-operand
FusedTransformerLayer (``has_bias``), emitted where the last norm was; same size gate.
"""
from __future__ import annotations


from ..env_registry import get
from ._fuse import Match, fusion_pass, gated, make_op, sole_reader, use_counts

DEFAULT_THRESHOLD = 64          # RLX_FUSE_ATTN_THRESHOLD's default (rlx_ref/_env_vars.py)


def small_enough(graph) -> bool:
    """RLX's ``should_fuse``: an Input of rank >= 2 with static ``d0·d1 <= threshold``."""
    limit = get("RLX_FUSE_ATTN_THRESHOLD")
    for n in graph.nodes:
        if n.kind == "Input" and n.shape.rank >= 2:
            d0, d1 = n.shape.dims[:2]
            if isinstance(d0, int) and isinstance(d1, int) and d0 * d1 <= limit:
                return True
    return False


def _mm_bias(node, activation=False):
    """``(x, w, bias[, act])`` of a FusedMatMulBiasAct without (with) an activation."""
    if node.kind != "FusedMatMulBiasAct" or len(node.inputs) != 3:
        return None
    act = node.attrs.activation
    if activation:
        return (*node.inputs, act) if act is not None else None
    return tuple(node.inputs) if act is None else None


def _sole_reader(graph, uses, nid):
    reader = sole_reader(graph, uses, nid)
    return None if reader is None else reader.id


def _block(graph, node, uses, table) -> Match | None:
    a = node.attrs
    if node.kind != "Attention" or a.mask_kind != "Custom" or a.score_scale is not None \
            or a.attn_logit_softcap is not None or len(node.inputs) != 4 \
            or (a.v_head_dim is not None and a.v_head_dim != a.head_dim):
        return None
    q, k, v, mask = node.inputs
    narrows = [graph.nodes[i] for i in (q, k, v)]
    if any(n.kind != "Narrow" for n in narrows) or len({n.inputs[0] for n in narrows}) != 1:
        return None
    qkv = narrows[0].inputs[0]
    h = a.num_heads * a.head_dim
    last = graph.shape(qkv).rank - 1
    for i, n in enumerate(narrows):
        if n.attrs.axis % (last + 1) != last or n.attrs.len != h or n.attrs.start != i * h:
            return None
        if uses[n.id] != 1:
            return None
    proj = _mm_bias(graph.nodes[qkv])
    if proj is None or uses[qkv] != 3:
        return None
    out_id = _sole_reader(graph, uses, node.id)
    if out_id is None:
        return None
    out = _mm_bias(graph.nodes[out_id])
    if out is None or out[0] != node.id:
        return None
    hidden, qkv_w, qkv_b = proj
    op = make_op("FusedAttentionBlock", num_heads=a.num_heads, head_dim=a.head_dim,
                 has_bias=True, has_rope=False)
    operands = (hidden, qkv_w, out[1], mask, qkv_b, out[2])
    shape = graph.nodes[out_id].shape
    if not gated(graph, table, op, operands, shape):
        return None
    return Match(out_id, (qkv, q, k, v, node.id), [(op, operands, shape)])


@fusion_pass("fuse_attention_block")
def fuse_attention_block(graph, table) -> list:
    """Matches of ``FMBA(qkv) → Narrow×3 → Attention(Custom) → FMBA(out)``."""
    if not small_enough(graph):
        return []
    uses = use_counts(graph)
    return [m for m in (_block(graph, n, uses, table) for n in graph.nodes) if m]


def _res_ln(node):
    """``(x, residual, gamma, beta, eps)`` of a bias-free FusedResidualLN."""
    if node.kind != "FusedResidualLN" or node.attrs.has_bias or len(node.inputs) != 4:
        return None
    return (*node.inputs, node.attrs.eps)


def _layer(graph, node, uses, table) -> Match | None:
    if node.kind != "FusedAttentionBlock" or not node.attrs.has_bias or node.attrs.has_rope \
            or len(node.inputs) != 6:
        return None
    hidden, qkv_w, out_w, mask, qkv_b, out_b = node.inputs
    ln1_id = _sole_reader(graph, uses, node.id)
    ln1 = _res_ln(graph.nodes[ln1_id]) if ln1_id is not None else None
    if ln1 is None or ln1[0] != node.id or ln1[1] != hidden or uses[ln1_id] != 2:
        return None
    fc1_id = ln2_id = None
    for r in graph.users(ln1_id):
        rn = graph.nodes[r]
        if _mm_bias(rn, activation=True) and rn.inputs[0] == ln1_id:
            fc1_id = r
        elif _res_ln(rn) and rn.inputs[1] == ln1_id:
            ln2_id = r
    if fc1_id is None or ln2_id is None:
        return None
    _, fc1_w, fc1_b, act = _mm_bias(graph.nodes[fc1_id], activation=True)
    fc2_id = _sole_reader(graph, uses, fc1_id)
    fc2 = _mm_bias(graph.nodes[fc2_id]) if fc2_id is not None else None
    if fc2 is None or fc2[0] != fc1_id or uses[fc2_id] != 1:
        return None
    ln2 = _res_ln(graph.nodes[ln2_id])
    if ln2[0] != fc2_id or ln2[1] != ln1_id:
        return None
    w1 = graph.shape(fc1_w)
    if w1.rank != 2 or not isinstance(w1.dims[-1], int):
        return None
    op = make_op("FusedTransformerLayer", num_heads=node.attrs.num_heads,
                 head_dim=node.attrs.head_dim, intermediate_size=w1.dims[-1], eps1=ln1[4],
                 eps2=ln2[4], activation=act, has_bias=True)
    operands = (hidden, qkv_w, qkv_b, out_w, out_b, ln1[2], ln1[3], fc1_w, fc1_b, fc2[1],
                fc2[2], ln2[2], ln2[3], mask)
    shape = graph.nodes[ln2_id].shape
    if not gated(graph, table, op, operands, shape):
        return None
    return Match(ln2_id, (node.id, ln1_id, fc1_id, fc2_id), [(op, operands, shape)])


@fusion_pass("fuse_transformer_layer")
def fuse_transformer_layer(graph, table) -> list:
    """Matches of a post-norm BERT layer made of the earlier fused kinds."""
    if not small_enough(graph):
        return []
    uses = use_counts(graph)
    return [m for m in (_layer(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["DEFAULT_THRESHOLD", "fuse_attention_block", "fuse_transformer_layer",
           "small_enough"]
