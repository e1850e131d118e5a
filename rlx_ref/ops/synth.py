"""Weight-synthesis family: SynthMatMul, SynthMatMulBackward and SynthReconstruct.

RLX's only ``SynthKind`` is ``Codebook{entry_dim, num_entries}``: a weight stored
transposed, `[n, k]`, as u8 indices `[n, k/entry_dim]` into a learned codebook
`[num_entries, entry_dim]`; `Ŵ[j, kb·entry_dim + t] = codebook[indices[j, kb], t]`.
Sums run in f64 and round once into the output.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from ._quant_scheme import StructOf, _VariantEnum
from .codec import U32, Enum, attr
from .opdef import Caps, OpDef, OpError, Sample, register, want

FLOATS = (DType.F32, DType.F64)
FAMILY = "synth"
SYNTH_KIND = _VariantEnum("SynthKind", data={
    "Codebook": StructOf(entry_dim=U32, num_entries=U32)})
SYNTH_WRT = Enum("SynthBwdWrt", units=("Dx", "Codebook"))


def codebook(entry_dim: int, num_entries: int):
    """The ``SynthKind::Codebook`` payload value."""
    return ("Codebook", (("entry_dim", entry_dim), ("num_entries", num_entries)))


def _fields(kind) -> tuple[int, int]:
    d = dict(kind[1])
    return int(d["entry_dim"]), int(d["num_entries"])


@dataclass(frozen=True)
class SynthAttrs:
    kind: object = attr(SYNTH_KIND, doc="RLX's SynthKind: Codebook{entry_dim, num_entries}")

    def __post_init__(self):
        object.__setattr__(self, "kind", SYNTH_KIND.normalize(self.kind))


@dataclass(frozen=True)
class SynthBackwardAttrs(SynthAttrs):
    wrt: str = attr(SYNTH_WRT, "Dx", doc="which gradient: Dx ([m, k]) or Codebook")


def _eq(a, b) -> bool:
    return isinstance(a, Dyn) or isinstance(b, Dyn) or a == b


def _operands(kind: str, idx: Shape, cb: Shape, a):
    """C1-C3 on indices and codebook; returns (n, kb, entry_dim, num_entries)."""
    ed, ne = _fields(a.kind)
    want(ed >= 1 and 1 <= ne <= 256, f"(C1) {kind}: entry_dim must be >= 1 and num_entries "
                                     f"in 1..256 (u8 indices), got {ed} and {ne}")
    want(idx.rank == 2 and idx.dtype is DType.U8,
         f"(C2) {kind}: indices must be u8 [n, k/entry_dim], got {idx}")
    want(cb.rank == 2 and _eq(cb.dims[0], ne) and _eq(cb.dims[1], ed),
         f"(C2) {kind}: codebook must be [num_entries, entry_dim] = [{ne}, {ed}], got "
         f"{cb.dims_text()}")
    want(cb.dtype in FLOATS, f"(C3) {kind}: codebook must be f32 or f64, got {cb.dtype}")
    return idx.dims[0], idx.dims[1], ed, ne


def _x_operand(kind: str, x: Shape, cb: Shape, kb, ed):
    want(x.rank == 2, f"(C2) {kind}: x must be [m, k], got {x.dims_text()}")
    want(x.dtype == cb.dtype, f"(C3) {kind}: x and codebook share one dtype, got {x.dtype} "
                              f"and {cb.dtype}")
    k = x.dims[1]
    want(isinstance(kb, Dyn) or _eq(k, kb * ed),
         f"(C2) {kind}: x's k = {k} must be (k/entry_dim = {kb}) · entry_dim ({ed})")
    return x.dims[0]


def _infer_mm(shapes, a):
    x, idx, cb = shapes
    n, kb, ed, _ = _operands("SynthMatMul", idx, cb, a)
    m = _x_operand("SynthMatMul", x, cb, kb, ed)
    return Shape((m, n), x.dtype)


def _infer_bwd(shapes, a):
    kind = "SynthMatMulBackward"
    x, idx, cb, up = shapes
    n, kb, ed, _ = _operands(kind, idx, cb, a)
    m = _x_operand(kind, x, cb, kb, ed)
    want(up.dtype == x.dtype and up.rank == 2 and _eq(up.dims[0], m) and _eq(up.dims[1], n),
         f"(C4) {kind}: upstream must be [m, n] = [{m}, {n}] {x.dtype}, got {up}")
    return x if a.wrt == "Dx" else cb


def _infer_rec(shapes, a):
    idx, cb = shapes
    n, kb, ed, _ = _operands("SynthReconstruct", idx, cb, a)
    return Shape((n, kb * ed if not isinstance(kb, Dyn) else kb), cb.dtype)


def weight(kind: str, indices: np.ndarray, cb: np.ndarray, cid: str = "C4") -> np.ndarray:
    """Ŵ [n, k] in f64; OpError (``cid``) naming an index past the codebook."""
    idx = np.asarray(indices).astype(np.int64)
    ne = cb.shape[0]
    if idx.size and idx.max() >= ne:
        j, kb = np.argwhere(idx >= ne)[0]
        raise OpError(f"({cid}) {kind}: indices[{j}, {kb}] = {idx[j, kb]} is past the codebook's "
                      f"{ne} entries")
    return np.asarray(cb, np.float64)[idx].reshape(idx.shape[0], idx.shape[1] * cb.shape[1])


def _ref_mm(ctx, x, indices, cb):
    w = weight("SynthMatMul", indices, cb)
    return (np.asarray(x, np.float64) @ w.T).astype(ctx.out_np)


def _ref_bwd(ctx, x, indices, cb, up):
    w = weight("SynthMatMulBackward", indices, cb, "C5")
    up64 = np.asarray(up, np.float64)
    if ctx.attrs.wrt == "Dx":
        return (up64 @ w).astype(ctx.out_np)
    ed, ne = cb.shape[1], cb.shape[0]
    dw = up64.T @ np.asarray(x, np.float64)                  # dŴ [n, k]
    out = np.zeros((ne, ed))
    np.add.at(out, np.asarray(indices).astype(np.int64).reshape(-1), dw.reshape(-1, ed))
    return out.astype(ctx.out_np)


def _ref_rec(ctx, indices, cb):
    return weight("SynthReconstruct", indices, cb).astype(ctx.out_np)


_U8 = np.uint8
_CB = np.float32([[1, 0], [0, 1], [2, -1]])          # 3 entries of width 2
_IDX = _U8([[0, 2], [1, 1]])                          # n = 2 rows of k = 4


def _r(rng, *dims):
    return rng.standard_normal(dims).astype(np.float32)


def _idx(rng, n, kb, ne):
    return rng.integers(0, ne, (n, kb)).astype(_U8)


def _mm_samples(rng):
    x = np.float32([[1, 2, 3, 4]])
    # Ŵ = [[1, 0, 2, -1], [0, 1, 0, 1]] → y = [1 + 6 − 4, 2 + 4] = [3, 6]
    return [
        Sample((x, _IDX, _CB), SynthAttrs(codebook(2, 3)), expect=np.float32([[3, 6]]),
               tags=("hand",)),
        Sample((_r(rng, 3, 6), _idx(rng, 5, 2, 4), _r(rng, 4, 3)), SynthAttrs(codebook(3, 4)),
               tags=("random", "prime")),
        Sample((_r(rng, 2, 4), _idx(rng, 3, 4, 1), _r(rng, 1, 1)), SynthAttrs(codebook(1, 1)),
               tags=("entry_dim-1", "one-entry")),
        Sample((np.zeros((0, 4), np.float32), _IDX, _CB), SynthAttrs(codebook(2, 3)),
               tags=("empty",)),
    ]


def _bwd_samples(rng):
    x = np.float32([[1, 2, 3, 4]])
    up = np.float32([[1, -1]])
    # dx = up·Ŵ = [1, -1, 2, -2]; dŴ = upᵀx = [[1,2,3,4], [-1,-2,-3,-4]]:
    # entry 0 ← [1, 2], entry 2 ← [3, 4], entry 1 ← [-1, -2] + [-3, -4]
    dcb = np.float32([[1, 2], [-4, -6], [3, 4]])
    a = codebook(2, 3)
    return [
        Sample((x, _IDX, _CB, up), SynthBackwardAttrs(a, "Dx"),
               expect=np.float32([[1, -1, 2, -2]]), tags=("hand",)),
        Sample((x, _IDX, _CB, up), SynthBackwardAttrs(a, "Codebook"), expect=dcb,
               tags=("hand", "repeated-index")),
        Sample((_r(rng, 3, 6), _idx(rng, 5, 2, 4), _r(rng, 4, 3), _r(rng, 3, 5)),
               SynthBackwardAttrs(codebook(3, 4), "Codebook"), tags=("random",)),
        Sample((_r(rng, 3, 6), _idx(rng, 5, 2, 4), _r(rng, 4, 3), _r(rng, 3, 5)),
               SynthBackwardAttrs(codebook(3, 4), "Dx"), tags=("random",)),
    ]


def _rec_samples(rng):
    return [
        Sample((_IDX, _CB), SynthAttrs(codebook(2, 3)),
               expect=np.float32([[1, 0, 2, -1], [0, 1, 0, 1]]), tags=("hand",)),
        Sample((_idx(rng, 7, 3, 5), _r(rng, 5, 2)), SynthAttrs(codebook(2, 5)),
               tags=("random", "prime")),
        Sample((np.zeros((0, 2), _U8), _CB), SynthAttrs(codebook(2, 3)), tags=("empty",)),
    ]


_KINDS = ("C1: kind is Codebook with entry_dim >= 1 and 1 <= num_entries <= 256.",)
_IDX_C = ("C2: indices are u8 [n, k/entry_dim]; codebook is [num_entries, entry_dim]",)
_RUN = "every index < num_entries (checked at run time)."
_NOTE = ("RLX's kernels are f32 only; here x and the codebook may both be f64 too. An index "
         "past the codebook reads out of bounds in RLX's kernel; here it is an error.")

register(OpDef(
    kind="SynthMatMul", family=FAMILY, attrs=SynthAttrs, payload="struct", arity=3,
    caps=Caps.BLAS | Caps.FUSION_BOUNDARY, input_names=("x", "indices", "codebook"), infer=_infer_mm,
    check=lambda s, a, o: _infer_mm(s, a), reference=_ref_mm,
    doc="Matmul against a codebook-synthesized weight: `y [m, n] = x [m, k] · Ŵᵀ` with "
        "`Ŵ[j, kb·entry_dim + t] = codebook[indices[j, kb], t]` (the weight stored "
        "transposed, as GGUF's `bt` layout).",
    constraints=_KINDS + (_IDX_C[0] + "; x is [m, k] with k = (k/entry_dim)·entry_dim.",
                          "C3: x and codebook share one dtype, f32 or f64 (y too).",
                          "C4: " + _RUN),
    samples=_mm_samples, dtypes=FLOATS, notes=_NOTE))

register(OpDef(
    kind="SynthMatMulBackward", family=FAMILY, attrs=SynthBackwardAttrs, payload="struct",
    arity=4, input_names=("x", "indices", "codebook", "upstream"),
    infer=_infer_bwd, check=lambda s, a, o: _infer_bwd(s, a), reference=_ref_bwd,
    doc="One gradient of SynthMatMul. `wrt = Dx`: `dx [m, k] = upstream · Ŵ`. `wrt = "
        "Codebook`: `d_codebook [num_entries, entry_dim]`, the blocks of `dŴ = upstreamᵀ · x` "
        "summed into the entry each index names (`d_codebook[e, t] = Σ over (j, kb) with "
        "indices[j, kb] = e of dŴ[j, kb·entry_dim + t]`; an unused entry gets 0).",
    constraints=_KINDS + (_IDX_C[0] + "; x is [m, k] with k = (k/entry_dim)·entry_dim.",
                          "C3: x, codebook and upstream share one dtype, f32 or f64.",
                          "C4: upstream is [m, n].", "C5: " + _RUN),
    samples=_bwd_samples, dtypes=FLOATS, notes=_NOTE))

register(OpDef(
    kind="SynthReconstruct", family=FAMILY, attrs=SynthAttrs, payload="struct", arity=2,
    input_names=("indices", "codebook"), infer=_infer_rec,
    check=lambda s, a, o: _infer_rec(s, a), reference=_ref_rec,
    doc="The dense synthesized weight in its stored (transposed) layout: `Ŵ [n, k]` with "
        "`Ŵ[j, kb·entry_dim + t] = codebook[indices[j, kb], t]`; a caller wanting `W [k, n]` "
        "adds a Transpose.",
    constraints=_KINDS + (_IDX_C[0] + ".", "C3: codebook is f32 or f64; Ŵ has its dtype.",
                          "C4: " + _RUN),
    samples=_rec_samples, dtypes=FLOATS,
    notes=_NOTE + " RLX's op doc says the output is `W [k, n]`; its shape rule, its "
                  "portable lowering (`LowerSynthReconstruct`, 'bit-identical to the fused "
                  "kernel') and their comments give `w_bt [n, k]` and leave the Transpose to "
                  "the caller, which is followed here."))
