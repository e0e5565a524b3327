"""The calibration stand-in's SIGTERM, with and without a shutdown timeout, under 32 streams.

These are timings (each stream must reach the server before the signal, and the drain must end within
its 5 s), so they run with the accuracy tests, alone on the machine: beside the lab's busy start, CI
stop 48's drain counted 31 of the 32 streams complete."""

from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb
from gpufleet.lib.llm_bench.drill import run_streams_through

from gpufleet import calibration_server


def _sigterm_drill(*server_args: str) -> dict:
    """32 streams through a stand-in with 16 slots, SIGTERM 2 s in, no new stream after it."""
    import asyncio
    import signal
    import time

    process, url = calibration_server.launch(0, "--ttft", "0.05", "--itl", "0.01", "--max-num-seqs", "16", *server_args)

    async def sigterm() -> dict:
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        while process.poll() is None and time.monotonic() - sent < 15:
            await asyncio.sleep(0.05)
        if process.poll() is None:
            process.kill()
        return {"exit_s": time.monotonic() - sent, "returncode": process.wait()}

    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=100, request_timeout_s=5)
    return run_streams_through(cfg, 32, 20, disrupt=sigterm, disrupt_at_s=2, stop_new_at_disruption=True)


def test_the_stand_in_aborts_on_sigterm_as_vllms_default_does():
    """vLLM 0.23 with --shutdown-timeout 0 (measured on an H200): every stream in flight stops, the
    ones running mid-stream and the ones waiting for a slot before their first token."""
    result = _sigterm_drill()
    cut = result["in_flight_at_disruption"]
    assert set(cut) == {"truncated", "refused"} and sum(cut.values()) == 32, result
    # The server held the broken streams until their client gave up (5 s here).
    assert result["disruption"]["result"]["exit_s"] >= 4.5


def test_the_stand_in_drains_on_sigterm_with_a_shutdown_timeout():
    result = _sigterm_drill("--shutdown-timeout", "5")
    assert result["in_flight_at_disruption"] == {"complete": 32}, result
    assert result["truncated"] == result["refused"] == 0
    assert result["disruption"]["result"]["returncode"] == 0
    assert result["disruption"]["result"]["exit_s"] < 5  # done when the last stream is
