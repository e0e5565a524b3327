# SPDX-License-Identifier: Apache-2.0
"""KEDA's Prometheus triggers for a serving workload, each on a series its engine exports, with a
threshold measured by `gpufleet bench` (the capacity file) times a stated headroom.

A gauge is summed over the workload's pods and compared per replica (KEDA's ``AverageValue``: the
HPA wants sum / threshold replicas); its default threshold is the figure the gauge had at the
recommended level times the headroom, so the workload scales out before a replica reaches the load
that still met the SLO. A histogram's P99 over the workload is compared as a whole (``Value``: the HPA
scales by P99 / threshold); a P99 read from the engine's buckets is no finer than they are, so its
default is the bucket bound at or above the measured P99 (an interpolated P99 at the measured load
stays below it; a load past it crosses it). A summary's P99 (Triton's queue time) is exact: its
default is the queue time at which the E2E P99 would reach the bench's SLO (the measured queue P99 plus
the slack between the measured E2E P99 and the SLO) times the headroom, or without an SLO the measured
queue P99 itself. (At the recommended level a model without dynamic batching queues nothing: its
measured queue P99 alone would scale out on the first request that waits.) A series with no measured
figure needs an explicit threshold.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import capacity

# The series each engine exports that a trigger may read: name -> (type, the capacity file's figure
# of one replica at the recommended level, or None where the bench measures none). vLLM 0.23's are
# those of its /metrics on the H200 (tests/fixtures/device/h200-vllm/metrics.txt); counters are left
# out (a rate says less of one replica's load than the gauges beside them).
VLLM_SERIES: dict[str, tuple[str, str | None]] = {
    "vllm:num_requests_running": ("gauge", "streams"),
    "vllm:num_requests_waiting": ("gauge", "waiting_max"),
    "vllm:kv_cache_usage_perc": ("gauge", "kv_cache_usage_max"),
    "vllm:time_to_first_token_seconds": ("histogram", "ttft_p99_s"),
    "vllm:request_time_per_output_token_seconds": ("histogram", "tpot_p99_s"),
    "vllm:inter_token_latency_seconds": ("histogram", "tpot_p99_s"),
    "vllm:e2e_request_latency_seconds": ("histogram", "e2e_p99_s"),
    "vllm:request_queue_time_seconds": ("histogram", "queue_time_p99_s"),
}
# DCGM's GPU utilisation (dcgm-exporter's default counters), per GPU the workload's pods hold, averaged
# over 2 minutes as the reference design reads it. The bench reads no DCGM series: explicit threshold.
DCGM_SERIES: dict[str, tuple[str, str | None]] = {"DCGM_FI_DEV_GPU_UTIL": ("gpu_gauge", None)}
# Triton's (its /metrics, 23.04 and later), per model: the requests waiting in a model's scheduler
# queue, and the queue time's summary, whose P99 over Triton's sliding window exists only with
# `--metrics-config summary_latencies=true` (the triton role sets it when a trigger reads it). The
# summary is in microseconds; its trigger reads seconds, as vLLM's latencies do.
TRITON_SERIES: dict[str, tuple[str, str | None]] = {
    "nv_inference_pending_request_count": ("gauge", "waiting_max"),
    "nv_inference_queue_summary_us": ("summary_us", "queue_time_p99_s"),
}
ENGINE_SERIES = {"vllm": {**VLLM_SERIES, **DCGM_SERIES}, "triton": {**TRITON_SERIES, **DCGM_SERIES}}
# The series whose P99 the HPA compares as a whole (KEDA's Value), not per replica.
LATENCY_KINDS = ("histogram", "summary_us")
# vLLM 0.23's histogram buckets (their finite `le` bounds in the H200's /metrics).
_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0)  # fmt: skip
_TOKEN = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
VLLM_BUCKETS: dict[str, tuple[float, ...]] = {
    "vllm:time_to_first_token_seconds": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                                         5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    "vllm:request_time_per_output_token_seconds": _TOKEN,
    "vllm:inter_token_latency_seconds": _TOKEN,
    "vllm:e2e_request_latency_seconds": _LATENCY,
    "vllm:request_queue_time_seconds": _LATENCY,
}  # fmt: skip
# The window a histogram's P99 and DCGM's average are taken over: the HPA sees a quantile of the last
# minute's requests, not of one polling interval's few.
RATE_WINDOW = "1m"
GPU_WINDOW = "2m"
# KEDA hands the HPA its threshold in thousandths (a milli-quantity): anything finer reads as 0.
MIN_THRESHOLD = 0.001


def problems(triggers: Any, doc: Any, headroom: float, engine: str, variable: str, capacity_variable: str) -> list[str]:
    """What makes ``triggers`` (the role's list of {metric, threshold}) unusable with the capacity file
    ``doc``; each names the variable, the item and the field."""
    series = ENGINE_SERIES[engine]
    if not isinstance(triggers, list) or not triggers:
        return [f"{variable}: at least one trigger, each a series {engine} exports and a threshold"]
    replica = {} if capacity.problems(doc, "-") else capacity.parsed(doc)["replica"]
    metrics = [trigger.get("metric") for trigger in triggers if isinstance(trigger, dict)]
    found = []
    for index, trigger in enumerate(triggers):
        where = f"{variable}[{index}]"
        if not isinstance(trigger, dict):
            found.append(f"{where}: a dict of metric and threshold, not {trigger!r}")
            continue
        metric = trigger.get("metric")
        if metric not in series:
            found.append(
                f"{where}.metric: {metric!r} is not a series {engine} exports that a trigger can read"
                f" (one of {', '.join(sorted(series))})"
            )
            continue
        if metrics.count(metric) > 1:
            found.append(f"{where}.metric: {metric} has two triggers; one threshold per series")
        given = trigger.get("threshold")
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, int | float) or not given > 0:
                found.append(f"{where}.threshold: {given!r}, not a number above 0")
                continue
        elif series[metric][0] != "summary_us" or slo_slack(doc) is None:
            figure = series[metric][1]
            measured = replica.get(figure) if figure else None
            if isinstance(measured, bool) or not isinstance(measured, int | float) or not measured > 0:
                why = f"replica.{figure} is {measured!r}" if figure else "the bench reads no DCGM series"
                found.append(
                    f"{where}.threshold: none given, and {capacity_variable} measured none for {metric}: {why}"
                )
                continue
        if threshold(trigger, doc, headroom, engine) < MIN_THRESHOLD:
            found.append(
                f"{where}.threshold: {threshold(trigger, doc, headroom, engine):g} is below {MIN_THRESHOLD}, the finest"
                " target KEDA gives the HPA (a quantity in thousandths)"
            )
    return found


def threshold(trigger: dict[str, Any], doc: Any, headroom: float, engine: str) -> float:
    """The trigger's threshold: its own, else from the measured figure (see the module's docstring)."""
    if trigger.get("threshold") is not None:
        return float(trigger["threshold"])
    metric = trigger["metric"]
    figure = capacity.parsed(doc)["replica"][ENGINE_SERIES[engine][metric][1]]
    measured = float(figure or 0)  # a summary's queue P99 where none was read: none waited
    if metric in VLLM_BUCKETS:
        return next((bound for bound in VLLM_BUCKETS[metric] if bound >= measured), measured)
    if ENGINE_SERIES[engine][metric][0] == "summary_us":
        slack = slo_slack(doc)
        return measured if slack is None else float(headroom) * (measured + slack)
    return measured * float(headroom)


def slo_slack(doc: Any) -> float | None:
    """How much longer requests could wait at the recommended level before the E2E P99 reached the
    bench's SLO; None where the capacity file has no SLO (or no such slack) to derive it from."""
    doc = capacity.parsed(doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("replica"), dict):
        return None
    slo, e2e = (doc.get("slo") or {}).get("e2e_p99_s"), doc["replica"].get("e2e_p99_s")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (slo, e2e))
    if not numbers or not slo > e2e:
        return None
    return float(slo) - float(e2e)  # type: ignore[arg-type]


def query(metric: str, engine: str, namespace: str, workload: str) -> str:
    """The PromQL of one trigger over the workload's pods (the scaling Prometheus labels each series
    with the pod's namespace and its app.kubernetes.io/instance as ``workload``)."""
    kind = ENGINE_SERIES[engine][metric][0]
    if kind == "gpu_gauge":
        # dcgm-exporter names the pod that holds each GPU (its own labels, kept by the scrape).
        selector = f'exported_namespace="{namespace}",exported_pod=~"{workload}-.*"'
        return f"sum(avg_over_time({metric}{{{selector}}}[{GPU_WINDOW}]))"
    selector = f'namespace="{namespace}",workload="{workload}"'
    if kind == "summary_us":
        # Quantiles do not add up: the worst model's P99 on the worst replica, in seconds. With no
        # request in Triton's window the quantile is NaN: 0 where the series exists, as below.
        p99 = f'max({metric}{{{selector},quantile="0.99"}}) / 1e6'
        return f"({p99} >= 0) or (sum({metric}_count{{{selector}}}) * 0)"
    if kind == "histogram":
        # No requests in the window make the quantile NaN: then 0 where the series exists, nothing
        # where it does not (a broken scrape reads as an error, not as no load).
        p99 = f"histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{{{selector}}}[{RATE_WINDOW}])))"
        return f"({p99} >= 0) or (sum({metric}_count{{{selector}}}) * 0)"
    return f"sum({metric}{{{selector}}})"


def keda_triggers(
    triggers: list[dict[str, Any]],
    doc: Any,
    headroom: float,
    engine: str,
    namespace: str,
    workload: str,
    server_address: str,
) -> list[dict[str, Any]]:
    """KEDA's ``prometheus`` triggers of a ScaledObject, one per item of ``triggers``."""
    rendered = []
    for trigger in triggers:
        kind = ENGINE_SERIES[engine][trigger["metric"]][0]
        value = threshold(trigger, doc, headroom, engine)
        rendered.append(
            {
                "type": "prometheus",
                "name": trigger["metric"].replace(":", "-").replace("_", "-").lower(),
                "metricType": "Value" if kind in LATENCY_KINDS else "AverageValue",
                "metadata": {
                    "serverAddress": server_address,
                    "query": query(trigger["metric"], engine, namespace, workload),
                    "threshold": f"{value:.6g}",
                    # An empty answer is a series missing, not no load (the queries give 0 for that):
                    # the trigger fails, the HPA keeps its replicas, and `gpufleet verify` names it.
                    "ignoreNullValues": "false",
                },
            }
        )
    return rendered


def bounds_problems(
    role: str, min_replicas: Any, max_replicas: Any, polling_s: Any, cooldown_s: Any, gpus: Any
) -> list[str]:
    """What makes a serving role's replica bounds and intervals unusable (``role``: the variables'
    prefix, vllm or triton), each naming the variable."""
    v = f"{role}_autoscaling"
    found = []
    if int(min_replicas) < 1:
        found.append(f"{v}_min_replicas=0: at least 1 replica stays warm (a model takes minutes to load; KEDA would"
                     " scale to zero)")  # fmt: skip
    if int(max_replicas) < int(min_replicas):
        found.append(f"{v}_max_replicas={max_replicas}: must be at least {v}_min_replicas={min_replicas} (it is"
                     f" required with autoscaling: each replica holds {gpus} GPU(s))")  # fmt: skip
    if int(polling_s) > int(cooldown_s):
        found.append(f"{v}_polling_seconds={polling_s}: longer than {v}_cooldown_seconds={cooldown_s}, the window"
                     " would hold at most one reading")  # fmt: skip
    return found


def scaled_object(
    name: str,
    namespace: str,
    labels: dict[str, str],
    min_replicas: Any,
    max_replicas: Any,
    polling_s: Any,
    cooldown_s: Any,
    grace_s: Any,
    triggers: list[dict[str, Any]],
    kind: str = "Deployment",
) -> dict[str, Any]:
    """KEDA's ScaledObject for a serving workload of the same name (``kind``: a Deployment, or the Rollout
    of a canary strategy, which Argo Rollouts scales through the same scale subresource), with ``triggers``
    (keda_triggers').

    Scale-up acts on the first reading above a threshold; scale-down waits until every recommendation of
    the cooldown asked for fewer (the HPA's stabilisation window), then removes one replica at a time,
    each given its grace period (``grace_s``: the drain of its streams) before the next, so a dip does
    not flap the replicas and no two replicas drain at once."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "argoproj.io/v1alpha1" if kind == "Rollout" else "apps/v1",
                "kind": kind,
                "name": name,
            },
            "minReplicaCount": int(min_replicas),
            "maxReplicaCount": int(max_replicas),
            "pollingInterval": int(polling_s),
            "cooldownPeriod": int(cooldown_s),
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": int(cooldown_s),
                            "policies": [
                                {"type": "Pods", "value": 1, "periodSeconds": max(int(polling_s), int(grace_s))}
                            ],
                        },
                        "scaleUp": {"stabilizationWindowSeconds": 0},
                    }
                }
            },
            "triggers": triggers,
        },
    }


# What `gpufleet verify` judges of a ScaledObject that runs: KEDA's own view, the HPA it made, and every
# trigger's metric as the HPA reads it (KEDA's external metrics API, which runs the query now).
def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def trigger_of(scaled_object: dict[str, Any], metric_name: str) -> dict[str, Any]:
    """The ScaledObject's trigger behind one of its external metrics (KEDA names them s<index>-<scaler>)."""
    triggers = (scaled_object.get("spec") or {}).get("triggers") or []
    index = metric_name.split("-", 1)[0][1:]
    return triggers[int(index)] if index.isdigit() and int(index) < len(triggers) else {"name": metric_name}


def status_problems(
    scaled_object: dict[str, Any] | None,
    hpa: dict[str, Any] | None,
    answers: dict[str, Any],
    scaler_errors: list[str] | tuple[str, ...] = (),
) -> tuple[list[str], list[dict[str, Any]]]:
    """(problems, one row per trigger) of a ScaledObject, the HPA its status names, ``answers`` (external
    metric name -> its value from the metrics API, a number, or the API's error, a str) and
    ``scaler_errors`` (KEDA's KEDAScalerFailed events of the ScaledObject, which do not name the trigger).

    An empty query is KEDA's "the result is empty": the series is missing (the scrape or the selector
    broken), which the triggers do not read as no load (ignoreNullValues is false), so it is named."""
    if scaled_object is None:
        return ["no ScaledObject (is autoscaling applied? run `gpufleet up`)"], []
    found = []
    ready = _condition(scaled_object, "Ready")
    if ready.get("status") != "True":
        found.append(f"ScaledObject not Ready: {ready.get('reason') or 'no condition'}: {ready.get('message') or ''}")
    if hpa is None:
        found.append(f"no HPA {(scaled_object.get('status') or {}).get('hpaName')!r} (KEDA makes it)")
        return found, []
    for kind in ("AbleToScale", "ScalingActive"):
        condition = _condition(hpa, kind)
        if condition.get("status") != "True":
            found.append(f"HPA {kind} is {condition.get('status')}: {condition.get('reason')}")
    rows = []
    for metric in (hpa.get("spec") or {}).get("metrics") or []:
        if metric.get("type") != "External":
            continue
        name = metric["external"]["metric"]["name"]
        trigger = trigger_of(scaled_object, name)
        answer = answers.get(name)
        rows.append(
            {
                "trigger": trigger.get("name"),
                "metric": name,
                "query": (trigger.get("metadata") or {}).get("query"),
                "threshold": (trigger.get("metadata") or {}).get("threshold"),
                "target_type": (metric["external"].get("target") or {}).get("type"),
                "value": answer if isinstance(answer, int | float) else None,
                "error": None if isinstance(answer, int | float) else str(answer),
            }
        )
    failing = [row for row in rows if row["error"] is not None]
    empty = any("result is empty" in error for error in scaler_errors)
    for row in failing:
        # KEDA's event says a query came back empty; with one trigger failing, it is this one's.
        cause = (
            "its query returned nothing (no such series: the scrape or the selector)"
            if empty and len(failing) == 1
            else f"the metrics API answered: {row['error']}"
        )
        found.append(f"trigger {row['trigger']} ({row['metric']}): {cause}; query: {row['query']}")
    if failing and scaler_errors and not (empty and len(failing) == 1):
        found.append("KEDA's scaler errors: " + "; ".join(sorted(set(scaler_errors))))
    if not rows:
        found.append("the HPA has no external metric of KEDA's")
    return found, rows
