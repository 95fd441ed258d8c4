"""benchmarks/e2e/gpu_clocks_summary.py: how often a call's busy GPUs were power-capped
(session 50 reads its step times against it)."""

import pytest

from benchmarks.e2e.gpu_clocks_summary import forward_by_clock, summarise, wall_seconds

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


def test_forward_gpu_time_split_by_the_nearest_clock_sample(tmp_path):
    log = tmp_path / "gpu_clocks.csv"
    # GPU 1 at 1980 MHz for the first second, 1500 MHz for the next; GPU 0 ignored
    samples = [f"2026/11/30 13:00:00.{ms:03d}, 1, 1980 MHz, 3201 MHz, 500 W, 50, 90 %, 0x0"
               for ms in range(0, 1000, 250)]
    samples += [f"2026/11/30 13:00:01.{ms:03d}, 1, 1500 MHz, 3201 MHz, 700 W, 55, 99 %, 0x4"
                for ms in range(0, 1000, 250)]
    samples += ["2026/11/30 13:00:01.000, 0, 1980 MHz, 3201 MHz, 100 W, 40, 90 %, 0x0"]
    log.write_text("\n".join(samples) + "\n")
    wall0 = wall_seconds("2026/11/30 13:00:00.000")
    mono0 = 100.0  # the trace's clock: 100 s monotonic is wall0
    runner = tmp_path / "t.csv.runner"
    rows = []
    for i in range(16):  # 32 requests, one draft: 5 ms when fast, 7 ms when slow
        t = mono0 + 0.05 + i * 0.12
        ms = 5.0 if t - mono0 < 0.875 else 7.0  # nearest sample: 0.75 s or 1.0 s
        rows.append(f"{t:.3f},32,2,2.0,0.5,1.0,{ms},0.05,0.4,2,2.0,0.5,1.0")
    rows.append(f"{mono0 + 50:.3f},32,2,2.0,0.5,1.0,9.0,0.05,0.4,2,2.0,0.5,1.0")  # no sample near
    runner.write_text("\n".join(rows) + "\n")
    (shape,) = forward_by_clock(log, "1", runner, wall0 - mono0)
    assert shape["requests"] == 32 and shape["verified_length"] == 2
    assert shape["high_clock_steps"] == 7 and shape["high_clock_forward_gpu_ms"] == 5.0
    assert shape["low_clock_steps"] == 9 and shape["low_clock_forward_gpu_ms"] == 7.0
    assert "high_clock_model_gpu_ms" not in shape  # a trace before session 51's columns


def test_forward_by_clock_splits_the_model_call_and_its_lead(tmp_path):
    """Session 51's runner traces time the model call and the device lead before it:
    both come out per clock side beside the forward phase."""
    log = tmp_path / "gpu_clocks.csv"
    log.write_text("\n".join(
        f"2026/11/30 13:00:00.{ms:03d}, 0, 1980 MHz, 3201 MHz, 500 W, 50, 90 %, 0x0"
        for ms in range(0, 1000, 250)) + "\n")
    runner = tmp_path / "t.csv.runner"
    runner.write_text("".join(
        f"{100.05 + i * 0.05:.3f},64,1,2.5,0.5,1.0,{6.0 + i % 2},0.05,0.4,2,2.4,0.5,1.0,"
        f"0.8,{4.5 + i % 2},1.5\n" for i in range(12)))
    (shape,) = forward_by_clock(log, "0", runner, wall_seconds("2026/11/30 13:00:00.000") - 100)
    assert shape["high_clock_steps"] == 12 and shape["low_clock_steps"] == 0
    assert shape["high_clock_forward_gpu_ms"] == 6.5
    assert shape["high_clock_model_gpu_ms"] == 5.0 and shape["high_clock_lead_gpu_ms"] == 1.5
    assert shape["low_clock_forward_gpu_ms"] is None and "low_clock_model_gpu_ms" not in shape
