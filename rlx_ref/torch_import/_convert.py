"""Walk a torch.export program's FX graph and append one or a few RLX nodes per aten op."""
from __future__ import annotations

import operator

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph

# aten overload name ("aten.conv2d.default") -> handler(ctx, node) -> node id or tuple of ids
HANDLERS: dict = {}
# the same name -> supports(node) -> None, or the reason this call cannot be mapped
LIMITS: dict = {}


class TorchImportError(ValueError):
    """The program holds aten calls that have no RLX mapping; ``nodes`` lists each one."""

    def __init__(self, problems: list):
        self.nodes = problems
        lines = "\n".join(f"  {name} ({target}): {why}" for name, target, why in problems)
        super().__init__(f"{len(problems)} aten call(s) cannot be mapped onto RLX kinds:\n"
                         f"{lines}\nDecompose them before import or extend "
                         "rlx_ref.torch_import.")


def handles(*names, supports=None):
    """Register one handler for several aten overloads (and an optional ``supports``)."""
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
            if supports is not None:
                LIMITS[n] = supports
        return fn
    return deco


def target_name(node) -> str:
    if node.target is operator.getitem:
        return "getitem"
    return str(node.target)


_TORCH_DTYPES = {"float32": DType.F32, "float64": DType.F64, "float16": DType.F16,
                 "bfloat16": DType.BF16, "int64": DType.I64, "int32": DType.I32,
                 "int16": DType.I16, "int8": DType.I8, "uint8": DType.U8, "bool": DType.BOOL}


def rlx_dtype(torch_dtype) -> DType:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise TypeError(f"torch dtype {torch_dtype} has no RLX dtype")
    return _TORCH_DTYPES[name]


def meta(node):
    """The FakeTensor torch.export recorded for ``node`` (shape and dtype)."""
    return node.meta["val"]


def problems_of(fx_graph) -> list:
    """(node name, aten target, reason) for every call that cannot be mapped."""
    out = []
    for node in fx_graph.nodes:
        if node.op != "call_function":
            continue
        name = target_name(node)
        if name not in HANDLERS:
            out.append((node.name, name, "no RLX mapping for this aten op"))
            continue
        why = LIMITS[name](node) if name in LIMITS else None
        if why:
            out.append((node.name, name, why))
    return out


class T(int):
    """An RLX node id standing for a tensor (a plain int in an aten call is a scalar)."""


def is_t(x) -> bool:
    return isinstance(x, T)


class Lazy:
    """A parameter or buffer not yet read: its Param node is made at its first use, so a
    weight read only through a derived Param (``<key>.T``) is not a Param itself."""

    def __init__(self, name: str, dims: tuple, dtype: DType):
        self.name, self.dims, self.dtype = name, dims, dtype


class Ctx:
    """The graph being built, the FX-node -> RLX-id map and helpers handlers share."""

    def __init__(self, g: Graph):
        self.g, self.env = g, {}
        self.derived: dict = {}     # Param name -> (source Param name, numpy transform)
        self.params: dict = {}      # Param name -> node id

    def param(self, name: str, dims, dtype: DType) -> T:
        if name not in self.params:
            self.params[name] = self.g.param(name, tuple(dims), dtype)
        return T(self.params[name])

    def weight(self, fx_arg):
        """The Lazy parameter behind an FX argument, or None when it is computed."""
        from torch.fx import Node

        v = self.env.get(fx_arg) if isinstance(fx_arg, Node) else None
        return v if isinstance(v, Lazy) else None

    def derived_param(self, src: Lazy, suffix: str, fn, dims) -> T:
        """A Param holding ``fn(value of src)``, computed once at import instead of on
        every run (a linear layer's transposed weight)."""
        self.derived[src.name + suffix] = (src.name, fn)
        return self.param(src.name + suffix, dims, src.dtype)

    def arg(self, a):
        """An FX argument as an RLX id (tensors), or the Python value itself."""
        from torch.fx import Node

        if isinstance(a, Node):
            v = self.env[a]
            return self.param(v.name, v.dims, v.dtype) if isinstance(v, Lazy) else v
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(v) for v in a)
        return a

    def args(self, node, defaults: tuple = ()) -> list:
        """Positional args with keyword args and ``defaults`` filled in by position."""
        vals = [self.arg(a) for a in node.args]
        schema = getattr(node.target, "_schema", None)
        names = [a.name for a in schema.arguments] if schema is not None else []
        vals += list(defaults[len(vals):]) if len(defaults) > len(vals) else []
        for k, v in node.kwargs.items():
            i = names.index(k) if k in names else None
            if i is None:
                continue
            vals += [None] * (i + 1 - len(vals))
            vals[i] = self.arg(v)
        return vals

    def dims(self, nid) -> tuple:
        return tuple(self.g.shape(nid).dims)

    def dtype(self, nid) -> DType:
        return self.g.shape(nid).dtype

    def scalar(self, value, dtype: DType) -> int:
        """A 0-d Constant of ``dtype`` (Python scalars in aten calls)."""
        return T(self.g.constant(np.asarray(value, dtype=dtype.np)))

    def as_dtype(self, x, dtype: DType) -> int:
        """``x`` as a tensor of ``dtype``: scalars become Constants, tensors are cast."""
        if not is_t(x):
            return self.scalar(x, dtype)
        return x if self.dtype(x) == dtype else T(self.g.cast(x, dtype))

    def reshape(self, x, dims) -> int:
        dims = tuple(int(d) for d in dims)
        if self.dims(x) == dims:
            return x
        src = self.g.node(x)
        if src.kind == "Reshape":       # a reshape of a reshape reads the first one's input
            x = T(src.inputs[0])
            if self.dims(x) == dims:
                return x
        return T(self.g.reshape(x, dims))


def convert(ep, g: Graph, user_inputs: list, consts: dict) -> tuple:
    """Fill ``g`` from the exported program; returns the output ids and the derived Params
    (name -> (source name, transform))."""
    ctx = Ctx(g)
    placeholders = {spec.arg.name: spec for spec in ep.graph_signature.input_specs}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            spec = placeholders[node.name]
            val = meta(node)
            dims, dt = tuple(val.shape), rlx_dtype(val.dtype)
            if node.name in user_inputs:
                ctx.env[node] = T(g.input(node.name, dims, dt))
            elif spec.target in consts:
                ctx.env[node] = T(g.constant(consts[spec.target], dt))
            else:
                ctx.env[node] = Lazy(spec.target, dims, dt)
        elif node.op == "call_function":
            out = HANDLERS[target_name(node)](ctx, node)
            ctx.env[node] = tuple(map(_wrap, out)) if isinstance(out, tuple) else _wrap(out)
        elif node.op == "output":
            outs = node.args[0]
            return [ctx.arg(o) for o in outs], ctx.derived
    raise ValueError("the exported graph has no output node")


def _wrap(x):
    return None if x is None else T(x)


@handles("getitem")
def _getitem(ctx, node):
    return ctx.env[node.args[0]][node.args[1]]
