# SPDX-License-Identifier: Apache-2.0
"""The verdicts: does a level meet the SLO, is it valid, where is the knee and the recommended level."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from .records import BenchConfig, LevelResult, RequestRecord
from .stats import histogram, percentile, request_metrics, summarize


def meets_slo(m: dict[str, Any], cfg: BenchConfig) -> bool:
    checks = ((cfg.slo_ttft_s, m["ttft"]), (cfg.slo_tpot_s, m["tpot"]), (cfg.slo_e2e_s, m["e2e"]))
    return all(limit is None or (not math.isnan(v) and v <= limit) for limit, v in checks)


def throughput(level: LevelResult) -> tuple[float, float, float]:
    """A level's output tokens/s: (mean, low, high), its 95 % interval where it was repeated, else one run's."""
    ci = level.intervals.get("output_tokens_per_s")
    if ci and ci["runs"]:
        return ci["mean"], ci["low"], ci["high"]
    return (level.output_tokens_per_s,) * 3


def find_drops(levels: Sequence[LevelResult], min_gain: float) -> dict[int, int]:
    """The valid levels whose throughput fell below a lower valid level's, each index with the index of the
    best level below it: below its 95 % interval where both were repeated, else by more than ``min_gain``
    of it. More streams that buy less
    throughput are not a knee but a fault of the load or the server (on the H200, 256 closed-loop
    streams of one fixed length gave a quarter less than 128: the streams started and ended in cohorts,
    each cohort's prefill stalling the decode)."""
    valid = [i for i, lv in enumerate(levels) if lv.valid and lv.output_tokens_per_s > 0]
    drops = {}
    for n, i in enumerate(valid[1:], start=1):
        best = max(valid[:n], key=lambda j: levels[j].output_tokens_per_s)
        mean, _, _ = throughput(levels[i])
        best_mean, best_low, _ = throughput(levels[best])
        repeated = levels[i].repeats > 1 and levels[best].repeats > 1
        if mean < (best_low if repeated else (1 - min_gain) * best_mean):
            drops[i] = best
    return drops


def drop_cause(level: LevelResult, fixed_length: bool) -> str:
    """The likely cause of a level's drop, from the server's and the GPU's own figures where read."""
    server, gpu = level.server or {}, level.gpu or {}
    causes = []
    if (server.get("preemptions") or 0) > 0:
        causes.append(f"the engine preempted {server['preemptions']:.0f} requests (its KV cache was full)")
    if level.mode == "closed" and fixed_length:
        causes.append(
            "closed loop with one fixed output length: the streams start and end together, so each cohort's"
            " prefill stalls the decode and the GPU idles between cohorts (open-loop arrivals have no cohorts:"
            " --rates)"
        )
    if isinstance(gpu.get("util_mean_pct"), int | float):
        causes.append(f"GPU utilisation {gpu['util_mean_pct']:.0f} % over the window")
    return "; ".join(causes) or "no server or GPU figures name a cause"


def find_knee(levels: Sequence[LevelResult], min_gain: float) -> int | None:
    """Index of the first valid level where more streams buy little: its throughput gain over
    the previous valid level is below ``min_gain`` while E2E P99 grows by more than that gain.
    None when throughput still scales. Invalid levels (errors, client-bound) are never the knee, nor is
    a drop (``find_drops``): where throughput falls, the knee is the last level before it."""
    valid = [i for i, lv in enumerate(levels) if lv.valid and lv.output_tokens_per_s > 0]
    drops = find_drops(levels, min_gain)
    for prev_i, i in itertools.pairwise(valid):
        prev, cur = levels[prev_i], levels[i]
        if i in drops:
            return prev_i
        # Repeated levels: the gain at the best their intervals allow, so the knee cannot flip within them.
        gain = throughput(cur)[2] / throughput(prev)[1] - 1
        latency = cur.e2e["p99"] / prev.e2e["p99"] - 1 if prev.e2e["p99"] and prev.e2e["p99"] > 0 else math.inf
        if gain < min_gain and latency > gain:
            return i
    return None


def operating_point(levels: Sequence[LevelResult], p99_slo_s: float | None, within: float = 0.90) -> int | None:
    """The recommended level: among valid levels meeting the E2E P99 SLO, the lowest concurrency
    that reaches ``within`` of the best throughput (of its interval's low end, where repeated).
    Weighing latency this way, two runs whose top levels differ by a few percent in tok/s recommend
    the same level."""
    ok = [
        i for i, lv in enumerate(levels)
        if lv.valid and lv.output_tokens_per_s > 0 and (p99_slo_s is None or lv.e2e["p99"] <= p99_slo_s)
    ]  # fmt: skip
    if not ok:
        return None
    # Repeated levels: a level qualifies where its interval reaches ``within`` of the best level's low end,
    # so a level the runs cannot tell from the best's share is not passed over by one run's noise.
    best = max(ok, key=lambda i: levels[i].output_tokens_per_s)
    target = within * throughput(levels[best])[1]
    return min((i for i in ok if throughput(levels[i])[2] >= target), key=lambda i: levels[i].level)


def within_slo(level: LevelResult, cfg: BenchConfig) -> bool:
    """A level the SLO capacity search passes: valid, and its goodput share at least ``goodput_share_min``
    (for repeats, the low end of its 95 % interval: every run's share is likely to hold it)."""
    ci = level.intervals.get("goodput_share")
    share = ci["low"] if ci and len(ci["runs"]) > 1 else level.goodput_share
    return level.valid and share is not None and share >= cfg.goodput_share_min


def next_search_level(cfg: BenchConfig, levels: Sequence[LevelResult]) -> float | None:
    """The SLO capacity search's next level, or None once it is found: doubling from 1 while levels pass
    (up to ``search_max``), halving below 1 while they fail (open loop), then bisecting between the highest
    pass and the lowest fail until they are within ``search_precision`` of each other (or whole streams
    apart, in closed loop)."""
    if not levels:
        return 1.0
    passed = [float(lv.level) for lv in levels if within_slo(lv, cfg)]
    failed = [float(lv.level) for lv in levels if not within_slo(lv, cfg)]
    closed = cfg.mode == "closed"
    if not failed:
        top = max(passed)
        return min(top * 2, cfg.search_max) if top < cfg.search_max else None
    low_fail = min(failed)
    below = [x for x in passed if x < low_fail]
    if not below:
        # Even the lowest level missed: an open loop tries lower rates, down to 1/64 req/s; one stream is the floor.
        return None if closed or low_fail <= 1 / 64 else low_fail / 2
    high_pass = max(below)
    if low_fail / high_pass - 1 <= cfg.search_precision:
        return None
    middle = float((int(high_pass) + int(low_fail)) // 2) if closed else (high_pass + low_fail) / 2
    return None if middle <= high_pass else middle


def capacity_level(cfg: BenchConfig, levels: Sequence[LevelResult]) -> int | None:
    """The index of the highest level the search passed below every level it failed; None where none passed."""
    failed = [float(lv.level) for lv in levels if not within_slo(lv, cfg)]
    ceiling = min(failed, default=float("inf"))
    passing = [i for i, lv in enumerate(levels) if within_slo(lv, cfg) and float(lv.level) < ceiling]
    return max(passing, key=lambda i: float(levels[i].level), default=None)


def judge_level(
    cfg: BenchConfig,
    level: int | float,
    records: list[RequestRecord],
    loop_lag: list[float],
    cpu_per_process: float,
    window_start: float,
    window_end: float,
) -> LevelResult:
    """Statistics of the requests sent inside the steady window (pure; unit-tested).
    Errors count every request of the level, warm-up included: an error is one whenever it happens."""
    in_window = [r for r in records if window_start <= r.start < window_end]
    good = [r for r in in_window if r.error is None]
    errors: dict[str, int] = {}
    messages: dict[str, list[str]] = {}
    for r in records:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
            seen = messages.setdefault(r.error, [])
            if r.error_detail and r.error_detail not in seen and len(seen) < 3:
                seen.append(r.error_detail)
    metrics = [request_metrics(r) for r in good]
    window = window_end - window_start
    # Tokens received inside the window, whichever request they belong to.
    tokens_in_window = 0.0
    for r in records:
        if r.error or not r.event_times:
            if not r.error and window_start <= r.end < window_end:
                tokens_in_window += r.tokens
            continue
        per_event = r.tokens / r.content_events
        tokens_in_window += per_event * sum(1 for t in r.event_times if window_start <= t < window_end)
    completed_in_window = sum(1 for r in records if r.error is None and window_start <= r.end < window_end)
    lags = [x for r in good for x in r.receive_lags]
    reasons = []
    lag_p99 = percentile(loop_lag, 99) if loop_lag else 0.0
    if lag_p99 > cfg.client_lag_limit_s:
        reasons.append(f"event-loop lag p99 {lag_p99 * 1000:.1f} ms > {cfg.client_lag_limit_s * 1000:.0f} ms")
    if cpu_per_process > cfg.client_cpu_limit:
        reasons.append(f"client CPU {cpu_per_process:.0%} of a core per process")
    if lags and percentile(lags, 99) > cfg.client_lag_limit_s:
        reasons.append(f"receive lag p99 {percentile(lags, 99) * 1000:.1f} ms behind the server's send stamps")
    slo_set = any(x is not None for x in (cfg.slo_ttft_s, cfg.slo_tpot_s, cfg.slo_e2e_s))
    error_rate = sum(errors.values()) / len(records) if records else 0.0
    invalid = []
    if error_rate > cfg.max_error_rate:
        invalid.append(f"error rate {error_rate:.1%} > {cfg.max_error_rate:.1%}")
    if reasons:
        invalid.append("client-bound")
    if records and not good:
        invalid.append("no request sent inside the window succeeded")
    e2e = [m["e2e"] for m in metrics]
    met = sum(1 for m in metrics if meets_slo(m, cfg))
    warnings = []
    if e2e and percentile(e2e, 50) > window:
        warnings.append(
            f"window {window:.0f}s is shorter than this level's E2E P50 {percentile(e2e, 50):.1f}s:"
            " few requests start and end inside it; lengthen the duration"
        )
    cached = [r for r in good if r.cached_tokens is not None and r.prompt_tokens]
    streamed = [r for r in good if r.content_events]
    dialect = {
        "done_marker": all(r.done_marker for r in streamed),
        "usage": ("in a chunk with choices" if any(r.usage_with_choices for r in streamed) else
                  "in a last chunk without choices" if all(r.usage_seen for r in streamed) else
                  "missing: tokens counted as content events"),
        "tokens_per_event": sum(r.tokens for r in streamed) / sum(r.content_events for r in streamed),
        "role_only_first_event": any(r.role_only_first for r in streamed),
    } if streamed else {}  # fmt: skip
    return LevelResult(
        level=level,
        mode=cfg.mode,
        window_s=window,
        requests=len(in_window),
        completed=len(good),
        errors=errors,
        output_tokens=sum(r.tokens for r in good),
        requests_per_s=completed_in_window / window,
        output_tokens_per_s=tokens_in_window / window,
        ttft=summarize([m["ttft"] for m in metrics if not math.isnan(m["ttft"])]),
        tpot=summarize([m["tpot"] for m in metrics if not math.isnan(m["tpot"])]),
        itl=summarize([x for m in metrics for x in m["itl"]]),
        e2e=summarize(e2e),
        queue=summarize([r.start - r.scheduled for r in in_window]),
        receive_lag=summarize(lags),
        goodput_requests_per_s=(met / window) if slo_set else None,
        goodput_share=(met / len(in_window)) if slo_set and in_window else None,  # a failed request met none
        client_cpu=cpu_per_process,
        loop_lag_p99_s=lag_p99,
        client_bound=bool(reasons),
        client_bound_reasons=reasons,
        window_start=window_start,
        window_end=window_end,
        ttft_histogram=histogram([m["ttft"] for m in metrics if not math.isnan(m["ttft"])]),
        warnings=warnings,
        error_rate=error_rate,
        error_messages=messages,
        valid=not invalid,
        invalid_reasons=invalid,
        input_tokens=summarize([float(r.prompt_tokens) for r in good if r.prompt_tokens]),
        output_tokens_per_request=summarize([float(r.tokens) for r in good]),
        prefix_cache_hit_rate=(
            sum(r.cached_tokens or 0 for r in cached) / sum(r.prompt_tokens for r in cached) if cached else None
        ),
        prefix_cache_source="usage.prompt_tokens_details.cached_tokens" if cached else None,
        dialect=dialect,
    )
