"""PyTorch import: ``from_torch(module, example_inputs)`` -> a graph with its parameters.

``torch.export`` traces the module for the example inputs' shapes; the program is
functionalized (``run_decompositions({})``), aten ops without a mapping are decomposed with
torch's own table where it has one, and each remaining aten call becomes one or a few RLX
nodes (``_aten_nn``, ``_aten_tensor``). Parameters and buffers become ``Param`` nodes named
by their state_dict keys; their values travel beside the graph in ``TorchProgram.params``.
A linear layer's weight is also held transposed, as the Param ``<key>.T`` (``[in, out]``),
so that no run transposes it.
torch is imported only when ``from_torch`` is called.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._convert import HANDLERS, TorchImportError, problems_of, target_name

__all__ = ["from_torch", "TorchProgram", "TorchImportError", "supported_aten_ops"]


@dataclass
class TorchProgram:
    """An imported module: ``graph`` (verified), ``params`` (name -> array, fed as Params),
    ``input_names`` (the graph's Inputs, in the module's argument order)."""

    graph: object
    params: dict
    input_names: list
    _compiled: dict = field(default_factory=dict, repr=False)

    def compile(self, backend: str = "reference", options=None):
        """A compiled executable for ``backend`` with every Param already set."""
        from ..runtime.session import Session

        exe = Session(backend).compile(self.graph, options)
        for name, value in self.params.items():
            exe.set_param(name, value)
        return exe

    def feeds(self, *inputs) -> dict:
        """The module's positional inputs (torch tensors or arrays) as a feed dict."""
        if len(inputs) != len(self.input_names):
            raise TypeError(f"the module takes {len(self.input_names)} input(s) "
                            f"({', '.join(self.input_names)}), got {len(inputs)}")
        return {n: _as_numpy(x) for n, x in zip(self.input_names, inputs)}

    def run(self, *inputs, backend: str = "reference"):
        """Run on ``backend`` (compiled once per backend); one output comes back as an
        array, several as a tuple, as the module returns them."""
        if backend not in self._compiled:
            self._compiled[backend] = self.compile(backend)
        outs = self._compiled[backend].run(self.feeds(*inputs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_float64(self, *inputs):
        """The oracle in float64 (every intermediate in f64): the reference for contracts."""
        from ..interpret import Interpreter

        outs = Interpreter(self.graph, float64=True).run(self.feeds(*inputs), self.params)
        return outs[0] if len(outs) == 1 else tuple(outs)


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def supported_aten_ops() -> list:
    """The aten overloads ``from_torch`` maps (after importing the handler tables)."""
    from . import _aten_nn, _aten_tensor  # noqa: F401  (registers the handlers)

    return sorted(n for n in HANDLERS if n != "getitem")


def _decompose_unmapped(ep):
    """Decompose, with torch's default table, only the ops that have no handler."""
    import torch

    table = torch.export.default_decompositions()
    for _ in range(4):        # a decomposition may produce ops that need decomposing again
        ops = {n.target for n in ep.graph.nodes if n.op == "call_function"
               and target_name(n) not in HANDLERS}
        wanted = {op: table[op] for op in ops if op in table}
        if not wanted:
            return ep
        ep = ep.run_decompositions(wanted)
    return ep


def from_torch(module, example_inputs, *, name: str | None = None) -> TorchProgram:
    """Import ``module`` (an ``nn.Module`` in eval mode) traced at ``example_inputs``.

    Every aten call must map onto RLX kinds; otherwise ``TorchImportError`` lists each
    node that does not (with the reason), and nothing is returned. Shapes are static:
    import again for other input shapes."""
    import torch
    from torch.export.graph_signature import InputKind

    from ..ir.graph import Graph
    from ..ir.verify import verify_or_raise
    from . import _aten_nn, _aten_tensor  # noqa: F401  (registers the handlers)
    from ._convert import convert

    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) \
        else (example_inputs,)
    with torch.no_grad():
        ep = torch.export.export(module, args)
        ep = _decompose_unmapped(ep.run_decompositions({}))
    problems = problems_of(ep.graph)
    if problems:
        raise TorchImportError(problems)
    specs = ep.graph_signature.input_specs
    user = [s.arg.name for s in specs if s.kind == InputKind.USER_INPUT]
    consts = {s.target: _as_numpy(ep.constants[s.target]) for s in specs
              if s.kind == InputKind.CONSTANT_TENSOR}
    g = Graph(name or type(module).__name__.lower())
    with torch.no_grad():
        outs, derived = convert(ep, g, user, consts)
    g.set_outputs(outs)
    verify_or_raise(g)
    values = {}
    for s in specs:
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            v = ep.state_dict.get(s.target)
            values[s.target] = _as_numpy(v if v is not None else ep.constants[s.target])
    for name, (src, fn) in derived.items():
        values[name] = fn(values[src])
    used = {n.attrs.name for n in g.param_nodes()}
    return TorchProgram(g, {k: values[k] for k in used}, user)
