"""``CompileOptions``: every knob of the compile pipeline, with RLX's field names.

RLX's ``CompileOptions`` (rlx-runtime/src/options.rs) has ``dce``, ``constant_folding``,
``verbose``, ``fusion_opts``, ``arena_alignment`` and ``supported_ops``; they mean the same
here. ``FusionOptions`` mirrors RLX's ``FusionOptions`` + ``FusionLimits``
(``max_elementwise_steps``, ``max_elementwise_inputs``, ``unfuse_elementwise_regions``);
``enable`` is the inverse of RLX's ``skip_fusion`` and ``min_ops`` is RLX's hard-coded
"regions of at least 2 ops". ``constant_fold_max_elements`` is rlx_ref's own.

RLX's builder methods (``CompileOptions::new().with_dce(true)...``) are here as ``with_*``
methods returning a copy; where RLX's builder has the field's own name (``policy``,
``scan_unroll_max_length``, ``arena_alignment``, ``supported_ops``, ``param_bindings``) the
method is ``with_<field>``, since a dataclass field and a method cannot share a name.

Defaults that differ from RLX's, because RLX's would change what rlx_ref's backends run
without anyone asking: ``scan_unroll_max_length`` 0 and ``scan_unroll_budget`` 0 (RLX: 64
and its fixed 4096; every backend here claims Scan, so RLX's defaults would unroll every
short Scan and the conformance suite would no longer reach the backends' Scan kernels);
``lower_control_flow`` "auto" (RLX lowers every If and While; here only those the backend
does not claim, since lowering evaluates both branches and every step, see
``lower_control_flow``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

MAX_ELEMENTWISE_STEPS = 32     # RLX FusionLimits::GPU_NATIVE; region kernels pack 32 steps
MAX_ELEMENTWISE_INPUTS = 16    # RLX FusionLimits::GPU_NATIVE; input_modulus is [u32; 16]


@dataclass(frozen=True)
class FusionOptions:
    """How ``MarkElementwiseRegions`` forms regions.

    enable: run the fusion pass at all (RLX: ``not skip_fusion``).
    max_elementwise_steps / max_elementwise_inputs: per-region caps (at most 32 / 16: the
    ElementwiseRegion payload cannot hold more).
    min_ops: the fewest ops worth a region (RLX: 2).
    unfuse_elementwise_regions: break every region back into its ops, even on a backend
    that claims ElementwiseRegion (RLX's CPU target does this).
    """

    enable: bool = True
    max_elementwise_steps: int = MAX_ELEMENTWISE_STEPS
    max_elementwise_inputs: int = MAX_ELEMENTWISE_INPUTS
    min_ops: int = 2
    unfuse_elementwise_regions: bool = False

    def __post_init__(self):
        if not 1 <= self.max_elementwise_steps <= MAX_ELEMENTWISE_STEPS:
            raise ValueError(f"max_elementwise_steps must be 1..{MAX_ELEMENTWISE_STEPS} (the "
                             f"region payload's limit), got {self.max_elementwise_steps}")
        if not 1 <= self.max_elementwise_inputs <= MAX_ELEMENTWISE_INPUTS:
            raise ValueError(f"max_elementwise_inputs must be 1..{MAX_ELEMENTWISE_INPUTS} "
                             f"(the region payload's limit), got {self.max_elementwise_inputs}")
        if self.min_ops < 1:
            raise ValueError(f"min_ops must be >= 1, got {self.min_ops}")

    @property
    def skip_fusion(self) -> bool:
        """RLX's name for ``not enable``."""
        return not self.enable

    @property
    def max_steps(self) -> int:
        """Short for ``max_elementwise_steps``."""
        return self.max_elementwise_steps

    @property
    def max_inputs(self) -> int:
        """Short for ``max_elementwise_inputs``."""
        return self.max_elementwise_inputs


@dataclass(frozen=True)
class CompileOptions:
    """Options for ``compile_pipeline`` and ``Backend.compile``.

    dce: remove nodes no output depends on (Inputs and Params stay: they are the
    executable's interface).
    constant_folding: evaluate CONST_FOLDABLE nodes whose operands are all Constants, on
    the oracle, when the result has at most ``constant_fold_max_elements`` elements.
    verbose: print the dispatch report and the pass log to stderr (as ``RLX_VERBOSE=1``).
    fusion_opts: see ``FusionOptions``.
    supported_ops: replaces the backend's declared table for this compile: a dict
    ``{kind: dtypes or "all"}`` or an iterable of kinds (all dtypes). As in RLX, an empty
    claim means "no claim": legalization accepts every kind.
    arena_alignment: byte alignment of planned buffers (for backends that plan an arena).
    scan_unroll_max_length: Scans this short are unrolled into body copies (0 = this rule
    off; RLX's default is 64). ``scan_unroll_budget``: Scans with length × body nodes at
    most this are unrolled too (0 = off; RLX always uses 4096). A backend that does not
    claim Scan gets every Scan unrolled (RLX's LowerScan).
    lower_control_flow: "auto" (lower the If / While the backend does not claim), True
    (every one, as RLX), False (none).
    cse: merge structurally identical nodes (RLX's CommonSubexpressionElimination).
    policy: RLX's ``PrecisionPolicy`` for AutoMixedPrecision: None (off, RLX's default),
    "AlwaysF32", "AlwaysF16", "AutoMixedConservative", "AutoMixed", "AutoMixedBf16",
    "AutoMixedBf16Safe", or a dict ``{category: dtype}`` (RLX's ``Custom``).
    legalize_broadcast: make every non-trailing Binary broadcast an explicit Expand (RLX
    runs LegalizeBroadcast on its wgpu / Vulkan / oneAPI backends; off here by default:
    rlx_ref's kernels broadcast by strides, and the Expands cost a buffer each).
    param_bindings: ``{param name: values}`` baked into Constants before everything else
    (RLX bakes them before DCE and constant folding, which then fold weight-only compute).
    lint_numerics: print constant subgraphs that provably fold to NaN/inf to stderr on
    every compile (as ``RLX_LINT_NUMERICS=1``).
    thresholds: ``{name: value}`` overriding the backends' kernel-selection thresholds
    (``rlx-ref variants`` lists them), e.g. ``{"numba-cpu:par_elements": 1}`` so a small
    graph takes the parallel kernels; the compile checks names and floors.
    memory_plan: place the intermediates in one arena by liveness, with views for
    Reshape / same-dtype Cast / axis-0 Narrow (``passes/memory_plan.py``; numba-cpu slices
    a host array, OpenCL makes sub-buffers of one buffer and takes no views); off, each
    intermediate gets a buffer of its own, shared only by equal size.
    hoist_param_invariant: compute the weight-only part of the graph once per set of params
    (RLX's ``split_param_invariant``) instead of on every run.
    """

    dce: bool = True
    constant_folding: bool = True
    verbose: bool = False
    fusion_opts: FusionOptions = field(default_factory=FusionOptions)
    supported_ops: object = None
    arena_alignment: int = 64
    scan_unroll_max_length: int = 0
    scan_unroll_budget: int = 0
    lower_control_flow: object = "auto"
    cse: bool = True
    lint_numerics: bool = False
    policy: object = None
    legalize_broadcast: bool = False
    param_bindings: dict | None = None
    constant_fold_max_elements: int = 1 << 16
    thresholds: dict = field(default_factory=dict)
    memory_plan: bool = True
    hoist_param_invariant: bool = True

    def __post_init__(self):
        a = self.arena_alignment
        if a < 1 or a & (a - 1):
            raise ValueError(f"arena_alignment must be a power of two, got {a}")
        if min(self.scan_unroll_max_length, self.scan_unroll_budget,
               self.constant_fold_max_elements) < 0:
            raise ValueError("scan_unroll_max_length, scan_unroll_budget and "
                             "constant_fold_max_elements must be >= 0")
        if self.policy is not None:
            from ..passes.mixed_precision import COMPUTE, precision_for

            precision_for(self.policy, COMPUTE)      # unknown policies fail here
        if self.lower_control_flow not in ("auto", True, False):
            raise ValueError(f"lower_control_flow must be 'auto', True or False, got "
                             f"{self.lower_control_flow!r}")
        if not isinstance(self.thresholds, dict):
            raise ValueError(f"thresholds must be a dict of name -> integer, got "
                             f"{type(self.thresholds).__name__}")

    @property
    def fusion(self) -> FusionOptions:
        """Short alias of ``fusion_opts``."""
        return self.fusion_opts

    def replace(self, **changes) -> CompileOptions:
        """A copy with ``changes`` applied (fusion fields may be given directly too)."""
        fusion_fields = {f.name for f in dataclasses.fields(FusionOptions)}
        fusion = {k: changes.pop(k) for k in list(changes) if k in fusion_fields}
        if fusion:
            changes["fusion_opts"] = dataclasses.replace(
                changes.get("fusion_opts", self.fusion_opts), **fusion)
        return dataclasses.replace(self, **changes)

    # ── RLX's builder methods ─────────────────────────────────────────────
    def with_dce(self, on: bool = True) -> CompileOptions:
        return self.replace(dce=on)

    def with_constant_folding(self, on: bool = True) -> CompileOptions:
        return self.replace(constant_folding=on)

    def with_verbose(self, on: bool = True) -> CompileOptions:
        return self.replace(verbose=on)

    def with_fusion_opts(self, opts: FusionOptions) -> CompileOptions:
        return self.replace(fusion_opts=opts)

    def with_arena_alignment(self, nbytes: int) -> CompileOptions:
        return self.replace(arena_alignment=nbytes)

    def with_supported_ops(self, ops) -> CompileOptions:
        return self.replace(supported_ops=ops)

    def with_scan_unroll_max_length(self, n: int) -> CompileOptions:
        """RLX's ``scan_unroll_max_length(n)``."""
        return self.replace(scan_unroll_max_length=n)

    def with_scan_unroll_budget(self, n: int) -> CompileOptions:
        return self.replace(scan_unroll_budget=n)

    def with_lower_control_flow(self, lower="auto") -> CompileOptions:
        return self.replace(lower_control_flow=lower)

    def with_cse(self, on: bool = True) -> CompileOptions:
        return self.replace(cse=on)

    def with_policy(self, policy) -> CompileOptions:
        """RLX's ``policy(p)``."""
        return self.replace(policy=policy)

    def no_policy(self) -> CompileOptions:
        return self.replace(policy=None)

    def with_legalize_broadcast(self, on: bool = True) -> CompileOptions:
        return self.replace(legalize_broadcast=on)

    def with_param_bindings(self, bindings: dict) -> CompileOptions:
        """RLX's ``param_bindings(map)``."""
        return self.replace(param_bindings=dict(bindings))

    def with_lint_numerics(self, on: bool = True) -> CompileOptions:
        return self.replace(lint_numerics=on)

    def with_memory_plan(self, on: bool = True) -> CompileOptions:
        return self.replace(memory_plan=on)

    def with_hoist_param_invariant(self, on: bool = True) -> CompileOptions:
        return self.replace(hoist_param_invariant=on)

    @classmethod
    def coerce(cls, options) -> CompileOptions:
        """``None`` → defaults; a dict → ``CompileOptions(**dict)``; an instance as is."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if isinstance(options, dict):
            return cls().replace(**options)
        raise TypeError(f"compile options must be CompileOptions, a dict or None, got "
                        f"{type(options).__name__}")


__all__ = [
    "MAX_ELEMENTWISE_INPUTS",
    "MAX_ELEMENTWISE_STEPS",
    "CompileOptions",
    "FusionOptions",
]
