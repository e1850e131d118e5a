"""The backend contract every rlx_ref backend follows (ours and third parties').

A ``Backend`` has a name, says whether it is available (and why not), declares the op
kinds and dtypes it runs (RLX's ``SUPPORTED_OPS``), and compiles a graph into an
``Executable`` with ``set_param`` / ``run`` / ``run_flat`` / ``capabilities`` /
``kernel_sources``. A graph using an undeclared kind fails to compile with
``UnsupportedOp`` listing every offending node; nothing falls back silently.
docs/backend-contract.md walks through the contract (leaves, node fields, run vs run_flat).
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.graph import Graph

ALL = "all"


class UnsupportedOp(Exception):
    """The graph uses kinds or dtypes the backend does not declare; ``nodes`` lists them."""

    def __init__(self, backend: str, nodes: list):
        self.backend, self.nodes = backend, nodes
        lines = "\n".join(f"  {n}" for n in nodes)
        super().__init__(f"backend {backend!r} does not support {len(nodes)} node(s):\n{lines}")


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; the message says why."""


class Executable:
    """A compiled graph. ``run`` takes ``{input name: array}`` and returns the outputs.

    The contract (``CompiledGraph`` keeps it for subclasses): ``set_param`` copies the
    caller's array; each run returns fresh arrays that alias no input, param, other output
    or buffer of the executable; concurrent ``run`` calls from many threads are correct.
    """

    def set_param(self, name: str, value) -> None:
        raise NotImplementedError

    def run(self, inputs: dict) -> list:
        raise NotImplementedError

    def run_flat(self, inputs: dict) -> list:
        raise NotImplementedError

    def capabilities(self):
        """RLX's ``ExecutableCapabilities`` (the methods stay authoritative). Nothing by
        default, as RLX's ``NONE``; ``CompiledGraph`` executables report what they add."""
        from ..runtime.capabilities import ExecutableCapabilities

        return ExecutableCapabilities.NONE

    def clone(self) -> "Executable":
        """An independent executable sharing the compiled kernels (RLX's ``clone_box``)."""
        raise NotImplementedError(f"clone is not implemented for {type(self).__name__}")

    def set_param_typed(self, name: str, data: bytes, dtype: str) -> None:
        """RLX's default typed upload: f32 bytes only, passed on to ``set_param``."""
        import numpy as np

        if str(dtype).lower() != "f32" or len(data) % 4:
            raise ValueError(f"set_param_typed({name!r}): this backend takes only whole f32 "
                             f"buffers (got {len(data)} bytes of {dtype})")
        self.set_param(name, np.frombuffer(bytes(data), "<f4").copy())

    def set_active_extent(self, extent) -> None:
        """RLX's active-extent hint; ignored by default (kernels run the whole extent)."""

    def kernel_sources(self) -> dict:
        """Generated source of every kernel, by kernel name (empty for interpreters)."""
        return {}

    def variants_run(self) -> list:
        """Names of the declared kernel variants the runs so far used (see variants.py);
        empty for a backend that declares none."""
        return []


class Backend:
    """Base class: subclasses set ``name`` and implement ``supported_ops`` and ``compile``."""

    name = "backend"
    emulated = False          # True for simulators/emulated devices (separate report column)
    test_only = False         # excluded from "every available backend"
    device = ""
    fork_safe = True          # False when a driver's threads make fork() unsafe
    device_types = ("cpu",)   # which device-typed kernel variants can run (variants.py)

    def availability(self) -> tuple[bool, str]:
        """(True, "") when usable here, else (False, the reason)."""
        return True, ""

    def supported_ops(self) -> dict:
        """``{kind: frozenset of DType | "all"}``: what this backend claims to run."""
        raise NotImplementedError

    def paths(self) -> dict:
        """``{kind: "native" | "rewritten" | "decomposed" | "host"}`` for the coverage report."""
        return {k: "native" for k in self.supported_ops()}

    def path_reasons(self) -> dict:
        """``{kind: why}`` for kinds not run natively (shown in the dispatch report)."""
        return {}

    def accumulation(self) -> list:
        """The ``Accumulation`` promises that hold here: accuracy beyond the generic
        contracts, which conformance holds this backend to (none by default)."""
        return []

    def supports(self, kind: str, dtype: DType | None = None) -> bool:
        table = self.supported_ops()
        if kind not in table:
            return False
        claimed = table[kind]
        return claimed == ALL or dtype is None or dtype in claimed

    def unsupported_nodes(self, graph: Graph) -> list[str]:
        """Text of every node (bodies included) whose kind/dtype this backend does not claim."""
        from ..ops.opdef import get

        bad, stack = [], [graph]
        while stack:
            g = stack.pop()
            for n in g.nodes:
                dt = n.shape.dtype
                if not self.supports(n.kind, dt):
                    bad.append(f"@{g.name} %{n.id} {n.kind} ({dt}): not in {self.name}'s "
                               "declared op table")
                elif (src := complex_cast_source(g, n, self.supports)) is not None:
                    bad.append(f"@{g.name} %{n.id} Cast from {src}: {self.name} does not "
                               f"claim Cast for {src}")
                stack.extend(get(n.kind).bodies(n.attrs))
        return bad

    def check_supported(self, graph: Graph) -> None:
        bad = self.unsupported_nodes(graph)
        if bad:
            raise UnsupportedOp(self.name, bad)

    def compile(self, graph: Graph, options=None) -> Executable:
        raise NotImplementedError

    def describe(self) -> dict:
        """What the results file records about this backend."""
        table = self.supported_ops()
        return {"emulated": self.emulated, "device": self.device,
                "device_types": list(self.device_types),
                "declared": {k: (v if v == ALL else sorted(str(d) for d in v))
                             for k, v in sorted(table.items())},
                "paths": dict(sorted(self.paths().items())),
                "accumulation": [p.to_json() for p in self.accumulation()]}


class TableBackend(Backend):
    """A kernel backend whose declarations come from its ``LoweringTable`` (``_table``)
    and whose compile runs the compile pipeline before building an executable."""

    def _table(self):
        raise NotImplementedError

    def supported_ops(self) -> dict:
        return self._table().supported_ops()

    def paths(self) -> dict:
        return self._table().paths()

    def path_reasons(self) -> dict:
        return self._table().path_reasons()

    def accumulation(self) -> list:
        return [p for p in self._table().accumulation() if self.promise_holds(p.when)]

    def promise_holds(self, when: str) -> bool:
        """Whether a promise's device condition ``when`` holds ("" always does)."""
        if when:
            raise ValueError(f"{self.name}: unknown accumulation condition {when!r}")
        return True

    def _compile_with(self, graph: Graph, options, make_executable) -> Executable:
        """Fold, DCE, decompose, legalize and fuse ``graph``, then
        ``make_executable(lowered graph)``; the result carries the dispatch report."""
        from ..passes import compile_pipeline

        lowered, report = compile_pipeline(graph, self, options)
        exe = make_executable(lowered)
        exe.dispatch_report = report
        exe.source_graph = graph
        return exe


def complex_cast_source(graph: Graph, node, supports) -> DType | None:
    """The complex operand dtype of a real-valued Cast that ``supports(kind, dtype)`` claims
    only through its output dtype (claims are keyed on outputs, and a real Cast kernel
    cannot read complex operands); None when there is none."""
    if node.kind != "Cast" or node.shape.dtype.is_complex or not node.inputs:
        return None
    src = graph.nodes[node.inputs[0]].shape.dtype
    return src if src.is_complex and not supports("Cast", src) else None
