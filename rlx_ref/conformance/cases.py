"""Conformance cases: every registry entry's samples × dtypes, generated edge cases, multi-op.

``build_cases()`` turns each OpDef's ``samples(rng)`` (fed a platform-independent
``CounterRNG``) into one-op graphs, re-emits all-f32 samples in the op's other float
dtypes, and adds generated edge cases (kernel-tiling tails, special values, domain edges,
ties, broadcasts, non-contiguous inputs) plus the multi-op cases of ``multi.py``. A case id
is ``<op>.<dtype>.<12 hex digits of sha256>`` over the case's content, so it is stable
across runs and machines and changes exactly when the case does.
"""
from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ..ops.opdef import OpDef, all_opdefs, get
from ..ops.single import single_op_graph
from .model import Case
from .rng import CounterRNG

_SKIP_KINDS = ("Input", "Param")
_HASH_VERSION = b"rlx-ref-case-v1"


@dataclass
class Spec:
    """A one-op case before it becomes a graph: kind, payload, input arrays, tags."""

    kind: str
    attrs: Any
    inputs: tuple
    tags: tuple = ()
    out: Shape | None = None
    noncontiguous: tuple = ()
    source: str = ""
    accuracy: Any = None        # a contract for this case only (None: the op's own)


# ── which inputs are data, which are indices ────────────────────────────────

def input_name(d: OpDef, i: int) -> str:
    """The OpDef's name for operand ``i`` (a trailing ``name...`` covers the rest)."""
    names = d.input_names
    if i < len(names):
        return names[i]
    return names[-1] if names and names[-1].endswith("...") else ""


def is_index_input(d: OpDef, i: int) -> bool:
    """Index operands (Gather/Scatter indices...) keep their dtype in dtype expansion."""
    return "ind" in input_name(d, i).lower()


def _is_selector(d: OpDef, i: int) -> bool:
    return input_name(d, i) in ("cond", "predicate")


def primary_dtype(d: OpDef, inputs, out: Shape) -> DType:
    """The case dtype: the first data operand's dtype, or the output's for leaves."""
    for i, x in enumerate(inputs):
        if not (is_index_input(d, i) or _is_selector(d, i)):
            return DType.of(np.asarray(x))
    return out.dtype


# ── ids ──────────────────────────────────────────────────────────────────────

def array_bytes(arr: np.ndarray) -> bytes:
    """Little-endian C-order bytes of ``arr`` (complex as its real components)."""
    a = np.ascontiguousarray(arr).reshape(-1)
    if a.dtype.kind == "c":
        a = a.view(np.dtype(f"f{a.dtype.itemsize // 2}"))
    if a.dtype.itemsize > 1:
        a = a.view(np.dtype(f"u{a.dtype.itemsize}")).astype(f"<u{a.dtype.itemsize}")
    return a.tobytes()


def _tensor_parts(kind: str, table: dict) -> list:
    parts = []
    for name in sorted(table):
        arr = np.asarray(table[name])
        parts += [kind.encode(), name.encode(), DType.of(arr).display.encode(),
                  repr(tuple(arr.shape)).encode(), array_bytes(arr)]
    return parts


def content_hash(graph: Graph, inputs: dict, params: dict, tags, seed: int,
                 noncontiguous) -> str:
    """12 hex digits of sha256 over a length-prefixed canonical encoding of the case."""
    parts = [_HASH_VERSION, graph.to_text().encode()]
    parts += _tensor_parts("input", inputs) + _tensor_parts("param", params)
    parts += [b"tags", "\x00".join(sorted(tags)).encode(), b"seed", str(int(seed)).encode(),
              b"noncontiguous", "\x00".join(sorted(noncontiguous)).encode()]
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:12]


def make_case(op: str, dtype: str, graph: Graph, inputs: dict, tags=(), params=None,
              noncontiguous=(), seed: int = 0, source: str = "") -> Case:
    """A Case with its content-hashed id."""
    params = dict(params or {})
    tags = tuple(dict.fromkeys(tags))
    nc = tuple(noncontiguous)
    h = content_hash(graph, inputs, params, tags, seed, nc)
    return Case(id=f"{op}.{dtype}.{h}", op=op, dtype=dtype, tags=tags, graph=graph,
                inputs=inputs, params=params, noncontiguous=nc, seed=seed, source=source)


def spec_case(spec: Spec, seed: int) -> Case:
    """The one-op Case of a Spec (graph ``@<kind>``, inputs ``x0, x1, ...``)."""
    arrays = [np.asarray(x) for x in spec.inputs]
    g = single_op_graph(spec.kind, spec.attrs, arrays, spec.out)
    dt = primary_dtype(get(spec.kind), arrays, g.nodes[g.outputs[0]].shape)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    case = make_case(spec.kind, dt.display, g, feeds, spec.tags, None, spec.noncontiguous,
                     seed, spec.source)
    case.accuracy = spec.accuracy
    return case


# ── samples and dtype expansion ──────────────────────────────────────────────

def _float_data(d: OpDef, inputs) -> list:
    return [i for i, x in enumerate(inputs)
            if not (is_index_input(d, i) or _is_selector(d, i))
            and np.asarray(x).dtype.kind in "fV" and DType.of(np.asarray(x)).is_float]


def dtype_variants(d: OpDef, spec: Spec) -> list[Spec]:
    """The spec re-emitted in the op's other float dtypes when its float data are all f32."""
    idx = _float_data(d, spec.inputs)
    if not idx or any(np.asarray(spec.inputs[i]).dtype != np.float32 for i in idx):
        return []
    out = []
    for dt in d.dtypes:
        if not dt.is_float or dt is DType.F32:
            continue
        inputs = tuple(np.asarray(x).astype(dt.np) if i in idx else x
                       for i, x in enumerate(spec.inputs))
        decl = spec.out
        if decl is not None and decl.dtype is DType.F32:
            decl = decl.with_dtype(dt)
        out.append(Spec(spec.kind, spec.attrs, inputs, spec.tags, decl, spec.noncontiguous,
                        f"{spec.source}@{dt.display}"))
    return out


def oracle_accepts(case: Case) -> bool:
    """The graph verifies and the oracle runs it (variants it rejects are skipped)."""
    from ..interpret import interpret
    from ..ir.verify import verify

    if verify(case.graph):
        return False
    try:
        interpret(case.graph, case.inputs, case.params)
    except Exception:  # noqa: BLE001  (any oracle rejection: not a valid variant)
        return False
    return True


def sample_specs(d: OpDef, seed: int) -> list[Spec]:
    """The OpDef's samples as Specs (inputs drawn from ``CounterRNG(seed, kind)``)."""
    samples = d.samples(CounterRNG(seed, d.kind)) if d.samples else []
    return [Spec(d.kind, s.attrs, tuple(s.inputs), tuple(s.tags), s.out, (),
                 f"samples[{i}]") for i, s in enumerate(samples)]


def _op_cases(d: OpDef, seed: int) -> list[Case]:
    from ._cases_edges import edge_specs
    from ._cases_power import power_cases
    from .errors import error_cases

    out = []
    for spec in sample_specs(d, seed):
        out.append(spec_case(spec, seed))
        for v in dtype_variants(d, spec):
            case = spec_case(v, seed)
            if oracle_accepts(case):
                out.append(case)
    out += [spec_case(s, seed) for s in edge_specs(d.kind, seed)]
    out += power_cases(d.kind, seed)
    out += error_cases(d.kind, seed)
    return out


# ── the public entry points ──────────────────────────────────────────────────

def _patterns(kinds) -> list[str] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = kinds.split(",")
    return [k.strip() for k in kinds if k.strip()]


def _matches(op: str, patterns) -> bool:
    return patterns is None or any(op == p or fnmatch.fnmatchcase(op, p) for p in patterns)


def _dtype_names(dtypes) -> set | None:
    if dtypes is None:
        return None
    if isinstance(dtypes, (str, DType)):
        dtypes = str(dtypes).split(",") if isinstance(dtypes, str) else [dtypes]
    return {d.display if isinstance(d, DType) else DType.parse(d).display for d in dtypes}


TIERS = ("default", "full")


def build_cases(kinds=None, seed: int = 0, dtypes=None, tier: str = "default") -> list[Case]:
    """Every conformance case, in registry order then the multi-op cases, then the
    ``lowered-thresholds`` copies that reach every kernel variant (``_cases_variants``).

    ``kinds``: op names or glob patterns (a list or a comma-separated string; ``multi:*``
    selects the multi-op cases); ``dtypes``: case dtypes to keep (``"f32"``, DType...);
    ``tier``: ``"full"`` adds the cases tagged ``large`` (above the real thresholds).
    Ids are unique: a generated case identical to an earlier one is dropped.
    """
    from ._cases_variants import large_cases, lowered_cases, reach_cases
    from .multi import multi_op_cases

    if tier not in TIERS:
        raise ValueError(f"unknown case tier {tier!r}; expected one of {', '.join(TIERS)}")
    pats, want = _patterns(kinds), _dtype_names(dtypes)
    cases = []
    for d in all_opdefs():
        if d.kind not in _SKIP_KINDS and _matches(d.kind, pats):
            cases += _op_cases(d, seed)
    cases += [c for c in multi_op_cases(seed) if _matches(c.op, pats)]
    cases += lowered_cases(cases) + [c for c in reach_cases(seed) if _matches(c.op, pats)]
    if tier == "full":
        cases += [c for c in large_cases(seed) if _matches(c.op, pats)]
    seen, out = set(), []
    for c in cases:
        if c.id not in seen and (want is None or c.dtype in want):
            seen.add(c.id)
            out.append(c)
    return out


def filter_cases(cases, op_pattern=None, dtypes=None, case_id=None, tags=None) -> list[Case]:
    """Cases whose op matches ``op_pattern`` (glob or comma list), dtype is in ``dtypes``,
    id equals (or starts with) ``case_id`` (a string or a list of them) and that carry at
    least one of ``tags`` (a comma-separated string or a list)."""
    pats, want = _patterns(op_pattern), _dtype_names(dtypes)
    ids = None if case_id is None else ([case_id] if isinstance(case_id, str) else case_id)
    tagset = None if tags is None else set(_patterns(tags))
    return [c for c in cases if _matches(c.op, pats)
            and (want is None or c.dtype in want)
            and (ids is None or any(c.id == i or c.id.startswith(i) for i in ids))
            and (tagset is None or tagset & set(c.tags))]


def case_by_id(case_id: str, cases=None, seed: int = 0) -> Case:
    """The case with id ``case_id`` (or a unique prefix of one); KeyError naming near ids."""
    if cases is None:
        op = case_id.split(".", 1)[0]
        cases = build_cases([op], seed=seed, tier="full")
    hits = [c for c in cases if c.id == case_id] or \
        [c for c in cases if c.id.startswith(case_id)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise KeyError(f"case id prefix {case_id!r} is ambiguous: "
                       f"{', '.join(c.id for c in hits[:5])}")
    import difflib

    near = difflib.get_close_matches(case_id, [c.id for c in cases], n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise KeyError(f"no conformance case has id {case_id!r}{hint}")
