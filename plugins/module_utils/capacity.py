# SPDX-License-Identifier: Apache-2.0
"""One replica's measured capacity: what `gpufleet bench` writes (capacity.json beside benchmark.json)
and what the serving roles take their shutdown and scaling defaults from.

The file names what it was measured on (the model, the engine and its version, the GPU): figures of
another model or engine say nothing of this one, and the roles refuse them. The replica's figures are
those of the recommended level (the highest valid level within reach of the best throughput, or the
highest that met the E2E P99 SLO), with the knee beside it.
"""

from __future__ import annotations

import datetime
import json
import math
import time
from typing import Any

KIND = "gpufleet-capacity"
VERSION = 1
# The replica's figures a role may read; each a number above 0 where the bench measured it. A KServe v2
# inference (Triton's) answers whole, one "token": it has no time per output token.
REPLICA_FIGURES = ("streams", "output_tokens_per_s", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s")
UNTOKENIZED_APIS = ("kserve_v2",)


def from_benchmark(
    result: dict[str, Any], engine: dict[str, str], gpu: str | None, cold_start_s: float | None = None
) -> dict[str, Any] | None:
    """The capacity file of a benchmark result (BenchResult.as_dict()); None when no level was recommended.
    ``cold_start_s``: a new replica's time from pod creation to Ready (cold_start_seconds), where read."""
    config = result["config"]
    searched = bool(config.get("search"))
    index = result.get("capacity_index" if searched else "operating_point_index")
    if index is None:
        return None
    level = result["levels"][index]
    server = level.get("server") or {}
    knee = result.get("knee_index")
    # An open loop's level is a rate: the streams it held are its rate times its mean E2E (Little's law).
    streams = level["level"]
    if config.get("mode") == "open":
        streams = max(1, math.ceil(level["requests_per_s"] * (level["e2e"].get("mean") or 0)))
    slo: dict[str, Any] = {"e2e_p99_s": config.get("p99_slo_s") or (config.get("slo_e2e_s") if searched else None)}
    if searched:
        slo.update(
            ttft_s=config.get("slo_ttft_s"), tpot_s=config.get("slo_tpot_s"), e2e_s=config.get("slo_e2e_s"),
            goodput_share=config.get("goodput_share_min"), measured_share=level.get("goodput_share"),
        )  # fmt: skip
    return {
        "kind": KIND,
        "version": VERSION,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(result.get("finished") or time.time())),
        "model": config["model"],
        "engine": engine,
        "gpu": gpu,
        "workload": {
            "api": config["api"],
            "max_tokens": config["max_tokens"],
            "prompt_words": config.get("prompt_words"),
            "fixed_length": bool((result.get("fixed_length") or {}).get("used")),
        },
        "slo": slo,
        # How the figures were found: the ladder's recommended level, or the SLO capacity search's answer.
        "found_by": ("capacity search, " if searched else "ladder, ") + f"{config.get('mode', 'closed')} loop",
        "replica": {
            "streams": streams,
            "requests_per_s": level["requests_per_s"],
            "output_tokens_per_s": level["output_tokens_per_s"],
            "ttft_p99_s": level["ttft"]["p99"],
            "tpot_p99_s": level["tpot"]["p99"],
            "e2e_p99_s": level["e2e"]["p99"],
            # The engine's own view, where the bench read it (vLLM's series through Prometheus).
            "waiting_max": server.get("waiting_max"),
            "kv_cache_usage_max": server.get("kv_cache_usage_max"),
            # Where every request fell in the histogram's lowest bucket, its bound: the P99 is at most that.
            "queue_time_p99_s": (
                server.get("queue_time_p99_s")
                if server.get("queue_time_p99_s") is not None
                else server.get("queue_time_p99_at_most_s")
            ),
        },
        "knee_streams": result["levels"][knee]["level"] if knee is not None else None,
        "cold_start_s": cold_start_s,
    }


def iso_seconds(stamp: str) -> float:
    """An RFC 3339 time as the API server writes it (2026-12-07T10:00:00Z) in seconds since the epoch."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def cold_start_seconds(pods: list[dict[str, Any]]) -> float | None:
    """A replica's cold start, from the serving pods that run (as the API serves them): the longest
    time from a pod's creation to its Ready condition (image pull, model load, the readiness probe's
    first pass). The slowest, as a scale-out waits for it. None where no pod is Ready."""
    found = []
    for pod in pods:
        created = (pod.get("metadata") or {}).get("creationTimestamp")
        ready: dict[str, Any] = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
        )  # fmt: skip
        if created and ready.get("status") == "True" and ready.get("lastTransitionTime"):
            found.append(iso_seconds(ready["lastTransitionTime"]) - iso_seconds(created))
    return round(max(found), 1) if found else None


def parsed(doc: Any) -> Any:
    """The file's text parsed, or the document as it came; None where the text is not JSON."""
    if isinstance(doc, str | bytes):
        try:
            return json.loads(doc)
        except ValueError:
            return None
    return doc


def problems(doc: Any, variable: str, model: str = "", engine: str = "") -> list[str]:
    """What makes ``doc`` (the file's text, or parsed) unusable for a role serving ``model`` with
    ``engine``; each problem names ``variable``."""
    doc = parsed(doc)
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        return [f"{variable}: not a readable capacity file of `gpufleet bench` (JSON of kind {KIND!r})"]
    if doc.get("version") != VERSION:
        return [f"{variable}: capacity file version {doc.get('version')!r}; this collection reads version {VERSION}"]
    found = []
    if model and doc.get("model") != model:
        found.append(
            f"{variable}: measured on model {doc.get('model')!r}, not {model!r}: another model's capacity says nothing "
            "of this one (run `gpufleet bench` against this model)"
        )
    measured_engine = (doc.get("engine") or {}).get("name")
    if engine and measured_engine != engine:
        found.append(f"{variable}: measured on engine {measured_engine!r}, not {engine!r}")
    replica = doc.get("replica") or {}
    untokenized = (doc.get("workload") or {}).get("api") in UNTOKENIZED_APIS
    for name in REPLICA_FIGURES:
        if untokenized and name == "tpot_p99_s":
            continue
        value = replica.get(name)
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0 or math.isinf(value):
            found.append(f"{variable}: replica.{name} is {value!r}, not a measured figure above 0")
    return found


def shutdown_seconds(doc: Any, headroom: float) -> int:
    """The engine's drain for in-flight requests: the measured E2E P99 at the recommended level, times
    the headroom, in whole seconds (vLLM's --shutdown-timeout and Triton's --exit-timeout-secs are
    integers), at least 1 (vLLM takes 0 as "abort"). 0 for a file ``problems`` refuses: the role's
    preflight names why, before anything changes."""
    if problems(doc, "-"):
        return 0
    return max(1, math.ceil(float(parsed(doc)["replica"]["e2e_p99_s"]) * float(headroom)))
