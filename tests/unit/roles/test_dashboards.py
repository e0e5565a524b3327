"""The Grafana dashboards the monitoring role ships: well-formed, and built on metric names that exist."""

import json
import re
from pathlib import Path

import pytest
from gpufleet.lib.dcgm import DEFAULT_COUNTERS

DASHBOARDS = sorted((Path(__file__).resolve().parents[3] / "roles/monitoring/files/dashboards").glob("*.json"))
# The inference servers' metric names (shared/FIELD-NOTES.md: vLLM V1 engine, Triton).
VLLM = {
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
    "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
    "vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
}  # fmt: skip
TRITON = {
    "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count", "nv_inference_exec_count",
    "nv_inference_queue_duration_us", "nv_inference_request_duration_us", "nv_gpu_utilization",
    "nv_gpu_memory_used_bytes",
}  # fmt: skip
KNOWN = {c.name for c in DEFAULT_COUNTERS} | VLLM | TRITON | {"up"}
METRIC = re.compile(r"\b(DCGM_FI_[A-Z_]+|vllm:[a-z_]+|nv_[a-z_]+)\b")


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_is_well_formed(path):
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] == path.stem and dashboard["title"].startswith("gpufleet / ")
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 6
    for panel in dashboard["panels"]:
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_uses_only_metrics_that_exist(path):
    dashboard = json.loads(path.read_text())
    used = {m for panel in dashboard["panels"] for t in panel["targets"] for m in METRIC.findall(t["expr"])}
    assert used and used <= KNOWN, used - KNOWN
