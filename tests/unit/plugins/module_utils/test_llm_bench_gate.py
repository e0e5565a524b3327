"""The canary's benchmark gate: a level judged against its limits (its exit status against a server:
tests/integration/test_llm_bench_gate.py)."""

import math

from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench import gate
from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench.records import LevelResult


def level(ttft_p99: float, tpot_p99: float, valid: bool = True, reasons=()) -> LevelResult:
    figures = {"p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0}
    return LevelResult(
        level=8, mode="closed", window_s=30, requests=120, completed=120, errors={}, output_tokens=0,
        requests_per_s=4, output_tokens_per_s=0, ttft={**figures, "p99": ttft_p99}, tpot={**figures, "p99": tpot_p99},
        itl=figures, e2e=figures, queue=figures, receive_lag=figures, goodput_requests_per_s=None, client_cpu=0.1,
        loop_lag_p99_s=0.0, client_bound=False, client_bound_reasons=[], valid=valid, invalid_reasons=list(reasons),
    )  # fmt: skip


def test_a_level_within_its_limits_misses_nothing_and_one_over_a_limit_names_it():
    assert gate.verdict(level(0.2, 0.01), 0.25, 0.02)["missed"] == []
    assert gate.verdict(level(0.3, 0.01), 0.25, 0.02)["missed"] == ["ttft_p99_s 0.3 s > 0.25 s"]
    assert gate.verdict(level(0.2, 0.03), 0.25, None)["missed"] == []  # no limit, no verdict on it


def test_a_level_that_measured_nothing_or_was_invalid_is_a_miss():
    assert gate.verdict(level(math.nan, 0.01), 0.25, None)["missed"] == ["ttft_p99_s nan s > 0.25 s"]
    missed = gate.verdict(level(0.2, 0.01, valid=False, reasons=["error rate 5.0% > 1.0%"]), 0.25, 0.02)["missed"]
    assert missed == ["the level judges nothing: error rate 5.0% > 1.0%"]
