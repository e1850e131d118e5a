"""rlx_ref: the Python reference stack for the RLX ML IR.

Public API: the IR (``DType``, ``Shape``, ``Dyn``, ``Graph``, ``Op``), the DSL
(``graph``, ``Node``), the text form (``parse``), the verifier (``verify``,
``verify_or_raise``), the oracle (``interpret``, ``Session``), devices, policies and
fallback (``parse_device``, ``DevicePolicy``, ``GraphDevices``, ...) and the op registry
(``opdef``, ``opdefs``, ``register_custom``) and the transforms (``grad``,
``grad_with_loss``, ``jvp``, ``hvp``, ``vmap``, ``gradcheck``; more in ``rlx_ref.autodiff``;
DSL: ``g.grad(loss, wrt=[...])``), pictures (``draw``, ``draw_svg``: Graphviz), the
explainers (``trace``, ``diff``; more in ``rlx_ref.explain``) and PyTorch import
(``from_torch``), all loaded on first use.
"""
from .ir.dtype import DType
from .ir.shape import Dyn, Shape, ShapeError
from .ir.graph import Graph, Op
from .ir.builder import BuildError, install_registry_methods
from .ir.dsl import GraphBuilder, Node, graph
from .ir.text import TextParseError, parse
from .ir.verify import GraphVerifyError, verify, verify_or_raise
from .interpret import InterpretError, Interpreter, interpret
from .runtime.session import CompiledGraph, Session, SessionError
from .runtime.devices import (Device, DeviceParseError, available_devices, device_label,
                              is_available, parse_device, parse_device_list)
from .runtime.policy import DevicePolicy, device_report, resolve_device, resolve_device_chain
from .runtime.device_cost import fastest_device_for
from .runtime.fallback import DeviceFallbackError, run_with_fallback
from .runtime.graph_devices import GraphDevices
from .runtime.flexible import DeviceRouter, FlexibleSession
from .runtime.manifest import backends_manifest
from .runtime.capabilities import ExecutableCapabilities
from .runtime.compile_cache import BucketedCompileCache, CompileCache
from .ops.opdef import OpDef, all_opdefs as opdefs, get as opdef
from .ops.custom import register_custom, unregister_custom
from .autodiff import AutodiffError, grad, grad_with_loss, gradcheck, hvp, jvp, vmap
from .quant import load_gguf, write_gguf

install_registry_methods(Graph)

_LAZY = {"draw": "rlx_ref.draw", "draw_svg": "rlx_ref.draw",   # optional peer: graphviz
         "trace": "rlx_ref.explain", "diff": "rlx_ref.explain",   # pull in conformance
         "from_torch": "rlx_ref.torch_import"}                     # optional peer: torch


def __getattr__(name):
    """``draw`` and ``draw_svg`` (``graphviz`` is an optional peer), ``trace`` and ``diff``
    (they read the conformance comparator) and ``from_torch`` (``torch`` is an optional
    peer) load on first use."""
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(_LAZY[name])
        return mod if name == "draw" else getattr(mod, name)
    raise AttributeError(f"module 'rlx_ref' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "DType", "Dyn", "Shape", "ShapeError", "Graph", "Op", "BuildError", "GraphBuilder",
    "Node", "graph", "TextParseError", "parse", "GraphVerifyError", "verify",
    "verify_or_raise", "InterpretError", "Interpreter", "interpret", "CompiledGraph",
    "Session", "SessionError", "OpDef", "opdefs", "opdef", "register_custom",
    "unregister_custom", "AutodiffError", "grad", "grad_with_loss", "gradcheck", "hvp", "jvp",
    "vmap", "load_gguf", "write_gguf", "Device", "DeviceParseError", "available_devices",
    "device_label", "is_available", "parse_device", "parse_device_list", "DevicePolicy",
    "device_report", "resolve_device", "resolve_device_chain", "fastest_device_for",
    "DeviceFallbackError", "run_with_fallback", "GraphDevices", "DeviceRouter",
    "FlexibleSession", "backends_manifest", "ExecutableCapabilities", "CompileCache",
    "BucketedCompileCache", "draw", "draw_svg", "trace", "diff", "from_torch",
    "__version__",
]
