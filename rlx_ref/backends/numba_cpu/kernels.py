"""Generated kernel source → compiled Numba functions, cached on disk.

A kernel is Python source that defines one ``@njit(cache=True)`` function. The source is
written to a file named by its hash under the cache directory and imported from there, so
Numba's own on-disk cache (which needs a real file) makes a second process fast.
``RLX_REF_DUMP_KERNELS=DIR`` also copies every generated source into DIR.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

HEADER = "import math\nimport numpy as np\nfrom numba import njit, prange\n\n"


def cache_dir(sub: str = "numba_cpu") -> Path:
    """``RLX_REF_CACHE_DIR/sub`` or ``~/.cache/rlx_ref/sub`` (a temp dir if home is
    read-only)."""
    root = os.environ.get("RLX_REF_CACHE_DIR")
    base = Path(root) if root else Path(os.path.expanduser("~")) / ".cache" / "rlx_ref"
    path = base / sub
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        path = Path(tempfile.gettempdir()) / f"rlx_ref_{sub}"
        path.mkdir(parents=True, exist_ok=True)
    return path


class Kernel:
    """One compiled kernel module: its name, full source, main callable and siblings."""

    def __init__(self, name: str, source: str, module):
        self.name, self.source, self.module = name, source, module
        self.fn = getattr(module, name)

    def get(self, fname: str):
        """Another function defined by the same source (e.g. the parallel variant)."""
        return getattr(self.module, fname)

    def __call__(self, *args):
        return self.fn(*args)


_LOADED: dict = {}
# one loader at a time: two threads planning the same kernel must get one module (a
# second import would replace the first in sys.modules under the loop drivers' feet)
LOAD_LOCK = threading.Lock()


def compile_kernel(name: str, body: str) -> Kernel:
    """Compile ``body`` (defining a function called ``name``) and return the Kernel.

    Identical sources share one module per process and one file (and Numba cache) on disk.
    """
    source = HEADER + body.strip() + "\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    key = (name, digest)
    kernel = _LOADED.get(key)
    if kernel is not None:
        return kernel
    with LOAD_LOCK:
        if key not in _LOADED:
            module = load_source_module(f"rlx_ref_k_{name}_{digest}", source, cache_dir(),
                                        f"{name}_{digest}.py")
            _LOADED[key] = Kernel(name, source, module)
        return _LOADED[key]


def load_source_module(mod_name: str, source: str, directory: Path, dump_name: str):
    """Import ``source`` as module ``mod_name`` from a file in ``directory`` (written once,
    atomically, so Numba's on-disk cache has a real file); ``RLX_REF_DUMP_KERNELS=DIR``
    also copies it to ``DIR/dump_name``."""
    path = directory / f"{mod_name}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)                # atomic: concurrent processes never see half
    dump = os.environ.get("RLX_REF_DUMP_KERNELS")
    if dump:
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / dump_name).write_text(source)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module
