"""CLI file readers: damaged, truncated, hostile and wrongly shaped files give one line
naming the file and exit status 2, never a traceback (hand-picked cases, then a fuzz)."""
import gzip
import io
import json
import tempfile
import zipfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx_ref
from rlx_ref import cli
from rlx_ref.conformance.model import CaseResult
from rlx_ref.conformance.results_file import FORMAT


def _graph_text() -> str:
    g = rlx_ref.Graph("t")
    x, b = g.input("x", [3]), g.param("b", [3])
    g.set_outputs([g.add(g.neg(x), b)])
    return g.to_text()


def _npy(arr) -> bytes:
    f = io.BytesIO()
    np.save(f, arr)
    return f.getvalue()


def _npz(**arrays) -> bytes:
    f = io.BytesIO()
    np.savez(f, **arrays)
    return f.getvalue()


def _results(**change) -> bytes:
    r = CaseResult("c-1", "MatMul", "f32", ("basic",), "numba-cpu", "ok", max_abs=0.0)
    doc = {"format": FORMAT, "machine": {"host": "h"},
           "backends": {"numba-cpu": {"emulated": False, "device": "cpu",
                                      "declared": {"MatMul": ["f32"]}, "paths": {}}},
           "results": [r.to_json()]}
    return json.dumps({**doc, **change}).encode()


GRAPH, X, PARAMS = _graph_text().encode(), _npy(np.arange(3, dtype=np.float32)), \
    _npz(b=np.ones(3, np.float32))
RESULTS = _results()


def _cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:       # argparse; anything else escaping fails the test
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def _argv(reader: str, d: Path, bad: Path) -> list:
    files = {"graph": d / "g.rlx", "npy": d / "x.npy", "npz": d / "p.npz"}
    for name, data in (("graph", GRAPH), ("npy", X), ("npz", PARAMS)):
        if reader != name:
            files[name].write_bytes(data)
    files[reader] = bad
    if reader == "results":
        return ["coverage", str(bad), "--out", str(d / "c.md"), "--json", str(d / "c.json"),
                "--html", str(d / "c.html")]
    return ["run", str(files["graph"]), "--input", f"x={files['npy']}",
            "--params", str(files["npz"]), "--out", str(d / "o.npz")]


def _check(reader: str, data: bytes, name: str = "bad.bin") -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        bad = d / name
        bad.write_bytes(data)
        rc, out, err = _cli(_argv(reader, d, bad))
    if rc == 0:
        assert "Traceback" not in err, err
        return rc, err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (rc, err)
    assert "Traceback" not in err and name in lines[0], err
    return rc, lines[0]


# ── hand-picked cases from the issue ────────────────────────────────────────

def _huge_header() -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                             "shape": (10**11,)})
    return f.getvalue() + b"\0" * 12


def _npz_member(name: str, data: bytes) -> bytes:
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w") as z:
        z.writestr(name, data)
    return f.getvalue()


@pytest.mark.parametrize("reader,data,says", [
    ("npy", b"", "not a .npy header"),
    ("npy", X[:len(X) - 4], "truncated"),
    ("npy", _huge_header(), "400000000000 bytes"),
    ("npy", _npy(np.array([{"a": 1}], dtype=object)), "Python objects"),
    ("npy", _npy(np.arange(4, dtype=np.float32)), "holds shape [4]"),
    ("npy", _npy(np.arange(3)), "holds dtype i64"),
    ("npz", PARAMS[:len(PARAMS) // 2], "not a readable .npz"),
    ("npz", _npz_member("b.npy", _huge_header()), "member 'b.npy': truncated"),
    ("npz", _npz_member("b.pkl", b"x"), "is not a .npy array"),
    ("npz", _npz_member("b.npy", _npy(np.array([None, 1], dtype=object))), "Python objects"),
    ("npz", _npz(b=np.ones(3, np.float32), c=np.ones(1)), "does not declare"),
    ("graph", b"", "empty input"),
    ("graph", GRAPH.replace(b'{"name":"x"}', b'["x"]'), "not a valid op"),
    ("graph", b"\xff\xfe", "not UTF-8"),
    ("results", b"[1, 2]", "holds a JSON list"),
    ("results", b"{", "not JSON"),
    ("results", RESULTS.replace(b'"max_abs": 0.0', b'"max_abs": "big"'), "max_abs"),
    ("results", _results(machine=[{"host": "h"}]), "machine is list"),
    ("results", _results(results={"c-1": {}}), "results is dict"),
    ("results", _results(results=[["c-1"]]), "results[0] is list"),
    ("results", _results(backends={"numba-cpu": ["x"]}), "not an object"),
    ("results", gzip.compress(RESULTS)[:-12], "truncated gzip"),
    ("results", b"\x1f\x8b" + gzip.compress(RESULTS)[2:20] + b"junk" * 8, "corrupt gzip"),
    ("results", gzip.compress(b"{"), "not JSON"),
])
def test_bad_file_is_one_line_naming_it(reader, data, says):
    rc, line = _check(reader, data)
    assert rc == 2 and says in line, line
    assert line.startswith("rlx-ref: ") and "(expected " in line, line


def test_good_files_run(tmp_path):
    for reader, data in (("npy", X), ("npz", PARAMS), ("graph", GRAPH), ("results", RESULTS)):
        assert _check(reader, data)[0] == 0


def test_float64_run_takes_float64_inputs_for_float_declarations(tmp_path):
    (tmp_path / "g.rlx").write_bytes(GRAPH)
    (tmp_path / "x.npy").write_bytes(_npy(np.array([1.0, 2.0, 3.0])))     # f64 for an f32 x
    (tmp_path / "p.npz").write_bytes(_npz(b=np.ones(3)))
    argv = ["run", str(tmp_path / "g.rlx"), "--input", f"x={tmp_path / 'x.npy'}",
            "--params", str(tmp_path / "p.npz"), "--out", str(tmp_path / "o.npz")]
    rc, _, err = _cli(argv + ["--float64"])
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["out0"], [0.0, -1.0, -2.0])
    rc, _, err = _cli(argv)                 # without --float64 the declared f32 is required
    assert rc == 2 and "holds dtype f64" in err, err


def test_out_names_a_directory_or_gets_npz_added(tmp_path):
    for name, data in (("g.rlx", GRAPH), ("x.npy", X), ("p.npz", PARAMS)):
        (tmp_path / name).write_bytes(data)
    base = ["run", str(tmp_path / "g.rlx"), "--input", f"x={tmp_path / 'x.npy'}",
            "--params", str(tmp_path / "p.npz")]
    for out in (str(tmp_path), str(tmp_path / "sub") + "/", ""):
        rc, _, err = _cli(base + ["--out", out])
        assert rc == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.npz.*")) and not (tmp_path.parent / ".npz").exists()
    rc, out, _ = _cli(base + ["--out", str(tmp_path / "res")])
    assert rc == 0 and f"wrote {tmp_path / 'res.npz'}" in out
    with np.load(tmp_path / "res.npz") as z:
        np.testing.assert_array_equal(z["out0"], 1 - np.arange(3, dtype=np.float32))


def test_missing_and_unreadable_files(tmp_path):
    rc, line = _check("npy", X)
    assert rc == 0
    rc, _, err = _cli(["verify", str(tmp_path / "absent.rlx")])
    assert rc == 2 and err.strip() == (f"rlx-ref: {tmp_path / 'absent.rlx'}: cannot read: no "
                                      f"such file (expected {cli.GRAPH})")
    rc, _, err = _cli(["run", str(tmp_path)])
    assert rc == 2 and "is a directory" in err


# ── bounded fuzz over every reader ──────────────────────────────────────────

@st.composite
def mutated(draw, seed: bytes) -> bytes:
    b = bytearray(seed)
    kind = draw(st.sampled_from(["truncate", "flip", "splice", "random", "json"]))
    if kind == "truncate":
        return bytes(b[:draw(st.integers(0, len(b)))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 6))):
            b[draw(st.integers(0, len(b) - 1))] ^= 1 << draw(st.integers(0, 7))
    elif kind == "splice":
        i = draw(st.integers(0, len(b)))
        b[i:i + draw(st.integers(0, 12))] = draw(st.binary(max_size=12))
    elif kind == "random":
        return draw(st.binary(max_size=len(seed) * 2))
    else:                              # a JSON-ish token where the format expects another
        i = draw(st.integers(0, len(b)))
        b[i:i + draw(st.integers(0, 8))] = draw(st.sampled_from(
            [b"[]", b"{}", b"[1]", b'{"a":[1]}', b"null", b"1e999", b"-1", b'"x"',
             b"99999999999", b"[[0]]", b"true"]))
    return bytes(b)


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("reader,seed", [("npy", X), ("npz", PARAMS), ("graph", GRAPH),
                                         ("results", RESULTS)])
def test_fuzz_reader_never_tracebacks(reader, seed):
    @FUZZ
    @given(mutated(seed))
    def one(data):
        _check(reader, data)

    one()


def test_damaged_repro_folder_is_one_line(tmp_path, capsys):
    from rlx_ref.conformance.repro import rerun

    meta = {"backend": "reference", "case_id": "c-1", "op": "Activation", "dtype": "f32",
            "tags": [], "noncontiguous": []}
    steps = [("meta.json", b"[1]", "meta.json"),
             ("meta.json", json.dumps(meta).encode(), "inputs.npz"),     # next file: absent
             ("inputs.npz", PARAMS[:40], "inputs.npz"),
             ("inputs.npz", PARAMS, "graph.rlx"),
             ("graph.rlx", b"graph @t {", "graph.rlx")]
    for name, data, named in steps:
        (tmp_path / name).write_bytes(data)
        assert rerun(tmp_path) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{tmp_path / named}:" in err[0], err


def test_compact_gzip_results_round_trip_and_are_reproducible(tmp_path):
    """``--out X.json.gz`` (the committed form): the same document twice gives the same
    bytes (no timestamp, no timings), and ``coverage`` reads it like the plain file."""
    from rlx_ref.conformance.report import load_results
    from rlx_ref.conformance.runner import write_results

    doc = json.loads(RESULTS)
    doc["results"][0]["seconds"] = 1.5
    a, b, plain = tmp_path / "a.json.gz", tmp_path / "b.json.gz", tmp_path / "p.json"
    write_results(doc, a)
    doc["results"][0]["seconds"] = 2.5
    write_results(doc, b)
    write_results(doc, plain)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:2] == b"\x1f\x8b"
    assert "seconds" not in gzip.decompress(a.read_bytes()).decode()
    packed, unpacked = load_results([a]), load_results([plain])
    assert packed.results.keys() == unpacked.results.keys() == {("numba-cpu", "c-1")}
    assert packed.results["numba-cpu", "c-1"].result.status == "ok"
    rc, _, err = _cli(["coverage", str(a), "--out", str(tmp_path / "c.md")])
    assert rc == 0 and "Traceback" not in err, err
