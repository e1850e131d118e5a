"""The environment registry: parsing, overrides, the catalog, and that code reads every
variable through it."""
import ast
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rlx_ref import env_registry as E
from rlx_ref.env_catalog import DOC_PATH, catalog_text, markdown

ROOT = Path(__file__).resolve().parents[1]
READERS = {"get", "flag", "raw", "set_override", "unset_override"}
PREFIXES = ("RLX_", "NUMBA_", "PYOPENCL_", "POCL_", "NO_COLOR")  # the names a read may take


def test_flag_words_follow_rlx_and_bad_words_are_errors():
    v = E.REGISTRY["RLX_VERBOSE"]
    for text in ("1", "true", " On ", "YES", "2", "007"):
        assert E.parse(v, text) is True, text
    for text in (None, "", "  ", "0", "false", "OFF", "no", "000"):
        assert E.parse(v, text) is False, text
    with pytest.raises(E.EnvError, match=r"RLX_VERBOSE='ture' is not a flag value; "
                                         r"expected one of 1, true, yes, on \(on\)"):
        E.parse(v, "ture")


def test_int_enum_and_path_kinds():
    fuzz = E.REGISTRY["RLX_REF_FUZZ_EXAMPLES"]
    assert E.parse(fuzz, None) == 500 and E.parse(fuzz, " 20 ") == 20
    with pytest.raises(E.EnvError, match="RLX_REF_FUZZ_EXAMPLES='many' is not an integer"):
        E.parse(fuzz, "many")
    style = E.REGISTRY["RLX_REF_OPENCL_KERNELS"]
    assert E.parse(style, None) == "auto" and E.parse(style, "GPU") == "gpu"
    with pytest.raises(E.EnvError, match="expected one of auto, gpu, cpu"):
        E.parse(style, "fpga")
    assert E.get("RLX_REF_CACHE_DIR", {"RLX_REF_CACHE_DIR": " /tmp/x "}) == "/tmp/x"
    assert E.get("RLX_REF_CACHE_DIR", {}) is None


def test_unregistered_names_are_refused():
    for call in (lambda: E.get("RLX_NOT_A_VAR"), lambda: E.flag("RLX_NOT_A_VAR"),
                 lambda: E.set_override("RLX_NOT_A_VAR", "1")):
        with pytest.raises(E.EnvError, match="RLX_NOT_A_VAR is not registered"):
            call()
    with pytest.raises(E.EnvError, match="is a path variable, not a flag"):
        E.flag("RLX_REF_CACHE_DIR")
    with pytest.raises(ValueError, match="registered twice"):
        E.register(E.REGISTRY["RLX_VERBOSE"])


def test_a_code_override_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("RLX_VERBOSE", "1")
    assert E.flag("RLX_VERBOSE")
    with E.overrides(RLX_VERBOSE="0"):
        assert not E.flag("RLX_VERBOSE") and not E.flag("RLX_VERBOSE", {"RLX_VERBOSE": "1"})
        with E.overrides(RLX_VERBOSE=None):          # None lifts the override inside
            assert E.flag("RLX_VERBOSE")
        assert not E.flag("RLX_VERBOSE")
    assert E.flag("RLX_VERBOSE")
    E.set_override("RLX_REF_VERIFY", "yes")
    try:
        assert E.flag("RLX_REF_VERIFY") and E.flag("RLX_REF_VERIFY", {})
    finally:
        E.unset_override("RLX_REF_VERIFY")
    assert E.raw("RLX_REF_VERIFY", {}) is None


def test_overrides_are_safe_from_many_threads():
    errors = []

    def worker(i):
        try:
            for _ in range(200):
                with E.overrides(RLX_REF_FUZZ_EXAMPLES=str(i)):
                    assert isinstance(E.get("RLX_REF_FUZZ_EXAMPLES"), int)
        except Exception as e:                       # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert E.raw("RLX_REF_FUZZ_EXAMPLES", {}) is None    # every block restored its value


def test_check_all_names_every_bad_value():
    bad = E.check_all({"RLX_VERBOSE": "maybe", "RLX_REF_OPENCL_KERNELS": "fpga",
                       "RLX_REF_VERIFY": "1"})
    assert len(bad) == 2 and any("RLX_VERBOSE" in b for b in bad)


def test_the_catalog_and_the_generated_page():
    assert (ROOT / DOC_PATH).read_text() == markdown(), \
        f"{DOC_PATH} is stale: run `rlx-ref env --write`"
    text = catalog_text(show_all=True)
    for name in E.REGISTRY:
        assert name in text and f"`{name}`" in markdown()
    assert "RLX_REF_THRESHOLDS" not in catalog_text()    # bisect: only with --all
    out = subprocess.run([sys.executable, "-m", "rlx_ref.cli", "env"], capture_output=True,
                         text=True, env={**os.environ, "RLX_VERBOSE": "ture"}, cwd=ROOT)
    assert out.returncode == 0 and "INVALID: RLX_VERBOSE='ture'" in out.stdout
    out = subprocess.run([sys.executable, "-m", "rlx_ref.cli", "env", "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "up to date" in out.stdout


# ── the code reads every variable through the registry ──────────────────────

def _sources():
    return sorted((ROOT / "rlx_ref").rglob("*.py"))


def _environ_reads(tree):
    """Lines that read os.environ / os.getenv (writes and copies for a child are allowed)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                isinstance(node.value, ast.Name) and node.value.id == "os":
            found.append(node.lineno)
    return found


def test_no_module_reads_the_environment_around_the_registry():
    allowed = {  # file -> why it may touch os.environ directly
        "env_registry.py": "the registry itself",
        "pocl_cache.py": "points POCL_CACHE_DIR at rlx_ref's cache before PoCL starts "
                         "(a write)",
    }
    offenders = []
    for path in _sources():
        lines = _environ_reads(ast.parse(path.read_text()))
        if lines and path.name not in allowed:
            offenders += [f"{path.relative_to(ROOT)}:{n}" for n in lines]
    assert not offenders, f"read these through rlx_ref.env_registry: {offenders}"
    text = (ROOT / "rlx_ref/backends/opencl/pocl_cache.py").read_text()
    assert [ln for ln in text.splitlines() if "os.environ" in ln] == \
        ['        os.environ["POCL_CACHE_DIR"] = str(path)']


def _literal_reads(path):
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in READERS:
            names += [a.value for a in node.args[:1]
                      if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.startswith(PREFIXES)]
    return names


def test_every_name_read_is_registered_and_every_registered_name_is_read():
    read = set()
    for path in _sources() + sorted((ROOT / "tests").glob("*.py")):
        read.update(n for n in _literal_reads(path) if n != "RLX_NOT_A_VAR")
    indirect = {"RLX_REF_THRESHOLDS", "RLX_REF_OPENCL_KERNELS",   # read via a module const
                "RLX_ENABLE_FUSE_TRANSFORMER_LAYER"}
    assert read - set(E.REGISTRY) == set()
    assert set(E.REGISTRY) - read - indirect == set()
    from rlx_ref.backends import variants
    from rlx_ref.backends.opencl import devices

    from rlx_ref.passes.fuse_patterns import OPT_IN

    assert {variants.ENV, devices.KERNELS_ENV, *OPT_IN.values()} == indirect
    assert devices.KERNEL_STYLES == E.REGISTRY["RLX_REF_OPENCL_KERNELS"].choices
