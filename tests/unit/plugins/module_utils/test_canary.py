"""A serving workload's canary: its steps as Argo Rollouts takes them, its analysis on series vLLM 0.23
exports (as its /metrics on the H200 lists them), limits from the capacity file where none is given,
and every unusable step, limit or replica count refused naming the variable, the item and the field."""

import json
import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import canary, rollout

REPO = Path(__file__).resolve().parents[4]
REFERENCE = json.loads((REPO / "roles/vllm/files/reference-capacity.json").read_text())
H200_METRICS = (REPO / "tests/fixtures/device/h200-vllm/metrics.txt").read_text()
STEPS = [{"weight": 10, "pause": "5m"}, {"weight": 50, "pause": "10m"}, {"weight": 100}]
DEFAULTS = [{"metric": "ttft_p99"}, {"metric": "tpot_p50"}, {"metric": "error_ratio"}]
URL = "http://gpufleet-scaling-metrics.gpufleet-scaling.svc.cluster.local:9090"


def problems(steps=STEPS, analysis=DEFAULTS, interval="1m", replicas=4, doc=REFERENCE):
    return canary.problems(steps, analysis, interval, replicas, doc, "vllm", "vllm")


def test_every_vllm_series_the_analysis_reads_is_one_vllm_023_exports_with_that_type():
    exported = dict(re.findall(r"^# TYPE (vllm:\S+) (\w+)$", H200_METRICS, re.M))
    for name, (kind, series, _detail, _figure) in canary.METRICS["vllm"].items():
        assert exported.get(series) == ("counter" if kind == "ratio" else kind), name
    assert 'vllm:request_success_total{engine="0",finished_reason="error"' in H200_METRICS


def test_the_defaults_are_usable_and_their_limits_come_from_the_capacity_file():
    assert problems() == []
    # The H200's TTFT P99 at the recommended level (0.609 s) up to vLLM's next bucket bound; its TPOT
    # P99 (8.3 ms) likewise; the error ratio the bench's own bound on a valid level.
    assert canary.default_limit("vllm", "ttft_p99", REFERENCE) == "750ms"
    assert canary.default_limit("vllm", "tpot_p50", REFERENCE) == "10ms"
    assert canary.default_limit("vllm", "error_ratio", REFERENCE) == "1%"


def test_the_steps_become_argo_rollouts_weights_and_pauses():
    assert canary.rollout_steps(STEPS) == [
        {"setWeight": 10}, {"pause": {"duration": "5m"}}, {"setWeight": 50}, {"pause": {"duration": "10m"}},
        {"setWeight": 100},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([{"weight": 50, "pause": "5m"}, {"weight": 10, "pause": "5m"}, {"weight": 100}],
         "vllm_canary_steps[1].weight: 10 after 50; the weights go up"),
        ([{"weight": 10, "pause": "5m"}, {"weight": 50, "pause": "5m"}],
         "vllm_canary_steps: the weights end at 50, not 100"),
        ([{"weight": 10, "pause": "30s"}, {"weight": 100}],
         "vllm_canary_steps[0].pause: 30s is shorter than vllm_canary_analysis_interval=1m"),
        ([{"weight": 10}, {"weight": 100}], "vllm_canary_steps[0].pause: none; every step but the last pauses"),
        ([{"weight": 0, "pause": "5m"}, {"weight": 100}], "vllm_canary_steps[0].weight: 0, not a whole percentage"),
        ([{"weight": 10, "pause": "soon"}, {"weight": 100}], "vllm_canary_steps[0].pause: 'soon' is not a duration"),
        ([], "vllm_canary_steps: at least one step"),
    ],
)  # fmt: skip
def test_unusable_steps_are_named(steps, expected):
    assert any(expected in p for p in problems(steps=steps)), problems(steps=steps)


@pytest.mark.parametrize(
    ("analysis", "expected"),
    [
        ([{"metric": "ttft_p99", "limit": "250"}], "vllm_canary_analysis[0].limit: '250' is not a limit with a unit"),
        ([{"metric": "ttft_p99", "limit": "1%"}], "vllm_canary_analysis[0].limit: '1%': ttft_p99 is a latency"),
        ([{"metric": "error_ratio", "limit": "2s"}], "vllm_canary_analysis[0].limit: '2s': error_ratio is a ratio"),
        ([{"metric": "ttft_p99", "limit": "90% of stable"}], "below 100% of stable, an identical canary would fail"),
        ([{"metric": "ttft_p99", "limit": "1.2s of stable"}], "a limit relative to stable is a percentage of it"),
        ([{"metric": "gpu_util"}], "vllm_canary_analysis[0].metric: 'gpu_util' is not one the analysis judges"),
        ([{"metric": "ttft_p99", "limit": "1s"}, {"metric": "ttft_p99", "limit": "2s"}],
         "vllm_canary_analysis[1]: a second absolute limit on ttft_p99"),
        ([], "vllm_canary_analysis: at least one limit"),
    ],
)  # fmt: skip
def test_unusable_limits_are_named(analysis, expected):
    assert any(expected in p for p in problems(analysis=analysis)), problems(analysis=analysis)


def test_a_limit_the_capacity_file_cannot_give_is_named_and_one_of_each_kind_per_metric_is_fine():
    found = problems(doc="")
    assert "vllm_canary_analysis[0].limit: none given, and vllm_capacity_file measured none for ttft_p99" in found
    assert not any("error_ratio" in p for p in found)  # its default is the bench's bound, not a measurement
    both = [{"metric": "ttft_p99", "limit": "250ms"}, {"metric": "ttft_p99", "limit": "120% of stable"}]
    assert problems(analysis=both) == []


def test_a_canary_on_one_replica_and_an_interval_that_is_no_duration_are_named():
    assert any(p.startswith("vllm_replicas=1: a canary needs at least 2 replicas") for p in problems(replicas=1))
    assert problems(interval="often") == [
        "vllm_canary_analysis_interval: 'often' is not a duration such as 1m or 30s, or auto"
    ]


def test_an_auto_interval_is_four_scrapes_and_a_hundred_requests_to_the_first_steps_canary():
    """The H200's replica served 13,289 tokens/s of 128 (104 requests/s): a hundred requests take 1 s, so
    four 5 s scrapes decide (20s). A model 50 times slower (2 requests/s) at 10 % of 4 replicas (one
    canary pod) needs 48 s for a hundred: 50s. An explicit interval is taken as it is."""
    assert canary.requests_per_s(REFERENCE) == pytest.approx(13288.6 / 128, rel=1e-4)
    assert canary.analysis_interval("auto", REFERENCE, STEPS, 4, "5s") == "20s"
    slow = {**REFERENCE, "replica": {**REFERENCE["replica"], "output_tokens_per_s": 13288.6 / 50}}
    assert canary.analysis_interval("auto", slow, STEPS, 4, "5s") == "50s"
    assert canary.analysis_interval("auto", slow, [{"weight": 50, "pause": "5m"}, {"weight": 100}], 4, "5s") == "30s"
    assert canary.analysis_interval("auto", None, STEPS, 4, "15s") == "60s"  # no capacity file: the scrapes
    assert canary.analysis_interval("1m", slow, STEPS, 4, "5s") == "1m"
    # Triton's inferences count one each: 10 a second.
    assert canary.requests_per_s({**TRITON_CAPACITY, "replica": {**TRITON_CAPACITY["replica"],
                                                                  "output_tokens_per_s": 10.0}}) == 10.0  # fmt: skip


def test_the_analysis_compares_the_canarys_pods_with_the_stables_over_the_same_window():
    analysis = [
        {"metric": "ttft_p99", "limit": "120% of stable"},
        {"metric": "ttft_p99", "limit": "250ms"},
        {"metric": "error_ratio", "limit": "5%"},
    ]
    template = canary.analysis_template("vllm-canary", "inference", {}, analysis, REFERENCE, "vllm", "vllm", "30s", 1,
                                        URL)  # fmt: skip
    assert template["kind"] == "AnalysisTemplate" and template["apiVersion"] == "argoproj.io/v1alpha1"
    assert [a["name"] for a in template["spec"]["args"]] == ["canary-hash", "stable-hash"]
    relative, absolute, errors = template["spec"]["metrics"]
    assert relative["name"] == "ttft-p99-vs-stable" and relative["successCondition"].endswith("# <= 1.2})")
    canary_part, stable_part = relative["provider"]["prometheus"]["query"].split(" / ")
    assert 'rollouts_pod_template_hash="{{args.canary-hash}}"' in canary_part and "[30s]" in canary_part
    assert stable_part == canary_part.replace("canary-hash", "stable-hash")
    assert absolute["name"] == "ttft-p99" and absolute["successCondition"] == "all(result, {isNaN(#) || # <= 0.25})"
    assert 'finished_reason="error"' in errors["provider"]["prometheus"]["query"]
    assert errors["successCondition"].endswith("# <= 0.05})") and errors["failureLimit"] == 1
    assert all(
        m["provider"]["prometheus"]["address"] == URL and m["interval"] == "30s" for m in template["spec"]["metrics"]
    )


# A Triton model without dynamic batching, measured by `gpufleet bench --api kserve_v2 --server triton`:
# nothing queued at the recommended level, whose E2E P99 (0.2 s) leaves 0.6 s of the SLO's 0.8 s.
TRITON_CAPACITY = {
    **REFERENCE, "model": "embed", "engine": {"name": "triton", "version": None}, "slo": {"e2e_p99_s": 0.8},
    "workload": {**REFERENCE["workload"], "api": "kserve_v2"},
    "replica": {**REFERENCE["replica"], "e2e_p99_s": 0.2, "queue_time_p99_s": 0.0, "waiting_max": 0.0},
}  # fmt: skip


def test_tritons_analysis_judges_its_failure_ratio_and_the_queue_time_the_slo_allows():
    """A queue P99 of nearly 0 at the recommended level is no limit under the fleet's load: the queue's
    default limit is the wait at which requests would reach the bench's SLO (0.6 s here)."""
    analysis = [{"metric": "failure_ratio"}, {"metric": "queue_p99"}]
    assert canary.problems(STEPS, analysis, "1m", 2, TRITON_CAPACITY, "triton", "triton") == []
    assert canary.default_limit("triton", "queue_p99", TRITON_CAPACITY) == "600ms"
    assert canary.default_limit("triton", "failure_ratio", None) == "1%"
    # Without an SLO in the file, the measured figure (none queued: no limit to give).
    unslo = {**TRITON_CAPACITY, "slo": {}}
    [problem] = canary.problems(STEPS, analysis, "1m", 2, unslo, "triton", "triton")
    assert problem == (
        "triton_canary_analysis[1].limit: none given, and triton_capacity_file measured none for queue_p99"
    )
    template = canary.analysis_template("triton-canary", "inference", {}, analysis, TRITON_CAPACITY, "triton",
                                        "triton", "1m", 1, URL)  # fmt: skip
    failures, queue = template["spec"]["metrics"]
    selector = 'namespace="inference",workload="triton",rollouts_pod_template_hash="{{args.canary-hash}}"'
    failed = f"(sum(rate(nv_inference_request_failure{{{selector}}}[1m])) or vector(0))"
    assert failures["provider"]["prometheus"]["query"] == (
        f"{failed} / ({failed} + sum(rate(nv_inference_request_success{{{selector}}}[1m])))"
    )
    assert failures["successCondition"] == "all(result, {isNaN(#) || # <= 0.01})"
    queue_p99 = f'max(nv_inference_queue_summary_us{{{selector},quantile="0.99"}}) / 1e6'
    assert queue["provider"]["prometheus"]["query"] == queue_p99
    assert queue["successCondition"] == "all(result, {isNaN(#) || # <= 0.6})"


def test_an_aborted_analysis_is_named_with_its_measured_value_and_limit():
    run = {
        "metadata": {"name": "vllm-6f7d-2"},
        "spec": {"metrics": [{"name": "ttft-p99-vs-stable", "successCondition": "all(result, {isNaN(#) || # <= 1.2})"},
                             {"name": "error-ratio", "successCondition": "all(result, {isNaN(#) || # <= 0.01})"}]},
        "status": {"phase": "Failed", "metricResults": [
            {"name": "ttft-p99-vs-stable", "phase": "Failed", "count": 3, "failed": 2,
             "measurements": [{"value": "[1.1]"}, {"value": "[2.0]"}]},
            {"name": "error-ratio", "phase": "Running", "count": 3, "failed": 0, "measurements": [{"value": "[0]"}]},
        ]},
    }  # fmt: skip
    assert rollout.analysis_failure(run) == (
        "analysis vllm-6f7d-2: ttft-p99-vs-stable measured [2.0] (limit 1.2; 2 of 3 measurements failed)"
    )
    # The benchmark step's job metric: its Job's own verdict (the gate's last line), as the module reads it.
    bench = {"metadata": {"name": "vllm-6f7d-2-1"}, "spec": {"metrics": [{"name": "bench"}]},
             "status": {"phase": "Failed", "metricResults": [{"name": "bench", "phase": "Failed", "count": 1,
                        "failed": 1, "measurements": [{"metadata": {"job-name": "j"}}]}]}}  # fmt: skip
    verdict = "Job j: gate: http://vllm-canary:8000 at 8 streams missed: ttft_p99_s 0.9 s > 0.6 s"
    assert rollout.analysis_failure(bench, {"bench": verdict}) == f"analysis vllm-6f7d-2-1: bench: {verdict}"


def test_a_rollout_is_done_once_its_new_version_is_stable_and_healthy():
    rollout_obj = {
        "metadata": {"generation": 3},
        "spec": {"replicas": 4, "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}},
        "status": {"observedGeneration": "3", "phase": "Paused", "stableRS": "a", "currentPodHash": "b",
                   "currentStepIndex": 1, "availableReplicas": 4, "updatedReplicas": 2},
    }  # fmt: skip
    assert rollout.canary_done(rollout_obj) == (
        False,
        "Paused, step 1/2, 4/4 replicas available (2 of the new version)",
    )
    rollout_obj["status"].update(phase="Healthy", stableRS="b", currentStepIndex=2, updatedReplicas=4)
    assert rollout.canary_done(rollout_obj) == (True, "Healthy, 4/4 replicas available (4 of the new version)")


def test_a_routes_weights_are_those_argo_rollouts_set_or_all_to_stable_for_a_new_one():
    service = {"kind": "VirtualService", "spec": {"http": [{"name": "primary", "route": [
        {"destination": {"host": "vllm-stable"}, "weight": 60}, {"destination": {"host": "vllm-canary"}, "weight": 40},
    ]}]}}  # fmt: skip
    route = {"spec": {"rules": [{"backendRefs": [{"name": "vllm-stable", "weight": 90},
                                                 {"name": "vllm-canary", "weight": 10}]}]}}  # fmt: skip
    assert canary.route_weights(service, "VirtualService", "vllm-stable", "vllm-canary") == {
        "vllm-stable": 60, "vllm-canary": 40,
    }  # fmt: skip
    assert canary.route_weights(route, "HTTPRoute", "vllm-stable", "vllm-canary") == {
        "vllm-stable": 90, "vllm-canary": 10,
    }  # fmt: skip
    new = {"vllm-stable": 100, "vllm-canary": 0}
    assert canary.route_weights({}, "HTTPRoute", "vllm-stable", "vllm-canary") == new
    # A route of other Services (a renamed workload) is not this one's: all to stable.
    assert canary.route_weights(route, "HTTPRoute", "llm-stable", "llm-canary") == {"llm-stable": 100, "llm-canary": 0}


PROMETHEUS = "http://prometheus.gpufleet-scaling:9090"


def test_the_series_probe_counts_each_limits_series_of_the_stable_pods():
    analysis = [{"metric": "ttft_p99"}, {"metric": "error_ratio", "limit": "1%"}]
    run = canary.series_probe("vllm", "inference", {"a": "b"}, analysis, "vllm", "vllm", PROMETHEUS, "6f7d9c")
    assert run["kind"] == "AnalysisRun" and run["metadata"]["name"] == "vllm-series-probe"
    first, second = run["spec"]["metrics"]
    selector = 'namespace="inference",workload="vllm",rollouts_pod_template_hash="6f7d9c"'
    assert first["provider"]["prometheus"] == {
        "address": PROMETHEUS, "query": f"count(vllm:time_to_first_token_seconds_bucket{{{selector}}})",
    }  # fmt: skip
    assert second["provider"]["prometheus"]["query"] == f"count(vllm:request_success_total{{{selector}}})"
    assert first["count"] == 1 and first["successCondition"] == "len(result) > 0"
    triton = canary.series_probe("t", "ns", {}, [{"metric": "failure_ratio"}], "triton", "t", PROMETHEUS, "h")
    assert triton["spec"]["metrics"][0]["provider"]["prometheus"]["query"].startswith(
        "count(nv_inference_request_success{"
    )


def test_the_probe_names_the_item_whose_series_is_missing_and_the_prometheus_that_cannot_be_asked():
    analysis = [{"metric": "ttft_p99"}, {"metric": "tpot_p50"}]
    run = canary.series_probe("vllm", "inference", {}, analysis, "vllm", "vllm", PROMETHEUS, "6f7d9c")
    assert canary.probe_problems({**run, "status": {"phase": "Successful"}}, analysis, "vllm") == []
    failed = {**run, "status": {"phase": "Failed", "metricResults": [
        {"name": "item-0", "phase": "Successful"}, {"name": "item-1", "phase": "Failed"},
    ]}}  # fmt: skip
    (problem,) = canary.probe_problems(failed, analysis, "vllm")
    assert problem.startswith(
        "vllm_canary_analysis[1] (tpot_p50): its series has no sample of the stable version's pods"
    )
    assert "count(vllm:request_time_per_output_token_seconds_bucket{" in problem and PROMETHEUS in problem
    error = {**run, "status": {"phase": "Error", "metricResults": [
        {"name": "item-0", "phase": "Error", "message": "consecutiveErrors (1) > consecutiveErrorLimit (0)",
         "measurements": [{"phase": "Error", "message": "connection refused"}]},
    ]}}  # fmt: skip
    (problem,) = canary.probe_problems(error, analysis, "vllm")
    assert "vllm_canary_prometheus_url" in problem and "could not be asked: Error: connection refused" in problem
    (unfinished,) = canary.probe_problems(run, analysis, "vllm")
    assert unfinished.startswith("vllm_canary_analysis: the probe of its series ended not finished (Argo Rollouts'")


# The benchmark step: a Job of the collection's gate against the canary's Service alone.
IMAGE = "mirror.example/gpufleet/canary-bench:0.10.0"


def bench_args(template: dict) -> dict[str, str]:
    container = template["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    return {args[i].removeprefix("--"): args[i + 1] for i in range(0, len(args), 2)}


def test_the_bench_step_measures_the_first_weight_before_its_pause():
    assert canary.rollout_steps(STEPS, "vllm-canary-bench")[:3] == [
        {"setWeight": 10},
        {"analysis": {"templates": [{"templateName": "vllm-canary-bench"}]}},
        {"pause": {"duration": "5m"}},
    ]
    assert not [s for s in canary.rollout_steps(STEPS) if "analysis" in s]


def test_the_bench_steps_load_and_limits_come_from_the_capacity_file():
    """128 streams a replica on the H200, 80 % of them per canary pod, the canary's pods at the first weight
    (10 % of 4 replicas, rounded up as Argo Rollouts does: 1; 50 %: 2); the limits the replica's figures."""
    template = canary.bench_template("vllm-canary-bench", "inference", {"a": "b"}, IMAGE,
                                     "http://vllm-canary.inference.svc:8000", "qwen", "30s", "", 0, {}, REFERENCE,
                                     0.8, 10, 4)  # fmt: skip
    args = bench_args(template)
    assert args["streams"] == "102" and args["duration"] == "30" and args["model"] == "qwen"
    assert args["ttft-p99"] == "0.609468" and args["tpot-p99"] == "0.00830032"
    assert (args["api"], args["max-tokens"], args["input-len"], args["fixed-length"]) == ("chat", "128", "96:160", "on")
    metric = template["spec"]["metrics"][0]
    assert (metric["count"], metric["failureLimit"]) == (1, 0)
    job = metric["provider"]["job"]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 5 + 30 + 120 + 60
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python3", "-m", "gpufleet.lib.llm_bench.gate"]
    assert container["securityContext"]["runAsNonRoot"] and "cpu" not in container["resources"]["limits"]
    half = canary.bench_template("b", "ns", {}, IMAGE, "u", "m", "1m", "key", 4, {"ttft_p99": "500ms"}, REFERENCE,
                                 0.8, 50, 4)  # fmt: skip
    args = bench_args(half)
    assert args["streams"] == "8" and args["ttft-p99"] == "0.5" and args["duration"] == "60"
    assert args["api-key-env"] == "VLLM_API_KEY"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"image": ""}, "vllm_canary_bench_image: none given"),
        ({"streams": -1}, "vllm_canary_bench_streams: -1, not a whole number"),
        ({"duration": "5s"}, "vllm_canary_bench_duration: '5s'; at least 10s"),
        ({"duration": "soon"}, "vllm_canary_bench_duration: 'soon' is not a duration"),
        ({"limits": {"ttft_p99": "120% of stable"}}, "vllm_canary_bench_limits.ttft_p99: '120% of stable' is not a"),
        ({"limits": {"ttft_p99": "0.5"}}, "vllm_canary_bench_limits.ttft_p99: '0.5' is not a latency"),
        ({"limits": {"e2e_p99": "1s"}}, "vllm_canary_bench_limits.e2e_p99: not a limit the step judges"),
        ({"limits": []}, "vllm_canary_bench_limits: a dict of ttft_p99 and tpot_p99"),
        ({"doc": {**REFERENCE, "replica": {}}}, "vllm_canary_bench_streams: 0 takes a replica's streams from"),
        ({"doc": {**REFERENCE, "replica": {"streams": 8}}}, "vllm_canary_bench_limits.ttft_p99: none given, and"),
    ],
)
def test_an_unusable_bench_step_is_named(kwargs, expected):
    given = {"image": IMAGE, "streams": 0, "duration": "30s", "limits": {}, "doc": REFERENCE, **kwargs}
    found = canary.bench_problems(given["image"], given["streams"], given["duration"], given["limits"], given["doc"],
                                  "vllm")  # fmt: skip
    assert any(p.startswith(expected) for p in found), found


def test_the_defaults_of_the_bench_step_are_usable_with_the_reference_capacity_file():
    assert canary.bench_problems(IMAGE, 0, "30s", {}, REFERENCE, "vllm") == []
    assert canary.bench_problems(IMAGE, 4, "30s", {"ttft_p99": "1s", "tpot_p99": "20ms"}, {}, "vllm") == []
