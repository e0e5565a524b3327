"""KEDA's triggers for a serving workload: each on a series the engine exports (vLLM 0.23's, as its
/metrics on the H200 lists them), its default threshold the capacity file's figure times the headroom,
and every unusable trigger refused naming the item and field."""

import json
import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import autoscaling

REPO = Path(__file__).resolve().parents[4]
REFERENCE = json.loads((REPO / "roles/vllm/files/reference-capacity.json").read_text())
H200_METRICS = (REPO / "tests/fixtures/device/h200-vllm/metrics.txt").read_text()
DEFAULTS = [
    {"metric": "vllm:num_requests_waiting"},
    {"metric": "vllm:kv_cache_usage_perc"},
    {"metric": "vllm:time_to_first_token_seconds"},
]
URL = "http://gpufleet-scaling-metrics.gpufleet-scaling.svc.cluster.local:9090"


def test_every_vllm_series_a_trigger_reads_is_one_vllm_023_exports_with_that_type():
    exported = dict(re.findall(r"^# TYPE (vllm:\S+) (\w+)$", H200_METRICS, re.M))
    for metric, (kind, _figure) in autoscaling.VLLM_SERIES.items():
        assert exported.get(metric) == kind, metric


def test_the_bucket_bounds_are_vllm_023s():
    for metric, bounds in autoscaling.VLLM_BUCKETS.items():
        found = re.findall(rf'^{re.escape(metric)}_bucket{{[^}}]*le="([^"]+)"', H200_METRICS, re.M)
        assert sorted({float(le) for le in found if le != "+Inf"}) == list(bounds), metric


def test_each_figure_a_default_comes_from_is_one_the_capacity_file_holds():
    figures = {figure for _kind, figure in autoscaling.ENGINE_SERIES["vllm"].values() if figure}
    assert figures <= set(REFERENCE["replica"])


def test_the_default_triggers_have_measured_thresholds_times_the_headroom():
    assert autoscaling.problems(DEFAULTS, REFERENCE, 0.8, "vllm", "v", "c") == []
    waiting, kv, ttft = autoscaling.keda_triggers(DEFAULTS, REFERENCE, 0.8, "vllm", "inference", "vllm", URL)
    assert waiting["metricType"] == "AverageValue" and waiting["metadata"]["threshold"] == "11.2"
    assert waiting["metadata"]["query"] == 'sum(vllm:num_requests_waiting{namespace="inference",workload="vllm"})'
    assert float(kv["metadata"]["threshold"]) == pytest.approx(
        REFERENCE["replica"]["kv_cache_usage_max"] * 0.8, rel=1e-5
    )
    assert ttft["metricType"] == "Value"
    assert ttft["metadata"]["query"] == (
        "histogram_quantile(0.99, sum by (le) "
        '(rate(vllm:time_to_first_token_seconds_bucket{namespace="inference",workload="vllm"}[1m])))'
    )
    # The H200's TTFT P99 of 0.609 s lies in vLLM's bucket (0.5, 0.75]: its P99 reads at most 0.75 there.
    assert ttft["metadata"]["threshold"] == "0.75"
    assert {t["metadata"]["serverAddress"] for t in (waiting, kv, ttft)} == {URL}
    assert [t["name"] for t in (waiting, kv, ttft)] == [
        "vllm-num-requests-waiting", "vllm-kv-cache-usage-perc", "vllm-time-to-first-token-seconds",
    ]  # fmt: skip


def test_an_explicit_threshold_wins_and_dcgm_reads_the_workloads_gpus():
    [waiting, gpu] = autoscaling.keda_triggers(
        [{"metric": "vllm:num_requests_waiting", "threshold": 4}, {"metric": "DCGM_FI_DEV_GPU_UTIL", "threshold": 65}],
        REFERENCE, 0.8, "vllm", "inference", "vllm", URL,
    )  # fmt: skip
    assert waiting["metadata"]["threshold"] == "4"
    assert gpu["metadata"]["query"] == (
        'sum(avg_over_time(DCGM_FI_DEV_GPU_UTIL{exported_namespace="inference",exported_pod=~"vllm-.*"}[2m]))'
    )
    assert gpu["metricType"] == "AverageValue" and gpu["metadata"]["threshold"] == "65"


@pytest.mark.parametrize(
    ("triggers", "message"),
    [
        ([], "v: at least one trigger"),
        (
            [{"metric": "vllm:gpu_cache_usage_perc"}],
            "v[0].metric: 'vllm:gpu_cache_usage_perc' is not a series",
        ),
        ([{"metric": "vllm:prompt_tokens_total"}], "v[0].metric: 'vllm:prompt_tokens_total' is not a series"),
        ([{"metric": "vllm:num_requests_waiting", "threshold": 0}], "v[0].threshold: 0, not a number above 0"),
        ([{"metric": "vllm:num_requests_waiting", "threshold": -1.5}], "v[0].threshold: -1.5, not a number above 0"),
        ([DEFAULTS[0], DEFAULTS[0]], "v[1].metric: vllm:num_requests_waiting has two triggers"),
        (
            [{"metric": "DCGM_FI_DEV_GPU_UTIL"}],
            "v[0].threshold: none given, and c measured none for DCGM",
        ),
        (["vllm:num_requests_waiting"], "v[0]: a dict of metric and threshold"),
        ([{"metric": "vllm:kv_cache_usage_perc", "threshold": 0.0004}], "v[0].threshold: 0.0004 is below 0.001"),
    ],
)
def test_unusable_triggers_are_refused_naming_the_item_and_field(triggers, message):
    found = autoscaling.problems(triggers, REFERENCE, 0.8, "vllm", "v", "c")
    assert any(problem.startswith(message) for problem in found), found


def test_a_figure_the_bench_did_not_measure_needs_an_explicit_threshold():
    unmeasured = {**REFERENCE, "replica": {**REFERENCE["replica"], "waiting_max": 0}}
    [problem] = autoscaling.problems([DEFAULTS[0]], unmeasured, 0.8, "vllm", "v", "c")
    assert (
        problem
        == "v[0].threshold: none given, and c measured none for vllm:num_requests_waiting: replica.waiting_max is 0"
    )
    assert autoscaling.problems([{**DEFAULTS[0], "threshold": 2}], unmeasured, 0.8, "vllm", "v", "c") == []
