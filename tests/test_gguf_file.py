"""GGUF files: write -> read round trips for every plain type and every metadata value
type, hand-built v1/v2 files, the validation errors, and interop with gguf-py."""
import ml_dtypes
import numpy as np
import pytest

import rlx_ref
from rlx_ref.quant import (GGUFError, QuantError, QuantizedTensor, dequant, get_scheme,
                           load_gguf, quantize, write_gguf)
from rlx_ref.quant.gguf_format import GGML_TYPES, ggml_type

from _gguf_build import ARRAY, STRING, ensure_q8_0, gguf_bytes, patch

PLAIN = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
         "F64": np.float64, "I8": np.int8, "I16": np.int16, "I32": np.int32,
         "I64": np.int64}
SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 2), (), (0, 4)]


def _arr(dtype, shape, rng):
    x = rng.standard_normal(shape) * 50
    return x.astype(dtype) if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16 \
        else np.asarray(x).astype(np.int64).astype(dtype)


def _file(tmp_path, data: bytes, name="f.gguf"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_top_level_exports():
    assert rlx_ref.load_gguf is load_gguf and rlx_ref.write_gguf is write_gguf
    assert issubclass(GGUFError, QuantError)


@pytest.mark.parametrize("type_name", list(PLAIN))
def test_round_trip_plain_types(tmp_path, type_name):
    rng = np.random.default_rng(0)
    tensors = {f"t{i}": _arr(PLAIN[type_name], s, rng) for i, s in enumerate(SHAPES)}
    write_gguf(tmp_path / "m.gguf", tensors, architecture="test")
    with load_gguf(tmp_path / "m.gguf") as r:
        assert r.version == 3 and r.architecture == "test" and r.alignment == 32
        assert r.tensor_names() == list(tensors)
        for name, want in tensors.items():
            ti = r.tensor_info(name)
            assert ti.ggml_type == type_name and ti.shape == want.shape
            assert ti.dims == tuple(reversed(want.shape)) and ti.offset % 32 == 0
            assert ti.n_bytes == want.nbytes == r.read_tensor_bytes(name).size
            got = r.read_tensor(name)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert np.array_equal(r.read_tensor_bytes(name), want.reshape(-1).view(np.uint8))
            deq = r.dequant_tensor(name)
            assert deq.dtype == np.float32 and deq.shape == want.shape
            assert np.array_equal(deq, want.astype(np.float32))


def test_arrays_outlive_close(tmp_path):
    write_gguf(tmp_path / "m.gguf", {"w": np.arange(4.0, dtype=np.float32)},
               architecture="a")
    r = load_gguf(tmp_path / "m.gguf")
    view = r.read_tensor("w")
    r.close()
    assert view.tolist() == [0, 1, 2, 3] and not view.flags.writeable
    with pytest.raises(GGUFError, match="closed"):
        r.read_tensor("w")
    with pytest.raises(GGUFError, match="no tensor 'x'"):
        r.tensor_info("x")


TYPED = {"u8": (200, "UINT8"), "i8": (-100, "INT8"), "u16": (60000, "UINT16"),
         "i16": (-30000, "INT16"), "u32": (4_000_000_000, "UINT32"),
         "i32": (-2_000_000_000, "INT32"), "u64": (2**64 - 1, "UINT64"),
         "i64": (-2**63, "INT64"), "f32": (0.5, "FLOAT32"), "f64": (0.1, "FLOAT64"),
         "b": (True, "BOOL"), "s": ("h\u00e9llo", "STRING"),
         "a_u8": ([1, 2, 255], "UINT8"), "a_i64": ([-1, 2**62], "INT64"),
         "a_f64": ([0.1, -2.5], "FLOAT64"), "a_b": ([True, False], "BOOL"),
         "a_s": (["x", "", "\u4e2d"], "STRING"), "empty": ([], "UINT32"),
         "bad_utf8": ("ok\udcff", "STRING")}


def test_metadata_every_value_type_round_trips(tmp_path):
    write_gguf(tmp_path / "m.gguf", {}, architecture="a", metadata=TYPED)
    with load_gguf(tmp_path / "m.gguf") as r:
        typed = r.metadata(typed=True)
        assert typed == {"general.architecture": ("a", "STRING"), **TYPED}
        assert r.metadata()["a_s"] == ["x", "", "\u4e2d"]
        assert r.value_type("a_u8") == ("ARRAY", "UINT8")
        # what metadata(typed=True) gives back writes the same file again
        write_gguf(tmp_path / "n.gguf", {}, architecture="a", metadata=typed)
    assert (tmp_path / "m.gguf").read_bytes() == (tmp_path / "n.gguf").read_bytes()


@pytest.mark.parametrize("value,vtype", [
    (7, "UINT32"), (-7, "INT32"), (2**40, "UINT64"), (-2**40, "INT64"), (1.5, "FLOAT32"),
    (np.float64(1.5), "FLOAT64"), (np.uint8(3), "UINT8"), (np.int16(-3), "INT16"),
    (False, "BOOL"), ("s", "STRING"), (b"raw", "STRING"), ([1, -1], "INT32"),
    ([1, 2**33], "UINT64"), ([1, 2.5], "FLOAT32"), (["a"], "STRING"),
    (np.arange(3, dtype=np.uint16), "UINT16"), ([True], "BOOL")])
def test_metadata_inferred_types(tmp_path, value, vtype):
    write_gguf(tmp_path / "m.gguf", {}, architecture="a", metadata={"k": value})
    with load_gguf(tmp_path / "m.gguf") as r:
        got, t = r.metadata(typed=True)["k"]
    assert t == vtype
    want = value.tolist() if isinstance(value, np.ndarray) else value
    want = want.decode() if isinstance(want, bytes) else want
    assert got == want


@pytest.mark.parametrize("metadata,match", [
    ({"k": [[1]]}, "nested arrays"), ({"k": []}, "empty array needs its item type"),
    ({"k": (300, "UINT8")}, "300 does not fit in UINT8"), ({"k": [1, "a"]}, "mix types"),
    ({"k": (1, "NOPE")}, "unknown GGUF value type"), ({"k": 2**64}, "does not fit"),
    ({"k": {"a": 1}}, "cannot store a dict"), ({"k": ("x", "UINT32")}, "not strings"),
    ({"k": (1e300, "FLOAT32")}, "overflows FLOAT32"), ({"k": (2, "BOOL")}, "BOOL"),
    ({"general.architecture": "other"}, "contradicts"), ({"": 1}, "non-empty string")])
def test_metadata_errors(tmp_path, metadata, match):
    with pytest.raises(GGUFError, match=match):
        write_gguf(tmp_path / "m.gguf", {}, architecture="a", metadata=metadata)
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.parametrize("tensors,kw,match", [
    ({"x": np.zeros(3, np.uint8)}, {}, "dtype uint8 has no GGML type"),
    ({"x": np.zeros((1,) * 5, np.float32)}, {}, "5 dims"),
    ({"x": [1.0]}, {}, "expected a numpy array"), ({"": np.zeros(1)}, {}, "non-empty"),
    ({"x": np.zeros(1, np.float32)}, {"alignment": 24}, "power of two"),
    ({"x": np.zeros(1, np.float32)}, {"alignment": 0}, "power of two")])
def test_writer_errors(tmp_path, tensors, kw, match):
    with pytest.raises(GGUFError, match=match):
        write_gguf(tmp_path / "m.gguf", tensors, architecture="a", **kw)


def test_quantized_tensor_checks():
    with pytest.raises(GGUFError, match="multiple of Q4_K's block size 256"):
        QuantizedTensor(np.zeros(144, np.uint8), (1, 128), "Q4_K")
    with pytest.raises(GGUFError, match="expected 144 bytes, got 143"):
        QuantizedTensor(np.zeros(143, np.uint8), (256,), "Q4_K")
    with pytest.raises(GGUFError, match="unknown ggml type 'Q9'"):
        QuantizedTensor(np.zeros(1, np.uint8), (1,), "Q9")


def test_quantized_round_trip_and_alignment(tmp_path):
    scheme = ensure_q8_0()
    w = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    packed = quantize(w, scheme)
    qt = QuantizedTensor(packed, w.shape, scheme)
    write_gguf(tmp_path / "q.gguf", {"a": np.ones(3, np.float32), "w": qt},
               architecture="a", alignment=64)
    with load_gguf(tmp_path / "q.gguf") as r:
        assert r.alignment == 64 and r.metadata(typed=True)["general.alignment"] == \
            (64, "UINT32")
        ti = r.tensor_info("w")
        assert (ti.ggml_type, ti.dims, ti.n_bytes, ti.offset % 64) == ("Q8_0", (64, 4),
                                                                       packed.size, 0)
        assert np.array_equal(r.read_tensor_bytes("w"), packed)
        assert r.read_tensor("w").shape == (4, 2 * 34)
        want = dequant(packed, scheme).reshape(4, 64)
        assert np.array_equal(r.dequant_tensor("w"), want)
        assert np.abs(want - w).max() <= np.abs(w).max() / 127


def test_block_type_without_decoder(tmp_path):
    """A file may hold a block type this build cannot decode: bytes yes, dequant no."""
    missing = []
    for t in GGML_TYPES.values():
        try:
            get_scheme(t.name)
        except QuantError:
            if t.block_size > 1:
                missing.append(t)
    if not missing:
        pytest.skip("every GGML block type has a registered scheme")
    t = missing[0]
    raw = bytes(range(256))[: t.type_size] * 2
    data, _, _ = gguf_bytes(tensors=[("q", (2 * t.block_size,), t.id, raw)])
    with load_gguf(_file(tmp_path, data)) as r:
        assert r.read_tensor_bytes("q").tobytes() == raw
        with pytest.raises(GGUFError, match=f"tensor 'q' \\({t.name}\\)"):
            r.dequant_tensor("q")


KV = [("general.architecture", STRING, "llama"), ("n", 4, 7), ("f", 6, 0.25),
      ("names", ARRAY, (STRING, ["a", "bc"])), ("ids", ARRAY, (5, [-1, 2, 3]))]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_hand_built_versions(tmp_path, version):
    w = np.arange(12, dtype=np.float32)
    h = np.arange(6, dtype=np.float16)
    data, _, start = gguf_bytes(KV, [("w", (4, 3), 0, w.tobytes()),
                                     ("h", (6,), 1, h.tobytes())], version=version)
    with load_gguf(_file(tmp_path, data)) as r:
        assert r.version == version and r.architecture == "llama"
        assert r.metadata() == {"general.architecture": "llama", "n": 7, "f": 0.25,
                                "names": ["a", "bc"], "ids": [-1, 2, 3]}
        assert r.data_offset == start and r.tensor_info("h").offset == 64
        assert np.array_equal(r.read_tensor("w"), w.reshape(3, 4))
        assert np.array_equal(r.dequant_tensor("h"), h.astype(np.float32))


def _errors():
    f32 = np.zeros(8, np.float32).tobytes()
    ok = [("t", (8,), 0, f32)]
    return [
        (gguf_bytes(tensors=ok)[0][:20], "truncated file: the key/value count"),
        (gguf_bytes(tensors=ok, magic=b"GGML")[0], "not a GGUF file: magic"),
        (patch(*gguf_bytes(tensors=ok)[:2], "version", 4), "unsupported GGUF version 4"),
        (patch(*gguf_bytes(tensors=ok)[:2], "version", 3 << 24), "big-endian"),
        (patch(*gguf_bytes(tensors=ok)[:2], "n_kv", 2**40), "key/value count 1099511627776"),
        (patch(*gguf_bytes(tensors=ok)[:2], "n_tensors", 2**64 - 1), "tensor count"),
        (patch(*gguf_bytes(KV, ok)[:2], "kv0.key", 2**63), "string length"),
        (patch(*gguf_bytes(KV, ok)[:2], "kv3.count", 2**50), "key 'names': array count"),
        (patch(*gguf_bytes(KV, ok)[:2], "kv3.item", ARRAY), "key 'names': nested arrays"),
        (patch(*gguf_bytes(KV, ok)[:2], "kv1.type", 13), "key 'n': unknown value type 13"),
        (gguf_bytes([("b", 7, 2)], ok)[0], "key 'b': bool value 2"),
        (gguf_bytes([("k", 4, 1), ("k", 4, 2)])[0], "duplicate key 'k'"),
        (gguf_bytes([(b"\xff", 4, 1)])[0], "key #0 is not valid UTF-8"),
        (gguf_bytes([("general.alignment", 4, 0)], ok)[0], "'general.alignment': 0 is not"),
        (gguf_bytes([("general.alignment", 4, 48)], ok)[0], "48 is not a power of two"),
        (gguf_bytes([("general.alignment", 5, 32)], ok)[0], "type INT32, expected UINT32"),
        (gguf_bytes([("general.architecture", 4, 1)])[0], "expected STRING"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.type", 99), "tensor 't': unknown ggml type 99"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.type", 31), "ggml type 31 \\(Q4_0_4_4\\)"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.n_dims", 5), "tensor 't': n_dims 5 exceeds"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.dim0", 2**63), "dim 0 = 9223372036854775808"),
        (gguf_bytes(tensors=[("t", (2**32, 2**32), 0, b"")])[0], "more than 2\\*\\*63-1 elements"),
        (gguf_bytes(tensors=[("t", (16,), 8, bytes(34))])[0],
         "row length \\(dim 0\\) 16 is not a"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.offset", 123),
         "tensor 't': offset 123 is not a multiple of the alignment 32"),
        (patch(*gguf_bytes(tensors=ok)[:2], "ti0.offset", 2**62), "runs past the end"),
        (gguf_bytes(tensors=[("t", (9,), 0, f32 + f32)])[0][:-32], "runs past the end"),
        (gguf_bytes(tensors=ok + [("u", (8,), 0, f32, 0)])[0], "'u' \\(offset 0\\) overlaps"),
        (gguf_bytes(tensors=ok + [("t", (8,), 0, f32)])[0], "duplicate tensor name 't'"),
        (b"", "empty"),
    ]


@pytest.mark.parametrize("data,match", _errors())
def test_validation_errors(tmp_path, data, match):
    with pytest.raises(GGUFError, match=match) as e:
        load_gguf(_file(tmp_path, data))
    assert str(tmp_path) in str(e.value) and "\n" not in str(e.value)


def test_ggml_type_table_matches_gguf_py():
    gguf = pytest.importorskip("gguf")
    theirs = {int(t): (t.name, b, s) for t, (b, s) in gguf.GGML_QUANT_SIZES.items()}
    ours = {i: (t.name, t.block_size, t.type_size) for i, t in GGML_TYPES.items()}
    # ggml's block_q8_1 is two f16 then 32 int8 (36 bytes); gguf-py still says 40
    theirs.pop(9), ours.pop(9)
    assert {i: v for i, v in ours.items() if i in theirs} == theirs
    assert ggml_type("Q8_1").type_size == 2 * 2 + 32
    with pytest.raises(GGUFError, match="unknown ggml type 1000"):
        ggml_type(1000)


def test_written_file_loads_in_gguf_py(tmp_path):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(2)
    tensors = {n: _arr(dt, (3, 4), rng) for n, dt in PLAIN.items() if n != "BF16"}
    meta = {k: v for k, v in TYPED.items() if k not in ("empty", "bad_utf8")}
    write_gguf(tmp_path / "m.gguf", tensors, architecture="llama", metadata=meta)
    r = gguf.GGUFReader(tmp_path / "m.gguf")
    for key, (value, vtype) in meta.items():
        f = r.fields[key]
        assert f.types[-1].name == vtype and f.contents() == value
    assert [t.name for t in r.tensors] == list(tensors)
    for t in r.tensors:
        assert t.tensor_type.name == t.name and list(t.shape) == [4, 3]
        assert np.array_equal(t.data, tensors[t.name])


def test_gguf_py_file_loads_here(tmp_path):
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 64)).astype(np.float32)
    q = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    wr = gguf.GGUFWriter(tmp_path / "p.gguf", "llama")
    wr.add_uint32("llama.context_length", 128)
    wr.add_float32("llama.eps", 1e-5)
    wr.add_array("tokenizer.ggml.tokens", ["<s>", "a", "\u00e9"])
    wr.add_bool("b", True)
    wr.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3))
    wr.add_tensor("i32", np.arange(5, dtype=np.int32))
    wr.add_tensor("q8", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    with load_gguf(tmp_path / "p.gguf") as r:
        m = r.metadata()
        assert r.architecture == "llama" and m["llama.context_length"] == 128
        assert m["llama.eps"] == np.float32(1e-5) and m["b"] is True
        assert m["tokenizer.ggml.tokens"] == ["<s>", "a", "\u00e9"]
        assert np.array_equal(r.read_tensor("f32"), np.arange(6).reshape(2, 3))
        assert np.array_equal(r.read_tensor("i32"), np.arange(5))
        assert r.tensor_info("q8").shape == (2, 64)
        assert np.array_equal(r.read_tensor_bytes("q8"), q.reshape(-1))
        ensure_q8_0()
        want = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0)
        assert np.array_equal(r.dequant_tensor("q8"), want)


def _gguf_schemes():
    from rlx_ref.quant import all_schemes

    return [sd for sd in all_schemes() if sd.kind == "gguf" and sd.ggml_type is not None]


@pytest.mark.parametrize("sd", _gguf_schemes(), ids=lambda sd: sd.name)
def test_registered_scheme_in_a_file(tmp_path, sd):
    """Every registered block format: the GGUF table agrees with its record, and its
    blocks go through a file unchanged and decode as the scheme decodes them."""
    t = ggml_type(sd.ggml_type)
    assert (t.name, t.block_size, t.type_size) == (sd.name, sd.block_size, sd.block_bytes)
    raw = np.random.default_rng(sd.ggml_type).integers(0, 256, 3 * sd.block_bytes,
                                                       dtype=np.uint8)
    write_gguf(tmp_path / "q.gguf", {"q": QuantizedTensor(raw, (3, sd.block_size), sd.name)},
               architecture="a")
    with load_gguf(tmp_path / "q.gguf") as r:
        assert np.array_equal(r.read_tensor_bytes("q"), raw)
        want = dequant(raw, sd.name).reshape(3, sd.block_size)
        assert np.array_equal(r.dequant_tensor("q"), want, equal_nan=True)
    gguf = pytest.importorskip("gguf")
    (ti,) = gguf.GGUFReader(tmp_path / "q.gguf").tensors
    assert ti.tensor_type.name == sd.name and np.array_equal(ti.data.reshape(-1), raw)
