"""safetensors -> GGUF conversion: the strict safetensors reader, which scheme each tensor
gets and why, the report, interop with gguf-py and safetensors, and ``rlx-ref gguf``."""
import io
import json
import struct
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from rlx_ref import cli
from rlx_ref.quant import GGUFError, convert_to_gguf, dequant, load_gguf, quantize
from rlx_ref.quant.safetensors import (SafetensorsError, load_safetensors,
                                       save_safetensors)

from _gguf_build import ensure_q8_0


def _model(rng):
    f32 = np.float32
    return {
        "tok_embd.weight": rng.standard_normal((16, 64)).astype(f32),
        "blk.0.attn_q.weight": rng.standard_normal((64, 64)).astype(np.float16),
        "blk.0.attn_norm.weight": rng.standard_normal(64).astype(f32),
        "blk.0.attn_q.bias": rng.standard_normal(64).astype(f32),
        "blk.0.ffn_down.weight": rng.standard_normal((64, 48)).astype(f32),
        "blk.0.big.weight": (rng.standard_normal((2, 40)) * 1e5).astype(f32),
        "blk.0.out.weight": rng.standard_normal((32, 64)).astype(ml_dtypes.bfloat16),
        "blk.0.norm_proj": rng.standard_normal((4, 64)).astype(f32),
        "pos": np.arange(10, dtype=np.int32),
    }


EXPECT = {"tok_embd.weight": "Q8_0", "blk.0.attn_q.weight": "Q8_0",
          "blk.0.attn_norm.weight": "F32", "blk.0.attn_q.bias": "F32",
          "blk.0.ffn_down.weight": "F16", "blk.0.big.weight": "F32",
          "blk.0.out.weight": "F16", "blk.0.norm_proj": "F32", "pos": "I32"}


@pytest.fixture
def model(tmp_path):
    ensure_q8_0()
    tensors = _model(np.random.default_rng(0))
    save_safetensors(tmp_path / "m.safetensors", tensors, {"format": "np"})
    return tmp_path / "m.safetensors", tensors


def test_convert_report_and_contents(tmp_path, model):
    src, tensors = model
    rep = convert_to_gguf(src, tmp_path / "m.gguf", "Q8_0",
                          scheme_overrides={"*.out.weight": "F16"})
    assert {t.name: t.scheme for t in rep.tensors} == EXPECT
    assert set(rep.notes) == {"blk.0.ffn_down.weight", "blk.0.big.weight"}
    assert "row length 48 is not a multiple of Q8_0's block size 32; wrote F16" in \
        rep.notes["blk.0.ffn_down.weight"]
    assert "values exceed F16" in rep.notes["blk.0.big.weight"]
    for name, shape, scheme, b_in, b_out in rep.tensors:
        assert shape == tensors[name].shape and b_in == tensors[name].nbytes
    assert rep.tensors[0].bytes_out == 16 * 2 * 34
    assert rep.bytes_in == sum(t.nbytes for t in tensors.values())
    assert rep.bytes_out == sum(t.bytes_out for t in rep.tensors) < rep.bytes_in
    assert rep.compression_ratio == rep.bytes_in / rep.bytes_out
    assert rep.file_bytes == (tmp_path / "m.gguf").stat().st_size
    with load_gguf(tmp_path / "m.gguf") as r:
        assert r.architecture == "llama"
        assert r.metadata(typed=True)["general.quantization_version"] == (2, "UINT32")
        for name, want in tensors.items():
            ti = r.tensor_info(name)
            assert ti.ggml_type == EXPECT[name] and ti.shape == want.shape
            got = r.dequant_tensor(name)
            x = np.asarray(want, dtype=np.float32)
            if EXPECT[name] == "Q8_0":
                packed = quantize(x, "Q8_0")
                assert np.array_equal(r.read_tensor_bytes(name), packed)
                assert np.array_equal(got, dequant(packed, "Q8_0").reshape(x.shape))
                assert np.abs(got - x).max() <= np.abs(x).max() / 127
            elif EXPECT[name] == "F16":
                assert np.array_equal(got, x.astype(np.float16).astype(np.float32))
            else:
                assert np.array_equal(got, x)


def test_quantize_norm_bias_and_plain_schemes(tmp_path, model):
    src, tensors = model
    rep = convert_to_gguf(src, tmp_path / "a.gguf", "Q8_0", skip_norm_bias=False)
    got = {t.name: t.scheme for t in rep.tensors}
    assert got["blk.0.attn_norm.weight"] == got["blk.0.attn_q.bias"] == "Q8_0"
    assert got["blk.0.norm_proj"] == "Q8_0"
    rep = convert_to_gguf(src, tmp_path / "b.gguf", "BF16", {"tok_*": "Q8_0"})
    got = {t.name: t.scheme for t in rep.tensors}
    assert got["tok_embd.weight"] == "Q8_0" and got["blk.0.attn_q.weight"] == "BF16"
    assert not rep.notes
    with load_gguf(tmp_path / "b.gguf") as r:
        w = np.asarray(tensors["blk.0.out.weight"], dtype=np.float32)
        assert np.array_equal(r.dequant_tensor("blk.0.out.weight"), w)


@pytest.mark.parametrize("scheme,overrides,match", [
    ("NOPE", None, "scheme 'NOPE': unknown quant scheme"),
    ("F16", {"*": 3}, "scheme 3 must be a name"),
])
def test_convert_bad_scheme(tmp_path, model, scheme, overrides, match):
    with pytest.raises(GGUFError, match=match):
        convert_to_gguf(model[0], tmp_path / "x.gguf", scheme, overrides)
    assert not (tmp_path / "x.gguf").exists()


def test_converted_file_in_gguf_py(tmp_path, model):
    gguf = pytest.importorskip("gguf")
    src, tensors = model
    convert_to_gguf(src, tmp_path / "m.gguf", "Q8_0")
    r = gguf.GGUFReader(tmp_path / "m.gguf")
    with load_gguf(tmp_path / "m.gguf") as ours:
        assert [t.name for t in r.tensors] == ours.tensor_names()
        for t in r.tensors:
            if t.tensor_type.name == "I32":      # gguf-py has no dequantize for ints
                assert np.array_equal(t.data, ours.read_tensor(t.name))
                continue
            theirs = gguf.quants.dequantize(t.data, t.tensor_type)
            assert np.array_equal(theirs.reshape(-1),
                                  ours.dequant_tensor(t.name).reshape(-1))


def test_safetensors_interop(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(1)
    tensors = {"a": rng.standard_normal((3, 5)).astype(np.float32),
               "b": np.arange(4, dtype=np.int64), "c": np.array([True, False]),
               "d": rng.standard_normal(3).astype(ml_dtypes.bfloat16),
               "e": np.zeros((0, 2), np.float16)}
    save_safetensors(tmp_path / "ours.st", tensors, {"k": "v"})
    theirs = st.load_file(tmp_path / "ours.st")
    assert all(np.array_equal(theirs[k], v) for k, v in tensors.items())
    st.save_file(tensors, tmp_path / "theirs.st", metadata={"x": "y"})
    with load_safetensors(tmp_path / "theirs.st") as f:
        assert sorted(f.names()) == sorted(tensors) and f.metadata == {"x": "y"}
        for k, v in tensors.items():
            assert f.tensor(k).dtype == v.dtype and np.array_equal(f.tensor(k), v)


def _st(header, data=b"", n=None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if n is None else n) + raw + data


ENTRY = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("data,match", [
    (b"\x01\x00", "truncated file"),
    (_st({"a": ENTRY}, bytes(8), n=10**6), "header length 1000000 runs past the end"),
    (_st(b"{}", n=2**40), "exceeds the limit"),
    (_st(b"{not json"), "not valid JSON"), (_st(b"[1]"), "JSON list, expected an object"),
    (_st(b'{"a": 1, "a": 2}'), "duplicate header key 'a'"),
    (_st({"a": {"dtype": "F32"}}), "expected an object with dtype"),
    (_st({"a": {**ENTRY, "dtype": "F12"}}, bytes(8)), "unknown dtype 'F12'"),
    (_st({"a": {**ENTRY, "shape": [-2]}}, bytes(8)), "non-negative integers"),
    (_st({"a": {**ENTRY, "data_offsets": [8, 0]}}, bytes(8)), "0 <= begin <= end"),
    (_st({"a": {**ENTRY, "data_offsets": [0, 16]}}, bytes(8)), "past the end of the data"),
    (_st({"a": {**ENTRY, "shape": [3]}}, bytes(8)), "takes 12 bytes but"),
    (_st({"a": ENTRY, "b": {**ENTRY, "data_offsets": [4, 12]}}, bytes(12)), "overlaps"),
    (_st({"__metadata__": {"k": 1}}), "must be an object of strings"),
])
def test_safetensors_validation(tmp_path, data, match):
    (tmp_path / "x.st").write_bytes(data)
    with pytest.raises(SafetensorsError, match=match) as e:
        load_safetensors(tmp_path / "x.st")
    assert str(tmp_path / "x.st") in str(e.value)


def test_safetensors_every_truncation(tmp_path):
    save_safetensors(tmp_path / "x.st", {"a": np.arange(6, dtype=np.float32),
                                         "b": np.ones((2, 2), np.float16)})
    data = (tmp_path / "x.st").read_bytes()
    for n in range(len(data)):
        (tmp_path / "t.st").write_bytes(data[:n])
        with pytest.raises(SafetensorsError):
            load_safetensors(tmp_path / "t.st")


def _main(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_cli_convert_and_inspect(tmp_path, model):
    out = str(tmp_path / "m.gguf")
    rc, text, err = _main("gguf", "convert", str(model[0]), out, "--scheme", "Q8_0",
                          "--override", "*.out.weight=F16")
    assert rc == 0 and not err and "compression" in text
    assert "blk.0.ffn_down.weight" in text and "wrote F16" in text
    rc, text, _ = _main("gguf", "inspect", out)
    assert rc == 0 and "GGUF v3, architecture llama" in text
    assert "tok_embd.weight" in text and "Q8_0" in text
    rc, text, _ = _main("gguf", "inspect", out, "--json")
    doc = json.loads(text)
    assert rc == 0 and doc["version"] == 3 and len(doc["tensors"]) == 9
    assert {t["name"]: t["type"] for t in doc["tensors"]} == EXPECT


def test_cli_inspect_shortens_long_values(tmp_path):
    from rlx_ref.quant import write_gguf

    write_gguf(tmp_path / "m.gguf", {}, architecture="a",
               metadata={"toks": [f"t{i}" for i in range(100)], "tmpl": "x\n" * 200})
    rc, text, _ = _main("gguf", "inspect", str(tmp_path / "m.gguf"))
    assert rc == 0 and "... (100 items)" in text and "(400 chars)" in text
    rc, text, _ = _main("gguf", "inspect", str(tmp_path / "m.gguf"), "--json")
    meta = json.loads(text)["metadata"]
    assert meta["toks"]["count"] == 100 and meta["toks"]["type"] == "ARRAY[STRING]"


@pytest.mark.parametrize("argv,match", [
    (["inspect", "{bad}"], "{bad}: truncated file"),
    (["inspect", "{missing}"], "{missing}: no such file"),
    (["convert", "{src}", "{out}", "--scheme", "NOPE"], "unknown quant scheme"),
    (["convert", "{src}", "{out}", "--scheme", "F16", "--override", "x"],
     "expected PATTERN=SCHEME"),
    (["convert", "{bad}", "{out}", "--scheme", "F16"], "{bad}: truncated file"),
])
def test_cli_errors(tmp_path, model, argv, match):
    (tmp_path / "bad").write_bytes(b"GGUF\x03\x00")
    paths = {"bad": tmp_path / "bad", "missing": tmp_path / "missing",
             "src": model[0], "out": tmp_path / "o.gguf"}
    argv = [a.format(**paths) for a in argv]
    rc, _, err = _main("gguf", *argv)
    assert rc == 2 and match.format(**paths) in err and err.count("\n") == 1


def test_cli_subprocess_no_traceback(tmp_path):
    (tmp_path / "bad.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-m", "rlx_ref.cli", "gguf", "inspect",
                        str(tmp_path / "bad.gguf")], capture_output=True, text=True,
                       cwd=root, env={"PYTHONPATH": str(root), "PATH": ""})
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1 and "key/value count" in p.stderr


def test_failed_conversion_leaves_the_old_file(tmp_path, model, monkeypatch):
    import rlx_ref.quant as q

    out = tmp_path / "m.gguf"
    out.write_bytes(b"old")
    calls = []

    def failing(w, dtype):
        calls.append(dtype)
        if len(calls) == 2:
            raise q.QuantError("quantizer failed")
        return quantize(w, dtype)

    monkeypatch.setattr(q, "quantize", failing)
    with pytest.raises(GGUFError, match="tensor 'blk.0.attn_q.weight': quantizing to "
                       "Q8_0: quantizer failed"):
        convert_to_gguf(model[0], out, "Q8_0")
    assert out.read_bytes() == b"old" and sorted(tmp_path.iterdir()) == sorted(
        [out, model[0]])


@pytest.mark.parametrize("scheme", ["Q4_0", "Q5_1", "Q4_K", "Q6_K", "IQ4_NL", "IQ4_XS",
                                    "TQ2_0", "MXFP4"])
def test_convert_with_registered_scheme(tmp_path, scheme):
    """Whichever block quantizers this build has: 256-wide rows quantize, the bytes are
    the scheme's own, and gguf-py decodes the file's tensor the same way."""
    from rlx_ref.quant import QuantError, get_scheme

    try:
        if get_scheme(scheme).quantize is None:
            pytest.skip(f"{scheme} has no quantizer in this build")
    except QuantError:
        pytest.skip(f"{scheme} is not registered in this build")
    w = np.random.default_rng(4).standard_normal((4, 256)).astype(np.float32)
    save_safetensors(tmp_path / "m.st", {"w": w, "odd": w[:, :100].copy()})
    rep = convert_to_gguf(tmp_path / "m.st", tmp_path / "m.gguf", scheme)
    assert [t.scheme for t in rep.tensors] == [scheme, "F16"]
    with load_gguf(tmp_path / "m.gguf") as r:
        assert np.array_equal(r.read_tensor_bytes("w"), quantize(w, scheme))
        got = r.dequant_tensor("w")
    gguf = pytest.importorskip("gguf")
    t = next(t for t in gguf.GGUFReader(tmp_path / "m.gguf").tensors if t.name == "w")
    try:
        theirs = gguf.quants.dequantize(t.data, t.tensor_type)
    except NotImplementedError:
        pytest.skip(f"gguf-py cannot dequantize {scheme}")
    assert np.array_equal(theirs.reshape(got.shape), got)
