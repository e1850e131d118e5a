"""Random number generation and sampling: RngNormal, RngUniform, Sample.

All three draw from RLX's Philox4x32-10 stream (``_philox``), so a node's output is a
function of its payload and shape, bit-exact with RLX's CPU executor: RngNormal and
RngUniform key the stream with ``combine_seed(42, key)`` (42 is RLX's default
``RngOptions`` seed; rlx_ref has no session RNG policy), Sample with its ``seed``. They
carry NONDETERMINISTIC (RLX's caps): never folded, never merged with a twin node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact
from ..ir.dtype import DType
from ..ir.shape import Dyn
from . import _philox
from ._random_samples import rng_samples, sample_samples
from ._sample_row import sample_rows
from .codec import F32, USIZE, Optional, _Int, attr
from .opdef import Caps, OpDef, OpError, register, want

U64 = _Int("u64", 0, 2**64 - 1)
_MAX_EXACT_F32 = 2**24


@dataclass(frozen=True)
class RngNormalAttrs:
    mean: float = attr(F32, doc="added to every standard-normal draw")
    scale: float = attr(F32, doc="multiplies every standard-normal draw (ONNX `scale`)")
    key: int = attr(U64, doc="per-node key mixed into the stream seed (ONNX name hash)")
    op_seed: float | None = attr(Optional(F32), None,
                                 doc="ONNX `seed`; used by RLX's Ort backend only")


@dataclass(frozen=True)
class RngUniformAttrs:
    low: float = attr(F32, doc="lower bound (inclusive)")
    high: float = attr(F32, doc="upper bound (exclusive when high > low)")
    key: int = attr(U64, doc="per-node key mixed into the stream seed (ONNX name hash)")
    op_seed: float | None = attr(Optional(F32), None,
                                 doc="ONNX `seed`; used by RLX's Ort backend only")


def _check_rng(kind):
    def check(shapes, a, out):
        want(len(shapes) <= 1, f"(C1) {kind} takes no input or one shape-template input, "
                               f"got {len(shapes)}")
        want(out.dtype is DType.F32, f"(C2) {kind} fills an f32 tensor, declared {out.dtype}")
    return check


def _ref_normal(ctx, *template):
    a, n = ctx.attrs, math.prod(ctx.out_dims)
    return _philox.normal_like(n, a.mean, a.scale, a.key).reshape(ctx.out_dims)\
        .astype(ctx.out_np)


def _ref_uniform(ctx, *template):
    a, n = ctx.attrs, math.prod(ctx.out_dims)
    return _philox.uniform_like(n, a.low, a.high, a.key).reshape(ctx.out_dims)\
        .astype(ctx.out_np)


_RNG_NOTES = (
    "Follows rlx-ir rng.rs on RLX's default Philox backend (fill_*_like with RngOptions "
    "seed 42): element i of the flattened output is draw i of one Philox4x32::new("
    "combine_seed(42, key)) stream. RLX's Ort, Bnns and Zero backends (a session policy) "
    "are not modelled, so op_seed (read only by Ort) has no effect. RLX multiplies by "
    "0xD2561A75 where published Philox uses 0xD2511F53: the stream is RLX's, not "
    "Random123's. RLX's ln/cos are the platform libm's; rlx_ref's are correctly rounded.")

register(OpDef(
    kind="RngNormal", family="random", attrs=RngNormalAttrs, payload="struct",
    arity=None, min_arity=0, caps=Caps.NONDETERMINISTIC, check=_check_rng("RngNormal"),
    reference=_ref_normal,
    doc="Fills the declared f32 shape with `mean + scale * z`, z standard normal from RLX's "
        "Philox4x32-10 stream seeded by `combine_seed(42, key)` = 42 + key * "
        "0x9E3779B97F4A7C15 (mod 2^64). Each z uses two consecutive u32 words: u = (w >> 8) / "
        "2^24 for each, u1 raised to at least f32's smallest normal, z = "
        "sqrt(-2 ln u1) * cos(2π u2) in f32 (Box-Muller, sine half dropped). The optional "
        "input is a shape template (ONNX RandomNormalLike) whose values are not read.",
    constraints=("C1: no input, or one shape-template input.",
                 "C2: the declared output dtype is f32."),
    samples=rng_samples("RngNormal", RngNormalAttrs), dtypes=(DType.F32,),
    accuracy=exact(signed_zeros=True), notes=_RNG_NOTES,
))

register(OpDef(
    kind="RngUniform", family="random", attrs=RngUniformAttrs, payload="struct",
    arity=None, min_arity=0, caps=Caps.NONDETERMINISTIC, check=_check_rng("RngUniform"),
    reference=_ref_uniform,
    doc="Fills the declared f32 shape with `low + u * (high - low)` in f32, u = (w >> 8) / "
        "2^24 from one u32 word w of RLX's Philox4x32-10 stream seeded by "
        "`combine_seed(42, key)`. The optional input is a shape template (ONNX "
        "RandomUniformLike) whose values are not read.",
    constraints=("C1: no input, or one shape-template input.",
                 "C2: the declared output dtype is f32."),
    samples=rng_samples("RngUniform", RngUniformAttrs), dtypes=(DType.F32,),
    accuracy=exact(signed_zeros=True), notes=_RNG_NOTES,
))


# ── Sample ────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class SampleAttrs:
    top_k: int = attr(USIZE, doc="keep the k largest logits (0 or >= vocab: off)")
    top_p: float = attr(F32, doc="nucleus mass to keep (>= 1 or NaN: off)")
    temperature: float = attr(F32, doc="logits are divided by max(temperature, 1e-6)")
    seed: int = attr(U64, doc="Philox seed of the draws (0: 0xDEADBEEF)")


def _check_sample(shapes, a, out):
    x = shapes[0]
    want(x.dtype is DType.F32, f"(C1) Sample reads f32 logits, got {x.dtype}")
    want(x.rank in (1, 2), f"(C2) Sample takes logits [vocab] or [batch, vocab], got {x}")
    batch = x.dims[0] if x.rank == 2 else 1
    want(out.rank == 1 and out.dims[0] == batch,
         f"(C3) Sample of {x.dims_text()} gives one id per row, [{batch}], declared "
         f"{out.dims_text()}")
    want(out.dtype is DType.F32, f"(C4) Sample returns f32-encoded ids, declared {out.dtype}")
    vocab = x.dims[-1]
    want(isinstance(vocab, Dyn) or vocab <= _MAX_EXACT_F32 + 1,
         f"(C5) Sample id {vocab} - 1 is not exact in f32 (vocab <= 2^24 + 1)")


def _ref_sample(ctx, logits):
    a = ctx.attrs
    x = np.asarray(logits, np.float32)
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    try:
        ids = sample_rows(rows, a.top_k, a.top_p, a.temperature, a.seed)
    except ValueError as e:
        raise OpError(str(e)) from None
    return ids.astype(ctx.out_np)


register(OpDef(
    kind="Sample", family="random", attrs=SampleAttrs, payload="struct", arity=1,
    caps=Caps.NONDETERMINISTIC, check=_check_sample, reference=_ref_sample,
    doc="One token id per row of f32 logits `[batch, vocab]` (or `[vocab]`: one row), "
        "f32-encoded, output `[batch]`. Per row, in f32 as RLX's CPU kernel: divide by "
        "t = max(temperature, 1e-6) (temperature 0 is thus a near-argmax, not a separate "
        "path); top-k (0 < k < vocab) sets logits below the k-th largest to -inf (ties at "
        "the cut all stay); softmax (exp of x - max, a sequential sum, times 1/sum); "
        "top-p (< 1) keeps the most probable tokens, ties by lower index, up to and "
        "including the first whose running sum reaches top_p (always at least one), and "
        "renormalizes; then one uniform r = (w >> 8) / 2^24 from Philox4x32::new(seed, or "
        "0xDEADBEEF when 0) — word b for row b — picks the first id whose running "
        "probability sum is >= r (the last id if none is).",
    constraints=("C1: the logits are f32.",
                 "C2: the logits have rank 1 ([vocab]) or 2 ([batch, vocab]).",
                 "C3: the declared output is [batch] ([1] for rank-1 logits).",
                 "C4: the declared output dtype is f32.",
                 "C5: vocab - 1 is exact in f32 (vocab <= 2^24 + 1)."),
    samples=sample_samples(SampleAttrs), dtypes=(DType.F32,), accuracy=exact(),
    notes="Follows rlx-cpu thunk/ops/reduce.rs sample_row and its executor (one "
          "Philox4x32 per node run, rows drawn in order). RLX's softmax calls the platform "
          "libm's f32 exp (an older revision used its polynomial vmath::exp_poly); rlx_ref "
          "takes exp correctly rounded, so an id could differ only where exp is not "
          "correctly rounded there and r falls on that cumulative boundary. RLX's sorts "
          "panic on NaN (partial_cmp().unwrap()), so NaN logits with top-k, or NaN "
          "probabilities with top-p, are an error here. RLX reads rank > 2 logits as "
          "[dim 0, last dim] and ignores the rest; rlx_ref rejects them (C2). RLX's op.rs "
          "doc contradicts its executor twice: it says temperature 1.0 'matches a plain "
          "argmax-of-softmax' and seed 0 uses 'a process-global counter'; the CPU kernel "
          "samples at every temperature and maps seed 0 to 0xDEADBEEF. rlx_ref follows "
          "the executor.",
))
