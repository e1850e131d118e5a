"""The declared host path: kinds with no OpenCL kernel run their registry reference on the
host between a read-back of their inputs and an upload of the result. Each is listed with
its reason in the dispatch and coverage reports; nothing reaches it silently."""
from __future__ import annotations

from ...interpret import Interpreter
from ...ir.dtype import DType
from ...ops.opdef import RefCtx, all_opdefs
from .lowering import TABLE, Step, lowers
from .variant_table import use

HOST_REASON = "no OpenCL kernel: inputs are read back and the reference runs on the host"


class _HostRunner(Interpreter):
    """The interpreter's reference call and result check, without a graph of its own."""

    def __init__(self):     # noqa: D107 - stateless: run_node/_conform read no fields
        pass


_RUNNER = _HostRunner()


def _run_body(body, args, params=None):
    ins = body.input_nodes()
    return Interpreter(body, verify=False).run({n.attrs.name: a for n, a in zip(ins, args)},
                                               params or {})


def lower_host(node, ins, ctx) -> Step:
    use("host.reference")
    ref_ctx = RefCtx(node.attrs, node.shape, False, _run_body, node)
    q = ctx.queue

    def bind(out, *xs):
        def launch():
            host = [x.get(q) for x in xs]
            out.set(q, _RUNNER.run_node(node, host, ref_ctx), blocking=True)
        return launch
    return Step(bind, note="host")


def register_host_kinds(reason: str = HOST_REASON) -> None:
    """Declare every registry kind without a native lowering as a host path."""
    for d in all_opdefs():
        if d.kind not in TABLE.entries:
            lowers(d.kind, tuple(DType), path="host", reason=reason)(lower_host)


register_host_kinds()
