"""pyrlx's spellings, accepted by the builder and the DSL beside rlx_ref's own: one table.

pyrlx is RLX's Python binding (MIT-RLX/rlx, ``crates/bindings/pyrlx``): ``src/graph.rs``
defines ``Graph``'s methods, ``python/pyrlx/dsl.py`` the ``Node`` methods and
``g.outputs = [...]``, ``src/session.rs`` ``set_param``. Three kinds of alias live here:

- op-name strings: every unit variant of an enum payload field (``Binary.op``,
  ``Activation.op``, ``Compare.op``, ``Reduce.op``, ``Pool.kind``, ``Attention.mask_kind``,
  ...) is accepted in any case or snake_case (``"add"``, ``"gelu_approx"``), plus the
  symbols in ``SYMBOLS`` (``"+"``, ``"<"``) and ``"sliding:N"`` for a data variant;
- field names: ``FIELD_ALIASES`` (pyrlx's ``length`` for Narrow's ``len``);
- methods: ``METHODS``, pyrlx's positional order, defaults and names for a kind
  (``conv2d(x, w, kernel_size, stride, padding, dilation, groups=1)`` builds a Conv).
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Callable

# Symbols pyrlx's binary()/compare() accept ("+", "<", ...), and the DSL's Python operators.
SYMBOLS = {
    "BinaryOp": {"+": "Add", "-": "Sub", "*": "Mul", "/": "Div", "**": "Pow", "%": "Mod",
                 "&": "BitAnd", "|": "BitOr", "^": "BitXor", "<<": "Shl", ">>": "Shr"},
    "CmpOp": {"==": "Eq", "!=": "Ne", "<": "Lt", "<=": "Le", ">": "Gt", ">=": "Ge"},
}
# Short tags pyrlx uses for enum data variants ("sliding:4" is SlidingWindow(4)).
DATA_TAGS = {"MaskKind": {"sliding": "SlidingWindow"}}
# (kind, pyrlx field name) -> rlx_ref's field name.
FIELD_ALIASES = {("Narrow", "length"): "len"}


def _snake(name: str) -> str:
    from .builder import snake

    return snake(name)


def _spellings(codec) -> dict:
    """Every accepted spelling (lower-cased) of ``codec``'s unit variants -> the variant."""
    table = {}
    for unit in codec.units:
        table[unit.lower()] = unit
        table[_snake(unit)] = unit
    table.update(SYMBOLS.get(codec.name, {}))
    return table


def accepted(codec) -> str:
    """``Add (add, +), Sub (sub, -), ...``: the variants with their aliases, for errors."""
    spell = _spellings(codec)
    parts = []
    for unit in codec.units:
        others = sorted({s for s, u in spell.items() if u == unit and s != unit},
                        key=lambda s: (not any(c.isalpha() for c in s), s))
        parts.append(f"{unit} ({', '.join(others)})" if others else unit)
    tags = {v: k for k, v in DATA_TAGS.get(codec.name, {}).items()}
    for tag in codec.data:
        parts.append(f"{tag}(n) ({tags.get(tag, _snake(tag))}:n)")
    return ", ".join(parts)


def enum_value(codec, value, where: str):
    """The canonical variant for a spelling of ``codec`` (BuildError naming every spelling)."""
    from .builder import BuildError

    if not isinstance(value, str) or value in codec.units:
        return value
    key = value.strip()
    spell = _spellings(codec)
    if key.lower() in spell or key in spell:
        return spell.get(key, spell.get(key.lower()))
    tag, sep, arg = key.partition(":")
    if sep:
        tags = {t.lower(): t for t in codec.data}
        tags.update({_snake(t): t for t in codec.data})
        tags.update(DATA_TAGS.get(codec.name, {}))
        full = tags.get(tag.strip().lower())
        if full is not None:
            try:
                return (full, int(arg))
            except ValueError:
                raise BuildError(f"{where}: {value!r} needs an integer after ':', "
                                 f"e.g. '{tag}:4'") from None
    close = did_you_mean(key, list(codec.units) + sorted(spell))
    raise BuildError(f"{where}: unknown {codec.name} {value!r}{close}; accepted: "
                     f"{accepted(codec)}")


def did_you_mean(name: str, known) -> str:
    """``"; did you mean 'Gelu'?"`` for the closest spellings of ``name`` (case ignored), or ''."""
    by_lower = {}
    for k in known:
        by_lower.setdefault(str(k).lower(), str(k))
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?"


def normalize_fields(kind: str, attrs_cls, fields: dict) -> dict:
    """``fields`` with pyrlx's field names and op-name strings turned into rlx_ref's."""
    from ..ops.codec import Enum, Optional
    from .builder import BuildError

    out = {}
    for name, value in fields.items():
        real = FIELD_ALIASES.get((kind, name), name)
        if real in out or (real != name and real in fields):
            raise BuildError(f"{kind}: {name!r} and {real!r} name the same field; give one")
        out[real] = value
    if attrs_cls is None:
        return out
    for f in dataclasses.fields(attrs_cls):
        codec = f.metadata.get("codec")
        codec = codec.item if isinstance(codec, Optional) else codec
        if f.name in out and isinstance(codec, Enum):
            out[f.name] = enum_value(codec, out[f.name], f"{kind}.{f.name}")
    return out


# ── methods ─────────────────────────────────────────────────────────────────────

@dataclasses.dataclass(frozen=True)
class Sig:
    """How one pyrlx method builds a kind: operand names, then payload parameters.

    ``params`` are ``name`` or ``(name, default)`` in pyrlx's positional order; any other
    keyword passes through as a payload field (so rlx_ref's own fields stay reachable).
    ``optional`` operands may be left out; ``derive`` fills fields computed from the rest;
    ``shaped`` methods take ``out_shape, dtype`` for the node's declared shape instead.
    """

    kind: str
    operands: tuple
    params: tuple = ()
    optional: tuple = ()
    derive: Callable | None = None
    shaped: bool = False
    operand_list: bool = False

    def text(self, name: str) -> str:
        """``conv2d(input, weight, kernel_size, ..., groups=1)``."""
        ops = ("[" + ", ".join(self.operands) + "]",) if self.operand_list else \
            tuple(f"{o}=None" if o in self.optional else o for o in self.operands)
        ps = tuple(p if isinstance(p, str) else f"{p[0]}={p[1]!r}" for p in self.params)
        shaped = ("out_shape", "dtype") if self.shaped else ()
        return f"{name}({', '.join(ops + shaped + ps)})"


def _rope_n_rot(fields: dict, n_operands: int) -> None:
    # pyrlx's rope(x, cos, sin, head_dim) rotates the whole head (graph_ext.rs: n_rot = head_dim)
    if "n_rot" not in fields and "head_dim" in fields:
        fields["n_rot"] = fields["head_dim"]


def _attention_mask(fields: dict, n_operands: int) -> None:
    # pyrlx's attention(q, k, v, mask, ...) is RLX's MaskKind::Custom; three operands: no mask
    fields.setdefault("mask_kind", "Custom" if n_operands == 4 else "None")


def _custom_fn_count(fields: dict, n_operands: int) -> None:
    fields.setdefault("num_inputs", n_operands)


_NORM = ("input", "gamma", "beta")
_CONV = ("kernel_size", "stride", "padding", "dilation")

# pyrlx method name -> Sig (graph.rs #[pymethods] of PyGraph; dsl.py Node for defaults the
# DSL adds: gather axis=0, cumsum axis=-1, attention_kind mask_kind="causal").
METHODS = {
    "conv2d": Sig("Conv", ("input", "weight"), _CONV + (("groups", 1),)),
    "conv_transpose2d": Sig("ConvTranspose2d", ("input", "weight"),
                            _CONV + ("output_padding", ("groups", 1))),
    "resize_nearest_2x": Sig("ResizeNearest2x", ("x",)),
    "layer_norm": Sig("LayerNorm", _NORM, (("axis", -1), ("eps", 1e-5))),
    "rms_norm": Sig("RmsNorm", _NORM, (("eps", 1e-5), ("axis", -1))),
    "layer_norm2d": Sig("LayerNorm2d", _NORM, (("eps", 1e-5),)),
    "group_norm": Sig("GroupNorm", _NORM, ("num_groups", ("eps", 1e-5))),
    "narrow": Sig("Narrow", ("x",), ("axis", "start", "length")),
    "gather": Sig("Gather", ("table", "indices"), (("axis", 0),)),
    "cumsum": Sig("Cumsum", ("input",), (("axis", -1), ("exclusive", False))),
    "attention": Sig("Attention", ("q", "k", "v", "mask"), ("num_heads", "head_dim"),
                     optional=("mask",), derive=_attention_mask),
    "attention_kind": Sig("Attention", ("q", "k", "v"),
                          ("num_heads", "head_dim", ("mask_kind", "causal"))),
    "rope": Sig("Rope", ("x", "cos", "sin"), ("head_dim",), derive=_rope_n_rot),
    "rope_n": Sig("Rope", ("x", "cos", "sin"), ("head_dim", "n_rot")),
    "matmul_with_shape": Sig("MatMul", ("lhs", "rhs"), shaped=True),
    "dense_solve": Sig("DenseSolve", ("a", "b"), shaped=True),
    "batched_dense_solve": Sig("BatchedDenseSolve", ("a", "b"), shaped=True),
    "custom_fn": Sig("CustomFn", ("inputs",), ("fwd_body", ("vjp_body", None),
                                               ("jvp_body", None)),
                     derive=_custom_fn_count, operand_list=True),
}

# pyrlx Graph methods (graph.rs) with no pyrlx-signature binding here yet: their kinds are
# registered, so build them with g.op(KIND, operands, **payload)
NOT_REGISTERED = {
    "fft": "Fft", "fft_norm": "Fft", "fft_real": "Fft", "rfft": "Fft", "irfft": "Fft",
    "fftfreq": "Fft", "rfftfreq": "Fft", "psd": "Fft", "psd_real": "Fft",
    "sample": "Sample", "lora_matmul": "LoraMatMul", "scaled_matmul": "ScaledMatMul",
    "fused_matmul_bias_act": "FusedMatMulBiasAct",
}

# Operand positions where the DSL turns a Python scalar into a Constant (pyrlx's dsl.py
# promotes scalars in these forwarded calls: _BINARY_GRAPH_OPS).
_CMP_SHORT = ("eq_", "ne_", "lt_", "le_", "gt_", "ge_")
SCALAR_OPERANDS = {**{n: (0, 1) for n in ("add", "sub", "mul", "div") + _CMP_SHORT},
                   "binary": (1, 2), "compare": (1, 2), "where_": (1, 2)}


def bind(name: str, sig: Sig, args: tuple, kwargs: dict):
    """(operands, fields, shape) for a pyrlx-style call; BuildError quoting the signature."""
    from .builder import BuildError, _dtype
    from .shape import Shape

    usage = f"{sig.text(name)} (pyrlx), or operands then {sig.kind}'s fields as keywords"
    args, kwargs = list(args), dict(kwargs)
    if sig.operand_list:
        # pyrlx passes one list; rlx_ref's own form passes the operands one by one
        if args and isinstance(args[0], (list, tuple)):
            operands = list(args.pop(0))
        else:
            operands, args = args, []
    else:
        n = min(len(args), len(sig.operands))
        operands, args = args[:n], args[n:]
        for o in sig.operands[n:]:
            if o in kwargs:
                operands.append(kwargs.pop(o))
            elif o not in sig.optional:
                raise BuildError(f"{name}: missing operand {o!r}; usage: {usage}")
    shape = None
    if sig.shaped:
        dims = args.pop(0) if args else kwargs.pop("out_shape", None)
        dt = args.pop(0) if args else kwargs.pop("dtype", None)
        if dims is None or dt is None:
            raise BuildError(f"{name}: needs out_shape and dtype; usage: {usage}")
        shape = Shape(dims, _dtype(dt))
    names = [p if isinstance(p, str) else p[0] for p in sig.params]
    if len(args) > len(names):
        raise BuildError(f"{name}: {len(args)} payload arguments after the operands, "
                         f"at most {len(names)}; usage: {usage}")
    fields = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in fields:
            raise BuildError(f"{name}: {k!r} given twice (by position and keyword)")
        fields[k] = v
    has_default = _defaulted_fields(sig.kind)
    for p in sig.params:
        if not isinstance(p, str):
            fields.setdefault(p[0], p[1])
            continue
        real = FIELD_ALIASES.get((sig.kind, p), p)
        if p not in fields and real not in fields and real not in has_default:
            raise BuildError(f"{name}: missing {p!r}; usage: {usage}")
    if sig.derive is not None:
        sig.derive(fields, len(operands))
    return operands, fields, shape


def _defaulted_fields(kind: str) -> set:
    """Payload fields of ``kind`` that rlx_ref defaults (rlx_ref's own calls may omit them)."""
    from ..ops.opdef import get

    cls = get(kind).attrs
    return {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
            or f.default_factory is not dataclasses.MISSING} if cls else set()


def _method(name: str, sig: Sig):
    def method(self, *args, shape=None, label=None, **kwargs):
        operands, fields, declared = bind(name, sig, args, kwargs)
        return self.op(sig.kind, operands, shape=shape or declared, label=label, **fields)
    method.__name__ = name
    method.__doc__ = f"pyrlx's {sig.text(name)}: a {sig.kind} node."
    return method


def unknown_method(owner: str, name: str, known) -> AttributeError:
    """AttributeError for ``owner.name`` naming close spellings (or why pyrlx has it)."""
    if name in NOT_REGISTERED:
        kind = NOT_REGISTERED[name]
        return AttributeError(f"{owner}.{name} is pyrlx's; its signature has no binding here "
                              f"yet: build RLX's {kind} with {owner}.op({kind!r}, operands, "
                              "**payload)")
    close = difflib.get_close_matches(name, sorted(known), n=4, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return AttributeError(f"{owner} has no method {name!r}{hint}")


def install_pyrlx_methods(cls) -> None:
    """Add one method per ``METHODS`` entry (before the registry's generic ones)."""
    for name, sig in METHODS.items():
        setattr(cls, name, _method(name, sig))
