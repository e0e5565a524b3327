# SPDX-License-Identifier: Apache-2.0
"""Check through Prometheus's own HTTP API that the metrics a platform promises arrive.

Stdlib only: the same code runs inside the Ansible module and the gpufleet CLI.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any

try:  # inside Ansible (module_utils) and as the gpufleet.lib package
    from ansible_collections.gpufleet.platform.plugins.module_utils import dcgm
except ImportError:  # pragma: no cover - CLI without the collection on the path
    from gpufleet.lib import dcgm  # type: ignore[no-redef]


@dataclass(frozen=True)
class Expectation:
    """A metric that must (or may) be present, with the labels each series needs.

    Each entry of ``labels`` is a tuple of accepted names: ("Hostname", "hostname")
    is satisfied by either spelling.
    """

    metric: str
    labels: tuple[tuple[str, ...], ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    required: bool = True


@dataclass
class MetricResult:
    metric: str
    status: str  # ok | missing | unsupported | missing_labels | out_of_range | stale
    series: int = 0
    detail: str = ""
    instances: list[str] = field(default_factory=list)


@dataclass
class TargetResult:
    scrape_url: str
    instance: str
    health: str
    last_error: str
    job: str


@dataclass
class Report:
    ok: bool
    job: str
    targets: list[TargetResult]
    metrics: list[MetricResult]
    failures: list[str]
    waited_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def summary(self) -> str:
        ok = [m.metric for m in self.metrics if m.status == "ok"]
        unsupported = [m.metric for m in self.metrics if m.status == "unsupported"]
        text = f"{len(ok)} metric(s) ok from {len(self.targets)} target(s) of job {self.job}"
        return text + (f"; not supported by the GPU: {', '.join(unsupported)}" if unsupported else "")


class PrometheusError(RuntimeError):
    pass


@dataclass(frozen=True)
class Server:
    """A Prometheus HTTP API, with the basic-auth user and CA a receiver behind TLS needs. Functions
    here take one of these or a plain URL; it prints as its URL (never the password)."""

    url: str
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""

    def __str__(self) -> str:
        return self.url


def _server(base_url: str | Server) -> Server:
    return base_url if isinstance(base_url, Server) else Server(base_url)


_RANGES: dict[str, tuple[float, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": (0, 100),
    "DCGM_FI_DEV_MEM_COPY_UTIL": (0, 100),
    "DCGM_FI_DEV_ENC_UTIL": (0, 100),
    "DCGM_FI_DEV_DEC_UTIL": (0, 100),
    "DCGM_FI_DEV_GPU_TEMP": (0, 130),
    "DCGM_FI_DEV_MEMORY_TEMP": (0, 130),
    "DCGM_FI_DEV_POWER_USAGE": (0, 2000),
    "DCGM_FI_DEV_FB_USED": (0, float("inf")),
    "DCGM_FI_DEV_FB_FREE": (0, float("inf")),
}


def dcgm_profile(include_optional: bool = True, profiling: bool = False) -> list[Expectation]:
    """Expectations for dcgm-exporter's default counters.

    Required fields must be present with real values; optional ones (not every
    GPU model reports them) are checked only when present.
    """
    labels = (*((name,) for name in dcgm.IDENTITY_LABELS), dcgm.HOST_LABELS)
    out = []
    for counter in dcgm.DEFAULT_COUNTERS:
        if counter.kind == "label" or (counter.profiling and not profiling):
            continue
        if not counter.required and not include_optional:
            continue
        low, high = _RANGES.get(counter.name, (0, float("inf")))
        out.append(Expectation(counter.name, labels, low, high, counter.required))
    return out


# The series the collection's vLLM dashboard and alert rules read (vLLM V1, >= 0.12), each with
# its model_name label. Histograms are checked by their _bucket series, which the panels query.
VLLM_SERIES = (
    ("vllm:num_requests_running", 0, float("inf")),
    ("vllm:num_requests_waiting", 0, float("inf")),
    ("vllm:kv_cache_usage_perc", 0, 1),
    ("vllm:prompt_tokens_total", 0, float("inf")),
    ("vllm:generation_tokens_total", 0, float("inf")),
    ("vllm:request_success_total", 0, float("inf")),
    ("vllm:num_preemptions_total", 0, float("inf")),
    ("vllm:time_to_first_token_seconds_bucket", 0, float("inf")),
    ("vllm:inter_token_latency_seconds_bucket", 0, float("inf")),
    ("vllm:e2e_request_latency_seconds_bucket", 0, float("inf")),
    ("vllm:request_queue_time_seconds_bucket", 0, float("inf")),
)


def vllm_profile(**_: object) -> list[Expectation]:
    """Expectations for vLLM's OpenAI server: what the dashboard and the alerts use."""
    return [Expectation(name, (("model_name",),), low, high) for name, low, high in VLLM_SERIES]


PROFILES = {"dcgm": dcgm_profile, "vllm": vllm_profile}


def _get(base_url: str | Server, path: str, params: dict[str, str] | None = None, timeout: float = 10) -> Any:
    server = _server(base_url)
    query_string = "?" + urllib.parse.urlencode(params) if params else ""
    request = urllib.request.Request(server.url.rstrip("/") + path + query_string)
    if server.username:
        token = base64.b64encode(f"{server.username}:{server.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=server.ca_file or None)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            payload = json.load(response)
    except urllib.error.HTTPError as exc:
        raise PrometheusError(f"Prometheus at {server} answered HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise PrometheusError(f"cannot reach Prometheus at {server}: {exc.reason}") from exc
    if payload.get("status") != "success":
        raise PrometheusError(f"Prometheus {path} answered {payload.get('errorType')}: {payload.get('error')}")
    return payload["data"]


def fetch_targets(base_url: str | Server, job: str) -> list[TargetResult]:
    data = _get(base_url, "/api/v1/targets", {"state": "active"})
    return [
        TargetResult(t["scrapeUrl"], t["labels"].get("instance", ""), t["health"], t.get("lastError", ""), job)
        for t in data["activeTargets"]
        if t.get("scrapePool") == job or t["labels"].get("job") == job
    ]


def up_targets(up: list[dict[str, Any]], job: str, now: float, max_age_s: float) -> list[TargetResult]:
    """Targets as the `up` series a remote-writing agent sends describe them (the receiver scrapes
    nothing itself, so it has no targets of its own), each with its newest sample's time
    (newest_samples). An `up` with no recent sample means the agent or its link went quiet."""
    results = []
    for series in up:
        stamp, value = float(series["value"][0]), series["value"][1]
        instance = series["metric"].get("instance", "")
        if now - stamp > max_age_s:
            health = "unknown"
            error = f"no sample for {now - stamp:.0f}s: the node's agent or its link to the receiver is down"
        elif value == "1":
            health, error = "up", ""
        else:
            health, error = "down", "the node's agent cannot scrape its exporter (up == 0)"
        results.append(TargetResult("remote write from " + instance, instance, health, error, job))
    return results


def query(base_url: str | Server, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    """An instant query's result vector (at a given Unix time, or now)."""
    params = {"query": promql} | ({"time": f"{at:.3f}"} if at is not None else {})
    result: list[dict[str, Any]] = _get(base_url, "/api/v1/query", params)["result"]
    return result


def _series_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def newest_samples(base_url: str | Server, selector: str) -> list[dict[str, Any]]:
    """Each series of an instant query with its newest sample's own time instead of the evaluation
    time (from timestamp()), which is what freshness is about: [{"metric", "value": [time, value]}]."""
    stamps = {_series_key(s["metric"]): s["value"][1] for s in query(base_url, f"timestamp({selector})")}
    return [
        {"metric": s["metric"], "value": [stamps.get(_series_key(s["metric"]), s["value"][0]), s["value"][1]]}
        for s in query(base_url, selector)
    ]


def _selector(metric: str, job: str, instances: list[str]) -> str:
    matchers = [f'job="{job}"']
    if instances:
        matchers.append('instance=~"' + "|".join(instances) + '"')
    return f"{metric}{{{','.join(matchers)}}}"


def check_metric(
    exp: Expectation, series: list[dict[str, Any]], now: float, max_age_s: float, instances: list[str]
) -> MetricResult:
    """Judge one metric from the instant-query result for it (pure; unit-tested)."""
    seen = sorted({s["metric"].get("instance", "") for s in series})
    result = MetricResult(exp.metric, "ok", len(series), instances=seen)
    if not series:
        result.status = "missing"
        return result
    lacking = [instance for instance in instances if instance not in seen]
    if lacking:
        result.status = "missing"
        result.detail = "no series for instance " + ", ".join(lacking)
        return result
    for s in series:
        labels = s["metric"]
        absent = [alts for alts in exp.labels if not any(labels.get(name) for name in alts)]
        if absent:
            names = ["/".join(alts) for alts in absent]
            result.status = "missing_labels"
            result.detail = f"series {labels.get('instance', '?')} lacks label(s) {', '.join(names)}"
            return result
    values = [(float(s["value"][1]), float(s["value"][0])) for s in series]
    real = [(v, t) for v, t in values if not dcgm.is_blank(v)]
    if not real:
        result.status = "unsupported"
        result.detail = "every series carries DCGM's blank sentinel (field not supported by this GPU)"
        return result
    oldest = min(t for _, t in real)
    if now - oldest > max_age_s:
        result.status = "stale"
        result.detail = f"newest sample is {now - oldest:.0f}s old (limit {max_age_s:.0f}s)"
        return result
    low = exp.minimum if exp.minimum is not None else float("-inf")
    high = exp.maximum if exp.maximum is not None else float("inf")
    outside = [v for v, _ in real if not low <= v <= high]
    if outside:
        result.status = "out_of_range"
        result.detail = f"value {outside[0]:g} outside [{low:g}, {high:g}]"
    return result


def _judge_once(
    base_url: str | Server,
    job: str,
    expectations: list[Expectation],
    instances: list[str],
    max_age_s: float,
    targets_from: str = "scrape",
) -> tuple[list[TargetResult], list[MetricResult], list[str]]:
    failures: list[str] = []
    if targets_from == "up":
        targets = up_targets(newest_samples(base_url, f'up{{job="{job}"}}'), job, time.time(), max_age_s)
        if not targets:
            failures.append(f"no up series of job {job!r} at the receiver: no agent sends this job's samples")
    else:
        targets = fetch_targets(base_url, job)
        if not targets:
            failures.append(
                f"no target in job {job!r}: the scrape configuration does not produce it (check its selector)"
            )
    for target in targets:
        if target.health != "up":
            failures.append(f"target {target.instance} ({target.scrape_url}) is {target.health}: {target.last_error}")
    missing_instances = [i for i in instances if i not in {t.instance for t in targets}]
    if targets and missing_instances:
        failures.append(f"no target with instance {', '.join(missing_instances)} in job {job!r}")
    results = []
    for exp in expectations:
        selector = _selector(exp.metric, job, instances)
        series = newest_samples(base_url, selector)
        result = check_metric(exp, series, time.time(), max_age_s, instances)
        results.append(result)
        tolerated = not exp.required and result.status in ("missing", "unsupported")
        if result.status != "ok" and not tolerated:
            failures.append(f"{exp.metric}: {result.status}{' - ' + result.detail if result.detail else ''}")
    return targets, results, failures


def verify(
    base_url: str | Server,
    job: str,
    expectations: list[Expectation],
    instances: list[str] | None = None,
    max_age_s: float = 120,
    timeout_s: float = 60,
    poll_s: float = 2,
    targets_from: str = "scrape",
) -> Report:
    """Poll until every expectation holds or ``timeout_s`` passes; report the last judgement.
    ``targets_from`` is ``scrape`` (the server's own targets) or ``up`` (the `up` series remote-written
    by agents, for a receiver)."""
    started = time.monotonic()
    wanted = list(instances or [])
    while True:
        try:
            targets, results, failures = _judge_once(base_url, job, expectations, wanted, max_age_s, targets_from)
        except PrometheusError as exc:
            targets, results, failures = [], [], [str(exc)]
        waited = time.monotonic() - started
        if not failures or waited >= timeout_s:
            return Report(not failures, job, targets, results, failures, round(waited, 1))
        time.sleep(poll_s)
