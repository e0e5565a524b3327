"""The benchmark client against the calibration server's known schedule (ground truth).

TTFT within 5 ms of the schedule at P50 and 20 ms at P99 (30 ms at 64 streams); TPOT within 2 ms at P50 (5 ms at 64
streams) and 20 ms at P99; token and error counts exact; throughput within 3% of the closed-loop
formula C*N/(TTFT+(N-1)*ITL).
Each bound is several times the error measured alone and well under the defect it guards against:
- TTFT carries a fixed bias TPOT does not: the server's first timer fires up to 1 ms late (the
  event loop wakes at millisecond steps) and the request crosses loopback once. Alone it measures
  1.1 to 1.3 ms at P50 at every level (TPOT: 0.02 ms, since later tokens are due on the schedule,
  not after the late one). CI beside the integration tests measured 2.02 ms at 1 stream, so a
  2-ms bound flaked. The defects are 20 ms (a token late: the first content, not the role chunk)
  or more.
- TPOT's cheapest defect, total time over N tokens instead of the gaps over N-1, is 5 ms off.
- The P99 bound is loose on purpose: one scheduling hiccup of this shared two-core machine moves a
  P99 of a few hundred requests (it failed CI at 5 ms with 13.7 ms, passing alone); at 64 streams
  a busy stretch moves the P50 too (CI measured 3.7 ms once; alone, 0.8 to 1.0 ms), and TTFT's P99
  sits at the old 20-ms bound: 20.1 ms alone on the machine, 22.6 beside the lab's start, 26.4 beside
  the integration tests' start (session 25), so 30 ms there. A token late at P50 is still the 5-ms
  bound's to catch.
Whether the client keeps up at 64 streams is a speed figure, not a test: on this shared machine
CI once measured a 10.6 ms P99 receive lag there, and the client rightly flagged itself
client-bound. It is asserted at 1 and 8 streams; at 64 the figures above must hold either way.
The tail's fidelity and the client's ceiling on quiet cores: benchmarks/client_ceiling.py.
"""

import asyncio
import time
from dataclasses import replace

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

from gpufleet.calibration_server import launch

TTFT, ITL, TOKENS = 0.1, 0.02, 16
TTFT_P50_BOUND = 0.005
TTFT_P99_BOUND = {1: 0.020, 8: 0.020, 64: 0.030}  # by concurrency, measured (docstring)


@pytest.fixture
def calibration_server(request):
    def start(*extra: str) -> str:
        process, url = launch(0, "--ttft", str(TTFT), "--itl", str(ITL), *extra)
        request.addfinalizer(process.terminate)
        return url

    return start


@pytest.mark.parametrize("concurrency", [1, 8, 64])
def test_latencies_tokens_and_throughput_match_the_schedule(calibration_server, concurrency):
    url = calibration_server()
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS, warmup_s=1, duration_s=6)
    level = lb.run_level(cfg, concurrency)
    assert level.errors == {} and level.completed > 0
    assert level.output_tokens == level.completed * TOKENS  # exact, from the usage chunk
    ttft_p99_bound = TTFT_P99_BOUND[concurrency]
    assert abs(level.ttft["p50"] - TTFT) <= TTFT_P50_BOUND and abs(level.ttft["p99"] - TTFT) <= ttft_p99_bound, (
        level.ttft
    )
    tpot_p50_bound = 0.002 if concurrency <= 8 else 0.005
    assert abs(level.tpot["p50"] - ITL) <= tpot_p50_bound and abs(level.tpot["p99"] - ITL) <= 0.020, level.tpot
    ideal = concurrency * TOKENS / (TTFT + (TOKENS - 1) * ITL)
    assert level.output_tokens_per_s == pytest.approx(ideal, rel=0.03)
    if concurrency <= 8:
        assert not level.client_bound, level.client_bound_reasons


def test_error_counts_are_exact(calibration_server):
    url = calibration_server("--fail-every", "5", "--cut-every", "7")
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS)
    now = time.time()
    part = asyncio.run(lb.run_level_async(cfg, 4, 4, now + 0.3, now + 3.3))
    records = [lb.RequestRecord(**r) for r in part["records"]]
    n = len(records)
    errors = {}
    for r in records:
        errors[r.error] = errors.get(r.error, 0) + 1
    # The server numbers requests 1..n: every 5th fails with 500; every 7th that is not a 5th is cut.
    assert errors.get("http_500", 0) == n // 5
    assert errors.get("broken_stream", 0) == sum(1 for i in range(1, n + 1) if i % 7 == 0 and i % 5)


def test_multi_token_events_and_role_chunk(calibration_server):
    url = calibration_server("--tokens-per-event", "4")
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS, warmup_s=0.5, duration_s=2)
    level = lb.run_level(cfg, 2)
    assert level.output_tokens == level.completed * TOKENS
    assert abs(level.ttft["p50"] - TTFT) <= TTFT_P50_BOUND  # the role-only first chunk is not the first token
    assert abs(level.itl["p50"] - ITL) <= 0.002  # 80 ms between events that carry 4 tokens each


def test_open_loop_arrivals_keep_their_schedule_and_a_cap_holds_them(calibration_server):
    """Open loop at 20 req/s against a server that serves each request in 0.42 s: the client sends each
    arrival on time, whatever the server's pace; capped at 2 in flight (8 req/s offered), the completions
    are the cap's 2 / 0.42 s and the rest wait, the wait counted as queue time. The schedule's bound, 50 ms at P99, is
    far under the defect it guards (a sender that waits for answers falls behind by requests of 0.42 s);
    beside the lab's suites it measured 25.7 ms."""
    url = calibration_server()
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS, warmup_s=1, duration_s=4,
                         mode="open", seed=3)  # fmt: skip
    free = lb.run_level(cfg, 20.0)
    assert abs(free.requests - 80) <= 4 * 80**0.5, free.requests  # Poisson: 4 standard deviations
    assert free.queue["p99"] <= 0.05 and free.error_rate == 0, free.queue
    # 8 req/s offered to 2 slots that serve 4.8: the backlog grows (and drains after the window, so 8, not 20).
    capped = lb.run_level(replace(cfg, max_concurrency=2, warmup_s=0.5), 8.0)
    per_request = TTFT + (TOKENS - 1) * ITL
    assert capped.requests_per_s == pytest.approx(2 / per_request, rel=0.10), capped.requests_per_s
    # The waits of the requests that complete in the window: the nth completes at n / 4.76 s, having arrived at
    # n / 8 s, so a completion at c waited about 0.405 c - 0.42 s: a median near 0.59 s (c = 2.5 s), at most 1.4 s
    # at P99. The defect this guards counts no queue time at all (0); the bounds sit at about half the model's
    # figures, as a seeded Poisson schedule moves the median (0.49 s measured beside nothing, CI 51).
    assert capped.queue["p50"] > 0.25 and capped.queue["p99"] > 0.7, capped.queue
    assert capped.e2e["p99"] < per_request + TTFT_P99_BOUND[8], capped.e2e


def test_output_lengths_drawn_around_max_tokens_are_what_the_server_sends(calibration_server):
    url = calibration_server()
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS, warmup_s=0.5, duration_s=2,
                         max_tokens_stddev=4, fixed_length="on")  # fmt: skip
    level = lb.run_level(cfg, 4)
    lengths = level.output_tokens_per_request
    assert abs(lengths["p50"] - TOKENS) <= 2 and lengths["p90"] > TOKENS + 2, lengths
    assert level.tpot["p50"] == pytest.approx(ITL, abs=0.002)  # per token, whatever each request's length


def test_repeats_give_an_interval_around_the_schedules_throughput(calibration_server):
    url = calibration_server()
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", max_tokens=TOKENS, warmup_s=0.5, duration_s=2,
                         levels=[4], repeats=3, fixed_length="on")  # fmt: skip
    (level,) = lb.run_benchmark(cfg).levels
    expected = 4 * TOKENS / (TTFT + (TOKENS - 1) * ITL)
    ci = level.intervals["output_tokens_per_s"]
    assert level.repeats == 3 and len(ci["runs"]) == 3 and ci["low"] <= ci["mean"] <= ci["high"], ci
    assert ci["mean"] == pytest.approx(expected, rel=0.03) and ci["high"] - ci["low"] < 0.1 * expected, ci
