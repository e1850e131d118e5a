"""PoCL's kernel cache under rlx_ref: the owned directory, clearing it after a build that
crashed, and recovering from a broken cache entry (a program without its kernel)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from rlx_ref.backends.opencl import pocl_cache


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """rlx_ref's PoCL cache setup run anew under ``tmp_path`` (restored afterwards)."""
    monkeypatch.setattr(pocl_cache, "_STATE", {"dir": None, "done": False})
    monkeypatch.setenv("RLX_REF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POCL_CACHE_DIR", "")      # recorded, so restored afterwards
    monkeypatch.delenv("POCL_CACHE_DIR")
    return tmp_path / "pocl"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_owns_the_cache_unless_the_user_set_one(fresh_cache, monkeypatch):
    assert pocl_cache.owned_dir() == fresh_cache
    assert os.environ["POCL_CACHE_DIR"] == str(fresh_cache)
    monkeypatch.setattr(pocl_cache, "_STATE", {"dir": None, "done": False})
    monkeypatch.setenv("POCL_CACHE_DIR", "/somewhere/else")
    assert pocl_cache.owned_dir() is None
    assert os.environ["POCL_CACHE_DIR"] == "/somewhere/else"


def test_a_build_that_crashed_clears_the_cache(fresh_cache):
    marks = fresh_cache / pocl_cache.MARKERS
    marks.mkdir(parents=True)
    (fresh_cache / "AB" / "entry").mkdir(parents=True)      # what PoCL left half-written
    (fresh_cache / "AB" / "entry" / "program.bc").write_bytes(b"x")
    (marks / str(_dead_pid())).touch()
    (marks / str(os.getppid())).touch()                     # a live process: no crash
    with pytest.warns(RuntimeWarning, match="compiler crash"):
        assert pocl_cache.owned_dir() == fresh_cache
    assert not (fresh_cache / "AB").exists()
    assert sorted(m.name for m in marks.iterdir()) == sorted([str(os.getppid()),
                                                              str(os.getpid())])


def test_a_clean_cache_is_kept(fresh_cache):
    (fresh_cache / "AB").mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pocl_cache.owned_dir()
    assert (fresh_cache / "AB").exists()


def test_the_running_mark_outlives_only_a_crash(fresh_cache, tmp_path, monkeypatch):
    marks = fresh_cache / pocl_cache.MARKERS
    pocl_cache.owned_dir()
    assert [m.name for m in marks.iterdir()] == [str(os.getpid())]
    env = {**os.environ, "RLX_REF_CACHE_DIR": str(tmp_path)}
    env.pop("POCL_CACHE_DIR", None)
    code = "from rlx_ref.backends.opencl import pocl_cache\npocl_cache.owned_dir()\n"
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
    assert len(list(marks.iterdir())) == 1                  # a normal exit unmarks
    crash = code + "import os\nos.abort()\n"           # what LLVM's fatal errors do
    assert subprocess.run([sys.executable, "-c", crash], env=env).returncode != 0
    assert len(list(marks.iterdir())) == 2
    (fresh_cache / "AB").mkdir()
    pocl_cache.reset_for_tests()                            # a later process, as it were
    monkeypatch.delenv("POCL_CACHE_DIR")
    with pytest.warns(RuntimeWarning, match="cleared it"):
        pocl_cache.owned_dir()
    assert [m.name for m in marks.iterdir()] == [str(os.getpid())]
    assert not (fresh_cache / "AB").exists()


def _device():
    pytest.importorskip("pyopencl")
    from rlx_ref.backends.registry import get_backend

    b = get_backend("opencl")
    ok, why = b.availability()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")
    return b._device()


_SRC = "__kernel void KNAME(__global float* o) { o[get_global_id(0)] = 7.0f + SALT; }"


def _builder(salt: float):
    from rlx_ref.backends.opencl.program import ProgramBuilder

    info, ctx, queue = _device()
    b = ProgramBuilder(ctx, info)
    name = f"rlx_cache_probe_{abs(hash(salt)) % 10 ** 8}"
    src = _SRC.replace("KNAME", name).replace("SALT", f"{salt!r}f")
    return b, b.add(src, name), queue, ctx


def _run(ref, queue, ctx, want: float):
    import pyopencl as cl

    out = np.zeros(4, np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
    k = ref.make()
    k(queue, (4,), None, buf)
    cl.enqueue_copy(queue, out, buf)
    np.testing.assert_array_equal(out, np.full(4, want, np.float32))


def test_invalid_kernel_name_rebuilds_uncached_and_warns(monkeypatch):
    import pyopencl as cl

    from rlx_ref.backends.opencl import program

    monkeypatch.setattr(program, "_WARNED", [])
    monkeypatch.setattr(program, "_REBUILDS", [])
    builder, ref, queue, ctx = _builder(0.25)
    real, calls = cl.Kernel, []

    def flaky(prog, name):          # the first creation meets a broken cache entry
        calls.append(name)
        if len(calls) == 1:
            raise cl.LogicError("clCreateKernel failed: INVALID_KERNEL_NAME")
        return real(prog, name)
    monkeypatch.setattr(cl, "Kernel", flaky)
    with pytest.warns(RuntimeWarning, match="rebuilt it uncached"):
        _run(ref, queue, ctx, 7.25)
    assert len(program._REBUILDS) == 1 and "INVALID_KERNEL_NAME" in program._REBUILDS[0]
    _run(ref, queue, ctx, 7.25)              # the rebuilt program is kept
    assert len(program._REBUILDS) == 1


def test_a_build_lacking_a_kernel_is_rebuilt(monkeypatch):
    import pyopencl as cl

    from rlx_ref.backends.opencl import program

    monkeypatch.setattr(program, "_WARNED", [])
    monkeypatch.setattr(program, "_REBUILDS", [])
    builder, ref, queue, ctx = _builder(0.5)
    real = program.ProgramBuilder._build
    empty = "__kernel void rlx_other(__global float* o) { o[0] = 0.0f; }"

    def stale(self, src, options):    # a cached binary of some other program comes back
        if not program._REBUILDS and not any("REBUILD" in o for o in options):
            return cl.Program(self.context, empty).build()
        return real(self, src, options)
    monkeypatch.setattr(program.ProgramBuilder, "_build", stale)
    with pytest.warns(RuntimeWarning, match="lacks"):
        _run(ref, queue, ctx, 7.5)
    assert len(program._REBUILDS) == 1


def test_a_kernel_missing_even_after_rebuild_is_an_error(monkeypatch):
    import pyopencl as cl

    from rlx_ref.backends.opencl import program

    monkeypatch.setattr(program, "_WARNED", ["earlier"])
    monkeypatch.setattr(program, "_REBUILDS", [])
    builder, ref, queue, ctx = _builder(0.75)
    empty = "__kernel void rlx_other(__global float* o) { o[0] = 0.0f; }"
    monkeypatch.setattr(program.ProgramBuilder, "_build",
                        lambda self, src, options: cl.Program(self.context, empty).build())
    with pytest.raises(RuntimeError, match="lacks kernel rlx_cache_probe_.*rebuilt uncached"):
        ref.make()
