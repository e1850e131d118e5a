"""Typed host I/O (RLX's ``set_param_typed`` / ``run_typed``): values as raw little-endian
bytes of a named dtype, outputs as ``(bytes, dtype)`` pairs.

Bytes must be of the declared dtype, or of a float dtype that widens to it exactly
(f16 or bf16 into f32 or f64, f32 into f64), as RLX's f32-arena backends widen f16/bf16
host bytes (``widen_bytes_to_f32``). Anything else is refused: a narrowing or an
int/float reinterpretation would silently change the values.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn

_WIDENS = {DType.F32: (DType.F16, DType.BF16), DType.F64: (DType.F16, DType.BF16, DType.F32)}


def decode(what: str, name: str, data, dtype, decl, error) -> np.ndarray:
    """``data`` (bytes of ``dtype``) as a flat array of ``decl``'s dtype; ``error`` is the
    exception class raised with a message naming ``what`` (``set_param_typed``, ...)."""
    try:
        dt = DType.parse(str(dtype))
    except ValueError as e:
        raise error(f"{what}({name!r}): {e}") from None
    want = decl.dtype
    if dt != want and dt not in _WIDENS.get(want, ()):
        raise error(f"{what}({name!r}): dtype {dt}, but the {_role(what)} is declared {decl} "
                    "(typed bytes are the declared dtype, or a float dtype it widens to "
                    "exactly: f16/bf16 into f32/f64, f32 into f64)")
    raw = bytes(data)
    if len(raw) % dt.size_bytes:
        raise error(f"{what}({name!r}): {len(raw)} bytes is not a whole number of {dt} "
                    f"elements ({dt.size_bytes} bytes each)")
    # RLX's buffers are little-endian, as numpy's native order on every supported host
    flat = np.frombuffer(raw, dt.np.newbyteorder("<"))
    return flat.astype(want.np) if dt != want else flat.copy()


def _role(what: str) -> str:
    return "param" if "param" in what else "input"


def shaped(name: str, flat: np.ndarray, decl, shape, error) -> np.ndarray:
    """``flat`` in ``shape`` (given) or the declared one; one dynamic dim is inferred."""
    if shape is not None:
        dims = tuple(int(d) for d in shape)
    else:
        dims = _infer(name, flat.size, decl, error)
    if int(np.prod(dims, dtype=np.int64)) != flat.size:
        raise error(f"run_typed({name!r}): {flat.size} elements do not fill shape "
                    f"{list(dims)} (declared {decl.dims_text()})")
    return flat.reshape(dims)


def _infer(name: str, count: int, decl, error) -> tuple:
    dyn = [i for i, d in enumerate(decl.dims) if isinstance(d, Dyn)]
    if not dyn:
        return tuple(decl.dims)
    known = int(np.prod([d for d in decl.dims if not isinstance(d, Dyn)], dtype=np.int64))
    if len(dyn) > 1 or known == 0 or count % known:
        raise error(f"run_typed({name!r}): cannot tell the shape of {count} elements for "
                    f"{decl.dims_text()}; pass (data, dtype, shape)")
    dims = list(decl.dims)
    dims[dyn[0]] = count // known
    return tuple(dims)


def typed_inputs(exe, inputs, error) -> dict:
    """``{name: array}`` for RLX's ``[(name, data, dtype)]`` or ``{name: (data, dtype[,
    shape])}``, checked against ``exe``'s declared inputs."""
    items = inputs.items() if isinstance(inputs, dict) else \
        ((entry[0], tuple(entry[1:])) for entry in inputs)
    out = {}
    for name, value in items:
        if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
            raise error(f"run_typed({name!r}): expected (data, dtype) or (data, dtype, shape), "
                        f"got {type(value).__name__}")
        decl = exe._inputs.get(name)
        if decl is None:
            raise error(f"unknown input {name!r}; inputs of @{exe.graph.name}: "
                        f"{', '.join(exe._inputs) or '(none)'}")
        flat = decode("run_typed", name, value[0], value[1], decl, error)
        out[name] = shaped(name, flat, decl, value[2] if len(value) == 3 else None, error)
    return out


def encode(outputs: list) -> list:
    """Each output as ``(little-endian bytes, dtype name)``."""
    pairs = []
    for arr in outputs:
        dt = DType.of(arr)
        pairs.append((np.ascontiguousarray(arr, dt.np.newbyteorder("<")).tobytes(), str(dt)))
    return pairs
