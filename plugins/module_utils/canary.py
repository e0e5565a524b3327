# SPDX-License-Identifier: Apache-2.0
"""A serving workload's canary under Argo Rollouts: its steps (weights and pauses) and the analysis
that judges the canary against the stable version, on the engine's own series, over the same window.

Without a mesh the weight is a share of the replicas (Argo Rollouts' basic canary): the workload's
Service spreads streams over both versions' pods, and the canary and stable Services select one
version each. The analysis runs in the background from the first step: every interval it reads, from
the Prometheus in the GPU cluster (the one KEDA reads), each limit's figure of the canary's pods and,
for a limit relative to stable, the same figure of the stable pods over the same window. A limit
failed more often than allowed aborts the Rollout, which Argo Rollouts then rolls back on its own.

A limit is absolute (``250ms``, ``1.5s`` for a latency; ``1%`` for a ratio) or relative to stable
(``120% of stable``). A limit left out comes from the capacity file, as the autoscaling thresholds do:
a latency's is the bucket bound at or above the figure the bench measured at the recommended level (a
P99 read from vLLM's buckets is no finer than they are); Triton's queue time's is the wait at which
requests would reach the bench's SLO there (the figure plus the SLO's slack: a queue of nearly 0 at
the recommended level is no limit for a version under the fleet's load); an error ratio's is the
bench's own validity bound (a level with more errors is never recommended). A window without a request, or without the
canary's pods scraped yet, reads NaN or nothing: that measurement passes (there is nothing to judge);
the benchmark step is what puts the canary under load.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import autoscaling, capacity
from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench.records import BenchConfig
from ansible_collections.gpufleet.platform.plugins.module_utils.validate import duration_seconds

# What each engine's analysis can judge: name -> (kind, series, quantile or the failed requests'
# selector, the capacity file's figure a default limit comes from). vLLM 0.23's series as on the H200
# (tests/fixtures/device/h200-vllm/metrics.txt); Triton's as its metrics documentation names them.
METRICS: dict[str, dict[str, tuple[str, str, Any, str | None]]] = {
    "vllm": {
        "ttft_p99": ("histogram", "vllm:time_to_first_token_seconds", 0.99, "ttft_p99_s"),
        "tpot_p50": ("histogram", "vllm:request_time_per_output_token_seconds", 0.5, "tpot_p99_s"),
        # vLLM counts each finished request by reason; "error" is a request the engine failed.
        "error_ratio": ("ratio", "vllm:request_success_total", 'finished_reason="error"', None),
    },
    "triton": {
        # Triton's queue summary, in microseconds (the triton role exports it); a P99 per replica.
        "queue_p99": ("summary_us", "nv_inference_queue_summary_us", 0.99, "queue_time_p99_s"),
        "failure_ratio": ("failures", "nv_inference_request", None, None),
    },
}
# A window the analysis can judge (``<role>_canary_analysis_interval: auto``): four scrapes of the
# analysis' Prometheus (a rate over fewer samples is mostly noise, as Prometheus' own guidance has it),
# and a hundred requests to the canary's pods at the first step at the capacity file's measured rate
# (fewer cannot hold a P99, or one failure in a 1 % ratio). Rounded up to whole 10 s.
SCRAPES_PER_WINDOW, REQUESTS_PER_WINDOW = 4, 100
LIMIT = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|%)(?P<relative>\s+of\s+stable)?$")
# The canary's pods and the stable's, by the hash Argo Rollouts labels each version's pods with
# (the analysis' arguments; the scaling Prometheus copies the label to each series).
VERSIONS = {"canary": "{{args.canary-hash}}", "stable": "{{args.stable-hash}}"}


def parse_limit(limit: Any) -> tuple[float, str, bool] | None:
    """(number, unit, relative to stable) of a limit such as ``250ms``, ``1%``, ``120% of stable``."""
    found = LIMIT.match(str(limit).strip()) if isinstance(limit, str) else None
    if not found:
        return None
    return float(found["number"]), found["unit"], bool(found["relative"])


def _is_latency(engine: str, metric: str) -> bool:
    return METRICS[engine][metric][0] in ("histogram", "summary_us")


def limit_problem(engine: str, metric: str, limit: Any) -> str | None:
    """Why ``limit`` cannot bound ``metric``, or None."""
    parsed = parse_limit(limit)
    latency = "250ms or 1.5s" if _is_latency(engine, metric) else "1%"
    if parsed is None:
        return f"{limit!r} is not a limit with a unit: {latency} (absolute) or 120% of stable (relative)"
    number, unit, relative = parsed
    if relative and unit != "%":
        return f"{limit!r}: a limit relative to stable is a percentage of it, such as 120% of stable"
    if not relative and _is_latency(engine, metric) and unit == "%":
        return f"{limit!r}: {metric} is a latency, its absolute limit is in ms or s"
    if not relative and not _is_latency(engine, metric) and unit != "%":
        return f"{limit!r}: {metric} is a ratio, its absolute limit is a percentage such as 1%"
    if relative and number < 100:
        return f"{limit!r}: below 100% of stable, an identical canary would fail"
    if not number > 0 and not (unit == "%" and not relative):
        return f"{limit!r}: a limit above 0"
    return None


def default_limit(engine: str, metric: str, doc: Any) -> str | None:
    """The limit a metric gets without one of the user's (see the module's docstring), or None where the
    capacity file measured nothing for it."""
    kind, series, _quantile, figure = METRICS[engine][metric]
    if figure is None:
        return f"{BenchConfig.max_error_rate:.0%}"
    if capacity.problems(doc, "-"):
        return None
    measured = capacity.parsed(doc)["replica"].get(figure)
    slack = autoscaling.slo_slack(doc) if kind == "summary_us" else None
    if slack is not None:
        queued = measured if isinstance(measured, int | float) and not isinstance(measured, bool) else 0.0
        return f"{(queued + slack) * 1000:.6g}ms" if queued + slack > 0 else None
    if isinstance(measured, bool) or not isinstance(measured, int | float) or not measured > 0:
        return None
    bounds = autoscaling.VLLM_BUCKETS.get(series, ())
    bound = next((b for b in bounds if b >= measured), float(measured))
    return f"{bound * 1000:.6g}ms"


def analysis_interval(interval: Any, doc: Any, steps: Any, replicas: Any, scrape_interval: Any) -> str:
    """The analysis' interval (and window): ``interval`` itself, or for ``auto`` the measured one above.
    A value that is neither passes through, for ``problems`` to name."""
    if str(interval).strip() != "auto":
        return str(interval)
    try:
        seconds = SCRAPES_PER_WINDOW * duration_seconds(str(scrape_interval))
    except ValueError:
        return str(interval)
    rate = requests_per_s(doc)
    first = steps[0] if isinstance(steps, list) and steps and isinstance(steps[0], dict) else {}
    weight = first.get("weight")
    if rate and isinstance(weight, int) and not isinstance(weight, bool) and 0 < weight <= 100:
        pods = max(1, -(-weight * int(replicas) // 100))  # Argo Rollouts rounds the canary's pods up
        seconds = max(seconds, REQUESTS_PER_WINDOW / (rate * pods))
    return f"{math.ceil(seconds / 10) * 10}s"


def requests_per_s(doc: Any) -> float | None:
    """The requests (Triton: inferences) a second one replica served at its recommended level, from the
    capacity file; None without one."""
    if capacity.problems(doc, "-"):
        return None
    parsed = capacity.parsed(doc)
    tokens_per_s = parsed["replica"].get("output_tokens_per_s")
    workload = parsed.get("workload") or {}
    # A KServe v2 inference counts as one token in the bench's figures.
    per_request: Any = 1 if workload.get("api") == "kserve_v2" else workload.get("max_tokens")
    if not _positive(tokens_per_s) or not _positive(per_request):
        return None
    return float(tokens_per_s) / float(per_request)


def problems(steps: Any, analysis: Any, interval: Any, replicas: Any, doc: Any, engine: str, role: str) -> list[str]:
    """What makes a canary's steps, analysis or replicas unusable; each names the variable (``role``: the
    variables' prefix), and for lists the item and field."""
    found = []
    v = f"{role}_canary"
    try:
        interval_s = duration_seconds(str(interval))
    except ValueError:
        return [f"{v}_analysis_interval: {interval!r} is not a duration such as 1m or 30s, or auto"]
    if int(replicas) < 2:
        found.append(f"{role}_replicas={replicas}: a canary needs at least 2 replicas (one canary beside one stable);"
                     f" with one, set {role}_rollout: deployment")  # fmt: skip
    if not isinstance(steps, list) or not steps:
        found.append(f"{v}_steps: at least one step, each a weight (1 to 100) and a pause such as 5m")
        steps = []
    previous = 0
    for index, step in enumerate(steps):
        where = f"{v}_steps[{index}]"
        if not isinstance(step, dict) or "weight" not in step:
            found.append(f"{where}: a dict of weight and pause, not {step!r}")
            continue
        weight = step["weight"]
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 < weight <= 100:
            found.append(f"{where}.weight: {weight!r}, not a whole percentage from 1 to 100")
            continue
        if weight <= previous:
            found.append(f"{where}.weight: {weight} after {previous}; the weights go up, step by step")
        previous = max(previous, weight)
        last = index == len(steps) - 1
        if "pause" not in step:
            if not last:
                found.append(f"{where}.pause: none; every step but the last pauses for the analysis to judge it")
            continue
        try:
            pause_s = duration_seconds(str(step["pause"]))
        except ValueError:
            found.append(f"{where}.pause: {step['pause']!r} is not a duration such as 5m")
            continue
        if pause_s < interval_s:
            found.append(f"{where}.pause: {step['pause']} is shorter than {v}_analysis_interval={interval}; the"
                         " analysis would not measure this step once")  # fmt: skip
    if steps and previous != 100:
        found.append(f"{v}_steps: the weights end at {previous}, not 100 (the last step sends all traffic to the"
                     " canary)")  # fmt: skip
    if not isinstance(analysis, list) or not analysis:
        found.append(f"{v}_analysis: at least one limit, each a metric ({', '.join(METRICS[engine])}) and a limit")
        return found
    seen = set()
    for index, item in enumerate(analysis):
        where = f"{v}_analysis[{index}]"
        if not isinstance(item, dict) or item.get("metric") not in METRICS[engine]:
            metric = item.get("metric") if isinstance(item, dict) else item
            found.append(f"{where}.metric: {metric!r} is not one the analysis judges for {engine}"
                         f" (one of {', '.join(METRICS[engine])})")  # fmt: skip
            continue
        limit = item.get("limit")
        if limit is None:
            limit = default_limit(engine, item["metric"], doc)
            if limit is None:
                found.append(f"{where}.limit: none given, and {role}_capacity_file measured none for {item['metric']}")
                continue
        problem = limit_problem(engine, item["metric"], limit)
        if problem:
            found.append(f"{where}.limit: {problem}")
            continue
        key = (item["metric"], parse_limit(limit)[2])  # type: ignore[index]
        if key in seen:
            found.append(f"{where}: a second {'relative' if key[1] else 'absolute'} limit on {item['metric']}")
        seen.add(key)
    return found


def rollout_steps(steps: list[dict[str, Any]], bench_template: str = "") -> list[dict[str, Any]]:
    """Argo Rollouts' canary steps: each weight, then its pause; with a benchmark step (``bench_template``,
    its AnalysisTemplate's name), the first weight is measured under load before its pause."""
    rendered: list[dict[str, Any]] = []
    for index, step in enumerate(steps):
        rendered.append({"setWeight": int(step["weight"])})
        if bench_template and index == 0:
            rendered.append({"analysis": {"templates": [{"templateName": bench_template}]}})
        if "pause" in step:
            rendered.append({"pause": {"duration": str(step["pause"])}})
    return rendered


def route_weights(live: Any, kind: str, stable: str, canary: str) -> dict[str, int]:
    """The weights Argo Rollouts last set on a canary's route through a mesh (the live VirtualService's
    ``primary`` route, or the HTTPRoute's backends), so that applying the route again keeps them mid-canary
    (the role applies server-side and takes its fields back); all to ``stable`` for a route not there yet,
    or one that names other Services."""
    weights = {stable: 100, canary: 0}
    spec = (live.get("spec") or {}) if isinstance(live, dict) else {}
    if kind == "VirtualService":
        found = [(d.get("destination", {}).get("host"), d.get("weight")) for route in spec.get("http") or []
                 if route.get("name") == "primary" for d in route.get("route") or []]  # fmt: skip
    else:
        found = [
            (b.get("name"), b.get("weight")) for rule in spec.get("rules") or [] for b in rule.get("backendRefs") or []
        ]
    live_weights = {name: weight for name, weight in found if name in weights and isinstance(weight, int)}
    return live_weights if set(live_weights) == set(weights) else weights


def query(engine: str, metric: str, version: str, namespace: str, workload: str, window: str) -> str:
    """The PromQL of one metric over one version's pods (``version``: canary or stable) and ``window``."""
    kind, series, detail, _figure = METRICS[engine][metric]
    selector = f'namespace="{namespace}",workload="{workload}",rollouts_pod_template_hash="{VERSIONS[version]}"'
    if kind == "histogram":
        return f"histogram_quantile({detail}, sum by (le) (rate({series}_bucket{{{selector}}}[{window}])))"
    if kind == "summary_us":
        # Quantiles do not add up: the worst replica's, in seconds.
        return f'max({series}{{{selector},quantile="{detail}"}}) / 1e6'
    if kind == "ratio":
        return f"sum(rate({series}{{{selector},{detail}}}[{window}])) / sum(rate({series}{{{selector}}}[{window}]))"
    # A failure counter Triton has not exported yet (no failure so far) counts none.
    failed, succeeded = (
        f"(sum(rate({series}_failure{{{selector}}}[{window}])) or vector(0))",
        f"sum(rate({series}_success{{{selector}}}[{window}]))",
    )
    return f"{failed} / ({failed} + {succeeded})"


def analysis_metric(item: dict[str, Any], doc: Any, engine: str, namespace: str, workload: str, interval: str,
                    failures: int, server_address: str) -> dict[str, Any]:  # fmt: skip
    """One metric of the AnalysisTemplate: the canary's figure (or its ratio to stable's) against the limit."""
    metric = item["metric"]
    limit = item.get("limit") or default_limit(engine, metric, doc)
    number, unit, relative = parse_limit(limit)  # type: ignore[misc]
    canary = query(engine, metric, "canary", namespace, workload, interval)
    if relative:
        promql, bound, name = (
            f"({canary}) / ({query(engine, metric, 'stable', namespace, workload, interval)})",
            number / 100,
            f"{metric}-vs-stable",
        )
    else:
        promql, name = canary, metric
        bound = number / 1000 if unit == "ms" else number / 100 if unit == "%" else number
    return {
        "name": name.replace("_", "-"),
        "interval": interval,
        # Measurements that may fail before the Rollout aborts (one slow window is not a verdict).
        "failureLimit": int(failures),
        # NaN (no request in the window) or nothing (no canary pod scraped yet) judges nothing: it passes.
        "successCondition": f"all(result, {{isNaN(#) || # <= {bound:.6g}}})",
        "provider": {"prometheus": {"address": server_address, "query": promql}},
    }


def analysis_template(
    name: str,
    namespace: str,
    labels: dict[str, str],
    analysis: list[dict[str, Any]],
    doc: Any,
    engine: str,
    workload: str,
    interval: str,
    failures: int,
    server_address: str,
) -> dict[str, Any]:
    """The AnalysisTemplate a workload's Rollout runs in the background of its canary steps."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "args": [{"name": "canary-hash"}, {"name": "stable-hash"}],
            "metrics": [
                analysis_metric(item, doc, engine, namespace, workload, interval, failures, server_address)
                for item in analysis
            ],
        },
    }


# The series each metric's query reads, for the probe below: a histogram's buckets, Triton's successes.
_PROBED = {
    "histogram": "{series}_bucket", "summary_us": "{series}", "ratio": "{series}", "failures": "{series}_success",
}  # fmt: skip


def series_query(engine: str, metric: str, namespace: str, workload: str, pod_hash: str) -> str:
    """How many of ``metric``'s series the analysis' Prometheus holds of one version's pods (by its hash)."""
    kind, series, _detail, _figure = METRICS[engine][metric]
    selector = f'namespace="{namespace}",workload="{workload}",rollouts_pod_template_hash="{pod_hash}"'
    return f"count({_PROBED[kind].format(series=series)}{{{selector}}})"


def series_probe(name: str, namespace: str, labels: dict[str, str], analysis: list[dict[str, Any]], engine: str,
                 workload: str, server_address: str, stable_hash: str) -> dict[str, Any]:  # fmt: skip
    """A one-measurement AnalysisRun that asks the analysis' Prometheus, through Argo Rollouts as the
    canary's analysis will, whether each limit's series holds the stable version's pods. A query that
    returns nothing there (a scrape that misses the pods, labels the queries do not match) would pass every
    measurement of the canary too (nothing to judge), so a new version is refused before it starts."""
    metrics = [
        _probe_metric(index, item, engine, namespace, workload, server_address, stable_hash)
        for index, item in enumerate(analysis)
    ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": f"{name}-series-probe", "namespace": namespace, "labels": labels},
        "spec": {"metrics": metrics},
    }


def _probe_metric(index: int, item: dict[str, Any], engine: str, namespace: str, workload: str,
                  server_address: str, stable_hash: str) -> dict[str, Any]:  # fmt: skip
    query = series_query(engine, item["metric"], namespace, workload, stable_hash)
    return {
        "name": f"item-{index}",
        "count": 1,
        "failureLimit": 0,
        "consecutiveErrorLimit": 0,  # a Prometheus that cannot be asked is the answer: no retries
        "successCondition": "len(result) > 0",
        "provider": {"prometheus": {"address": server_address, "query": query}},
    }


def probe_problems(run: Any, analysis: list[dict[str, Any]], role: str) -> list[str]:
    """What the finished probe (the AnalysisRun above, as read back) says is wrong, naming each item of
    ``<role>_canary_analysis`` whose series is missing, or the Prometheus that could not be asked."""
    status = (run.get("status") or {}) if isinstance(run, dict) else {}
    phase = status.get("phase") or "not finished"
    if phase == "Successful":
        return []
    queries = {m["name"]: m["provider"]["prometheus"] for m in (run.get("spec") or {}).get("metrics") or []}
    found = []
    for result in status.get("metricResults") or []:
        index = int(str(result.get("name", "item--1")).rsplit("-", 1)[1])
        if not 0 <= index < len(analysis) or result.get("phase") == "Successful":
            continue
        where = f"{role}_canary_analysis[{index}] ({analysis[index].get('metric')})"
        asked = queries.get(result["name"], {})
        if result.get("phase") == "Failed":
            found.append(f"{where}: its series has no sample of the stable version's pods in the Prometheus at"
                         f" {asked.get('address')} ({asked.get('query')} returned nothing): the canary's would"
                         " read nothing and pass; check that it scrapes the pods with these labels")  # fmt: skip
        else:
            # The measurement's own error (the result's message only counts the errors).
            measured = [m.get("message") for m in result.get("measurements") or [] if m.get("message")]
            message = measured[-1] if measured else result.get("message") or ""
            found.append(f"{where}: the Prometheus at {asked.get('address')} ({role}_canary_prometheus_url) could"
                         f" not be asked: {result.get('phase')}: {message}")  # fmt: skip
    return found or [
        f"{role}_canary_analysis: the probe of its series ended {phase} (Argo Rollouts' controller runs it;"
        f" is it running?): {status.get('message') or ''}"
    ]


# The benchmark step's limits, each from the capacity file's figure of one replica at the level it was
# measured to sustain: the canary, given a share of that load, must do at least as well.
BENCH_LIMITS = {"ttft_p99": "ttft_p99_s", "tpot_p99": "tpot_p99_s"}
# The gate's verdict may take its window, the warm-up and the slowest request's drain (its timeout).
_BENCH_WARMUP_S, _BENCH_REQUEST_TIMEOUT_S = 5, 120


def bench_problems(image: Any, streams: Any, duration: Any, limits: Any, doc: Any, role: str) -> list[str]:
    """What makes a canary's benchmark step unusable, naming each ``<role>_canary_bench_*`` variable."""
    v = f"{role}_canary_bench"
    found = []
    if not isinstance(image, str) or not image.strip():
        found.append(f"{v}_image: none given; the step's Job runs the collection's benchmark gate from an image"
                     " that holds it (images/canary-bench/Containerfile)")  # fmt: skip
    try:
        if duration_seconds(str(duration)) < 10:
            found.append(f"{v}_duration: {duration!r}; at least 10s, so that the window holds whole requests")
    except ValueError:
        found.append(f"{v}_duration: {duration!r} is not a duration such as 30s")
    replica = capacity.parsed(doc)["replica"] if not capacity.problems(doc, "-") else {}
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 0:
        found.append(f"{v}_streams: {streams!r}, not a whole number of streams (0: from {role}_capacity_file)")
    elif streams == 0 and not _positive(replica.get("streams")):
        found.append(f"{v}_streams: 0 takes a replica's streams from {role}_capacity_file, which measured none")
    if not isinstance(limits, dict):
        return [*found, f"{v}_limits: a dict of {' and '.join(BENCH_LIMITS)}, not {limits!r}"]
    for key in sorted(set(limits) - set(BENCH_LIMITS)):
        found.append(f"{v}_limits.{key}: not a limit the step judges ({', '.join(BENCH_LIMITS)})")
    for key, figure in BENCH_LIMITS.items():
        limit = limits.get(key)
        if limit is None:
            if not _positive(replica.get(figure)):
                found.append(f"{v}_limits.{key}: none given, and {role}_capacity_file measured no {figure}")
            continue
        parsed = parse_limit(limit)
        if parsed is None or parsed[2] or parsed[1] == "%" or not parsed[0] > 0:
            found.append(f"{v}_limits.{key}: {limit!r} is not a latency above 0 such as 500ms or 1.5s")
    return found


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


def bench_plan(streams: int, limits: dict[str, Any], doc: Any, headroom: float, first_weight: int,
               replicas: int) -> dict[str, Any]:  # fmt: skip
    """The step's load and limits: ``streams`` per canary pod (0: the capacity file's replica streams times
    ``headroom``) times the canary's pods at the first step, and each limit (the user's, else the capacity
    file's figure); the workload (API, output tokens, prompt lengths) is the capacity file's, so that the
    canary is measured as the replica was."""
    parsed = capacity.parsed(doc) if not capacity.problems(doc, "-") else {"replica": {}, "workload": {}}
    per_pod = streams or max(1, round(parsed["replica"]["streams"] * headroom))
    canary_pods = max(1, -(-first_weight * replicas // 100))  # Argo Rollouts rounds the canary's pods up
    plan: dict[str, Any] = {"streams": per_pod * canary_pods}
    for key, figure in BENCH_LIMITS.items():
        limit = limits.get(key)
        if limit is None:
            plan[key] = float(parsed["replica"][figure])
        else:
            number, unit, _relative = parse_limit(limit)  # type: ignore[misc]
            plan[key] = number / 1000 if unit == "ms" else number
    workload = parsed.get("workload") or {}
    words = workload.get("prompt_words") or [96, 160]
    plan.update(
        api=workload.get("api") or "chat",
        max_tokens=int(workload.get("max_tokens") or 128),
        input_len=f"{words[0]}:{words[1]}",
        fixed_length="on" if workload.get("fixed_length") else "auto",
    )
    return plan


def bench_template(name: str, namespace: str, labels: dict[str, str], image: str, url: str, model: str,
                   duration: str, api_key_secret: str, streams: int, limits: dict[str, Any], doc: Any,
                   headroom: float, first_weight: int, replicas: int, node_selector: dict[str, str] | None = None,
                   tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    """The benchmark step's AnalysisTemplate: one Job (Argo Rollouts' job metric: it passes when the Job
    succeeds) that runs the gate against the canary's Service alone, at the load and limits of
    ``bench_plan`` (the arguments from ``streams`` on)."""
    plan = bench_plan(int(streams), limits, doc, float(headroom), int(first_weight), int(replicas))
    window_s = duration_seconds(str(duration))
    args = [
        "--url", url, "--model", model, "--streams", str(plan["streams"]), "--warmup", str(_BENCH_WARMUP_S),
        "--duration", str(window_s), "--api", plan["api"], "--max-tokens", str(plan["max_tokens"]),
        "--input-len", plan["input_len"], "--fixed-length", plan["fixed_length"],
        "--ttft-p99", f"{plan['ttft_p99']:.6g}", "--tpot-p99", f"{plan['tpot_p99']:.6g}",
    ]  # fmt: skip
    container: dict[str, Any] = {
        "name": "bench",
        "image": image,
        "command": ["python3", "-m", "gpufleet.lib.llm_bench.gate"],
        "args": args,
        # No CPU limit: a throttled client would measure itself (the gate calls that level client-bound).
        "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
            "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
    }  # fmt: skip
    if api_key_secret:
        container["args"] += ["--api-key-env", "VLLM_API_KEY"]
        secret = {"secretKeyRef": {"name": api_key_secret, "key": "VLLM_API_KEY"}}
        container["env"] = [{"name": "VLLM_API_KEY", "valueFrom": secret}]
    job = {
        "metadata": {"labels": {**labels, "app.kubernetes.io/component": "canary-bench"}},
        "spec": {
            "backoffLimit": 0,  # one measurement: a second try would judge a canary that failed once
            "activeDeadlineSeconds": int(_BENCH_WARMUP_S + window_s + _BENCH_REQUEST_TIMEOUT_S + 60),
            "template": {
                "metadata": {"labels": {**labels, "app.kubernetes.io/component": "canary-bench"}},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                         "nodeSelector": node_selector or {}, "tolerations": tolerations or [],
                         "containers": [container]},
            },
        },
    }  # fmt: skip
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"metrics": [{"name": "bench", "count": 1, "failureLimit": 0, "provider": {"job": job}}]},
    }
