"""Error cases: inputs on which the oracle must raise, and so must every backend.

A value check alone passes a backend that wraps a negative index or divides by zero
quietly. Each error case carries ``Case.expect_error``, the key phrases of its error
family; the oracle's own error must contain one (checked when the case is built and again
when it runs).

Matching rule: an error case passes on a backend when running it (compile, set params,
run) raises an exception other than ``UnsupportedOp`` whose message, or the message of an
exception it was raised from, contains one of the case's phrases (case-insensitive).
Backends wrap errors in their own classes (``NumbaRunError``, ``OpenCLRunError``), so the
class is not compared; the phrase is the contract. Returning values instead is ``MISMATCH``
("no error raised"); raising an error without the phrase is ``error``.

Families: an invalid index (out of range, negative where the kind does not wrap, NaN or
inf where indices are floats) is ("out of range", "not an integer"): the oracle says "not
an integer" for NaN/inf, a device kernel that range-checks the decoded value may say "out
of range", and both name the index as invalid. Integer division or modulo by zero is
("by zero",).
"""
from __future__ import annotations

import numpy as np

INDEX_ERROR = ("out of range", "not an integer")
DIV_ZERO = ("by zero",)
TAG = "error-case"
INDEX_KINDS = ("Gather", "GatherElements", "GatherNd", "ScatterAdd", "ScatterElements",
               "ScatterNd")


def _messages(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield str(exc)
        exc = exc.__cause__ or exc.__context__


def error_matches(exc: BaseException, phrases: tuple) -> bool:
    """Whether ``exc`` (or an exception it came from) mentions one of ``phrases``."""
    text = "\n".join(_messages(exc)).lower()
    return any(p.lower() in text for p in phrases)


def describe(phrases: tuple) -> str:
    return " or ".join(repr(p) for p in phrases)


# ── building the cases ────────────────────────────────────────────────────────

def _oracle_error(spec) -> str | None:
    """The oracle's error message on ``spec``'s one-op graph, or None if it runs."""
    from ..interpret import interpret
    from .cases import spec_case

    case = spec_case(spec, 0)
    try:
        interpret(case.graph, case.inputs, case.params)
    except Exception as e:  # noqa: BLE001 - the message is what we want
        return str(e)
    return None


def _with_index(spec, pos: int, value, dtype=None):
    """``spec`` with the last element of its index operand set to ``value``."""
    from .cases import Spec

    inputs = list(spec.inputs)
    idx = np.array(inputs[pos], dtype=dtype or np.asarray(inputs[pos]).dtype)
    idx.reshape(-1)[-1] = value
    inputs[pos] = idx
    return Spec(spec.kind, spec.attrs, tuple(inputs), spec.tags, spec.out, (), spec.source)


def _first_bad(spec, pos: int, values, dtype=None):
    """The first of ``values`` the oracle rejects as an invalid index, as (value, spec)."""
    for v in values:
        s = _with_index(spec, pos, v, dtype)
        msg = _oracle_error(s)
        if msg is not None and any(p in msg for p in INDEX_ERROR):
            return v, s
    return None, None


def _base(kind: str, seed: int):
    """A sample of ``kind`` with a float index operand of >= 2 elements and data, and the
    operand's position."""
    from ..ops.opdef import get
    from .cases import is_index_input, sample_specs

    d = get(kind)
    for spec in sample_specs(d, seed):
        arrays = [np.asarray(x) for x in spec.inputs]
        pos = [i for i in range(len(arrays)) if is_index_input(d, i)]
        if (pos and arrays[pos[0]].dtype == np.float32 and arrays[pos[0]].size >= 2
                and all(a.size for a in arrays)
                and all(a.dtype == np.float32 for a in arrays)):
            return spec, pos[0]
    raise LookupError(f"no {kind} sample has an f32 index operand to make error cases from")


def _spec(spec, tag: str, phrases: tuple):
    from .cases import Spec

    return Spec(spec.kind, spec.attrs, spec.inputs, (TAG, tag), spec.out, (),
                f"errors:{tag}"), phrases


def index_error_specs(kind: str, seed: int) -> list:
    """(Spec, phrases) for an index just past the end (f32 and int32 index tensors), a
    negative one (past -size where the kind counts negatives from the end), NaN and inf."""
    base, pos = _base(kind, seed)
    out = []
    _, s = _first_bad(base, pos, range(0, 1 << 12))
    out.append(_spec(s, "index-past-end", INDEX_ERROR))
    _, s = _first_bad(base, pos, range(0, 1 << 12), np.int32)
    out.append(_spec(s, "int-index-past-end", INDEX_ERROR))
    v, s = _first_bad(base, pos, range(-1, -(1 << 12), -1))
    out.append(_spec(s, "negative-index" if v == -1 else "negative-past-start", INDEX_ERROR))
    for v, tag in ((np.nan, "nan-index"), (np.inf, "inf-index")):
        _, s = _first_bad(base, pos, [v])
        out.append(_spec(s, tag, INDEX_ERROR))
    return out


def div_zero_specs(seed: int) -> list:
    """(Spec, phrases): integer Div and Mod with a zero divisor (the last element)."""
    from ..ops.opdef import get
    from .cases import Spec

    attrs_cls = get("Binary").attrs
    out = []
    for op in ("Div", "Mod"):
        for dt in (np.int32, np.int64):
            a = np.array([7, -7, 5, 9, 3], dt)
            b = np.array([2, 3, -2, 4, 0], dt)
            out.append(_spec(Spec("Binary", attrs_cls(op), (a, b)), f"{op.lower()}-by-zero",
                             DIV_ZERO))
    return out


def error_specs(kind: str, seed: int) -> list:
    """The error-case (Spec, phrases) pairs of ``kind`` (empty for kinds without any)."""
    if kind in INDEX_KINDS:
        return index_error_specs(kind, seed)
    if kind == "Binary":
        return div_zero_specs(seed)
    return []


def error_cases(kind: str, seed: int) -> list:
    """The error Cases of ``kind``; each is checked to make the oracle raise as expected."""
    from .cases import spec_case

    out = []
    for spec, phrases in error_specs(kind, seed):
        msg = _oracle_error(spec)
        if msg is None or not any(p in msg.lower() for p in phrases):
            raise AssertionError(f"error case {spec.kind} {spec.tags}: the oracle "
                                 f"{'ran' if msg is None else 'raised ' + repr(msg)}, "
                                 f"expected an error mentioning {describe(phrases)}")
        case = spec_case(spec, seed)
        case.expect_error = phrases
        out.append(case)
    return out
