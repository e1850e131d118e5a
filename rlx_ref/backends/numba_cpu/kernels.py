"""Generated kernel source → compiled Numba functions, cached on disk.

A kernel is Python source that defines one ``@njit(cache=True)`` function. The source is
written to a file named by its hash under the cache directory and compiled with that file
name, so Numba's own on-disk cache (which needs a real file; checked by ``kernel_cache``)
makes a second process fast. ``RLX_REF_DUMP_KERNELS=DIR`` also copies every generated
source into DIR.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import types
from pathlib import Path

from ..._atomic import write_bytes
from ...env_registry import get
from ..faults import rewrite
from .kernel_cache import warn_corrupt, warn_unwritable

HEADER = "import math\nimport numpy as np\nfrom numba import njit, prange\n\n"


def cache_dir(sub: str = "numba_cpu") -> Path:
    """``RLX_REF_CACHE_DIR/sub`` or ``~/.cache/rlx_ref/sub`` (a temp dir, with a warning,
    when that cannot be created)."""
    root = get("RLX_REF_CACHE_DIR")
    base = Path(root) if root else Path(os.path.expanduser("~")) / ".cache" / "rlx_ref"
    path = base / sub
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fallback = Path(tempfile.gettempdir()) / f"rlx_ref_{sub}"
        warn_unwritable(path, e.strerror or e, f"caching under {fallback} instead")
        try:
            fallback.mkdir(parents=True, exist_ok=True)
        except OSError:
            return path                        # nothing writable: kernels load from memory
        path = fallback
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
    source = HEADER + rewrite("numba-cpu", name, body).strip() + "\n"
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
    """Import ``source`` as module ``mod_name`` from ``directory/mod_name.py``.

    The file is Numba's anchor for its on-disk cache. It is checked against ``source``
    before every import: a missing, truncated or altered file is (re)written atomically
    (a damaged one with a warning), and a directory that cannot be written makes the module
    load from memory, uncached. The source is compiled from memory either way, so no
    ``.pyc`` is written or trusted. ``RLX_REF_DUMP_KERNELS=DIR`` also copies it to
    ``DIR/dump_name``.
    """
    path = directory / f"{mod_name}.py"
    data = source.encode()
    try:
        on_disk = path.read_bytes()
    except OSError:
        on_disk = None
    filename = str(path)
    if on_disk != data:
        if on_disk is not None:
            warn_corrupt(path, "its text differs from the source its name hashes")
        try:
            write_bytes(path, data, mkdir=True)
        except OSError as e:
            warn_unwritable(directory, e.strerror or e)
            filename = f"<rlx_ref kernel {mod_name}>"     # no file: numba caches nothing
    dump = get("RLX_REF_DUMP_KERNELS")
    if dump:
        write_bytes(Path(dump) / dump_name, data)
    module = types.ModuleType(mod_name)
    module.__file__ = filename
    sys.modules[mod_name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module
