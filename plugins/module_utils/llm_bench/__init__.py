# SPDX-License-Identifier: Apache-2.0
"""Benchmark an OpenAI-compatible LLM server (vLLM) or a KServe v2 endpoint (Triton).

Definitions (docs/benchmark.md compares them with vLLM bench serve, genai-perf, guidellm):
- TTFT: request sent -> first event whose choice carries non-empty text (a role-only or
  empty first chunk is not a token).
- E2E: request sent -> end of the stream ([DONE]) or of the response body.
- TPOT: (E2E - TTFT) / (N - 1), N = completion tokens from the server's usage report.
- ITL: gaps between content events, each divided by the tokens that event carried
  (N / content events when the server reports usage only at the end): one SSE event
  may carry several tokens.
- Queue time: scheduled send time -> actual send time (a client-side wait is never
  hidden inside the latencies, nor silently dropped).
- Throughput counts tokens and completions received inside the level's steady window,
  after a warm-up, divided by the window's length: ramp-up and drain do not dilute it.

Servers differ (their "dialect", which the result names): usage may come in the last chunk
with or without choices, or not at all (then content events are counted, and the result
says so); the stream may end with `data: [DONE]` or just end; a first event may carry only
the role. vLLM's `ignore_eos`/`min_tokens`, which fix the output length, are sent only where
a probe shows the server takes them (`fixed_length: auto`); elsewhere the output length is
what arrived, and the result says that it was not fixed.

A level is valid when its error rate is at most ``max_error_rate`` and the client kept up;
only valid levels can be the knee or the recommended level. A failing level stops early
(users back off after each error, and the level ends once half its requests failed), and the
ladder stops there: a broken server is not flooded.

The package, by concern: records (the configuration, requests, levels), stats, prompts, http (the
requests on the wire, SSE), level (one level's streams), verdicts (SLO, validity, knee, recommendation),
ladder (the levels in turn, the result). Its names are all here, as before the split.

The hot path uses aiohttp with an unlimited connector and one session per worker;
connections are opened during warm-up so TTFT never includes connection set-up.
"""

from __future__ import annotations

from .http import auth_headers, classify_event, request_body, send, server_message
from .ladder import BenchResult, probe_fixed_length, run_benchmark, server_cache_counters
from .level import _Failing, next_gap, run_level, run_level_async
from .prompts import load_dataset, make_prompts, max_tokens_for, prompt_for
from .records import ARRIVALS, MODES, PERCENTILES, BenchConfig, LevelResult, RequestRecord
from .stats import histogram, percentile, request_metrics, summarize
from .verdicts import (
    capacity_level,
    drop_cause,
    find_drops,
    find_knee,
    judge_level,
    meets_slo,
    next_search_level,
    operating_point,
    throughput,
    within_slo,
)

__all__ = [
    "ARRIVALS",
    "MODES",
    "PERCENTILES",
    "BenchConfig",
    "BenchResult",
    "LevelResult",
    "RequestRecord",
    "_Failing",
    "auth_headers",
    "capacity_level",
    "classify_event",
    "drop_cause",
    "find_drops",
    "find_knee",
    "histogram",
    "judge_level",
    "load_dataset",
    "make_prompts",
    "max_tokens_for",
    "meets_slo",
    "next_gap",
    "next_search_level",
    "operating_point",
    "percentile",
    "probe_fixed_length",
    "prompt_for",
    "request_body",
    "request_metrics",
    "run_benchmark",
    "run_level",
    "run_level_async",
    "send",
    "server_cache_counters",
    "server_message",
    "summarize",
    "throughput",
    "within_slo",
]
