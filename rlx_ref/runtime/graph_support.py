"""Whether a device can run a graph (RLX's ``supports_graph`` / ``first_unsupported_op``),
asked without compiling: the same rewrites the backend's compile runs before legalizing
(unfuse, DCE, decompose for kernel backends), then the claim check."""
from __future__ import annotations

from dataclasses import dataclass

from .devices import backend_for, is_available, parse_device


@dataclass(frozen=True)
class Blocker:
    """The first node a device cannot run: its index, kind and dtype."""

    node: int
    kind: str
    dtype: str
    where: str = ""         # the body it is in, when not the top-level graph

    def text(self) -> str:
        """RLX's blocker string: ``unsupported op at node 3: Attention``."""
        inside = f" in {self.where}" if self.where else ""
        return f"unsupported op at node {self.node}{inside}: {self.kind} ({self.dtype})"


def _offenders(backend, graph) -> list:
    from ..backends.base import TableBackend
    from ..passes import dead_code_elimination, decompose, find_unsupported
    from ..passes._rewrite import SupportTable, walk_graphs
    from ..passes.unfuse import unfuse_elementwise

    table = SupportTable.of(backend)
    if isinstance(backend, TableBackend):           # its compile runs the pipeline
        g = decompose(dead_code_elimination(unfuse_elementwise(graph, table)), table)
        return [(o.graph, o.node, o.kind, o.dtype) for o in find_unsupported(g, table)]
    return [(path, n.id, n.kind, n.shape.dtype) for g, path in walk_graphs(graph)
            for n in g.nodes if not backend.supports(n.kind, n.shape.dtype)]


def first_unsupported_op(device, graph) -> Blocker | None:
    """The first node of ``graph`` that ``device`` cannot run, or None. A kind made by a
    decomposition is reported at the first original node of a kind the backend lacks."""
    dev = parse_device(device)
    backend = backend_for(dev)
    if backend is None or not is_available(dev):
        first = graph.nodes[0] if graph.nodes else None
        return Blocker(0, first.kind if first else "(empty graph)",
                       str(first.shape.dtype) if first else "-")
    bad = _offenders(backend, graph)
    if not bad:
        return None
    path, node, kind, dtype = bad[0]
    top = f"@{graph.name}"
    if path == top and node < len(graph.nodes) and graph.nodes[node].kind == kind:
        return Blocker(node, kind, str(dtype))
    for n in graph.nodes:                           # a decomposition's product: its source
        if not backend.supports(n.kind, n.shape.dtype):
            return Blocker(n.id, n.kind, str(n.shape.dtype))
    return Blocker(node, kind, str(dtype), "" if path == top else path)


def supports_graph(device, graph) -> bool:
    """Whether ``device`` is available and can run every node of ``graph``."""
    return first_unsupported_op(device, graph) is None


def advisory_capabilities(device) -> list:
    """RLX's advisory capability names for ``device``: what its executables report
    (``Executable.capabilities``) before anything is compiled."""
    dev = parse_device(device)
    caps = ["clone", "typed_io"]           # what every CompiledGraph executable reports
    backend = backend_for(dev)
    # the OpenCL executable hands out device buffers on a real GPU; CUDA returns host arrays
    if backend is not None and backend.name == "opencl" and is_available(dev) \
            and "gpu" in tuple(backend.device_types) and not backend.emulated:
        caps.append("gpu_handles")
    return caps
