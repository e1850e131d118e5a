"""bench/runtime.py's scoring and page (synthetic timings: nothing is timed here)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import runtime as bench  # noqa: E402
from runtime_report import markdown  # noqa: E402


def test_the_fastest_is_over_the_ranked_devices_and_the_oracle_is_shown():
    times = {"opencl": 3e-3, "cpu": 2e-3, "reference": 1e-3}
    row = bench.score("g", "cpu", ["opencl", "cpu"], times, named="reference")
    assert (row["best"], row["best_all"]) == ("cpu", "reference")
    assert row["pick_over_best"] == 1.0 and row["pick_over_best_all"] == 2.0
    slow = bench.score("h", "opencl", ["opencl", "cpu"], {**times, "cpu": None, "reference": 3.2e-3})
    assert slow["best"] == "opencl" and slow["pick_over_best"] == 1.0
    page = markdown({"machine": "m", "devices": list(times), "rows": [row, slow],
                     "calibration": {"cpu": None}, "wall_s": 1.0,
                     "calibration_warnings": ["rlx_ref: calibrating numba-cpu on a busy "
                                              "machine: x"],
                     "dispatch": {"graph_devices_run_s": 2e-6, "executable_run_s": 1e-6,
                                  "overhead_s": 1e-6}, "arena": None, "note": ""})
    assert "picked the fastest device on **2 of 2** graphs" in page
    assert "oracle included, the pick is within 1.1x on **1 of 2**" in page
    assert "| g | 3.000 | 2.000 | 1.000 | cpu | cpu | 1.00 |" in page
    assert "| h | 3.000 | — | 3.200 | opencl | opencl | 1.00 |" in page
    assert "- rlx_ref: calibrating numba-cpu on a busy machine: x" in page
    assert row["named_over_best_all"] == 1.0 and slow["named_pick"] is None
    assert ("the cost model picks the fastest of all on **1 of 1** graphs, within 1.1x on "
            "**1 of 1**; its picks differ on g (reference)") in page
