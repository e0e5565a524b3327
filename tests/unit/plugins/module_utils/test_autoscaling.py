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
    selector = '{namespace="inference",workload="vllm"}'
    assert ttft["metadata"]["query"] == (
        f"(histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{selector}[1m]))) >= 0)"
        f" or (sum(vllm:time_to_first_token_seconds_count{selector}) * 0)"
    )
    # A missing series is an error (KEDA's "the result is empty"), not a reading of no load.
    assert {t["metadata"]["ignoreNullValues"] for t in (waiting, kv, ttft)} == {"false"}
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


TRITON_CAPACITY = {
    **REFERENCE, "model": "minilm", "engine": {"name": "triton", "version": None},
    "replica": {**REFERENCE["replica"], "waiting_max": 5.0, "queue_time_p99_s": 0.042},
}  # fmt: skip


def test_tritons_triggers_read_its_pending_requests_per_replica_and_its_queue_p99_in_seconds():
    triggers = [{"metric": "nv_inference_pending_request_count"}, {"metric": "nv_inference_queue_summary_us"}]
    assert autoscaling.problems(triggers, TRITON_CAPACITY, 0.8, "triton", "v", "c") == []
    pending, queue = autoscaling.keda_triggers(triggers, TRITON_CAPACITY, 0.8, "triton", "inference", "triton", URL)
    assert pending["metricType"] == "AverageValue" and pending["metadata"]["threshold"] == "4"
    assert pending["metadata"]["query"] == (
        'sum(nv_inference_pending_request_count{namespace="inference",workload="triton"})'
    )
    # A summary's P99 is exact; without an SLO in the file the threshold is the measured one, compared
    # for the workload as a whole.
    assert queue["metricType"] == "Value" and queue["metadata"]["threshold"] == "0.042"
    selector = 'namespace="inference",workload="triton"'
    assert queue["metadata"]["query"] == (
        f'(max(nv_inference_queue_summary_us{{{selector},quantile="0.99"}}) / 1e6 >= 0)'
        f" or (sum(nv_inference_queue_summary_us_count{{{selector}}}) * 0)"
    )
    # vLLM's series are not Triton's.
    [problem] = autoscaling.problems(
        [{"metric": "vllm:num_requests_waiting"}], TRITON_CAPACITY, 0.8, "triton", "v", "c"
    )
    assert problem.startswith("v[0].metric: 'vllm:num_requests_waiting' is not a series triton exports"), problem


def test_tritons_queue_threshold_is_the_wait_the_slo_still_allows_times_the_headroom():
    """A model without dynamic batching queues nothing at its recommended level (its instances busy,
    none waiting): the queue threshold is the wait at which the E2E P99 would reach the SLO."""
    unbatched = {
        **TRITON_CAPACITY, "slo": {"e2e_p99_s": 0.8},
        "replica": {**TRITON_CAPACITY["replica"], "e2e_p99_s": 0.2, "queue_time_p99_s": 0.0, "waiting_max": 0.0},
    }  # fmt: skip
    queue = [{"metric": "nv_inference_queue_summary_us"}]
    assert autoscaling.problems(queue, unbatched, 0.8, "triton", "v", "c") == []
    [trigger] = autoscaling.keda_triggers(queue, unbatched, 0.8, "triton", "inference", "triton", URL)
    assert float(trigger["metadata"]["threshold"]) == pytest.approx(0.8 * (0.8 - 0.2))
    # The pending requests measured none: that trigger still needs a threshold of the user's own.
    [problem] = autoscaling.problems(
        [{"metric": "nv_inference_pending_request_count"}], unbatched, 0.8, "triton", "v", "c"
    )
    assert problem.endswith("replica.waiting_max is 0.0"), problem
    # An SLO the replica already missed leaves no slack: the measured figure decides (none here).
    missed = {**unbatched, "slo": {"e2e_p99_s": 0.1}}
    [problem] = autoscaling.problems(queue, missed, 0.8, "triton", "v", "c")
    assert "replica.queue_time_p99_s is 0.0" in problem, problem


def test_the_bounds_name_the_roles_own_variables():
    assert autoscaling.bounds_problems("triton", 1, 4, 15, 300, 1) == []
    found = autoscaling.bounds_problems("triton", 0, 0, 30, 15, 2)
    assert [f.split(":")[0] for f in found] == [
        "triton_autoscaling_min_replicas=0", "triton_autoscaling_polling_seconds=30",
    ], found  # fmt: skip
    [problem] = autoscaling.bounds_problems("vllm", 3, 2, 15, 300, 2)
    assert problem.startswith("vllm_autoscaling_max_replicas=2: must be at least vllm_autoscaling_min_replicas=3")
    assert "each replica holds 2 GPU(s)" in problem


def test_the_scaled_object_scales_up_at_once_and_down_one_drained_replica_at_a_time():
    triggers = autoscaling.keda_triggers(DEFAULTS, REFERENCE, 0.8, "vllm", "inference", "vllm", URL)
    obj = autoscaling.scaled_object("vllm", "inference", {"a": "b"}, "2", 6, 15, 300, 45, triggers)
    spec = obj["spec"]
    assert (obj["apiVersion"], obj["kind"], obj["metadata"]) == (
        "keda.sh/v1alpha1", "ScaledObject", {"name": "vllm", "namespace": "inference", "labels": {"a": "b"}},
    )  # fmt: skip
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["pollingInterval"], spec["cooldownPeriod"]) == (
        2, 6, 15, 300,
    )  # fmt: skip
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"] == {"stabilizationWindowSeconds": 0}
    # The window is the cooldown; one replica per grace period (its drain), or per polling interval if longer.
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 300, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 45}],
    }  # fmt: skip
    short = autoscaling.scaled_object("t", "n", {}, 1, 2, 30, 300, 10, [])
    assert (
        short["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["policies"][0][
            "periodSeconds"
        ]
        == 30
    )
    assert spec["triggers"] == triggers


SCALED_OBJECT = {
    "spec": {"triggers": [
        {"name": "vllm-num-requests-running", "metadata": {"query": "sum(a)", "threshold": "6.4"}},
        {"name": "dcgm-fi-dev-gpu-util", "metadata": {"query": "sum(b)", "threshold": "65"}},
    ]},
    "status": {"hpaName": "keda-hpa-vllm", "conditions": [{"type": "Ready", "status": "True"}]},
}  # fmt: skip


def _hpa(*metrics: str, active: str = "True") -> dict:
    return {
        "spec": {"metrics": [
            {"type": "External", "external": {"metric": {"name": m}, "target": {"type": "AverageValue"}}}
            for m in metrics
        ]},
        "status": {"conditions": [
            {"type": "AbleToScale", "status": "True"},
            {"type": "ScalingActive", "status": active, "reason": "FailedGetExternalMetric", "message": "s1"},
        ]},
    }  # fmt: skip


def test_a_running_scaled_object_with_every_metric_answered_has_no_problem():
    found, rows = autoscaling.status_problems(
        SCALED_OBJECT, _hpa("s0-prometheus", "s1-prometheus"), {"s0-prometheus": 4.0, "s1-prometheus": 30.0}
    )
    assert found == []
    assert [(r["trigger"], r["value"], r["threshold"]) for r in rows] == [
        ("vllm-num-requests-running", 4.0, "6.4"), ("dcgm-fi-dev-gpu-util", 30.0, "65"),
    ]  # fmt: skip


def test_a_trigger_whose_query_returns_nothing_is_named_with_its_query():
    empty = "prometheus metrics 'prometheus' target may be lost, the result is empty"
    answers = {"s0-prometheus": 4.0, "s1-prometheus": "500 error when getting metric values"}
    hpa = _hpa("s0-prometheus", "s1-prometheus", active="False")
    found, rows = autoscaling.status_problems(SCALED_OBJECT, hpa, answers, [empty])
    assert found == [
        "HPA ScalingActive is False: FailedGetExternalMetric",
        "trigger dcgm-fi-dev-gpu-util (s1-prometheus): its query returned nothing (no such series: the scrape or"
        " the selector); query: sum(b)",
    ]
    assert rows[1]["value"] is None and rows[1]["error"].startswith("500")
    # Without KEDA's word for it, the metrics API's answer is what is said.
    found, _rows = autoscaling.status_problems(SCALED_OBJECT, hpa, answers)
    assert found[1] == (
        "trigger dcgm-fi-dev-gpu-util (s1-prometheus): the metrics API answered: 500 error when getting metric"
        " values; query: sum(b)"
    )


def test_no_scaled_object_no_hpa_or_not_ready_is_named():
    assert autoscaling.status_problems(None, None, {})[0][0].startswith("no ScaledObject")
    failed = {"type": "Ready", "status": "False", "reason": "ScaledObjectCheckFailed", "message": "bad trigger"}
    not_ready = {**SCALED_OBJECT, "status": {"hpaName": "keda-hpa-vllm", "conditions": [failed]}}
    found, rows = autoscaling.status_problems(not_ready, None, {})
    assert found == [
        "ScaledObject not Ready: ScaledObjectCheckFailed: bad trigger",
        "no HPA 'keda-hpa-vllm' (KEDA makes it)",
    ]
    assert rows == []
