"""The burst window of an idle BASS engine core (`patches.engine_core_burst_window`), run
through vLLM's own `EngineCoreProc._process_input_queue` on a stand-in core whose requests
arrive from another thread."""

import queue
import threading
import time
import types

import pytest

from vllm_bass.config import ADDITIONAL_CONFIG_KEY, BassConfig, BassConfigError
from vllm_bass.patches import engine_core_burst_window as burst

pytestmark = pytest.mark.cpu


class Core:
    """What vLLM's input loop touches of an EngineCoreProc."""

    def __init__(self, window_ms: float | None):
        options = None if window_ms is None else {"draft_model": "d", "burst_window_ms":
                                                   window_ms}
        self.vllm_config = types.SimpleNamespace(
            additional_config={} if options is None else {ADDITIONAL_CONFIG_KEY: options})
        self.input_queue = queue.Queue()
        self.aborts_queue = queue.Queue()
        self.process_input_queue_block = True
        self.handled: list = []
        self.scheduler = types.SimpleNamespace(has_requests=lambda: bool(self.handled))

    def has_work(self):
        return bool(self.handled)

    def is_running(self):
        return True

    def _notify_idle_state_callbacks(self):
        pass

    def _handle_client_request(self, kind, request):
        self.handled.append(request)


def process_input_queue():
    from vllm.v1.engine.core import EngineCoreProc

    burst.apply()  # idempotent (the plugin applied it already where it loaded)
    return EngineCoreProc._process_input_queue


def feed(core: Core, n: int, gap_s: float) -> threading.Thread:
    def run():
        for i in range(n):
            core.input_queue.put(("ADD", i))
            time.sleep(gap_s)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_idle_core_takes_a_close_burst_in_one_go(monkeypatch):
    """8 requests 2 ms apart, all within the gap (widened to 50 ms so that a loaded CI
    machine's pauses stay inside it): one call takes them all."""
    monkeypatch.setattr(burst, "BURST_GAP_S", 0.05)
    core = Core(100.0)
    thread = feed(core, 8, 0.002)
    process_input_queue()(core)
    taken = len(core.handled)
    thread.join()
    assert taken == 8, taken


@pytest.mark.parametrize("window_ms", [0.0, None])
def test_without_a_window_the_core_steps_with_what_has_arrived(window_ms):
    """Off, or an engine without BASS: vLLM's behaviour, whatever arrived and no more."""
    core = Core(window_ms)
    thread = feed(core, 8, 0.01)
    process_input_queue()(core)
    taken = len(core.handled)
    thread.join()
    assert 1 <= taken < 8, taken


def test_the_window_ends_at_a_gap_and_at_its_length():
    core = Core(100.0)
    thread = feed(core, 3, 0.1)  # 100 ms apart: past the 1 ms gap, a burst of one
    started = time.monotonic()
    process_input_queue()(core)
    assert len(core.handled) == 1 and time.monotonic() - started < 0.08
    thread.join()

    clock = iter([0.0, 0.0, 0.002, 0.004, 0.006]).__next__  # items keep coming: the window
    items = iter([("ADD", i) for i in range(10)])
    handled = []
    assert burst.gather_burst(lambda timeout: next(items), lambda *a: handled.append(a),
                              0.001, 0.005, clock) == 3


def test_a_busy_core_does_not_wait():
    core = Core(100.0)
    core.handled.append("running")  # work in hand: vLLM's drain only
    thread = feed(core, 4, 0.05)
    started = time.monotonic()
    process_input_queue()(core)
    assert time.monotonic() - started < 0.04 and len(core.handled) <= 2
    thread.join()


@pytest.mark.parametrize("bad", [-1.0, 101, True, "4"])
def test_the_window_option_is_checked(bad):
    with pytest.raises(BassConfigError, match="burst_window_ms"):
        BassConfig(draft_model="d", burst_window_ms=bad)
