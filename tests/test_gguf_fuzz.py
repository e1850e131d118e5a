"""GGUF reader fuzz: truncations at every length, random byte changes, huge counts,
lengths, dims and offsets patched into the header. Each file either loads (and every
tensor reads back within the file) or raises GGUFError: never another exception, a
crash, or a huge allocation."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlx_ref.quant import GGUFError, load_gguf, quantize

from _gguf_build import ARRAY, STRING, ensure_q8_0, gguf_bytes, patch

FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
EDGES = [0, 1, 3, 5, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**48, 2**63 - 1, 2**63,
         2**64 - 1]


def _small(version: int = 3):
    """A small valid file: scalar, string and array keys; F32, F16 and Q8_0 tensors."""
    rng = np.random.default_rng(0)
    kv = [("general.architecture", STRING, "llama"), ("n", 4, 7), ("f", 6, 0.5),
          ("names", ARRAY, (STRING, ["a", "bc"])), ("ids", ARRAY, (5, [1, -2, 3])),
          ("b", 7, 1), ("big", 10, 2**40)]
    w = rng.standard_normal(32).astype(np.float32)
    tensors = [("w", (8, 2), 0, rng.standard_normal(16).astype(np.float32).tobytes()),
               ("h", (4,), 1, np.arange(4, dtype=np.float16).tobytes()),
               ("q", (32,), 8, quantize(w, ensure_q8_0()).tobytes())]
    return gguf_bytes(kv, tensors, version=version)


DATA, AT, _ = _small()
DATA1, AT1, _ = _small(version=1)
_names = itertools.count()


def _exercise(directory, data: bytes):
    """Everything the reader offers, or None where it refused the file (GGUFError)."""
    path = directory / f"f{next(_names)}.gguf"
    path.write_bytes(data)
    try:
        with load_gguf(path) as r:
            meta = r.metadata(typed=True)
            out = {}
            for name in r.tensor_names():
                ti = r.tensor_info(name)
                raw = r.read_tensor_bytes(name)
                assert raw.size == ti.n_bytes
                assert r.data_offset + ti.offset + ti.n_bytes <= len(data)
                r.read_tensor(name)
                try:
                    deq = r.dequant_tensor(name)
                    assert deq.shape == ti.shape and deq.dtype == np.float32
                except GGUFError as e:   # a block type with no decoder in this build
                    assert "quant scheme" in str(e)
                out[name] = (ti, raw.tobytes())
            return meta, out
    except GGUFError as e:
        assert str(path) in str(e)
        return None
    finally:
        path.unlink()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf-fuzz")


@pytest.mark.parametrize("data", [DATA, DATA1], ids=["v3", "v1"])
def test_every_truncation(fuzz_dir, data):
    full = _exercise(fuzz_dir, data)
    assert full is not None and set(full[1]) == {"w", "h", "q"}
    loaded = 0
    for n in range(len(data)):
        got = _exercise(fuzz_dir, data[:n])
        if got is not None:           # only the padding after the last tensor was cut
            assert got == full
            loaded += 1
    assert loaded < 32


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 255)),
                min_size=1, max_size=8))
def test_random_byte_changes(fuzz_dir, changes):
    data = bytearray(DATA)
    for pos, byte in changes:
        data[pos] = byte
    _exercise(fuzz_dir, bytes(data))


@FUZZ
@given(st.sampled_from(sorted(AT)), st.one_of(st.sampled_from(EDGES),
                                             st.integers(0, 2**64 - 1),
                                             st.integers(0, 2 * len(DATA))))
def test_huge_header_fields(fuzz_dir, label, value):
    _exercise(fuzz_dir, patch(DATA, AT, label, value))


@FUZZ
@given(st.sampled_from(sorted(AT1)), st.one_of(st.sampled_from(EDGES),
                                              st.integers(0, 2 * len(DATA1))))
def test_huge_header_fields_v1(fuzz_dir, label, value):
    _exercise(fuzz_dir, patch(DATA1, AT1, label, value))


@FUZZ
@given(st.sampled_from([1, 2, 3]), st.binary(max_size=300))
def test_random_bytes_after_the_version(fuzz_dir, version, tail):
    _exercise(fuzz_dir, b"GGUF" + version.to_bytes(4, "little") + tail)


@FUZZ
@given(st.sampled_from(sorted(k for k in AT if k.startswith(("ti", "n_")))),
       st.sampled_from(sorted(k for k in AT if k.startswith(("ti", "n_")))),
       st.sampled_from(EDGES), st.sampled_from(EDGES))
def test_two_fields_at_once(fuzz_dir, a, b, x, y):
    _exercise(fuzz_dir, patch(patch(DATA, AT, a, x), AT, b, y))
