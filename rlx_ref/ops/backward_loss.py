"""Training losses: SoftmaxCrossEntropyWithLogits (class-index labels), SoftmaxCrossEntropy
(dense / soft targets) and SoftmaxCrossEntropyBackward (the gradient of the first).

All take 2-D logits ``[N, C]`` (one row per example, classes on axis 1) and return one loss
per row; the caller reduces (``Reduce Mean``) when it wants a scalar. Every row's
log-sum-exp is max-subtracted, so large logits do not overflow. Unit payloads, as RLX.
"""
from __future__ import annotations

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Shape
from ._indexing_index import check_index_dtype, decode, in_range
from .movement import same_dim
from .opdef import Caps, OpDef, Sample, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
_F = np.float32


def _work(*arrays):
    """Arrays in one arithmetic dtype: f64 if any input is f64, else f32."""
    dt = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]


# ── shared rules ──────────────────────────────────────────────────────────

def _check_logits(kind: str, logits) -> None:
    want(logits.dtype.is_float, f"(C1) {kind} logits must be a float tensor, got "
                                f"{logits.dtype}")
    want(logits.rank == 2, f"(C1) {kind} logits must be [N, C] (rank 2), got {logits}")


def _check_labels(kind: str, logits, labels) -> None:
    check_index_dtype(labels.dtype, kind, "C2", "labels")
    n = logits.dims[0]
    ok = (labels.rank == 1 and same_dim(labels.dims[0], n)) or \
        (labels.rank == 2 and same_dim(labels.dims[0], n) and labels.dims[1] == 1)
    want(ok, f"(C2) {kind} labels must be [N] (or [N, 1]) with N = {n} rows of logits, got "
             f"{labels}")


def _labels(kind: str, labels, c: int) -> np.ndarray:
    """The class index of every row: integers in 0..C-1, else OpError (never read outside)."""
    flat = np.asarray(labels).reshape(-1)
    return in_range(decode(flat, kind, "C3", "labels"), c, 1, kind, "C3", negative_ok=False,
                    what="labels")


def _log_sum_exp(x) -> np.ndarray:
    """Per row, ``m + log Σ exp(x - m)`` with ``m`` the row max (no overflow)."""
    m = x.max(axis=1, keepdims=True, initial=-np.inf)
    return m[:, 0] + np.log(np.exp(x - m).sum(axis=1))


def _softmax_rows(x) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True, initial=-np.inf))
    return e / e.sum(axis=1, keepdims=True)


def _rows(shapes, a):
    return Shape((shapes[0].dims[0],), shapes[0].dtype)


# ── SoftmaxCrossEntropyWithLogits ─────────────────────────────────────────

def _check_sce_labels(shapes, a, out):
    logits, labels = shapes
    _check_logits("SoftmaxCrossEntropyWithLogits", logits)
    _check_labels("SoftmaxCrossEntropyWithLogits", logits, labels)


def _ref_sce_labels(ctx, logits, labels):
    (x,) = _work(logits)
    lab = _labels("SoftmaxCrossEntropyWithLogits", labels, x.shape[1])
    with np.errstate(all="ignore"):
        loss = _log_sum_exp(x) - x[np.arange(x.shape[0]), lab]   # -log softmax(x)[label]
    return loss.astype(ctx.out_np)


def _logits(rng, n, c, scale=1.0):
    return (rng.standard_normal((n, c)) * scale).astype(_F)


def _sce_label_samples(rng):
    lab = np.array([0, 4, 2, 4], _F)                   # both edge classes, a repeat
    special = _logits(rng, 3, 4)
    special[0, 1], special[1, 2] = -np.inf, np.nan
    return [
        Sample((_logits(rng, 4, 5), lab), tags=("edge-labels", "duplicates", "prime-length")),
        # one class: the loss is exactly 0; a margin of 100 saturates exp in f32
        Sample((np.array([[3], [-2]], _F), np.zeros(2, _F)), tags=("hand", "size-1"),
               expect=np.zeros(2, _F)),
        Sample((np.array([[100, 0], [100, 0]], _F), np.array([0, 1], _F)),
               tags=("hand", "large-margin"), expect=np.array([0, 100], _F)),
        Sample((_logits(rng, 3, 6), np.array([[5], [0], [3]], _F)), tags=("labels-column",)),
        Sample((_logits(rng, 3, 4), np.array([3, 1, 0], np.int64)), tags=("int",)),
        Sample((_logits(rng, 2, 7, 50.0), np.array([6, 0], _F)), tags=("large",)),
        Sample((special, np.array([0, 1, 3], _F)), tags=("nan", "inf")),
        Sample((np.zeros((0, 5), _F), np.zeros(0, _F)), tags=("empty",)),
        Sample((rng.standard_normal((3, 4)), np.array([1, 3, 0], np.float64)), tags=("f64",)),
        Sample((_logits(rng, 3, 4).astype(np.float16), np.array([2, 0, 3], np.float16)),
               tags=("f16",)),
    ]


register(OpDef(
    kind="SoftmaxCrossEntropyWithLogits", family="backward", payload="unit", arity=2,
    caps=Caps.NONE, infer=_rows, check=_check_sce_labels, reference=_ref_sce_labels,
    input_names=("logits", "labels"),
    doc="Fused softmax + cross-entropy with class-index labels, one loss per row: "
        "`loss[n] = logsumexp(logits[n]) − logits[n, labels[n]]` (= −log softmax(logits[n])"
        "[labels[n]]), with the row max subtracted inside the log-sum-exp. `logits` is "
        "`[N, C]`; `labels` holds N class indices as f32-encoded integers (or an integer "
        "tensor), `[N]` or `[N, 1]`; the output is `[N]` in the logits' dtype. A NaN "
        "logit, or a row whose max is ±inf, gives NaN; -inf on another class is fine.",
    constraints=(
        "C1: logits is a float tensor [N, C].",
        "C2: labels are [N] or [N, 1], float (integral values) or integer.",
        "C3: at run time every label is an integer in 0..C-1 (anything else is an error, "
        "never a read outside the row).",
    ),
    samples=_sce_label_samples, dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[1] + 2, "all"),
    notes="RLX's CPU kernel casts the label with `as usize` (a negative or NaN label "
          "becomes 0, a too-large one reads past the row); here both are errors. RLX's "
          "builder debug-asserts rank-2 logits; its verifier has no rule for this kind.",
))


# ── SoftmaxCrossEntropy (dense / soft targets) ─────────────────────────────

def _check_sce_dense(shapes, a, out):
    logits, targets = shapes
    _check_logits("SoftmaxCrossEntropy", logits)
    want(targets.dtype == logits.dtype and targets.rank == 2 and
         all(same_dim(p, q) for p, q in zip(targets.dims, logits.dims)),
         f"(C2) SoftmaxCrossEntropy targets must have the logits' shape and dtype "
         f"{logits}, got {targets}")


def _ref_sce_dense(ctx, logits, targets):
    x, t = _work(logits, targets)
    with np.errstate(all="ignore"):
        loss = _log_sum_exp(x) - (t * x).sum(axis=1)
    return loss.astype(ctx.out_np)


def _sce_dense_samples(rng):
    soft = _softmax_rows(rng.standard_normal((4, 5))).astype(_F)
    one_hot = np.eye(5, dtype=_F)[[0, 4, 2, 4]]
    return [
        Sample((_logits(rng, 4, 5), soft), tags=("soft-labels", "prime-length")),
        Sample((_logits(rng, 4, 5), one_hot), tags=("one-hot", "edge-labels")),
        Sample((_logits(rng, 3, 4), rng.random((3, 4)).astype(_F) * 2),
               tags=("unnormalised",)),
        Sample((np.array([[3], [-2]], _F), np.ones((2, 1), _F)), tags=("hand", "size-1"),
               expect=np.zeros(2, _F)),
        Sample((np.array([[100, 0]], _F), np.array([[0.5, 0.5]], _F)),
               tags=("hand", "large-margin"), expect=np.array([50], _F)),
        Sample((_logits(rng, 2, 7, 50.0), _softmax_rows(rng.standard_normal((2, 7)))
                .astype(_F)), tags=("large",)),
        Sample((np.zeros((0, 5), _F), np.zeros((0, 5), _F)), tags=("empty",)),
        Sample((rng.standard_normal((3, 4)), _softmax_rows(rng.standard_normal((3, 4)))),
               tags=("f64",)),
        Sample((_logits(rng, 3, 4).astype(np.float16), soft[:3, :4].astype(np.float16)),
               tags=("f16",)),
    ]


register(OpDef(
    kind="SoftmaxCrossEntropy", family="backward", payload="unit", arity=2, caps=Caps.NONE,
    infer=_rows, check=_check_sce_dense, reference=_ref_sce_dense,
    input_names=("logits", "targets"),
    doc="Softmax cross-entropy with dense (soft) targets, one loss per row: "
        "`loss[n] = logsumexp(logits[n]) − Σ_c targets[n, c]·logits[n, c]`, RLX's formula, "
        "which equals `−Σ_c targets[n, c]·log softmax(logits[n])[c]` when each target row "
        "sums to 1 (a one-hot row gives SoftmaxCrossEntropyWithLogits' loss); rows that do "
        "not sum to 1 are NOT rescaled. `logits` and `targets` are `[N, C]` of one float "
        "dtype; the output is `[N]`. Its gradient is `(softmax(logits) − targets)·d_loss` for "
        "the logits and `−logits·d_loss` for the targets (RLX composes it from primitives).",
    constraints=("C1: logits is a float tensor [N, C].",
                 "C2: targets have the logits' shape and dtype."),
    samples=_sce_dense_samples, dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[1] + 2, "all"),
    notes="Not in RLX 0.2.2; newer RLX adds it with a CPU kernel, a primitive lowering for "
          "GPU backends and an autodiff rule that composes its gradient (no backward kind).",
))


# ── SoftmaxCrossEntropyBackward ───────────────────────────────────────────

def _check_sce_backward(shapes, a, out):
    logits, labels, d_loss = shapes
    _check_logits("SoftmaxCrossEntropyBackward", logits)
    _check_labels("SoftmaxCrossEntropyBackward", logits, labels)
    want(d_loss.dtype == logits.dtype and d_loss.rank == 1 and
         same_dim(d_loss.dims[0], logits.dims[0]),
         f"(C4) d_loss must be [N] = [{logits.dims[0]}] in the logits' dtype "
         f"{logits.dtype} (the cotangent of the per-row loss), got {d_loss}")


def _ref_sce_backward(ctx, logits, labels, d_loss):
    x, dl = _work(logits, d_loss)
    lab = _labels("SoftmaxCrossEntropyBackward", labels, x.shape[1])
    with np.errstate(all="ignore"):
        p = _softmax_rows(x)
        one_hot = np.zeros_like(p)
        one_hot[np.arange(x.shape[0]), lab] = 1
        dx = (p - one_hot) * dl[:, None]
    return dx.astype(ctx.out_np)


def _sce_backward_samples(rng):
    out = []
    for s in _sce_label_samples(rng):
        logits = s.inputs[0]
        d_loss = rng.standard_normal(logits.shape[0]).astype(logits.dtype)
        if "hand" not in s.tags:
            out.append(Sample(s.inputs + (d_loss,), tags=s.tags))
    out += [
        # p = (1/2, 1/2): ((1/2 - 1)·2, (1/2)·2)
        Sample((np.zeros((1, 2), _F), np.zeros(1, _F), np.array([2], _F)), tags=("hand",),
               expect=np.array([[-1, 1]], _F)),
        Sample((np.array([[3], [-2]], _F), np.zeros(2, _F), np.array([5, -1], _F)),
               tags=("hand", "size-1"), expect=np.zeros((2, 1), _F)),
        Sample((_logits(rng, 3, 4), np.array([1, 2, 3], _F), np.zeros(3, _F)),
               tags=("zero-cotangent",), expect=np.zeros((3, 4), _F)),
    ]
    return out


register(OpDef(
    kind="SoftmaxCrossEntropyBackward", family="backward", payload="unit", arity=3,
    caps=Caps.NONE, infer=lambda s, a: s[0], check=_check_sce_backward,
    reference=_ref_sce_backward, input_names=("logits", "labels", "d_loss"),
    doc="The gradient of SoftmaxCrossEntropyWithLogits with respect to the logits: "
        "`dlogits[n, c] = (softmax(logits[n])[c] − [c == labels[n]])·d_loss[n]`, the "
        "softmax recomputed (max-subtracted) from the logits. Operands are the forward's "
        "`logits [N, C]` and `labels` plus `d_loss [N]`, the cotangent of the per-row "
        "loss; the output has the logits' shape and dtype. Labels get no gradient.",
    constraints=(
        "C1: logits is a float tensor [N, C].",
        "C2: labels are [N] or [N, 1], float (integral values) or integer.",
        "C3: at run time every label is an integer in 0..C-1.",
        "C4: d_loss is [N] in the logits' dtype.",
    ),
    samples=_sce_backward_samples, dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[1] + 2, "all"),
    notes="RLX's CPU kernel casts labels with `as usize` (no range check); here a bad "
          "label is an error.",
))
