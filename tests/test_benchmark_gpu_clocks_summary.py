"""benchmarks/e2e/gpu_clocks_summary.py: how often a call's busy GPUs were power-capped
(session 50 reads its step times against it)."""

import pytest

from benchmarks.e2e.gpu_clocks_summary import summarise

pytestmark = [pytest.mark.cpu]


def test_busy_samples_power_capped_share_and_clocks(tmp_path):
    log = tmp_path / "gpu_clocks.csv"
    rows = [
        "2026/11/30 13:53:54.377, 0, 345 MHz, 3201 MHz, 79.41 W, 40, 0 %, 0x0000000000000001",
        "2026/11/30 13:53:54.640, 0, 1980 MHz, 3201 MHz, 500.0 W, 50, 90 %, 0x0000000000000000",
        "2026/11/30 13:53:54.890, 0, 1500 MHz, 3201 MHz, 700.0 W, 55, 100 %, 0x0000000000000004",
        "2026/11/30 13:53:55.140, 0, 1800 MHz, 3201 MHz, 690.0 W, 55, 99 %, 0x0000000000000004",
        "2026/11/30 13:53:54.383, 1, 1980 MHz, 3201 MHz, 300.0 W, 41, 80 %, 0x0000000000000000",
        "2026/11/30 13:53:55.3",  # a line cut off when the logger was killed
    ]
    log.write_text("\n".join(rows) + "\n")
    s = summarise(log)
    assert set(s) == {"0", "1"}
    gpu0 = s["0"]
    assert gpu0["samples"] == 4 and gpu0["busy_samples"] == 3  # the idle sample left out
    assert gpu0["power_capped_share"] == pytest.approx(2 / 3)
    assert gpu0["hw_slowdown_share"] == 0.0
    assert gpu0["sm_clock_mhz"]["min"] == 1500 and gpu0["sm_clock_mhz"]["max"] == 1980
    assert gpu0["sm_clock_mhz"]["median"] == 1800
    assert s["1"]["power_capped_share"] == 0.0 and s["1"]["power_w"]["median"] == 300.0
