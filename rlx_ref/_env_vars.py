"""The registered environment variables (read through ``rlx_ref.env_registry``)."""
from __future__ import annotations

from ._env_record import EnvVar as V

OPENCL_KERNEL_STYLES = ("auto", "gpu", "cpu")

VARS = (
    # devices (RLX's names and meanings; lists: names split on commas, semicolons, spaces)
    V("RLX_DEVICE", "device", "str",
      "default device hint for resolved runs (cpu, cpu-ref, gpu, cuda[:N], opencl[:P:D], "
      "rocm, oneapi, metal, ...)", rlx=True),
    V("RLX_DEVICES", "device", "str",
      "allow-list of devices for DevicePolicy.from_env (e.g. cpu,opencl)", rlx=True),
    V("RLX_DENY_DEVICES", "device", "str",
      "block-list of devices for DevicePolicy.from_env", rlx=True),
    V("RLX_PREFER_DEVICES", "device", "str",
      "tie-break order of devices for DevicePolicy.from_env", rlx=True),
    V("RLX_BENCHMARK_PICK", "device", "int",
      "pick the device by a one-time micro-benchmark of N runs (needs inputs)", rlx=True),
    V("RLX_DEVICE_CHAIN", "device", "str",
      "fallback order when a device fails (e.g. cuda,opencl,cpu)", rlx=True),
    V("RLX_FORCE_DEVICE", "device", "str",
      "hard-pin the device, overriding the cost model's choice (and the policy)",
      stability="bisect", rlx=True),
    # compile and reports (RLX's names and meanings)
    V("RLX_DISPATCH_REPORT", "compile", "flag",
      "print the dispatch report (which kernel runs each node) to stderr on every compile",
      rlx=True),
    V("RLX_VERBOSE", "compile", "flag",
      "print the dispatch report and the pass log on every compile", rlx=True),
    V("RLX_DEBUG_NANS", "debug", "enum",
      "name the first node that produces a NaN or inf at run time on the oracle (1 / warn: "
      "print it; abort: raise at it)", default="0",
      choices=("0", "1", "warn", "abort", "off", "on", "true", "false"), rlx=True),
    V("RLX_LINT_NUMERICS", "compile", "flag",
      "report constant subgraphs that provably fold to NaN or inf on every compile",
      rlx=True),
    V("RLX_REF_VERIFY", "debug", "flag",
      "verify the graph after every compile pass (on in the test suite)"),
    V("RLX_ENABLE_FUSE_TRANSFORMER_LAYER", "compile", "flag",
      "let the pattern fusions build FusedTransformerLayer (off by default, as in RLX)",
      rlx=True, stability="bisect"),
    V("RLX_FUSE_ATTN_THRESHOLD", "compile", "int",
      "attention-block fusions run only when an Input's first two dims multiply to at most "
      "this", default=64, rlx=True, stability="bisect"),
    # kernels and caches
    V("RLX_REF_CACHE_DIR", "cache", "path",
      "where compiled kernels are cached (default ~/.cache/rlx_ref)"),
    V("RLX_REF_CALIBRATION", "cache", "enum",
      "when the cost model measures a backend: auto (read the calibration cache under "
      "RLX_REF_CACHE_DIR, measure on a miss), cached (never measure) or off (no estimates: "
      "the policy order picks)", default="auto", choices=("auto", "cached", "off")),
    V("RLX_REF_DUMP_KERNELS", "debug", "path",
      "write the source of every generated Numba and OpenCL kernel into this directory"),
    V("RLX_REF_PURE_PYTHON", "backend", "flag",
      "use the pure-Python twin of the Cython core even when it is compiled"),
    V("RLX_REF_THRESHOLDS", "backend", "str",
      "override kernel-variant thresholds: `backend:name=value,...` (see `rlx-ref variants`)",
      stability="bisect"),
    V("RLX_REF_OPENCL_KERNELS", "backend", "enum",
      "OpenCL kernel style: auto picks GPU-style kernels on GPUs and Oclgrind, CPU-style on "
      "CPUs", default="auto", choices=OPENCL_KERNEL_STYLES, stability="bisect"),
    # tests and tooling
    V("RLX_REF_REQUIRE_CORE", "tooling", "flag",
      "the test suite fails when the compiled Cython core is missing (set by CI)",
      stability="internal"),
    V("RLX_REF_REQUIRE_DOCS", "tooling", "flag",
      "tests/test_docs_site.py fails, not skips, when mkdocs and its plugins are missing",
      stability="internal"),
    V("RLX_REF_REQUIRE_BROWSER", "tooling", "flag",
      "the browser checks (the docs site, the coverage page) fail, not skip, without "
      "playwright and /usr/bin/chromium (set by CI)", stability="internal"),
    V("RLX_REF_FUZZ_EXAMPLES", "tooling", "int",
      "examples per property in the text-form fuzz tests", default=500, stability="internal"),
    # other libraries' variables rlx_ref reads (they own the meaning)
    V("NUMBA_ENABLE_CUDASIM", "external", "flag",
      "Numba's CUDA simulator; the numba-cuda backend reports it as emulated",
      stability="external"),
    V("PYOPENCL_CTX", "external", "str",
      "pyopencl's device choice; the OpenCL backend honours it when no device is given",
      stability="external"),
    V("POCL_CACHE_DIR", "external", "path",
      "PoCL's kernel cache; when unset, rlx_ref points it under its own cache directory",
      stability="external"),
    V("NO_COLOR", "external", "str",
      "the no-color.org convention: any non-empty value turns off colours chosen on `auto`",
      stability="external"),
)
