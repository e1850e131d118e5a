"""Region family: ElementwiseRegion, RLX's fused chain of elementwise steps.

A region holds a short program (``chain``) evaluated once per output element. Each step
is one of the elementwise ops (Activation, Cast, Binary, Compare, Where) and reads region
inputs (``Input(i)``) or earlier steps (``Step(j)``). Steps run through the very OpDefs of
``elementwise.py`` (their scalar tables, dtype rules and checks), so a fused region
computes bit for bit what the unfused ops compute.

Python form of a step: ``(tag, args)`` as the codecs give it, e.g.
``("Binary", ("Add", ("Input", 0), ("Step", 1)))``; build them with ``binary(...)`` etc.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import chain_accuracy
from ..ir.dtype import ALL_DTYPES, DType
from ..ir.graph import Op
from ..ir.shape import Shape, broadcast_dims
from .codec import DTYPE, U32, Enum, ListOf, TupleOf, attr
from .elementwise import (ACTIVATIONS, BINARIES, COMPARES, ActivationAttrs, BinaryAttrs,
                          CastAttrs, CompareAttrs)
from .opdef import Caps, OpDef, OpError, RefCtx, Sample, get, register, want

MAX_INPUTS = 16     # input_modulus is a [u32; 16]
MAX_STEPS = 32      # region kernels pack 4 u32 words per step into 128 words

# The sub-op enums come from elementwise's tables, so a new row there is a new step here.
ACTIVATION_ENUM = Enum("Activation", units=tuple(ACTIVATIONS))
BINARY_ENUM = Enum("BinaryOp", units=tuple(BINARIES))
COMPARE_ENUM = Enum("CmpOp", units=tuple(COMPARES))
OPERAND = Enum("ChainOperand", data={"Input": U32, "Step": U32})
CHAIN_STEP = Enum("ChainStep", data={
    "Activation": TupleOf(ACTIVATION_ENUM, OPERAND),
    "Cast": TupleOf(DTYPE, OPERAND),
    "Binary": TupleOf(BINARY_ENUM, OPERAND, OPERAND),
    "Compare": TupleOf(COMPARE_ENUM, OPERAND, OPERAND),
    "Where": TupleOf(OPERAND, OPERAND, OPERAND),
})
PROLOGUE = Enum("RegionPrologue", units=("None", "ResizeNearest2x"))


# ── building chains ───────────────────────────────────────────────────────

def Input(i: int) -> tuple:
    """ChainOperand::Input(i): region input ``i``."""
    return ("Input", i)


def Step(j: int) -> tuple:
    """ChainOperand::Step(j): the value of chain step ``j`` (an earlier step)."""
    return ("Step", j)


def activation(op: str, x) -> tuple:
    return ("Activation", (op, x))


def cast(to: DType, x) -> tuple:
    return ("Cast", (to, x))


def binary(op: str, a, b) -> tuple:
    return ("Binary", (op, a, b))


def compare(op: str, a, b) -> tuple:
    return ("Compare", (op, a, b))


def where(cond, on_true, on_false) -> tuple:
    return ("Where", (cond, on_true, on_false))


@dataclass(frozen=True)
class ElementwiseRegionAttrs:
    chain: tuple = attr(ListOf(CHAIN_STEP), doc="the steps, evaluated in order per element")
    num_inputs: int = attr(U32, doc="number of region inputs (operands)")
    scalar_input_mask: int = attr(U32, 0, doc="bit i set: input i is a one-element scalar")
    input_modulus: tuple = attr(TupleOf(*[U32] * MAX_INPUTS), (0,) * MAX_INPUTS,
                                doc="per input: 0 = read element gid, m > 0 = read gid % m")
    prologue: str = attr(PROLOGUE, "None", doc="memory transform applied before the chain")
    prologue_input: int = attr(U32, 0, doc="the input the prologue transforms")


def encode_region(chain, input_shapes, out_shape: Shape | None = None, prologue="None",
                  prologue_input=0) -> ElementwiseRegionAttrs:
    """Attrs for ``chain`` over ``input_shapes``, with mask and moduli set as RLX's fusion
    pass sets them (one element → scalar bit and modulus 1; fewer elements → modulus =
    element count; as many as the output → 0)."""
    chain = tuple(chain)
    a = ElementwiseRegionAttrs(chain, len(input_shapes), 0, (0,) * MAX_INPUTS, prologue,
                               prologue_input)
    out = out_shape or _infer_region(list(input_shapes), a)
    mask, modulus = 0, [0] * MAX_INPUTS
    for i, s in enumerate(input_shapes[:MAX_INPUTS]):
        n, o = s.numel, out.numel
        if prologue != "None" and i == prologue_input or n is None or o is None:
            continue
        if n == 1 and o != 1:
            mask |= 1 << i
            modulus[i] = 1
        elif n != o and n > 0:
            modulus[i] = n
    return ElementwiseRegionAttrs(chain, len(input_shapes), mask, tuple(modulus), prologue,
                                  prologue_input)


# ── the chain walk (shared by infer, check and reference) ─────────────────

def step_op(step) -> tuple:
    """(elementwise kind, its attrs, operand list) of one chain step."""
    if not (isinstance(step, tuple) and len(step) == 2 and isinstance(step[1], tuple)):
        raise OpError(f"(C2) a chain step is (tag, args), got {step!r}")
    tag, args = step
    arity = {"Activation": 2, "Cast": 2, "Binary": 3, "Compare": 3, "Where": 3}.get(tag)
    want(arity == len(args), f"(C2) {step!r} is not a ChainStep (Activation(op, x), "
                             "Cast(dtype, x), Binary/Compare(op, a, b), Where(c, t, f))")
    if tag == "Where":
        return "Where", None, list(args)
    payload = {"Activation": ActivationAttrs, "Cast": CastAttrs, "Binary": BinaryAttrs,
               "Compare": CompareAttrs}[tag]
    return tag, payload(args[0]), list(args[1:])


def format_step(step) -> str:
    """``Binary(Add, Input(0), Step(1))``: a step as RLX's Debug form prints it."""
    tag, args = step
    return f"{tag}({', '.join(_fmt_arg(x) for x in args)})"


def _fmt_arg(x) -> str:
    if isinstance(x, tuple) and len(x) == 2 and x[0] in ("Input", "Step"):
        return f"{x[0]}({x[1]})"
    return x.value if isinstance(x, DType) else str(x)


def _operand(k: int, o, n_inputs: int) -> tuple:
    """Validate one operand of step ``k``; returns (source, index)."""
    ok = isinstance(o, tuple) and len(o) == 2 and o[0] in ("Input", "Step") \
        and isinstance(o[1], int) and o[1] >= 0
    want(ok, f"(C2) step {k}: operand {o!r} is not Input(i) or Step(j)")
    src, i = o
    if src == "Input":
        want(i < n_inputs, f"(C2) step {k} reads Input({i}) but the region has {n_inputs} "
                           f"input{'s' if n_inputs != 1 else ''}")
    else:
        want(i < k, f"(C2) step {k} reads Step({i}); a step may only read earlier steps"
                    + (f" (Step(0)..Step({k - 1}))" if k else " (step 0 must read inputs)"))
    return src, i


def walk_chain(chain, in_dtypes, check: bool = False) -> list:
    """The dtype of every step, from the elementwise OpDefs' own rules (Compare → bool,
    Cast → its dtype, Where → on_true's, otherwise the first operand's). With ``check``,
    each step must also pass its op's check."""
    dtypes = []
    for k, step in enumerate(chain):
        kind, attrs, operands = step_op(step)
        srcs = [_operand(k, o, len(in_dtypes)) for o in operands]
        shapes = [Shape((), in_dtypes[i] if s == "Input" else dtypes[i]) for s, i in srcs]
        d = get(kind)
        if check and d.check is not None:
            try:
                d.check(shapes, attrs, None)
            except OpError as e:
                raise OpError(f"(C3) step {k} {format_step(step)}: {e}") from None
        dtypes.append(d.infer(shapes, attrs).dtype)
    return dtypes


# ── shape rule and checks ─────────────────────────────────────────────────

def _check_counts(shapes, a) -> None:
    want(1 <= len(a.chain) <= MAX_STEPS,
         f"(C1) the chain has {len(a.chain)} steps, expected 1..{MAX_STEPS}")
    want(1 <= a.num_inputs <= MAX_INPUTS,
         f"(C1) num_inputs is {a.num_inputs}, expected 1..{MAX_INPUTS}")
    want(len(shapes) == a.num_inputs, f"(C1) ElementwiseRegion declares num_inputs="
                                      f"{a.num_inputs} but has {len(shapes)} operand(s)")


def _upsampled(s: Shape) -> Shape:
    want(s.rank == 4, f"(C7) the ResizeNearest2x prologue needs an NCHW (rank 4) input, "
                      f"got {s}")
    n, c, h, w = s.dims
    return s.with_dims((n, c, h * 2, w * 2))


def _effective(shapes, a) -> list:
    """Input shapes as the chain sees them (the prologue input upsampled)."""
    out = list(shapes)
    if a.prologue == "ResizeNearest2x":
        want(a.prologue_input < len(shapes), f"(C7) prologue_input {a.prologue_input} is "
                                             f"not an input (the region has {len(shapes)})")
        out[a.prologue_input] = _upsampled(shapes[a.prologue_input])
    return out


def _infer_region(shapes, a):
    _check_counts(shapes, a)
    dtypes = walk_chain(a.chain, [s.dtype for s in shapes])
    dims = ()
    for s in _effective(shapes, a):
        dims = broadcast_dims(dims, s.dims)
    return Shape(dims, dtypes[-1])


def _is_trailing_block(dims: tuple, out_dims: tuple) -> bool:
    """dims (leading 1s dropped) equal the last dims of the output: then flat index
    gid % numel reads the element numpy broadcasting reads."""
    core = list(dims)
    while core and core[0] == 1:
        core.pop(0)
    return len(core) <= len(out_dims) and tuple(core) == tuple(out_dims[len(out_dims)
                                                                          - len(core):])


def _check_input(i: int, s: Shape, a, out: Shape) -> None:
    m, n, o = a.input_modulus[i], s.numel, out.numel
    if n is not None and o is not None:
        if m == 0:
            want(n == o, f"(C4) input {i} {s} has {n} elements but the output {out} has {o}: "
                         f"set input_modulus[{i}] = {n} to broadcast it (encode_region "
                         "computes the moduli)")
        else:
            want(m == n, f"(C4) input_modulus[{i}] = {m} but input {i} {s} has {n} elements "
                         "(the kernel reads element gid % modulus)")
            want(o % m == 0, f"(C4) input_modulus[{i}] = {m} does not divide the output's "
                             f"{o} elements")
    want(_is_trailing_block(s.dims, out.dims),
         f"(C5) input {i} {s} is not a trailing block of the output {out}: reading element "
         f"gid % {m or n} would tile it along the last axes, not broadcast it as numpy does "
         "(keep this op unfused, or reshape the input)")
    if a.scalar_input_mask >> i & 1:
        want(n in (None, 1), f"(C6) scalar_input_mask marks input {i} as a scalar but it has "
                             f"{n} elements")


def _check_region(shapes, a, out):
    _check_counts(shapes, a)
    want(len(a.input_modulus) == MAX_INPUTS,
         f"(C4) input_modulus has {len(a.input_modulus)} entries, expected {MAX_INPUTS}")
    walk_chain(a.chain, [s.dtype for s in shapes], check=True)
    out = out if out is not None else _infer_region(shapes, a)
    for i, m in enumerate(a.input_modulus[a.num_inputs:], a.num_inputs):
        want(m == 0, f"(C4) input_modulus[{i}] = {m} but the region has only "
                     f"{a.num_inputs} inputs")
    want(a.scalar_input_mask >> a.num_inputs == 0,
         f"(C6) scalar_input_mask {a.scalar_input_mask:#x} has bits past input "
         f"{a.num_inputs - 1}")
    want(a.prologue in PROLOGUE.units, f"(C7) unknown prologue {a.prologue!r}")
    prologue = a.prologue == "ResizeNearest2x"
    for i, s in enumerate(_effective(shapes, a)):
        if prologue and i == a.prologue_input:
            want(s.dims == out.dims, f"(C7) the prologue input {shapes[i]} upsamples to "
                                     f"{s}, which must equal the output {out}")
        else:
            _check_input(i, s, a, out)


# ── reference ─────────────────────────────────────────────────────────────

def _out_dims(ctx, arrays) -> tuple:
    if ctx.out.is_static:
        return ctx.out_dims
    return tuple(np.broadcast_shapes(*(x.shape for x in arrays)))


def _upsample2x(x: np.ndarray) -> np.ndarray:
    """out[n, c, y, x] = in[n, c, y // 2, x // 2]."""
    if x.ndim != 4:
        raise OpError(f"the ResizeNearest2x prologue needs a rank-4 input, got {x.shape}")
    return x.repeat(2, axis=2).repeat(2, axis=3)


def _read_input(a, i: int, x: np.ndarray, n: int) -> np.ndarray:
    """Input ``i`` as the kernel reads it: one value per output element gid."""
    flat = x.reshape(-1)
    m = a.input_modulus[i]
    if a.scalar_input_mask >> i & 1:
        if flat.size != 1:
            raise OpError(f"input {i} is marked scalar but has {flat.size} elements")
        return flat[np.zeros(n, np.intp)]
    if m == 0:
        if flat.size != n:
            raise OpError(f"input {i} has {flat.size} elements, the output {n}, and "
                          f"input_modulus[{i}] is 0 (no broadcast)")
        return flat
    if flat.size != m or n % m:
        raise OpError(f"input {i} has {flat.size} elements; input_modulus[{i}] = {m} must "
                      f"equal that and divide the output's {n}")
    return flat[np.arange(n) % m]


def _ref_region(ctx, *arrays):
    a = ctx.attrs
    if a.prologue == "ResizeNearest2x":
        arrays = list(arrays)
        arrays[a.prologue_input] = _upsample2x(arrays[a.prologue_input])
    dims = _out_dims(ctx, arrays)
    n = math.prod(dims)
    inputs = []
    for i, x in enumerate(arrays):
        if a.prologue == "ResizeNearest2x" and i == a.prologue_input:
            inputs.append(x.reshape(-1))      # already one value per output element
        else:
            inputs.append(_read_input(a, i, x, n))
    # In float64 mode floats arrive as f64; their step dtypes then widen identically.
    dtypes = walk_chain(a.chain, [DType.of(x) for x in inputs])
    values = []
    for step, dt in zip(a.chain, dtypes):
        kind, attrs, operands = step_op(step)
        args = [inputs[i] if src == "Input" else values[i] for src, i in operands]
        step_ctx = RefCtx(attrs, Shape((n,), dt), ctx.float64)
        out = np.asarray(get(kind).reference(step_ctx, *args))
        values.append(out.astype(step_ctx.out_np, copy=False))   # as the interpreter does
    return values[-1].reshape(dims)


# ── unfusing ──────────────────────────────────────────────────────────────

def unfuse(graph, attrs: ElementwiseRegionAttrs, inputs) -> int:
    """Append the region's steps to ``graph`` as separate ops reading node ids ``inputs``
    (a ResizeNearest2x node first for the prologue); returns the last step's id."""
    ids = list(inputs)
    if attrs.prologue == "ResizeNearest2x":
        p = ids[attrs.prologue_input]
        ids[attrs.prologue_input] = graph.add_node(
            Op("ResizeNearest2x"), [p], _upsampled(graph.shape(p)))
    steps = []
    for step in attrs.chain:
        kind, payload, operands = step_op(step)
        args = [ids[i] if src == "Input" else steps[i] for src, i in operands]
        shape = get(kind).infer([graph.shape(x) for x in args], payload)
        steps.append(graph.add_node(Op(kind, payload), args, shape))
    return steps[-1]


# ── samples and registration ──────────────────────────────────────────────

def _region_sample(chain, inputs, tags=(), expect=None, **kw) -> Sample:
    shapes = [Shape(np.shape(x), DType.of(np.asarray(x))) for x in inputs]
    return Sample(tuple(inputs), encode_region(chain, shapes, **kw), tags=tags, expect=expect)


def _region_samples(rng):
    f = np.float32
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -0.0, -4.0]], f)
    y = np.array([[1.0, 1.0, -1.0], [-5.0, 2.0, 4.5]], f)
    x3 = rng.standard_normal((2, 3, 4)).astype(f)
    bias, scale = rng.standard_normal(4).astype(f), rng.standard_normal(4).astype(f)
    add_relu = [binary("Add", Input(0), Input(1)), activation("Relu", Step(0))]
    maximum = [compare("Gt", Input(0), Input(1)), where(Step(0), Input(0), Input(1))]
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], f)
    half = rng.standard_normal((1, 2, 2, 3)).astype(f)
    full = rng.standard_normal((1, 2, 4, 6)).astype(f)
    return [
        _region_sample(add_relu, (x, y), expect=np.maximum(x + y, 0)),
        _region_sample(maximum, (x, y), ("ties", "±0"), expect=np.where(x > y, x, y)),
        _region_sample([binary("Add", Input(0), Input(1)), binary("Mul", Step(0), Input(2))],
                       (x3, bias, scale), ("broadcast",)),
        _region_sample([binary("Mul", Input(0), Input(1)), activation("Tanh", Step(0))],
                       (rng.standard_normal(7).astype(f), f(0.5)),
                       ("broadcast", "0-d", "prime-length")),
        _region_sample([binary("Sub", Input(1), Input(0)), activation("Exp", Step(0))],
                       (np.ones((1, 1), f), special), ("broadcast", "size-1", "nan", "inf")),
        _region_sample([where(Input(0), Input(1), Input(2)),
                        binary("Add", Step(0), Input(1))],
                       (np.array([True, False, True]), np.arange(3, dtype=f), np.ones(3, f)),
                       ("bool-cond",), expect=np.array([0, 2, 4], f)),
        _region_sample([activation("Relu", Input(0)), cast(DType.F16, Step(0))],
                       (x,), ("f16", "cast")),
        _region_sample([binary("Mul", Input(0), Input(1)), binary("Add", Step(0), Input(0))],
                       (np.array([3, -7, 0, 127], np.int32), np.array([2], np.int32)),
                       ("int", "broadcast"), expect=np.array([9, -21, 0, 381], np.int32)),
        _region_sample([compare("Le", Input(0), Input(1))], (x, y), ("bool-out",)),
        _region_sample(add_relu, (np.zeros((0, 3), f), np.ones(3, f)), ("empty", "broadcast")),
        _region_sample(add_relu, (f(1.5), f(-2.5)), ("0-d",), expect=f(0.0)),
        _region_sample(add_relu, (rng.standard_normal((2, 5)), rng.standard_normal(5)),
                       ("f64", "broadcast")),
        _region_sample([activation("Relu", Input(0)), binary("Add", Step(0), Input(1))],
                       (half, full), ("prologue",), prologue="ResizeNearest2x"),
    ]


register(OpDef(
    kind="ElementwiseRegion", family="region", attrs=ElementwiseRegionAttrs,
    payload="struct", arity=None, min_arity=1, caps=Caps.ELEMENTWISE,
    infer=_infer_region, check=_check_region, reference=_ref_region,
    doc="A fused chain of elementwise steps evaluated per output element `gid` (row-major). "
        "Step k is `Activation(op, x)`, `Cast(dtype, x)`, `Binary(op, a, b)`, "
        "`Compare(op, a, b)` or `Where(cond, on_true, on_false)`, with exactly the semantics "
        "of the standalone op; an operand is `Input(i)` (region input i) or `Step(j)` (an "
        "earlier step's value). The output is the last step's value. Input i is read at "
        "element `gid` when `input_modulus[i]` is 0, else at `gid % input_modulus[i]` "
        "(trailing-shape broadcast; `scalar_input_mask` bit i marks a one-element input). "
        "With prologue `ResizeNearest2x`, input `prologue_input` is a half-resolution NCHW "
        "tensor read 2x nearest-upsampled: `in[n, c, y // 2, x // 2]`.",
    constraints=(
        f"C1: the chain has 1..{MAX_STEPS} steps; num_inputs is 1..{MAX_INPUTS} and equals "
        "the operand count.",
        "C2: every operand is Input(i) with i < num_inputs or Step(j) with j < the reading "
        "step's index.",
        "C3: each step obeys its op's rules (Activation C1-C2, Binary C1-C3, Compare C1-C2, "
        "Where C1) on the dtypes that reach it.",
        "C4: input_modulus[i] is 0 when input i has the output's element count, else that "
        "input's element count, which divides the output's; entries past num_inputs are 0.",
        "C5: every input (leading 1s dropped) equals the trailing dims of the output, so "
        "modulo tiling reads what numpy broadcasting reads.",
        "C6: scalar_input_mask sets bits only for inputs that hold exactly one element.",
        "C7: with prologue ResizeNearest2x, prologue_input < num_inputs, that input is rank "
        "4 and its 2x upsample [N, C, 2H, 2W] equals the output dims.",
        "C8: the output dims are the numpy broadcast of the inputs (prologue input "
        "upsampled); the output dtype is the last step's (Compare: bool, Cast: its dtype, "
        "Where: on_true's, else the first operand's).",
    ),
    samples=_region_samples, dtypes=ALL_DTYPES,
    accuracy=lambda a, s, dt: chain_accuracy([step_op(st)[:2] for st in a.chain], dt),
    notes="C5 is stricter than RLX, whose fusion pass accepts any input whose element count "
          "divides the output's: a [3, 1] input over [3, 4] then reads gid % 3, not numpy's "
          "element, and the fused region disagrees with the unfused chain. Shape inference "
          "fails on inputs that do not broadcast (RLX skips them) and upsamples the prologue "
          "input before broadcasting (RLX doubles H, W afterwards); both agree on the "
          "regions RLX's passes build. Cast steps convert as the Cast op does (RLX's GPU "
          "region kernels compute every step in f32 and ignore the Cast dtype; RLX fuses "
          "only same-dtype Casts). Payloads from RLX snapshots before the prologue fields "
          "parse with prologue None.",
))
