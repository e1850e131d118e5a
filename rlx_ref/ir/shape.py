"""Shapes: static and dynamic (symbolic) dims plus a dtype, and RLX's broadcasting."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

from .dtype import DType


@dataclass(frozen=True, order=True)
class Dyn:
    """A dynamic dim: symbol ``sym``; two ``Dyn(3)`` in one graph are the same size."""

    sym: int

    def __str__(self) -> str:
        return f"?{self.sym}"


Dim = Union[int, Dyn]


class ShapeError(ValueError):
    """A shape rule was violated; the message says which dims and what was expected."""


@dataclass(frozen=True)
class Shape:
    """Ordered dims plus an element dtype, as RLX's ``Shape``."""

    dims: tuple
    dtype: DType

    def __init__(self, dims: Iterable[Dim], dtype: DType):
        dims = tuple(d if isinstance(d, Dyn) else _static(d) for d in dims)
        object.__setattr__(self, "dims", dims)
        if not isinstance(dtype, DType):
            dtype = DType.parse(str(dtype))
        object.__setattr__(self, "dtype", dtype)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_static(self) -> bool:
        return all(not isinstance(d, Dyn) for d in self.dims)

    @property
    def numel(self) -> int | None:
        """Element count, or None when a dim is dynamic."""
        n = 1
        for d in self.dims:
            if isinstance(d, Dyn):
                return None
            n *= d
        return n

    @property
    def size_bytes(self) -> int | None:
        n = self.numel
        return None if n is None else n * self.dtype.size_bytes

    def with_dtype(self, dtype: DType) -> "Shape":
        return Shape(self.dims, dtype)

    def with_dims(self, dims: Iterable[Dim]) -> "Shape":
        return Shape(dims, self.dtype)

    def with_dim(self, axis: int, dim: Dim) -> "Shape":
        dims = list(self.dims)
        dims[axis] = dim
        return Shape(dims, self.dtype)

    def dynamic_symbols(self) -> list[int]:
        return sorted({d.sym for d in self.dims if isinstance(d, Dyn)})

    def bind(self, bindings: dict[int, int]) -> "Shape":
        """Replace dynamic symbols found in ``bindings`` by their static size."""
        return Shape(
            (bindings.get(d.sym, d) if isinstance(d, Dyn) else d for d in self.dims), self.dtype
        )

    def dims_text(self) -> str:
        return "[" + ", ".join(str(d) for d in self.dims) + "]"

    def __str__(self) -> str:
        return f"{self.dims_text()} {self.dtype}"

    def __repr__(self) -> str:
        return f"Shape({self.dims_text()}, {self.dtype})"

    def static_dims(self) -> tuple[int, ...]:
        """The dims as ints; ShapeError when one is dynamic."""
        if not self.is_static:
            raise ShapeError(f"shape {self} has dynamic dims where static ones are needed")
        return self.dims


def _static(d) -> int:
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise ShapeError(f"a dim must be a non-negative int or Dyn, got {d!r}")
    d = int(d)
    if d < 0:
        raise ShapeError(f"a dim must be non-negative, got {d}")
    return d


def broadcast_dim(a: Dim, b: Dim) -> Dim:
    """One dim of a numpy broadcast: 1 stretches; equal dims agree; a dynamic dim wins."""
    if a == 1:
        return b
    if b == 1:
        return a
    if a == b:
        return a
    if isinstance(a, Dyn) or isinstance(b, Dyn):
        return a
    raise ShapeError(f"cannot broadcast {a} with {b}")


def broadcast_dims(a: tuple, b: tuple) -> tuple:
    """NumPy broadcast of two dim tuples, right-aligned (rank-0 broadcasts like [1])."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        try:
            out.append(broadcast_dim(x, y))
        except ShapeError:
            raise ShapeError(
                f"cannot broadcast {_txt(a)} with {_txt(b)}: dim {i} is {x} vs {y}"
            ) from None
    return tuple(out)


def broadcast(a: Shape, b: Shape) -> Shape:
    """RLX's ``broadcast``: dims broadcast, dtype of the left operand."""
    return Shape(broadcast_dims(a.dims, b.dims), a.dtype)


def _txt(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into [0, rank); ShapeError when out of range."""
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
