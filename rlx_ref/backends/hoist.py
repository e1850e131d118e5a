"""The weight-only prefix of a compiled graph, run once per set of params.

``split_param_invariant`` (passes/param_invariant.py) cuts a graph into ``prepare`` (reads
only Params and Constants) and ``main`` (reads the prepared tensors as extra Inputs). An
executable runs ``prepare`` when the params it reads are not the ones of the last
prepare, and ``main`` on every run. Params are an immutable snapshot replaced by every
``set_param`` (runtime/session.py), and ``set_param`` always stores a new array, so
"the same params" is identity of the arrays; the cache holds them, so an id is never
recycled while it is compared.
"""
from __future__ import annotations

from typing import Callable

from ..passes.param_invariant import HoistSplit, split_param_invariant


def split_for(graph, options) -> HoistSplit | None:
    """The split to run, or None (option off, nothing to hoist, dynamic prepare shapes)."""
    if options is not None and not options.hoist_param_invariant:
        return None
    split = split_param_invariant(graph)
    if split is None or not all(n.shape.is_static for n in split.prepare.nodes):
        return None
    return split


class HoistedPrefix:
    """``feeds(params)``: the prepared tensors as ``main``'s extra inputs, computed by
    ``run_prepare(params) -> list`` only when the params ``prepare`` reads changed."""

    def __init__(self, split: HoistSplit, run_prepare: Callable):
        self.split = split
        self._names = sorted(split.prepare_params)
        self._run_prepare = run_prepare
        self._cache = None          # (param arrays, prepared); replaced whole, never edited
        self.runs = 0               # how many times prepare ran

    def feeds(self, params: dict) -> dict:
        """``{boundary input name: array}`` for ``params`` (cached per params snapshot)."""
        arrays = tuple(params[n] for n in self._names)
        cache = self._cache
        if cache is not None and all(a is b for a, b in zip(cache[0], arrays)):
            return cache[1]
        # two runs racing here both prepare; either result is right for these params
        prepared = dict(zip(self.split.boundary, self._run_prepare(params)))
        self.runs += 1
        self._cache = (arrays, prepared)
        return prepared


__all__ = ["HoistedPrefix", "split_for"]
