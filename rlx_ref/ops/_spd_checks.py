"""Operand rules shared by the SPD-manifold kinds: every operand f64, matrices square,
one matrix size ``n`` and one batch size ``B`` across operands (RLX's shape rules)."""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from .opdef import want

KINDS = ("BiMap", "ReEig", "LogEig", "SpdBatchNorm", "SpdKarcherMean", "SpdKarcherMeanWeighted",
         "SpdLogMap", "SpdExpMap", "SpdParallelTransport", "SpdMatrixFnBatch",
         "ReEigBackward", "LogEigBackward", "SpdBatchNormBackwardX", "SpdBatchNormBackwardG",
         "SpdLogMapBackward", "SpdExpMapBackward", "SpdParallelTransportBackward",
         "SpdMatrixFnBatchBackward")    # ops/spd.py and ops/spd_backward.py


def agree(a, b) -> bool:
    """Two dims agree: equal, or one is dynamic (only the run can tell)."""
    return a == b or isinstance(a, Dyn) or isinstance(b, Dyn)


def f64_only(shapes, kind: str, names, cid: str = "C1") -> None:
    """Every operand is f64: RLX's CPU kernels read and write f64 only."""
    for s, n in zip(shapes, names):
        want(s.dtype is DType.F64,
             f"({cid}) {kind} operand `{n}` must be f64 (RLX's SPD kernels are f64-only), "
             f"got {s.dtype}; insert a Cast")


def square(s: Shape, kind: str, name: str, cid: str):
    """n of an [n, n] operand."""
    want(s.rank == 2 and agree(s.dims[0], s.dims[1]),
         f"({cid}) {kind} operand `{name}` must be a square matrix [n, n], got {s}")
    return s.dims[0]


def stack(s: Shape, kind: str, name: str, cid: str):
    """(B, n) of a [B, n, n] operand."""
    want(s.rank == 3 and agree(s.dims[1], s.dims[2]),
         f"({cid}) {kind} operand `{name}` must be a stack of square matrices [B, n, n], "
         f"got {s}")
    return s.dims[0], s.dims[1]


def same_n(kind: str, cid: str, **ns) -> None:
    """Every named operand has the same matrix size n."""
    items = list(ns.items())
    first_name, first = items[0]
    for name, n in items[1:]:
        want(agree(first, n), f"({cid}) {kind}: `{first_name}` has n={first} but `{name}` "
                              f"has n={n}; every matrix operand must be n x n")


def flat(s: Shape, want_numel, kind: str, name: str, cid: str) -> None:
    """An operand read flat: exactly ``want_numel`` elements (any rank)."""
    if s.is_static and not isinstance(want_numel, Dyn):
        want(s.numel == want_numel,
             f"({cid}) {kind} operand `{name}` must hold {want_numel} elements (read flat), "
             f"got {s}")


def f64(dims) -> Shape:
    return Shape(tuple(dims), DType.F64)


# ── per-kind operand checks: each returns the output shape ───────────────────

def maps(kind: str, names, shapes) -> Shape:
    """[n, n] operands (base/from, the point or tangent...) -> the last operand's shape."""
    f64_only(shapes, kind, names)
    ns = {n: square(s, kind, n, "C2") for n, s in zip(names, shapes)}
    same_n(kind, "C2", **ns)
    return shapes[-1]


def packed_grads(kind: str, names, shapes, k: int) -> Shape:
    """[n, n] operands -> the packed [k, n, n] per-input gradients."""
    maps(kind, names, shapes)
    n = shapes[0].dims[0]
    return f64((k, n, n))


def batch_fn(kind: str, names, shapes) -> Shape:
    """[B, n, n] operands of one shape -> that shape."""
    f64_only(shapes, kind, names)
    dims = [stack(s, kind, n, "C2") for n, s in zip(names, shapes)]
    for (b, n), name in zip(dims[1:], names[1:]):
        want(agree(b, dims[0][0]) and agree(n, dims[0][1]),
             f"(C2) {kind}: `{name}` {shapes[names.index(name)]} must match `{names[0]}` "
             f"{shapes[0]}")
    return shapes[0]


def spectral_bwd(kind: str, shapes) -> Shape:
    """(λ [n], U [n²], dY [n²]) -> dX [n, n]."""
    f64_only(shapes, kind, ("lam", "u", "dy"))
    lam = shapes[0]
    want(lam.rank == 1, f"(C2) {kind} operand `lam` must be the eigenvalues [n], got {lam}")
    n = lam.dims[0]
    nn = n if isinstance(n, Dyn) else n * n
    flat(shapes[1], nn, kind, "u", "C2")
    flat(shapes[2], nn, kind, "dy", "C2")
    return f64((n, n))
