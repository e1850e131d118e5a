"""Kernel cache faults: damaged cache files are replaced, unwritable caches compile in memory."""
import errno
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("numba")

from rlx_ref.backends.numba_cpu import kernel_cache as kc  # noqa: E402
from rlx_ref.backends.numba_cpu import kernels  # noqa: E402

RUN = ("import numpy as np, rlx_ref\n"
       "from rlx_ref.backends.registry import get_backend\n"
       "g = rlx_ref.Graph('c'); x = g.input('x', [5]); g.set_outputs([g.tanh(g.neg(x))])\n"
       "e = get_backend('numba-cpu').compile(g)\n"
       "print(e.run({'x': np.arange(5, dtype=np.float32)})[0].tolist())\n")
WANT = np.tanh(-np.arange(5, dtype=np.float32))


def _run(cache) -> tuple[list, str]:
    env = {**os.environ, "RLX_REF_CACHE_DIR": str(cache)}
    env.pop("PYTHONWARNINGS", None)
    p = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return eval(p.stdout.strip().splitlines()[-1]), p.stderr   # noqa: S307 - our own print


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("kcache")
    got, err = _run(root)
    np.testing.assert_allclose(got, WANT, rtol=1e-6)
    assert "KernelCacheWarning" not in err, err
    return root


def _damage(path, mode: str) -> None:
    data = bytearray(path.read_bytes())
    if mode == "truncated":
        data = data[:len(data) // 2]
    elif mode == "random":
        data = bytearray(np.random.default_rng(len(data)).integers(0, 256, len(data),
                                                                     dtype=np.uint8))
    else:                                       # one flipped bit, in the payload
        data[len(data) * 3 // 4] ^= 0x08
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("mode", ["truncated", "random", "bitflip"])
@pytest.mark.parametrize("kind", ["py", "nbi", "nbc"])
def test_damaged_cache_file_is_replaced_with_one_warning(cache, kind, mode):
    d = cache / "numba_cpu"
    files = sorted(d.glob("*.py") if kind == "py" else (d / "__pycache__").glob(f"*.{kind}"))
    assert files, f"no .{kind} file to damage under {d}"
    for f in files:
        _damage(f, mode)
    got, err = _run(cache)
    np.testing.assert_allclose(got, WANT, rtol=1e-6)
    assert err.count("KernelCacheWarning") == 1, err
    assert "discarded the damaged entry" in err
    if mode == "random":                        # the entry was rewritten whole
        got, err = _run(cache)
        np.testing.assert_allclose(got, WANT, rtol=1e-6)
        assert "KernelCacheWarning" not in err, err
    assert all(f.read_bytes().startswith(kc.MAGIC) for f in (d / "__pycache__").glob("*.nbc"))
    assert all(kc.MAGIC in f.read_bytes() for f in (d / "__pycache__").glob("*.nbi"))


def test_seal_detects_every_damage():
    blob = kc.seal(b"payload" * 50)
    assert kc.unseal(blob) == b"payload" * 50
    for bad in (blob[:-1], blob[:10], b"", blob[:60] + bytes([blob[60] ^ 1]) + blob[61:]):
        with pytest.raises(kc.CorruptEntry):
            kc.unseal(bad)


def test_only_rlx_ref_functions_use_the_checked_cache():
    assert kc.owned(kernels.compile_kernel)
    assert not kc.owned(np.add.reduce) and not kc.owned(lambda: 0)


def _fresh_body(tag: str) -> tuple[str, str]:
    name = f"k_{tag}_{os.getpid()}"
    return name, f"@njit(cache=True)\ndef {name}(x):\n    return x * 2.0 + 0.5\n"


def _cache_warnings(record) -> list:
    return [w for w in record if issubclass(w.category, kc.KernelCacheWarning)]


def test_unwritable_cache_dir_compiles_in_memory(monkeypatch, tmp_path):
    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(kc, "_WARNED", set())
    monkeypatch.setattr(kernels, "write_bytes", read_only)
    monkeypatch.setenv("RLX_REF_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k1 = kernels.compile_kernel(*_fresh_body("ro1"))
        k2 = kernels.compile_kernel(*_fresh_body("ro2"))
    assert k1(1.0) == 2.5 and k2(2.0) == 4.5
    ws = _cache_warnings(rec)
    assert len(ws) == 1 and "compiling in memory" in str(ws[0].message), ws
    assert "Read-only file system" in str(ws[0].message)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_full_disk_on_numba_cache_save_compiles_in_memory(monkeypatch, tmp_path):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kc, "_WARNED", set())
    monkeypatch.setattr(kc, "write_bytes", full)
    monkeypatch.setenv("RLX_REF_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k1 = kernels.compile_kernel(*_fresh_body("full1"))
        assert k1(1.0) == 2.5 and k1(np.float32(1.0)) == 2.5      # two signatures
        assert kernels.compile_kernel(*_fresh_body("full2"))(0.0) == 0.5
    ws = _cache_warnings(rec)
    assert len(ws) == 1 and "No space left on device" in str(ws[0].message), ws
    assert not list(tmp_path.rglob("*.nb?"))


def test_cache_dir_under_a_regular_file_falls_back_with_a_warning(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(kc, "_WARNED", set())
    monkeypatch.setenv("RLX_REF_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        d = kernels.cache_dir()
        assert kernels.compile_kernel(*_fresh_body("blocked"))(1.0) == 2.5
    ws = _cache_warnings(rec)
    assert len(ws) == 1 and str(blocker) in str(ws[0].message), ws
    assert d.is_dir() and blocker not in d.parents


def test_unchecked_entries_from_plain_numba_are_replaced_quietly(cache):
    pyc = cache / "numba_cpu" / "__pycache__"
    head = len(kc.MAGIC) + 32
    for f in pyc.glob("*.nbc"):                  # back to plain Numba's format
        f.write_bytes(f.read_bytes()[head:])
    for f in pyc.glob("*.nbi"):
        blob = f.read_bytes()
        at = blob.index(kc.MAGIC)
        f.write_bytes(blob[:at] + blob[at + head:])
    got, err = _run(cache)
    np.testing.assert_allclose(got, WANT, rtol=1e-6)
    assert "KernelCacheWarning" not in err, err
    assert all(f.read_bytes().startswith(kc.MAGIC) for f in pyc.glob("*.nbc"))


def test_writers_racing_on_one_function_never_cross_signatures(tmp_path):
    """Two processes adding overloads of one function at once: b still sees the index
    without a's entry, and a's data file lands last. Numbered data files let both pick
    '.1', so b's signature then named a's machine code ("can't unbox array"); files
    named by key cannot cross."""
    a = kc.CheckedCacheFile(str(tmp_path), "f-1.py", "stamp")
    b = kc.CheckedCacheFile(str(tmp_path), "f-1.py", "stamp")
    stale = b._load_index()
    b._load_index = lambda: dict(stale)          # b read the index before a wrote it
    deferred, write = [], a._save_data
    a._save_data = lambda name, data: deferred.append((name, data))
    a.save(("sig-f32", "magic"), {"code": "f32"})
    b.save(("sig-f64", "magic"), {"code": "f64"})
    for name, data in deferred:                  # a's data file is written last
        write(name, data)
    fresh = kc.CheckedCacheFile(str(tmp_path), "f-1.py", "stamp")
    assert fresh.load(("sig-f64", "magic")) == {"code": "f64"}
    assert fresh.load(("sig-f32", "magic")) in (None, {"code": "f32"})   # lost, never crossed


def test_entries_in_the_older_numbered_layout_are_recompiled(tmp_path):
    """An index from before data files were named by key may map a signature to another
    signature's numbered file ("can't unbox array"): such entries are misses."""
    f = kc.CheckedCacheFile(str(tmp_path), "g-1.py", "stamp")
    f.save(("sig-f64", "magic"), {"code": "f64"})
    numbered = f._data_name(1)                   # Numba's own name: base.1.nbc
    f._save_data(numbered, {"code": "f64"})
    f._save_index({("sig-f32", "magic"): numbered,
                   ("sig-f64", "magic"): f._entry_name(("sig-f64", "magic"))})
    fresh = kc.CheckedCacheFile(str(tmp_path), "g-1.py", "stamp")
    assert fresh.load(("sig-f32", "magic")) is None
    assert fresh.load(("sig-f64", "magic")) == {"code": "f64"}
