"""``Session(device).compile(graph)`` → a compiled graph with set_param / run / run_flat.

The reference device runs the oracle interpreter. Inputs are checked by name, shape and
dtype before anything runs; dynamic dims bind consistently across inputs.

The rules every backend keeps: ``set_param`` copies the caller's array (so changing it
later changes nothing); every run returns fresh arrays that alias no input, param, other
output or executable buffer; and ``run`` may be called from many threads at once.
"""
from __future__ import annotations

import copy
import threading

import numpy as np

from ..interpret import Interpreter
from ..ir.dtype import DType, cast_checked
from ..ir.graph import Graph
from ..ir.shape import Dyn
from ..ir.verify import verify_or_raise

DEVICES = ("reference",)


class SessionError(ValueError):
    """Bad use of a compiled graph: unknown/missing names, wrong shapes or dtypes."""


class Session:
    """A device to compile graphs for: an RLX device name (``"cpu"`` runs numba-cpu,
    ``"cpu-ref"``/``"reference"`` the oracle, ``"gpu"``, ``"cuda:N"``, ``"opencl:P:D"``,
    ... see ``rlx_ref.runtime.devices``) or any backend spec ``rlx_ref.backends.registry``
    takes. ``device`` is the backend's name; ``label`` the RLX device label."""

    def __init__(self, device: str = "reference", float64: bool = False):
        from ..backends.base import BackendUnavailable
        from ..backends.registry import get_backend
        from .devices import DeviceParseError, availability, backend_for, parse_device

        self.float64 = float64
        self.backend = None
        try:
            dev = parse_device(device)
        except DeviceParseError as e:       # a registry-only spec: faults, options
            dev, parse_error = None, e
        self.label = dev.label if dev is not None else str(device)
        if dev is not None and dev.spec == "reference":
            self.device = "reference"
            return
        try:
            self.backend = backend_for(dev) if dev is not None else get_backend(device)
        except BackendUnavailable as e:   # a spec's own error, else the valid names
            why = e if any(c in str(device) for c in "+/:") else parse_error
            raise SessionError(f"unknown device {device!r}: {why}") from None
        if self.backend is None:
            raise SessionError(f"device {device!r} is unavailable here: "
                               f"{availability(dev)[1]}")
        ok, why = self.backend.availability()
        if not ok:
            raise SessionError(f"device {device!r} is unavailable here: {why}")
        self.device = self.backend.name

    def compile(self, graph: Graph, options=None) -> "CompiledGraph":
        """Verify and compile ``graph`` for this session's device."""
        verify_or_raise(graph)
        if self.backend is not None:
            return self.backend.compile(graph, options)
        return CompiledGraph(graph, self.float64)

    def __repr__(self) -> str:
        return f"Session(device={self.device!r})"


class CompiledGraph:
    """A verified graph with checked I/O; params persist across runs.

    The base class runs the oracle interpreter; backends subclass it and override
    ``_execute`` (and set ``_uses_interpreter = False``) and, to hold params in their own
    form (a device copy), ``_bind_param``. Params are an immutable snapshot replaced on
    every ``set_param``: a run reads one snapshot, so a concurrent ``set_param`` never
    tears it.
    """

    _uses_interpreter = True
    _active_extent = None

    def __init__(self, graph: Graph, float64: bool = False):
        self.graph = graph
        self.device = "reference"
        self._interp = Interpreter(graph, float64, verify=False) if self._uses_interpreter \
            else None
        self._inputs = {n.attrs.name: n.shape for n in graph.input_nodes()}
        self._params_decl = {n.attrs.name: n.shape for n in graph.param_nodes()}
        self._params: dict = {}             # replaced, never changed in place
        self._params_lock = threading.Lock()

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    @property
    def param_names(self) -> list[str]:
        return list(self._params_decl)

    def set_param(self, name: str, data) -> None:
        """Bind a weight: an array of the Param's shape and dtype, or (pyrlx's form) a flat
        buffer of its element count, reshaped. A list or tuple carries no dtype of its own
        and is converted to the Param's, refusing values the dtype cannot hold; a numpy
        array must already have the Param's dtype."""
        decl = self._param_decl(name)
        arr = _as_param_array(name, data, decl)
        self._check(name, arr, decl, "param", {})
        value = self._bind_param(name, np.array(arr, order="C"))     # always a copy
        with self._params_lock:
            self._params = {**self._params, name: value}

    def set_param_typed(self, name: str, data: bytes, dtype: str) -> None:
        """pyrlx's typed upload: the Param's values as raw little-endian bytes of ``dtype``
        (the Param's dtype, or a float dtype that widens to it exactly: see
        ``rlx_ref.runtime.typed_io``), flat or in any layout of its element count."""
        from .typed_io import decode

        decl = self._param_decl(name)
        self.set_param(name, decode("set_param_typed", name, data, dtype, decl, SessionError))

    def _param_decl(self, name: str):
        if name not in self._params_decl:
            raise SessionError(f"graph @{self.graph.name} has no param {name!r}; params: "
                               f"{', '.join(self._params_decl) or '(none)'}")
        return self._params_decl[name]

    def _bind_param(self, name: str, arr: np.ndarray):
        """The form runs read a param in (``arr``: the executable's own C-order copy)."""
        return arr

    def run(self, inputs: dict) -> list:
        """Outputs (list of arrays) for ``{input name: array}``."""
        unknown = [k for k in inputs if k not in self._inputs]
        if unknown:
            raise SessionError(f"unknown input {unknown[0]!r}; inputs of @{self.graph.name}: "
                               f"{', '.join(self._inputs) or '(none)'}")
        missing = [k for k in self._inputs if k not in inputs]
        if missing:
            raise SessionError(f"missing input {missing[0]!r} "
                               f"(declared {self._inputs[missing[0]]})")
        params = self._params               # this run's snapshot
        unset = [k for k in self._params_decl if k not in params]
        if unset:
            raise SessionError(f"param {unset[0]!r} is not set; call set_param first")
        bound: dict = {}
        arrays = {}
        for k, decl in self._inputs.items():
            arr = np.asarray(inputs[k])
            self._check(k, arr, decl, "input", bound)
            arrays[k] = arr
        return owned_outputs(self._execute(arrays, params, bound), arrays, params)

    def _execute(self, inputs: dict, params: dict, bindings: dict) -> list:
        """Run the checked inputs (``bindings``: dynamic symbol → size); engines override."""
        return self._interp.run(inputs, params)

    def run_flat(self, inputs: dict) -> list:
        """Like ``run`` but inputs may be flat (reshaped by declaration); outputs are 1-D."""
        shaped = {}
        for k, v in inputs.items():
            decl = self._inputs.get(k)
            arr = np.asarray(v)
            if decl is not None and decl.is_static and arr.ndim == 1:
                if arr.size != decl.numel:
                    raise SessionError(f"input {k!r} has {arr.size} elements, expected "
                                       f"{decl.numel} for {decl}")
                arr = arr.reshape(decl.dims)
            shaped[k] = arr
        return [o.reshape(-1) for o in self.run(shaped)]

    def _check(self, name, arr, decl, what, bound):
        try:
            dt = DType.of(arr)
        except TypeError:
            dt = None
        if dt != decl.dtype:
            raise SessionError(f"{what} {name!r} has dtype {arr.dtype}, expected {decl.dtype}")
        if arr.ndim != decl.rank:
            raise SessionError(f"{what} {name!r} has shape {list(arr.shape)} (rank "
                               f"{arr.ndim}), expected {decl.dims_text()}")
        for i, (d, n) in enumerate(zip(decl.dims, arr.shape)):
            if isinstance(d, Dyn):
                if bound.setdefault(d.sym, n) != n:
                    raise SessionError(f"{what} {name!r} dim {i} is {n} but ?{d.sym} is "
                                       f"already bound to {bound[d.sym]}")
            elif d != n:
                raise SessionError(f"{what} {name!r} has shape {list(arr.shape)}, expected "
                                   f"{decl.dims_text()}")

    def run_typed(self, inputs) -> list:
        """RLX's typed run: inputs as raw little-endian bytes, ``[(name, data, dtype)]`` or
        ``{name: (data, dtype[, shape])}`` (the declared shape when omitted); outputs as
        ``(bytes, dtype)`` pairs in each output's declared dtype."""
        from .typed_io import encode, typed_inputs

        return encode(self.run(typed_inputs(self, inputs, SessionError)))

    def clone(self) -> "CompiledGraph":
        """A new executable sharing this one's compiled kernels and plans, with params of
        its own: it starts with this one's, and ``set_param`` on either changes only that
        one (params are an immutable snapshot, so sharing it until then is safe)."""
        twin = copy.copy(self)
        twin._params_lock = threading.Lock()
        twin._active_extent = None
        return twin

    def set_active_extent(self, extent) -> None:
        """RLX's hint that runs need only the first ``actual`` of the ``upper`` rows the
        graph was built for (``(actual, upper)``; None clears it). Kernels here always run
        the whole extent, so ``capabilities().active_extent`` is False; the hint is kept
        (``active_extent()``) and ``BucketedCompileCache.run_padded`` slices the rows."""
        if extent is not None:
            actual, upper = (int(v) for v in extent)
            if not 0 <= actual <= upper:
                raise SessionError(f"set_active_extent: need 0 <= actual <= upper, got "
                                   f"({actual}, {upper})")
            extent = (actual, upper)
        self._active_extent = extent

    def active_extent(self):
        """The hint ``set_active_extent`` left, or None."""
        return self._active_extent

    def capabilities(self):
        """RLX's ``ExecutableCapabilities`` (also readable as a dict)."""
        from .capabilities import ExecutableCapabilities

        return ExecutableCapabilities(clone=True, typed_io=True)

    def __repr__(self) -> str:
        return f"<CompiledGraph @{self.graph.name} on {self.device}>"


def _as_param_array(name: str, data, decl) -> np.ndarray:
    """``data`` as an array for Param ``decl``: lists converted with checks, flat reshaped."""
    if isinstance(data, (list, tuple)):
        try:
            arr = cast_checked(data, decl.dtype)
        except (ValueError, OverflowError) as e:
            raise SessionError(f"param {name!r} ({decl}): {e}") from None
    else:
        arr = np.asarray(data)
        if arr.dtype != decl.dtype.np and arr.dtype.kind in "biufcV":
            raise SessionError(f"param {name!r} has dtype {arr.dtype}, expected {decl.dtype} "
                               f"(convert the array, or pass a list: lists convert with "
                               "range checks)")
    if decl.is_static and arr.ndim == 1 and decl.rank != 1:
        if arr.size != decl.numel:
            raise SessionError(f"param {name!r} got a flat buffer of {arr.size} values, "
                               f"expected {decl.dims_text()} ({decl.numel} values flat, or an "
                               "array of that shape)")
        arr = arr.reshape(decl.dims)
    return arr


def owned_outputs(outs: list, inputs: dict, params: dict) -> list:
    """``outs`` where each array is the caller's alone: a view (of an input, a param, an
    executable's buffer), a read-only array, an input or param itself, or an array
    already returned as another output is replaced by a copy."""
    taken = None                        # ids of the leaves and of outputs kept so far
    for i, a in enumerate(outs):
        if a.base is None and a.flags.writeable:
            if taken is None:
                taken = set(map(id, inputs.values()))
                taken.update(map(id, params.values()))
            if id(a) not in taken:
                taken.add(id(a))
                continue
        outs[i] = a.copy()
    return outs
