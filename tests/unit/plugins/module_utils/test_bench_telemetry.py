"""The server's figures the bench reads from Prometheus: vLLM's queue-time P99 from its histogram."""

import math
import re
from dataclasses import asdict
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import bench_telemetry as bt
from ansible_collections.gpufleet.platform.plugins.module_utils import capacity
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

FIXTURES = Path(__file__).parents[3] / "fixtures"
# vLLM 0.23's queue-time buckets, as the H200's /metrics has them.
BOUNDS = sorted(
    {
        float(le)
        for le in re.findall(
            r'^vllm:request_queue_time_seconds_bucket\{[^}]*le="([^"]+)"',
            (FIXTURES / "device/h200-vllm/metrics.txt").read_text(),
            re.M,
        )
    }
)


def cumulative(waits: list[float]) -> dict[float, float]:
    return {bound: float(sum(1 for w in waits if w <= bound)) for bound in BOUNDS}


def test_a_p99_in_the_lowest_bucket_is_only_a_bound():
    """With no request queued every wait is in the lowest bucket (0 to 0.3 s): histogram_quantile reads
    0.99 x 0.3 = 297 ms there. The bench now says the P99 is below 300 ms and no more."""
    assert BOUNDS[0] == 0.3 and BOUNDS[-1] == math.inf
    assert bt.histogram_p99(cumulative([0.0] * 500)) == (None, 0.3)
    assert bt.histogram_p99(cumulative([])) == (None, None)


def test_a_p99_above_the_lowest_bucket_is_interpolated_as_prometheus_does():
    waits = [0.0] * 90 + [0.4] * 10  # the P99 in (0.3, 0.5]: 9 of the bucket's 10 above its start
    p99, bound = bt.histogram_p99(cumulative(waits))
    assert bound is None and p99 == pytest.approx(0.3 + 0.2 * 0.9)
    p99, _ = bt.histogram_p99(cumulative([0.0] * 50 + [9000.0] * 50))  # beyond the highest finite bound
    assert p99 == BOUNDS[-2]


def test_vllm_server_reads_the_bound_and_the_report_and_capacity_file_say_so(monkeypatch):
    from gpufleet import report

    monkeypatch.setattr(bt, "prometheus_scalar", lambda url, promql, at: 0.0)
    monkeypatch.setattr(bt, "prometheus_buckets", lambda url, promql, at: cumulative([0.001] * 200))

    level = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [], [], 0.0, 0.0, 10.0)
    bt.VllmServer("http://prometheus")(level)
    assert level.server["queue_time_p99_s"] is None and level.server["queue_time_p99_at_most_s"] == 0.3
    line = next(x for x in report.notes({"levels": [asdict(level)]}) if "queue time" in x)
    assert "p99 <300ms (the histogram's lowest bucket)" in line and "297" not in line
    bench = {
        "operating_point_index": 0, "knee_index": None, "finished": 0.0,
        "config": {"model": "m", "api": "completions", "max_tokens": 8, "p99_slo_s": None},
        "levels": [{"level": 1, "output_tokens_per_s": 10.0, "requests_per_s": 1.0, "server": level.server,
                    **{k: {"p99": 0.1} for k in ("ttft", "tpot", "e2e")}}],
    }  # fmt: skip
    doc = capacity.from_benchmark(bench, {"name": "vllm", "version": "0.23.0"}, None)
    assert doc["replica"]["queue_time_p99_s"] == 0.3  # at most: the queue trigger's threshold is that bucket
