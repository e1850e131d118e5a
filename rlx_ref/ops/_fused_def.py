"""Shared machinery of the fused kinds: operand counts, dtype rules, and shape inference
and checks that run the kind's decomposition (``_fused_forms``) over the operand shapes,
so every step's own rules apply and are reported under the fused kind's constraint."""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.shape import ShapeError
from ._fused_emit import form_accuracy, form_graph, run_form
from .opdef import Caps, OpDef, OpError, register, want

FUSED = Caps.FUSED
# RLX's fused kernels compute in f32; a deep composite in a 16-bit dtype rounds at every
# step, which no single contract bounds usefully, so the fused kinds take f32 and f64
WIDE = (DType.F32, DType.F64)
BLAS_FUSED = Caps.BLAS | Caps.FUSION_BOUNDARY | Caps.FUSED


def _build(form, shapes, a, kind: str, cid: str):
    """The decomposition graph over ``shapes``; OpError naming the failing step."""
    from ..ir.builder import BuildError

    try:
        return form_graph(form, a, shapes)
    except (BuildError, OpError, ShapeError) as e:
        raise OpError(f"({cid}) {kind}: the operands do not fit its steps: {e}") from None
    except (TypeError, ValueError, IndexError, ZeroDivisionError) as e:
        # a payload value a step cannot even be built from (the verifier reports it)
        raise OpError(f"({cid}) {kind}: its steps cannot be built from this payload: "
                      f"{type(e).__name__}: {e}") from None


def make_rules(names, kind: str, rules=None, loose=("mask",), floats: bool = True):
    """C1 operand count, C2 one (float) dtype (``loose`` operands: float or bool), then
    the kind's own ``rules(shapes, a)``."""
    def pre(shapes, a):
        ns = names(a)
        want(len(shapes) == len(ns), f"(C1) {kind} takes {len(ns)} operands "
                                     f"({', '.join(ns)}), got {len(shapes)}")
        dt = shapes[0].dtype
        want(dt in WIDE or not floats, f"(C2) {kind} operand {ns[0]} must be f32 or f64, "
                                       f"got {dt} (Cast 16-bit tensors to f32 first)")
        for s, n in zip(shapes, ns):
            if n in loose:
                want(s.dtype.is_float or s.dtype is DType.BOOL,
                     f"(C2) {kind} operand {n} must be float or bool, got {s.dtype}")
            else:
                want(s.dtype == dt, f"(C2) {kind} operands share one dtype: {ns[0]} is {dt} "
                                    f"but {n} is {s.dtype}")
        if rules is not None:
            rules(shapes, a)
    return pre


def make_infer(form, pre, kind: str, cid: str):
    """Shape rule: the decomposition's output shape (None while a dim is dynamic)."""
    def infer(shapes, a):
        pre(shapes, a)
        if not all(s.is_static for s in shapes):
            return None
        g = _build(form, shapes, a, kind, cid)
        return g.shape(g.outputs[0])
    return infer


def make_check(form, pre, kind: str, cid: str):
    """The operand rules, then every step of the decomposition."""
    def check(shapes, a, out):
        pre(shapes, a)
        if all(s.is_static for s in shapes):
            _build(form, shapes, a, kind, cid)
    return check


def register_fused(kind, form, attrs, names, doc, constraints, samples, dtypes, *,
                   input_names=(), caps=FUSED, rules=None, notes="", payload="struct",
                   cid=None, family="fused", loose=("mask",), floats=True, accuracy=None):
    """One fused kind: oracle = its decomposition on arrays; contract = its nodes' sum."""
    cid = cid or f"C{len(constraints)}"
    count = names if callable(names) else (lambda a, _n=tuple(names): _n)
    pre = make_rules(count, kind, rules, loose, floats)
    register(OpDef(
        kind=kind, family=family, attrs=attrs, payload=payload,
        arity=None if callable(names) else len(names), min_arity=1,
        caps=caps, infer=make_infer(form, pre, kind, cid),
        check=make_check(form, pre, kind, cid),
        reference=lambda ctx, *xs: run_form(form, ctx, xs), doc=doc,
        constraints=tuple(constraints), samples=samples, dtypes=dtypes,
        input_names=tuple(input_names or (() if callable(names) else names)),
        accuracy=accuracy or form_accuracy(form), notes=notes))
