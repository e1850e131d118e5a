"""RLX's cost model (``rlx-runtime/src/cost.rs``, ``graph_io.rs``): a forward pass's time
on a backend, estimated from the graph's shapes and the backend's calibrated numbers.

``estimate_graph_cost`` is RLX's formula, term for term (ns):

    roundtrip + Σ node_cost + device_traffic / memory_bw
              + host_readback / host_readback_bw + sync_points · roundtrip

``node_cost`` (RLX ``node_cost``): 0 for Input, Param, Constant; for MatMul (and RLX's
FusedMatMulBiasAct) ``2·m·k·n / (sgemm_gflops(m, k, n) + 1) + dispatch`` with n the
output's last dim, m = numel(out) / n, k = numel(a) / m; for Attention
``2·b·h·s²·d / (sgemm_gflops(s, d, s) + 1) + dispatch`` with s the query's second-last dim
and b = numel(q) / (s·h·d); every other node is bandwidth-bound,
``numel(out) · 4 / max(memory_bw, 1) + dispatch`` (RLX counts 4 bytes whatever the dtype).
The I/O profile (RLX ``profile_graph_io``) skips the metadata kinds (Input, Param,
Constant, Reshape, Transpose, Narrow); each other node is a launch moving its inputs' and
output's bytes (dtype sizes); outputs are read back, plus a quarter of the traffic unless
memory is unified; LogMel, LogMelBackward, Custom and WelchPeaks are sync points. Only the
top-level nodes count, as in RLX (a Scan or If body is not walked). Dynamic dims count 0.

rlx_ref keeps RLX's formula as is; what it adds lies around it: the numbers come from
calibration probes that are robust to load (``microbench``: rounds, minimums, a stalled
large probe measured again and bounded by its small twin), and the numpy oracle, whose
cost is not a backend's (a Python call per node, float64 upcasts, a numpy temporary per
step), is ranked only when a policy names it (``device_cost.ranked_candidates``).

``CalibratedCostModel`` is the hook ``device_cost`` installs: per device, the backend's
``Calibration`` (measured lazily, cached on disk) turned into a ``BackendCostModel``.
"""
from __future__ import annotations

from dataclasses import dataclass

SMALL_SGEMM_WORK = 32_768           # RLX's MLX crossover: m·k·n below it runs at "small"
METADATA_KINDS = frozenset({"Input", "Param", "Constant", "Reshape", "Transpose", "Narrow"})
SYNC_KINDS = frozenset({"LogMel", "LogMelBackward", "Custom", "WelchPeaks"})
MATMUL_KINDS = frozenset({"MatMul", "FusedMatMulBiasAct"})


class CostCalibration:
    """Where a model's numbers came from (RLX's ``CostCalibration``)."""

    MEASURED, ARCH_DEFAULT, UNCALIBRATED = "measured", "arch-default", "uncalibrated"

    @staticmethod
    def is_rankable(provenance: str) -> bool:
        """Whether numbers of this provenance may be compared across devices."""
        return provenance in (CostCalibration.MEASURED, CostCalibration.ARCH_DEFAULT)


class BackendCostModel:
    """RLX's ``BackendCostModel``: a backend's execution characteristics on this host."""

    device = None

    def calibration(self) -> str:
        return CostCalibration.ARCH_DEFAULT

    def sgemm_gflops(self, m: int, k: int, n: int) -> float:
        raise NotImplementedError

    def dispatch_overhead_ns(self) -> float:
        raise NotImplementedError

    def roundtrip_overhead_ns(self) -> float:
        raise NotImplementedError

    def memory_bw(self) -> float:
        """Bytes per ns (= GB/s)."""
        raise NotImplementedError

    def host_readback_bw(self) -> float:
        return self.memory_bw()

    def unified_memory(self) -> bool:
        return False

    def num_threads(self) -> int:
        return 1


class CalibratedBackendCost(BackendCostModel):
    """A ``BackendCostModel`` from a ``Calibration`` (small/large sgemm split as RLX's MLX
    model: ``m·k·n < 32768`` runs at the small rate)."""

    def __init__(self, calibration, device=None):
        self.cal, self.device = calibration, device

    def calibration(self) -> str:
        return CostCalibration.MEASURED

    def sgemm_gflops(self, m: int, k: int, n: int) -> float:
        small = float(m) * k * n < SMALL_SGEMM_WORK
        return self.cal.sgemm_small_gflops if small else self.cal.sgemm_large_gflops

    def dispatch_overhead_ns(self) -> float:
        return self.cal.dispatch_overhead_ns

    def roundtrip_overhead_ns(self) -> float:
        return self.cal.roundtrip_overhead_ns

    def memory_bw(self) -> float:
        return self.cal.memory_bw_gbps


@dataclass(frozen=True)
class GraphIoProfile:
    """RLX's ``GraphIoProfile``: launches, sync points and bytes of one forward pass."""

    kernel_launches: int = 0
    sync_points: int = 0
    host_output_bytes: int = 0
    device_traffic_bytes: int = 0

    def host_readback_bytes(self, unified_memory: bool) -> int:
        extra = 0 if unified_memory else self.device_traffic_bytes // 4
        return self.host_output_bytes + extra


def _numel(shape) -> int:
    n = shape.numel
    return int(n) if n is not None else 0


def _bytes(shape) -> int:
    return _numel(shape) * shape.dtype.size_bytes


def profile_graph_io(graph) -> GraphIoProfile:
    """The static I/O profile of ``graph``'s top-level nodes (RLX ``profile_graph_io``)."""
    outputs = set(graph.outputs)
    launches = syncs = out_bytes = traffic = 0
    for node in graph.nodes:
        if node.kind in METADATA_KINDS:
            continue
        launches += 1
        traffic += _bytes(node.shape) + sum(_bytes(graph.nodes[i].shape) for i in node.inputs)
        syncs += node.kind in SYNC_KINDS
        if node.id in outputs:
            out_bytes += _bytes(node.shape)
    return GraphIoProfile(launches, syncs, out_bytes, traffic)


def _static(dim) -> int:
    return dim if isinstance(dim, int) else 0


def node_cost(node, graph, model: BackendCostModel) -> float:
    """One node's time in ns (RLX ``node_cost``)."""
    dispatch = model.dispatch_overhead_ns()
    if node.kind in ("Input", "Param", "Constant"):
        return 0.0
    if node.kind in MATMUL_KINDS:
        n = _static(node.shape.dims[-1]) if node.shape.rank else 1
        m = _numel(node.shape) // max(n, 1)
        k = _numel(graph.nodes[node.inputs[0]].shape) // max(m, 1)
        return 2.0 * m * k * n / (model.sgemm_gflops(m, k, n) + 1.0) + dispatch
    if node.kind == "Attention":
        q = graph.nodes[node.inputs[0]].shape
        heads, hd = node.attrs.num_heads, node.attrs.head_dim
        seq = _static(q.dims[-2]) if q.rank >= 2 else 0
        batch = _numel(q) // max(seq * heads * hd, 1)
        flops = float(batch * heads * seq * seq * hd * 2)
        return flops / (model.sgemm_gflops(seq, hd, seq) + 1.0) + dispatch
    return _numel(node.shape) * 4 / max(model.memory_bw(), 1.0) + dispatch


def estimate_graph_cost_with_io(graph, model: BackendCostModel, io: GraphIoProfile) -> float:
    """Compute + device traffic + host readback + sync points, in ns."""
    total = model.roundtrip_overhead_ns()
    total += sum(node_cost(n, graph, model) for n in graph.nodes)
    total += io.device_traffic_bytes / max(model.memory_bw(), 1.0)
    total += io.host_readback_bytes(model.unified_memory()) / max(model.host_readback_bw(), 1.0)
    total += io.sync_points * model.roundtrip_overhead_ns()
    return total


def estimate_graph_cost(graph, model: BackendCostModel) -> float:
    """Forward-pass time of ``graph`` on ``model``'s backend, in ns (RLX's formula)."""
    return estimate_graph_cost_with_io(graph, model, profile_graph_io(graph))


def pick_best_device(graph, models: list):
    """The device of the cheapest model; models that are not rankable are left out while
    any rankable one exists (RLX ``pick_best_device``)."""
    rankable = [m for m in models if CostCalibration.is_rankable(m.calibration())]
    pool = rankable or list(models)
    return min(pool, key=lambda m: estimate_graph_cost(graph, m)).device if pool else None


class CalibratedCostModel:
    """The cost hook (``estimate(graph, device)`` in seconds, None without calibration):
    each device's backend calibrated on first use (``calibration.calibration_for``)."""

    calibrated = True

    def model_for(self, device):
        """The ``CalibratedBackendCost`` of ``device``, or None without calibration."""
        from .calibration import calibration_for
        from .devices import parse_device

        dev = parse_device(device)
        cal = calibration_for(dev)
        return None if cal is None else CalibratedBackendCost(cal, dev)

    def estimate(self, graph, device):
        model = self.model_for(device)
        return None if model is None else estimate_graph_cost(graph, model) * 1e-9


__all__ = ["BackendCostModel", "CalibratedBackendCost", "CalibratedCostModel",
           "CostCalibration", "GraphIoProfile", "estimate_graph_cost",
           "estimate_graph_cost_with_io", "node_cost", "pick_best_device", "profile_graph_io"]
