"""Small diagrams of layout-heavy ops for the op pages, drawn from the oracle itself.

Each diagram runs the op on probe inputs (one-hot lanes, distinct values, zero scores) and
draws what came out: which keys a query sees, which lanes Rope pairs, which inputs a
convolution output reads. So a picture cannot drift from the semantics it shows.
"""
from __future__ import annotations

import numpy as np

from .svg import INK, PALETTE, Svg

CELL = 22.0
F = np.float32


def run_op(kind: str, attrs, *arrays, out=None) -> np.ndarray:
    """One op on the oracle (float64 mode off: the op's own dtype)."""
    from ..ops.single import run_single

    return np.asarray(run_single(kind, attrs, *[np.asarray(a) for a in arrays], out=out))


def _grid(s: Svg, x0, y0, rows, cols, fill_of, text_of=None, size=CELL) -> None:
    for r in range(rows):
        for c in range(cols):
            s.rect(x0 + c * size, y0 + r * size, size, size, fill=fill_of(r, c),
                   stroke="#495057", width=0.8)
            t = text_of(r, c) if text_of else ""
            if t:
                s.text(x0 + (c + 0.5) * size, y0 + (r + 0.5) * size + 3, t, size=8)


# ── Attention ─────────────────────────────────────────────────────────────

def visible_keys(mask_kind, s_q: int, s_k: int) -> np.ndarray:
    """bool [s_q, s_k]: the keys each query weighs, from the oracle (equal scores, V = I:
    the output row is the query's weights)."""
    from ..ops.attention import AttentionAttrs

    q, k = np.zeros((s_q, 2), F), np.zeros((s_k, 2), F)
    w = run_op("Attention", AttentionAttrs(1, 2, s_k, mask_kind), q, k, np.eye(s_k, dtype=F))
    return w > 1e-6


def kv_head_of(num_heads: int, kv_heads: int) -> list:
    """The K/V head each query head reads (GQA), from the oracle: V head j holds j."""
    from ..ops.attention import AttentionAttrs

    q, k = np.zeros((1, num_heads, 1, 2), F), np.zeros((1, kv_heads, 1, 2), F)
    v = np.arange(kv_heads, dtype=F).reshape(1, kv_heads, 1, 1)
    out = run_op("Attention", AttentionAttrs(num_heads, 2, 1), q, k, v)
    return [int(round(float(x))) for x in out.reshape(-1)]


def attention_layouts() -> str:
    """Memory order of the two rank-4 layouts (packed forms share [B, S, H, D]) and the
    GQA head mapping."""
    H, S, D = 2, 3, 2
    s = Svg(350, 215, "Attention layouts: element order in memory and GQA head sharing")
    s.text(10, 16, "Attention: memory order for B = 1, H = 2 heads, S = 3, D = 2",
           size=11, anchor="start", weight="bold")
    orders = (("[B, H, S, D] (Q's axis 1 = num_heads)", ("h", "s", "d")),
              ("[B, S, H, D] = packed [B, S, H·D] = [S, H·D]", ("s", "h", "d")))
    for row, (title, order) in enumerate(orders):
        y = 40 + row * 56
        s.text(10, y - 6, title, size=9, anchor="start")
        coords = [dict(zip(order, idx)) for idx in np.ndindex(
            *[{"h": H, "s": S, "d": D}[a] for a in order])]
        for p, c in enumerate(coords):
            shade = ("#d0ebff", "#a5d8ff", "#74c0fc")[c["s"]] if c["h"] == 0 else \
                ("#ffe8cc", "#ffd8a8", "#ffc078")[c["s"]]
            s.rect(10 + p * 24, y, 24, 24, fill=shade, stroke="#495057", width=0.8)
            s.text(22 + p * 24, y + 11, f"h{c['h']}", size=7)
            s.text(22 + p * 24, y + 20, f"s{c['s']}d{c['d']}", size=7)
    heads, kv = 4, 2
    mapping = kv_head_of(heads, kv)
    y = 160
    s.text(10, y - 12, f"GQA: {heads} query heads share {kv} K/V heads (h reads h // "
                       f"{heads // kv})", size=9, anchor="start")
    per = heads // kv
    for h in range(heads):
        s.rect(10 + h * 40, y, 30, 18, fill="#e7f5ff", stroke="#1c7ed6")
        s.text(25 + h * 40, y + 12, f"q{h}", size=8)
        j = mapping[h]
        s.line(25 + h * 40, y + 18, 25 + (j * per + (per - 1) / 2) * 40, y + 30,
               stroke=PALETTE[j], arrow=True)
    for j in range(kv):
        x = 10 + (j * per + (per - 1) / 2) * 40
        s.rect(x, y + 30, 30, 18, fill="#fff4e6", stroke="#e8590c")
        s.text(x + 15, y + 42, f"kv{j}", size=8)
    return s.text_doc()


def attention_masks() -> str:
    """Which keys each query sees under each mask kind (S_q = 3 queries, S_k = 5 keys:
    queries are aligned to the end of the keys)."""
    kinds = (("None", "None"), ("Causal", "Causal"),
             ("SlidingWindow(1)", ("SlidingWindow", 1)))
    s_q, s_k = 3, 5
    s = Svg(470, 150, "Attention mask kinds: the keys each query weighs")
    s.text(10, 16, f"Attention masks: S_q = {s_q} queries (rows), S_k = {s_k} keys (columns)",
           size=11, anchor="start", weight="bold")
    for i, (name, kind) in enumerate(kinds):
        vis = visible_keys(kind, s_q, s_k)
        x0 = 30 + i * 150
        s.text(x0 + s_k * CELL / 2, 40, name, size=9)
        _grid(s, x0, 48, s_q, s_k, lambda r, c, v=vis: "#4dabf7" if v[r, c] else "#f1f3f5")
        for r in range(s_q):
            s.text(x0 - 4, 48 + (r + 0.5) * CELL + 3, f"q{r}", size=7, anchor="end")
    s.text(10, 138, "blue: weighed (softmax over these keys); grey: hidden", size=8,
           anchor="start", fill="#495057")
    return s.text_doc()


# ── Rope ──────────────────────────────────────────────────────────────────

def rope_partners(style: str, head_dim: int, n_rot: int) -> list:
    """For each lane: (partner lane, frequency index) or None for a pass-through lane,
    from the oracle (cos = 0, sin[i] = i + 1: a one-hot lane lands on its partner
    scaled by its pair's sin)."""
    from ..ops.attention import RopeAttrs

    half = n_rot // 2
    cos = np.zeros((1, half), F)
    sin = np.arange(1, half + 1, dtype=F).reshape(1, half)
    out = []
    for j in range(head_dim):
        x = np.zeros((1, head_dim), F)
        x[0, j] = 1
        y = run_op("Rope", RopeAttrs(head_dim, n_rot, style), x, cos, sin)[0]
        if y[j] != 0:
            out.append(None)
            continue
        p = int(np.argmax(np.abs(y)))
        out.append((p, int(round(abs(float(y[p])))) - 1))
    return out


def rope_pairs() -> str:
    """Lane pairs of NeoX and GptJ rotation for head_dim = 8, n_rot = 6."""
    head_dim, n_rot = 8, 6
    s = Svg(520, 190, "Rope pairings: NeoX and GptJ")
    s.text(10, 16, f"Rope: which lanes rotate together (head_dim = {head_dim}, n_rot = "
                   f"{n_rot}); pair i uses cos[row, i], sin[row, i]", size=10,
           anchor="start", weight="bold")
    for row, style in enumerate(("NeoX", "GptJ")):
        y = 60 + row * 70
        s.text(10, y + 14, style, size=10, anchor="start", weight="bold")
        partners = rope_partners(style, head_dim, n_rot)
        x0 = 60
        for j, pr in enumerate(partners):
            fill = "#f1f3f5" if pr is None else ("#d0ebff", "#d3f9d8", "#ffe8cc")[pr[1] % 3]
            s.rect(x0 + j * 40, y, 32, 20, fill=fill, stroke="#495057", width=0.8)
            s.text(x0 + j * 40 + 16, y + 13, f"x{j}", size=8)
            if pr is not None and pr[0] > j:
                a, b = x0 + j * 40 + 16, x0 + pr[0] * 40 + 16
                s.path(f"M{a},{y} C{a},{y - 22} {b},{y - 22} {b},{y}",
                       stroke=PALETTE[pr[1] % 3], width=1.2)
                s.text((a + b) / 2, y - 17, f"i={pr[1]}", size=7)
        s.text(x0 + head_dim * 40 + 4, y + 13, "grey: passes through", size=7,
               anchor="start", fill="#495057")
    return s.text_doc()


# ── Conv ──────────────────────────────────────────────────────────────────

def receptive_field(size: int, k: int, stride: int, pad: int, dil: int, o: tuple) -> set:
    """Input cells (r, c) that output ``o`` reads, from the oracle: a one-hot input through
    an all-ones kernel reaches exactly the outputs whose window covers it."""
    from ..ops.conv import ConvAttrs

    attrs = ConvAttrs((k, k), (stride, stride), (pad, pad), (dil, dil))
    w = np.ones((1, 1, k, k), F)
    cells = set()
    for r in range(size):
        for c in range(size):
            x = np.zeros((1, 1, size, size), F)
            x[0, 0, r, c] = 1
            if run_op("Conv", attrs, x, w)[0, 0][o] != 0:
                cells.add((r, c))
    return cells


def conv_taps(k: int, stride: int, pad: int, dil: int, o: tuple) -> list:
    """Kernel tap positions of output ``o`` in padded-input coordinates (the formula
    ``o·stride + tap·dilation``)."""
    return [(o[0] * stride + a * dil, o[1] * stride + b * dil)
            for a in range(k) for b in range(k)]


def conv_geometry() -> str:
    """Two geometries on a 5x5 input: the taps of two outputs, padding shaded."""
    size, k = 5, 3
    cases = ((1, 1, 1), (2, 1, 2))
    s = Svg(600, 250, "Conv geometry: kernel taps over a padded input")
    s.text(10, 16, "Conv: which inputs an output reads (5×5 input, 3×3 kernel; shaded: "
                   "padding)", size=11, anchor="start", weight="bold")
    for i, (stride, pad, dil) in enumerate(cases):
        n_out = (size + 2 * pad - dil * (k - 1) - 1) // stride + 1
        x0, y0 = 20 + i * 300, 56
        s.text(x0, 40, f"stride {stride}, padding {pad}, dilation {dil} → {n_out}×{n_out} "
                       "output", size=9, anchor="start")
        full = size + 2 * pad
        outs = ((0, 0), (n_out - 1, n_out - 1))
        fields = [receptive_field(size, k, stride, pad, dil, o) for o in outs]
        taps = [set(conv_taps(k, stride, pad, dil, o)) for o in outs]

        def fill(r, c, fields=fields, pad=pad):
            inside = pad <= r < pad + size and pad <= c < pad + size
            hits = [j for j, f in enumerate(fields) if (r - pad, c - pad) in f]
            if hits:
                return "#a5d8ff" if hits == [0] else ("#ffd8a8" if hits == [1] else "#d0bfff")
            return "#ffffff" if inside else "#dee2e6"
        _grid(s, x0, y0, full, full, fill)
        for j, t in enumerate(taps):
            for r, c in t:
                s.rect(x0 + c * CELL + 6 + 4 * j, y0 + r * CELL + 6 + 4 * j, 6, 6,
                       fill=PALETTE[j], stroke="none")
        ox = x0 + full * CELL + 24
        s.text(ox + n_out * CELL / 2, y0 - 4, "output", size=8)
        _grid(s, ox, y0, n_out, n_out,
              lambda r, c, outs=outs: "#a5d8ff" if (r, c) == outs[0] else
              ("#ffd8a8" if (r, c) == outs[1] else "#ffffff"))
    s.text(10, 240, "dots: kernel taps (o·stride + tap·dilation, padded coordinates); "
                    "filled cells: what the oracle reads", size=8, anchor="start", fill=INK)
    return s.text_doc()


__all__ = ["attention_layouts", "attention_masks", "conv_geometry", "conv_taps",
           "kv_head_of", "receptive_field", "rope_pairs", "rope_partners", "run_op",
           "visible_keys"]
