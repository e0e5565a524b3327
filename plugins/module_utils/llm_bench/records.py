# SPDX-License-Identifier: Apache-2.0
"""The benchmark's records: its configuration, each request's record, each level's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PERCENTILES = (50, 90, 95, 99)
MODES = ("closed", "open")
ARRIVALS = ("poisson", "gamma", "constant")


@dataclass
class BenchConfig:
    base_url: str
    model: str = ""
    api: str = "completions"  # completions | chat | kserve_v2
    stream: bool = True
    levels: list[int] = field(default_factory=lambda: [1, 5, 30])  # concurrency, or req/s in open loop
    mode: str = "closed"  # closed (N concurrent users) | open (arrivals at a rate, whatever the server's pace)
    # Open loop: the gaps between arrivals (ARRIVALS), the gamma's burstiness (its shape: 1 is Poisson,
    # below 1 burstier, above 1 steadier, as vLLM's bench and AIPerf define it), and a cap on the
    # requests in flight (0: none; an arrival beyond it waits, and the wait counts as queue time).
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int = 0
    # Output lengths: max_tokens, or drawn per request from a normal of this deviation around it (seeded,
    # at least 1), as AIPerf's --output-tokens-stddev.
    max_tokens_stddev: float = 0.0
    repeats: int = 1  # runs per level, back to back: its figures their means, each with a 95 % interval
    # The SLO capacity search: instead of the ladder, the highest level (a concurrency, or a rate in open
    # loop) whose goodput share (requests meeting every slo_*) stays at or above ``goodput_share_min``, found
    # by doubling from 1 up to ``search_max`` and halving the gap until it is within ``search_precision``.
    search: bool = False
    goodput_share_min: float = 0.99
    search_max: float = 512.0
    search_precision: float = 0.10
    auto_ladder_max: int = 0  # >0: double concurrency from 1 up to this, stopping after the knee
    warmup_s: float = 3.0
    duration_s: float = 20.0
    max_tokens: int = 128
    fixed_length: str = "auto"  # auto (probe the server) | on | off: vLLM's ignore_eos + min_tokens
    prompt: str = "Write a short story about a GPU that learns to dream."
    # Random prompts, unique per request (so no prefix cache flatters TTFT), with a length in
    # words drawn uniformly from this range; seeded. None: the fixed prompt (or the dataset).
    prompt_words: tuple[int, int] | None = None
    dataset: list[str] | None = None
    seed: int = 0
    request_timeout_s: float = 300.0
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    slo_e2e_s: float | None = None
    knee_gain: float = 0.10
    p99_slo_s: float | None = None  # for the recommended operating point (on E2E P99)
    workers: int = 1
    kserve_inputs: list[dict[str, Any]] | None = None  # the "inputs" of a v2 inference request
    client_lag_limit_s: float = 0.010
    client_cpu_limit: float = 0.90
    max_error_rate: float = 0.01  # above it a level is invalid: never the knee, never recommended
    abort_error_rate: float = 0.5  # a level stops early once this share of its requests failed
    recommend_within: float = 0.90  # the lowest valid level with this share of the best throughput
    # Sent as "Authorization: Bearer <key>" (vLLM's --api-key / VLLM_API_KEY); never in the result.
    api_key: str | None = field(default=None, repr=False)
    window_e2e_multiple: float = 3.0  # a window is lengthened to this many E2E P50s of the level before


@dataclass
class RequestRecord:
    scheduled: float
    start: float
    end: float = 0.0
    first_token: float | None = None
    tokens: int = 0
    content_events: int = 0
    event_times: list[float] = field(default_factory=list)
    receive_lags: list[float] = field(default_factory=list)
    error: str | None = None
    error_detail: str | None = None  # the server's own words (an HTTP error body, an exception)
    prompt_tokens: int = 0
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, where reported
    usage_seen: bool = False
    usage_with_choices: bool = False
    done_marker: bool = False  # the stream ended with data: [DONE]
    finished: bool = False  # a finish_reason, usage or [DONE] arrived: the stream was not cut short
    role_only_first: bool = False


@dataclass
class LevelResult:
    level: int | float
    mode: str
    window_s: float
    requests: int
    completed: int
    errors: dict[str, int]
    output_tokens: int
    requests_per_s: float
    output_tokens_per_s: float
    ttft: dict[str, float]
    tpot: dict[str, float]
    itl: dict[str, float]
    e2e: dict[str, float]
    queue: dict[str, float]
    receive_lag: dict[str, float]
    goodput_requests_per_s: float | None
    client_cpu: float
    loop_lag_p99_s: float
    client_bound: bool
    client_bound_reasons: list[str]
    window_start: float = 0.0
    window_end: float = 0.0
    ttft_histogram: list[tuple[float, int]] = field(default_factory=list)  # (bucket upper bound s, count)
    gpu: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # the level's whole run: warm-up, window and drain
    error_rate: float = 0.0
    error_messages: dict[str, list[str]] = field(default_factory=dict)  # kind -> first distinct messages
    valid: bool = True
    invalid_reasons: list[str] = field(default_factory=list)
    stopped_early: str | None = None
    input_tokens: dict[str, float] = field(default_factory=dict)
    output_tokens_per_request: dict[str, float] = field(default_factory=dict)
    prefix_cache_hit_rate: float | None = None
    prefix_cache_source: str | None = None
    dialect: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)  # the server's own figures (vLLM's queue, KV cache)
    repeats: int = 1  # runs of the level; its figures their means where more than one
    goodput_share: float | None = None  # of the requests sent inside the window, those that met every SLO
    intervals: dict[str, dict[str, Any]] = field(default_factory=dict)  # figure -> mean, 95 % low and high, runs
