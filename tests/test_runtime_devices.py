"""Devices and policies: parsing every label (and the error text), availability, the
manifest, Session("cpu"), DevicePolicy, resolve_device(_chain), device_report, the cost
hook, and the device variables read from a shell."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx_ref
from rlx_ref.env_registry import EnvError, overrides
from rlx_ref.runtime import device_cost
from rlx_ref.runtime.devices import (Device, DeviceParseError, availability, available_devices,
                                     device_label, is_available, parse_device,
                                     parse_device_list)
from rlx_ref.runtime.manifest import backends_manifest
from rlx_ref.runtime.policy import (DevicePolicy, DeviceResolveError, device_report,
                                    devices_for_with_policy, resolve_device,
                                    resolve_device_chain)

from _device_backends import add_graph

ROOT = Path(__file__).resolve().parents[1]
F = np.float32
REF_ONLY = DevicePolicy.only(["reference"])


@pytest.mark.parametrize("text,label,spec", [
    ("cpu", "cpu", "numba-cpu"), ("numba-cpu", "cpu", "numba-cpu"), (" CPU ", "cpu", "numba-cpu"),
    ("cpu-ref", "reference", "reference"), ("reference", "reference", "reference"),
    ("gpu", "gpu", ""), ("wgpu", "gpu", ""),
    ("cuda", "cuda", "cuda"), ("nvidia", "cuda", "cuda"), ("cuda:1", "cuda:1", "cuda:1"),
    ("CUDA:01", "cuda:1", "cuda:1"), ("nvidia:2", "cuda:2", "cuda:2"),
    ("opencl", "opencl", "opencl"), ("opencl:1", "opencl:1:0", "opencl:1:0"),
    ("opencl:0:2", "opencl:0:2", "opencl:0:2"),
    ("rocm", "rocm", "opencl:amd"), ("amd", "rocm", "opencl:amd"), ("hip", "rocm", "opencl:amd"),
    ("oneapi", "oneapi", "opencl:intel"), ("intel", "oneapi", "opencl:intel"),
    ("sycl", "oneapi", "opencl:intel"), ("level-zero", "oneapi", "opencl:intel"),
    ("metal", "metal", "opencl:apple"), ("apple", "metal", "opencl:apple"),
    ("mtl", "metal", "opencl:apple"), ("broken", "broken", "broken"),
])
def test_every_label_parses(text, label, spec):
    dev = parse_device(text)
    assert (dev.label, dev.spec, str(dev), device_label(text)) == (label, spec, label, label)
    assert parse_device(dev) is dev


@pytest.mark.parametrize("text,message", [
    ("", "empty device name"),
    ("  ", "empty device name"),
    ("tpu", "unknown device 'tpu' (try: cpu, cpu-ref, reference, gpu, cuda[:N], "
            "opencl[:P:D], rocm, amd, oneapi, intel, metal, apple, nvidia, numba-cpu, "
            "broken, broken-faults, or module:object); RLX's tpu backend has no rlx_ref "
            "counterpart"),
    ("Vulkan", "unknown device 'vulkan' (try: cpu,"),
    ("fpga", "unknown device 'fpga' (try: cpu, cpu-ref, reference, gpu, cuda[:N]"),
    ("cuda:x", "bad device 'cuda:x': expected cuda:N (a GPU number)"),
    ("cuda:0:1", "bad device 'cuda:0:1': expected cuda:N (a GPU number)"),
    ("opencl:1:2:3", "bad device 'opencl:1:2:3': expected opencl:P:D (platform, device)"),
    ("nosuchmodule:Backend", "unknown device 'nosuchmodule:Backend': cannot import backend "
                             "module 'nosuchmodule'"),
])
def test_bad_names_say_what_is_valid(text, message):
    with pytest.raises(DeviceParseError) as info:
        parse_device(text)
    assert str(info.value).startswith(message) and info.value.input == text
    if text.strip() and ":" not in text:
        assert "module:object" in str(info.value)


def test_device_lists_split_dedupe_and_refuse_empty():
    devs = parse_device_list("cpu, opencl;reference  cpu,numba-cpu")
    assert [d.label for d in devs] == ["cpu", "opencl", "reference"]
    assert parse_device_list(["cuda:0", "nvidia:0"]) == [parse_device("cuda:0")]
    for empty in ("", " , ; ", []):
        with pytest.raises(DeviceParseError, match="^device list is empty$"):
            parse_device_list(empty)
    with pytest.raises(DeviceParseError, match="unknown device 'tpu'"):
        parse_device_list("cpu,tpu")


def test_a_module_object_spec_is_a_device():
    dev = parse_device("_device_backends:Counting")
    assert dev == Device("_device_backends:Counting", "_device_backends:Counting")
    assert is_available(dev)


def test_availability_is_consistent_with_the_list_and_the_manifest():
    avail = available_devices()
    labels = [d.label for d in avail]
    assert "reference" in labels and labels.index("reference") == len(labels) - 1
    for label in ("cuda", "gpu", "rocm", "oneapi", "metal", "opencl", "cpu", "reference"):
        ok, why = availability(label)
        assert ok == is_available(label) == (label in labels)
        assert (why == "") == ok, (label, why)
    with pytest.raises(DeviceParseError):
        is_available("tpu")
    man = json.loads(backends_manifest())
    assert man["crate"] == "rlx_ref" and man["version"] == rlx_ref.__version__
    assert "broken" not in man["backends"] and "reference" in man["available"]
    entries = {e["name"]: e for e in man["entries"]}
    assert entries["reference"]["claim"]["ops"]["MatMul"] == "all"
    assert entries["opencl"]["labels"] == ["rocm", "oneapi", "metal", "opencl"]
    for name, label in (("numba-cpu", "cpu"), ("opencl", "opencl"), ("cuda", "cuda")):
        e = entries[name]
        assert e["available"] == is_available(label)
        assert e["reason"] == availability(label)[1]
    assert man["gpu"]["available"] == is_available("gpu")


def test_session_takes_device_names_as_pyrlx():
    g = add_graph()
    x, w = np.arange(4, dtype=F), np.full(4, 0.5, F)
    for name, backend in (("cpu-ref", "reference"), ("reference", "reference")):
        s = rlx_ref.Session(name)
        assert (s.device, s.label) == (backend, "reference")
    if not is_available("cpu"):
        pytest.skip(availability("cpu")[1])
    s = rlx_ref.Session("cpu")
    assert (s.device, s.label) == ("numba-cpu", "cpu")
    exe = s.compile(g)
    exe.set_param("w", w)
    np.testing.assert_array_equal(exe.run({"x": x})[0], x + w)
    with pytest.raises(rlx_ref.SessionError, match=r"unknown device 'tpu': unknown device "
                                                   r"'tpu' \(try: cpu"):
        rlx_ref.Session("tpu")
    if not is_available("gpu"):
        with pytest.raises(rlx_ref.SessionError, match="device 'gpu' is unavailable here: "
                                                       "no GPU device"):
            rlx_ref.Session("gpu")


def test_policy_allow_deny_prefer_and_pick():
    p = DevicePolicy.only(["cpu", "reference", "broken"])
    assert [d.label for d in p.apply(["broken", "reference", "cpu", "opencl"])] == \
        ["cpu", "reference", "broken"]                     # platform order
    p2 = p.with_prefer(["broken"]).with_deny(["cpu"])
    assert [d.label for d in p2.apply(["reference", "cpu", "broken"])] == \
        ["broken", "reference"]
    assert p.pick_strategy().kind == "cost_model"
    assert p.with_benchmark_pick(0).pick_strategy().runs == 1          # RLX: at least one
    assert p.with_benchmark_pick(5).pick_strategy() == p2.with_benchmark_pick(5).pick
    assert [d.label for d in p.probe_set()] == ["cpu", "reference", "broken"]
    assert [d.label for d in DevicePolicy.all().probe_set()][:2] == ["cuda", "rocm"]
    assert DevicePolicy.only([]).apply(["reference"]) == []


def test_policy_from_env_and_bad_values_name_the_variable():
    with overrides(RLX_DEVICES="reference,broken", RLX_DENY_DEVICES="broken",
                   RLX_PREFER_DEVICES="cpu-ref", RLX_BENCHMARK_PICK="3"):
        p = DevicePolicy.from_env()
    assert [d.label for d in p.allow] == ["reference", "broken"]
    assert [d.label for d in p.deny] == ["broken"] and p.prefer == (parse_device("reference"),)
    assert (p.pick.kind, p.pick.runs) == ("benchmark", 3)
    with overrides(RLX_DEVICES=None, RLX_DENY_DEVICES=None, RLX_PREFER_DEVICES=None,
                   RLX_BENCHMARK_PICK=None):
        assert DevicePolicy.from_env() == DevicePolicy.all()
    with overrides(RLX_DEVICES="cpu,tpu"):
        with pytest.raises(EnvError, match=r"RLX_DEVICES='cpu,tpu': unknown device 'tpu'"):
            DevicePolicy.from_env()
    with overrides(RLX_BENCHMARK_PICK="many"):
        with pytest.raises(EnvError, match="RLX_BENCHMARK_PICK='many' is not an integer"):
            DevicePolicy.from_env()


def test_resolve_hint_then_env_then_cheapest():
    g = add_graph()
    pol = DevicePolicy.only(["reference", "broken"])
    assert resolve_device(g, "broken", pol).label == "broken"
    with pytest.raises(DeviceResolveError, match=r"^hint requested cuda but viable backends "
                                                 r"are \[reference, broken\]$"):
        resolve_device(g, "cuda", pol)
    with overrides(RLX_DEVICE="broken", RLX_FORCE_DEVICE=None):
        assert resolve_device(g, None, pol).label == "broken"
        assert resolve_device(g, "reference", pol).label == "reference"   # the hint wins
    with overrides(RLX_DEVICE="cuda:3", RLX_FORCE_DEVICE=None):           # not viable
        assert resolve_device(g, None, pol).label == "reference"          # the cheapest
    with overrides(RLX_DEVICE=None, RLX_FORCE_DEVICE="broken"):
        assert resolve_device(g, None, pol).label == "broken"
        assert device_cost.fastest_device_for(g, REF_ONLY).label == "broken"  # pins, as RLX
    with overrides(RLX_DEVICE="bogus"):
        with pytest.raises(EnvError, match=r"RLX_DEVICE='bogus': unknown device 'bogus'"):
            resolve_device(g, None, pol)
    with pytest.raises(DeviceResolveError, match="^no backend can lower this graph under "
                                                 "the current policy — widen DevicePolicy"):
        resolve_device(g, None, DevicePolicy.only(["reference"]).with_deny(["reference"]))


def test_resolve_chain_takes_the_first_viable():
    g = add_graph()
    pol = DevicePolicy.only(["reference", "broken"])
    assert resolve_device_chain(g, ["cuda", "broken", "reference"], pol).label == "broken"
    with pytest.raises(DeviceResolveError, match=r"^no device in chain \[cuda, cpu\] can run "
                                                 r"this graph — viable: \[reference, broken\]$"):
        resolve_device_chain(g, ["cuda", "cpu"], pol)


def test_device_report_blockers():
    g = rlx_ref.Graph("att")
    q = g.input("q", [1, 2, 8])
    g.set_outputs([g.attention(q, q, q, num_heads=1, head_dim=8)])
    pol = DevicePolicy.only(["broken", "reference", "cuda:7"]).with_deny(["reference"])
    rows = {r.label: r for r in device_report(g, pol)}
    assert rows["broken"].blocker == "unsupported op at node 1: Attention (f32)"
    assert not rows["broken"].supports_graph and rows["broken"].available
    assert rows["reference"].blocker == "denied by DevicePolicy"
    assert rows["cuda:7"].blocker == "not available on this host or in this build"
    assert rows["cuda:7"].reason and not rows["cuda:7"].available
    assert all("typed_io" in r.capabilities for r in rows.values())
    assert not any(r.recommended for r in rows.values())          # nothing viable
    rows = device_report(add_graph(), REF_ONLY)
    assert [(r.label, r.recommended, r.blocker) for r in rows] == [("reference", True, None)]


def test_a_cost_model_plugs_in():
    g = add_graph()
    pol = DevicePolicy.only(["reference", "broken"])

    class Model:
        def estimate(self, graph, device):
            return {"broken": 1.0, "reference": 2.0}.get(device.label)

    assert device_cost.fastest_device_for(g, pol).label == "reference"   # placeholder order
    device_cost.set_cost_model(Model())
    try:
        with overrides(RLX_FORCE_DEVICE=None):
            assert device_cost.fastest_device_for(g, pol).label == "broken"
            assert resolve_device(g, None, pol).label == "broken"
    finally:
        device_cost.set_cost_model(device_cost.PriorityCost())
    with pytest.raises(TypeError, match="needs estimate"):
        device_cost.set_cost_model(object())
    assert devices_for_with_policy(g, pol) == [parse_device("reference"),
                                               parse_device("broken")]


def _shell(code: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", **env}
    for name in ("RLX_DEVICE", "RLX_DEVICES", "RLX_FORCE_DEVICE", "RLX_DEVICE_CHAIN"):
        full.setdefault(name, "")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, cwd=ROOT, timeout=600)


def test_device_variables_from_a_shell():
    code = ("import rlx_ref\n"
            "from rlx_ref.runtime.policy import DevicePolicy, resolve_device\n"
            "from _device_backends import add_graph\n"
            "g = add_graph()\n"
            "print(resolve_device(g, None, DevicePolicy.from_env()).label)\n"
            "print(rlx_ref.Session('cpu').device)\n")
    out = _shell(code, RLX_DEVICE="broken", RLX_DEVICES="reference,broken")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["broken", "numba-cpu"]
    out = _shell(code, RLX_DEVICES="broken;reference", RLX_PREFER_DEVICES="broken")
    assert out.returncode == 0 and out.stdout.split()[0] == "broken", out.stderr
    out = _shell(code, RLX_DEVICES="reference", RLX_FORCE_DEVICE="cpu")
    assert out.returncode == 0 and out.stdout.split()[0] == "cpu", out.stderr
    out = _shell(code, RLX_DEVICE="tpu")
    assert out.returncode == 1 and "RLX_DEVICE='tpu': unknown device 'tpu'" in out.stderr


def test_registry_specs_still_reach_session_and_names_are_parsed_once():
    s = rlx_ref.Session("numba-cpu+fault:ew-tail-serial")       # not a device name
    assert s.device == s.label == "numba-cpu+fault:ew-tail-serial"
    with pytest.raises(rlx_ref.SessionError, match="unknown device 'numba-cpu\\+fault:nope'"):
        rlx_ref.Session("numba-cpu+fault:nope")
    with pytest.raises(DeviceParseError):
        parse_device("numba-cpu+fault:ew-tail-serial")
    assert parse_device("Broken") is parse_device("Broken")


def test_labels_on_one_backend_share_it_and_emulated_devices_rank_after_the_cpu():
    from rlx_ref.runtime.devices import backend_for, backend_key, emulated

    assert backend_key("cpu") == backend_key("numba-cpu") != backend_key("reference")
    if not is_available("opencl"):
        pytest.skip(availability("opencl")[1])
    p, d = backend_for("opencl")._device()[0].index
    assert backend_key("opencl") == backend_key(f"opencl:{p}:{d}") != backend_key("cpu")
    order = [x.label for x in DevicePolicy.all().apply(["reference", "opencl", "cpu"])]
    if emulated("opencl") and is_available("cpu"):
        assert order == ["cpu", "opencl", "reference"]      # PoCL on the host CPU
    else:
        assert order == ["opencl", "cpu", "reference"]
