"""Inputs for explaining a graph: seeded random feeds, and graphs read from text files."""
from __future__ import annotations

import re

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Dyn

DYN_SIZE = 3          # the size a dynamic dim gets in random feeds


_INDEX = re.compile(r"ind|idx|label|position|token", re.I)


def random_array(shape, rng: np.random.Generator, role: str = "",
                 spd: bool = False) -> np.ndarray:
    """A value for a declared Shape: floats ~ N(0, 1); integers in [1, 3] (never 0: an
    integer Div or Mod by zero is an error, not a value); bools fair
    coins. ``role`` is the operand name its reader gives it: an index (``indices``,
    ``labels``, ``expert_idx`` ...) gets integral values in [0, 1], valid on any axis of
    length 2 or more, whatever its dtype. With ``spd`` square matrices are made symmetric
    positive definite. Dynamic dims get DYN_SIZE."""
    dims = tuple(DYN_SIZE if isinstance(d, Dyn) else int(d) for d in shape.dims)
    dt = shape.dtype
    if dt.is_bool:
        return rng.random(dims) < 0.5
    if _INDEX.search(role):
        return rng.integers(0, 2, dims).astype(dt.np)
    if dt.is_int:
        return rng.integers(1, 4, dims).astype(dt.np)
    if dt.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt.np)
    x = rng.standard_normal(dims)
    if spd and len(dims) >= 2 and dims[-1] == dims[-2]:
        x = x @ np.swapaxes(x, -1, -2) + dims[-1] * np.eye(dims[-1])
    return x.astype(dt.np)


def _roles(graph: Graph) -> dict:
    """Node id -> (the operand name its first reader gives it, whether that reader wants a
    symmetric positive definite matrix: an ``A`` (Cholesky, Eigh, solves) or any operand
    of the SPD-manifold ops)."""
    from ..ops.opdef import get

    out: dict = {}
    for n in graph.nodes:
        d = get(n.kind)
        manifold = d.family == "spd" or n.kind.startswith("Spd")
        for pos, i in enumerate(n.inputs):
            if i not in out:
                name = d.input_names[pos] if pos < len(d.input_names) else ""
                out[i] = (name, manifold or name == "A")
    return out


def random_feeds(graph: Graph, seed: int, inputs: dict | None = None,
                 params: dict | None = None) -> tuple[dict, dict]:
    """(inputs, params) with every declared one not given filled from ``seed``.

    Values depend only on the seed and the declarations in node order, so a command
    line with the same seed sees the same values."""
    rng = np.random.default_rng(seed)
    inputs, params = dict(inputs or {}), dict(params or {})
    roles = _roles(graph)
    for n in graph.nodes:
        table = {"Input": inputs, "Param": params}.get(n.kind)
        if table is not None:
            # drawn even when given, so the others keep their values
            value = random_array(n.shape, rng, *roles.get(n.id, ("", False)))
            table.setdefault(n.attrs.name, value)
    return inputs, params


_GRAPH_START = re.compile(r"^\s*graph\s+@", re.M)


def split_graphs(text: str) -> list[str]:
    """The ``graph @name { ... }`` blocks of a text (``//`` comment lines dropped), e.g.
    a pass fixture holding the input graph and, after ``// EXPECT``, the expected one."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]
    body = "\n".join(lines)
    starts = [m.start() for m in _GRAPH_START.finditer(body)]
    return [body[a:b].strip() for a, b in zip(starts, starts[1:] + [len(body)])]


_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def markdown_graphs(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text that hold a ``graph @name {`` graph."""
    return [b for b in _FENCE.findall(text) if b.lstrip().startswith("graph @")]


def read_graph(path, which: int | None = None) -> tuple[Graph, str, dict | None]:
    """(graph, note, params) from ``path``: a text-form graph, or a Python script listing
    its graphs in ``build_graphs()`` (as ``examples/*.py`` do; their params come along).

    A Markdown file gives its fenced graph blocks. A file holding several graphs (a pass
    fixture, a doc page, a script) gives graph ``which``
    (default 0) and a note saying so; FileInputError names the file and what is wrong."""
    from .._readers import FileInputError, read_text
    from ..ir.text import parse

    if str(path).endswith(".py"):
        return _script_graph(path, which)
    what = "a graph in RLX's text form: graph @name { %0 = ... return %N }"
    text = read_text(path, what)
    blocks = markdown_graphs(text) if str(path).endswith(".md") else split_graphs(text)
    if not blocks:
        raise FileInputError(path, "holds no `graph @name {` block", what)
    i = 0 if which is None else which
    if not 0 <= i < len(blocks):
        raise FileInputError(path, f"holds {len(blocks)} graph(s); --graph {i} is out of "
                             f"range (0..{len(blocks) - 1})", what)
    try:
        g = parse(blocks[i] if len(blocks) > 1 or str(path).endswith(".md") else text)
    except (ValueError, RecursionError) as e:
        raise FileInputError(path, str(e), what) from None
    note = ""
    if len(blocks) > 1:
        note = (f"{path} holds {len(blocks)} graphs; this is graph {i} (@{g.name}); "
                f"--graph N picks another")
    return g, note, None


def _script_graph(path, which):
    from .._readers import FileInputError
    from .corpus import script_graphs

    what = "a Python script with build_graphs() returning name -> (graph, params)"
    try:
        entries = script_graphs(path)
    except (OSError, ValueError, ImportError, SyntaxError) as e:
        raise FileInputError(path, f"{type(e).__name__}: {e}", what) from None
    i = 0 if which is None else which
    if not 0 <= i < len(entries):
        raise FileInputError(path, f"builds {len(entries)} graph(s); --graph {i} is out of "
                             f"range (0..{len(entries) - 1})", what)
    names = ", ".join(f"{k}: {e.label.rsplit(':', 1)[1]}" for k, e in enumerate(entries))
    note = f"{path} builds {len(entries)} graph(s) ({names}); this is graph {i}" \
        if len(entries) > 1 else ""
    return entries[i].graph, note, entries[i].params


def dtype_label(arr) -> str:
    """RLX's name of an array's dtype (numpy's name when RLX has none)."""
    try:
        return str(DType.of(np.asarray(arr)))
    except TypeError:
        return str(np.asarray(arr).dtype)
