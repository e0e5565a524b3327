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

The hot path uses aiohttp with an unlimited connector and one session per worker;
connections are opened during warm-up so TTFT never includes connection set-up.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

PERCENTILES = (50, 90, 95, 99)


@dataclass
class BenchConfig:
    base_url: str
    model: str = ""
    api: str = "completions"  # completions | chat | kserve_v2
    stream: bool = True
    levels: list[int] = field(default_factory=lambda: [1, 5, 30])  # concurrency, or req/s in open loop
    mode: str = "closed"  # closed (N concurrent users) | open (Poisson arrivals at a rate)
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


# --- statistics (pure) -------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default), NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, float]:
    out = {f"p{p}": percentile(values, p) for p in PERCENTILES}
    out["mean"] = sum(values) / len(values) if values else math.nan
    out["count"] = float(len(values))
    return out


def request_metrics(r: RequestRecord) -> dict[str, Any]:
    """TTFT, TPOT, ITLs and E2E of one successful request."""
    e2e = r.end - r.start
    ttft = (r.first_token - r.start) if r.first_token is not None else math.nan
    tpot = (e2e - ttft) / (r.tokens - 1) if r.tokens > 1 and r.first_token is not None else math.nan
    per_event = r.tokens / r.content_events if r.content_events else 1.0
    gaps = [b - a for a, b in zip(r.event_times, r.event_times[1:], strict=False)]
    return {"e2e": e2e, "ttft": ttft, "tpot": tpot, "itl": [g / per_event for g in gaps]}


def histogram(values: Sequence[float], buckets: int = 20) -> list[tuple[float, int]]:
    """Counts in equal-width buckets from the smallest to the largest value: (upper bound, count)."""
    if not values:
        return []
    low, high = min(values), max(values)
    width = (high - low) / buckets or 1e-9
    counts = [0] * buckets
    for v in values:
        counts[min(int((v - low) / width), buckets - 1)] += 1
    return [(low + width * (i + 1), n) for i, n in enumerate(counts)]


def meets_slo(m: dict[str, Any], cfg: BenchConfig) -> bool:
    checks = ((cfg.slo_ttft_s, m["ttft"]), (cfg.slo_tpot_s, m["tpot"]), (cfg.slo_e2e_s, m["e2e"]))
    return all(limit is None or (not math.isnan(v) and v <= limit) for limit, v in checks)


def find_knee(levels: Sequence[LevelResult], min_gain: float) -> int | None:
    """Index of the first valid level where more streams buy little: its throughput gain over
    the previous valid level is below ``min_gain`` while E2E P99 grows by more than that gain.
    None when throughput still scales. Invalid levels (errors, client-bound) are never the knee."""
    valid = [i for i, lv in enumerate(levels) if lv.valid and lv.output_tokens_per_s > 0]
    for prev_i, i in itertools.pairwise(valid):
        prev, cur = levels[prev_i], levels[i]
        gain = cur.output_tokens_per_s / prev.output_tokens_per_s - 1
        latency = cur.e2e["p99"] / prev.e2e["p99"] - 1 if prev.e2e["p99"] and prev.e2e["p99"] > 0 else math.inf
        if gain < min_gain and latency > gain:
            return i
    return None


def operating_point(levels: Sequence[LevelResult], p99_slo_s: float | None, within: float = 0.90) -> int | None:
    """The recommended level: among valid levels meeting the E2E P99 SLO, the lowest concurrency
    that reaches ``within`` of the best throughput. Weighing latency this way, two runs whose top
    levels differ by a few percent in tok/s recommend the same level."""
    ok = [
        i for i, lv in enumerate(levels)
        if lv.valid and lv.output_tokens_per_s > 0 and (p99_slo_s is None or lv.e2e["p99"] <= p99_slo_s)
    ]  # fmt: skip
    if not ok:
        return None
    best = max(levels[i].output_tokens_per_s for i in ok)
    return min((i for i in ok if levels[i].output_tokens_per_s >= within * best), key=lambda i: levels[i].level)


# --- requests ----------------------------------------------------------------


def load_dataset(path: str) -> list[str]:
    """Prompts from JSON Lines (a "prompt" field per line) or plain text (one per line)."""
    prompts = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    prompt = json.loads(line)["prompt"]
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"line {number}: expected a JSON object with a 'prompt' field ({exc})") from exc
                prompts.append(str(prompt))
            else:
                prompts.append(line)
    if not prompts:
        raise ValueError("no prompts in the file")
    return prompts


# Plain English words for random prompts: a byte-level BPE tokenizer gives about one token each.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "be",
    "this",
    "are",
    "which",
    "or",
    "had",
    "not",
    "but",
    "have",
    "they",
    "were",
    "one",
    "all",
    "their",
    "there",
    "been",
    "has",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "my",
    "now",
    "such",
    "like",
    "our",
    "over",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "states",
    "himself",
    "few",
    "house",
    "use",
    "during",
    "without",
    "again",
    "place",
    "around",
    "however",
    "home",
    "small",
    "found",
    "thought",
    "went",
    "say",
    "part",
    "once",
    "general",
    "high",
    "upon",
    "school",
    "every",
    "united",
    "left",
    "number",
    "course",
    "war",
    "until",
    "always",
    "away",
    "something",
    "fact",
    "though",
    "water",
    "less",
    "public",
    "put",
    "think",
    "almost",
    "hand",
    "enough",
    "far",
    "took",
    "head",
    "yet",
    "government",
    "system",
    "better",
    "set",
    "told",
    "nothing",
    "night",
    "end",
    "why",
    "called",
    "eyes",
    "find",
    "going",
    "look",
    "asked",
    "later",
    "knew",
    "point",
    "next",
    "program",
]


def auth_headers(cfg: BenchConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


def prompt_for(cfg: BenchConfig, n: int) -> str:
    """The n-th request's prompt. Random prompts are unique per request from their first word,
    so a server's prefix cache cannot serve them from an earlier request."""
    if cfg.dataset:
        return cfg.dataset[n % len(cfg.dataset)]
    if cfg.prompt_words:
        rng = random.Random(cfg.seed * 1_000_003 + n)
        low, high = cfg.prompt_words
        return f"{n}-{rng.getrandbits(32):08x} " + " ".join(rng.choices(_WORDS, k=max(0, rng.randint(low, high) - 1)))
    return cfg.prompt


def make_prompts(cfg: BenchConfig, count: int) -> list[str]:
    return [prompt_for(cfg, n) for n in range(count)]


def request_body(cfg: BenchConfig, prompt: str, max_tokens: int | None = None) -> tuple[str, dict[str, Any]]:
    if cfg.api == "kserve_v2":
        return f"/v2/models/{cfg.model}/infer", {"inputs": cfg.kserve_inputs or []}
    tokens = cfg.max_tokens if max_tokens is None else max_tokens
    body: dict[str, Any] = {"model": cfg.model, "max_tokens": tokens, "stream": cfg.stream}
    if cfg.fixed_length == "on":
        body.update(ignore_eos=True, min_tokens=tokens)  # vLLM extensions: a fixed output length
    if cfg.stream:
        body["stream_options"] = {"include_usage": True}
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


_SENT = b'"gpufleet_sent":'
_FINISHED = b'"finish_reason":"'


def _take_usage(record: RequestRecord, event: dict[str, Any]) -> None:
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return
    record.usage_seen = True
    record.usage_with_choices = record.usage_with_choices or bool(event.get("choices"))
    record.tokens = int(usage.get("completion_tokens") or 0)
    record.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        record.cached_tokens = int(cached)


def classify_event(raw: bytes, record: RequestRecord, now: float) -> str:
    """Account one SSE event on the record; returns "done", "content", "usage" or "other".

    Content events from the usual servers are recognised without parsing JSON
    (a hot path at thousands of events per second); anything unusual is parsed.
    Usage is taken from whichever event carries it, with or without choices.
    """
    if not raw.startswith(b"data:"):
        return "other"
    data = raw[5:].strip()
    if data == b"[DONE]":
        record.done_marker = record.finished = True
        return "done"
    at = data.rfind(_SENT)
    if at >= 0:
        end = at + len(_SENT)
        stop = min(i for i in (data.find(b",", end), data.find(b"}", end), len(data)) if i >= 0)
        record.receive_lags.append(now - float(data[end:stop]))
    if data.find(_FINISHED) >= 0:
        record.finished = True
    fast = -1
    for key in (b'"content":"', b'"text":"'):
        fast = data.find(key)
        if fast >= 0:
            fast += len(key)
            break
    if fast >= 0 and b'"usage"' not in data:
        if data[fast : fast + 1] == b'"':
            if record.content_events == 0:
                record.role_only_first = True
            return "other"  # empty text: a role-only or keep-alive chunk is not a token
    else:
        try:
            event = json.loads(data)
        except ValueError:
            return "other"
        if not isinstance(event, dict):
            return "other"
        _take_usage(record, event)
        if event.get("usage"):
            record.finished = True
        if not any(_content_of(c) for c in event.get("choices") or ()):
            if record.content_events == 0 and event.get("choices"):
                record.role_only_first = True
            return "usage" if event.get("usage") else "other"
    record.content_events += 1
    record.event_times.append(now)
    if record.first_token is None:
        record.first_token = now
    return "content"


def _content_of(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return choice["text"] or ""
    return (choice.get("delta") or {}).get("content") or ""


def server_message(body: bytes | str, limit: int = 300) -> str:
    """The reason an error response gives: OpenAI's error.message, FastAPI's detail list
    (each field it rejected), or the body's start."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:limit]
    message: Any = payload
    if isinstance(payload, dict):
        error = payload.get("error")
        message = error.get("message", error) if isinstance(error, dict) else error or payload.get("detail") or payload
    if isinstance(message, list):  # FastAPI/pydantic: [{loc: [...], msg: ...}, ...]
        message = "; ".join(
            f"{'.'.join(str(x) for x in m.get('loc', []))}: {m.get('msg', '')}" if isinstance(m, dict) else str(m)
            for m in message
        )
    return " ".join(str(message).split())[:limit]


async def send(
    session: Any, cfg: BenchConfig, prompt: str, scheduled: float, max_tokens: int | None = None
) -> RequestRecord:
    """One request; every failure becomes an error kind on the record, with the server's
    reason where it gave one, never an exception."""
    import aiohttp

    path, body = request_body(cfg, prompt, max_tokens)
    record = RequestRecord(scheduled=scheduled, start=time.time())
    try:
        async with session.post(cfg.base_url.rstrip("/") + path, json=body) as response:
            if response.status != 200:
                record.error = f"http_{response.status}"
                record.error_detail = server_message(await response.read())
                record.end = time.time()
                return record
            if not cfg.stream or cfg.api == "kserve_v2":
                payload = await response.json(content_type=None)
                record.end = record.first_token = time.time()
                _take_usage(record, payload)
                record.tokens = record.tokens or (1 if cfg.api == "kserve_v2" else 0)
                record.finished = True
                return record
            pending = b""
            # Read whatever bytes arrived and split SSE events ourselves: one pass per
            # network read, not per line, keeps the client cheap under bursts.
            async for block in response.content.iter_any():
                now = time.time()
                pending += block
                *events, pending = pending.split(b"\n\n")
                for raw in events:
                    classify_event(raw, record, now)
            if pending.strip():
                classify_event(pending, record, time.time())
            record.end = time.time()
            # A stream may end without [DONE]: what counts is that it was not cut short.
            if not record.finished:
                record.error = "broken_stream"
                record.error_detail = f"the stream ended after {record.content_events} content event(s) with no finish"
            elif not record.usage_seen:
                record.tokens = record.content_events  # no usage report: count content events, and say so
    except TimeoutError:
        record.error, record.error_detail = "timeout", f"no complete answer within {cfg.request_timeout_s:g} s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
        record.error, record.error_detail = "broken_stream", str(exc) or type(exc).__name__
    except aiohttp.ClientError as exc:
        record.error, record.error_detail = "connect_" + type(exc).__name__, str(exc)
    if record.error and not record.end:
        record.end = time.time()
    return record


# --- one level in one process -------------------------------------------------


async def _loop_lag(samples: list[float], stop: asyncio.Event, period: float = 0.005) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(period)
        samples.append(loop.time() - before - period)


class _Failing:
    """Counts a process's requests and failures, and says when a level should stop early."""

    def __init__(self, abort_rate: float, minimum: int = 5) -> None:
        self.abort_rate, self.minimum = abort_rate, minimum
        self.sent = self.failed = 0
        self.reason: str | None = None

    def count(self, record: RequestRecord) -> None:
        self.sent += 1
        self.failed += record.error is not None
        if self.reason is None and self.sent >= self.minimum and self.failed >= self.abort_rate * self.sent:
            cause = f"{record.error}: {record.error_detail or 'no detail'}"
            self.reason = f"{self.failed} of {self.sent} requests failed ({cause}); the level stopped early"


async def run_level_async(
    cfg: BenchConfig, level: float, users: int, t_start: float, t_window_end: float, first_request: int = 0
) -> dict[str, Any]:
    """Run a level from ``t_start`` (wall clock) until the window ends and drain.

    Closed loop: ``users`` users each send back to back, backing off after each error.
    Open loop: Poisson arrivals at ``level`` req/s (this process's share), each in its own
    task. Either stops early once ``abort_error_rate`` of the requests failed.
    Request numbers start at ``first_request``, so random prompts are unique across levels
    and processes.
    """
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, force_close=False)
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s, sock_read=cfg.request_timeout_s)
    records: list[RequestRecord] = []
    lag: list[float] = []
    stop = asyncio.Event()
    cpu0 = time.process_time()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=auth_headers(cfg)) as session:
        # Open the connections before the clock starts.
        warm = max(users, 1)
        await asyncio.gather(*(session.get(cfg.base_url.rstrip("/") + "/health") for _ in range(warm)),
                             return_exceptions=True)  # fmt: skip
        # Prompts are made before the clock starts; beyond the pool, as they are needed.
        pool = [prompt_for(cfg, first_request + n) for n in range(2048)]

        def prompt(n: int) -> str:
            return pool[n] if n < len(pool) else prompt_for(cfg, first_request + n)

        failing = _Failing(cfg.abort_error_rate)
        lag_task = asyncio.create_task(_loop_lag(lag, stop))
        await asyncio.sleep(max(0.0, t_start - time.time()))

        async def user(index: int) -> None:
            # Users start spread over the warm-up, so the window sees steady traffic,
            # not every user in lockstep (a thundering herd no real client produces).
            await asyncio.sleep(max(0.0, t_start + cfg.warmup_s * 0.8 * index / max(users, 1) - time.time()))
            n, backoff = index, 0.0
            while time.time() < t_window_end and failing.reason is None:
                record = await send(session, cfg, prompt(n), time.time())
                records.append(record)
                failing.count(record)
                n += users
                # An error answers fast: without a pause one user would flood a broken server.
                backoff = min(2.0, backoff * 2 or 0.05) if record.error else 0.0
                await asyncio.sleep(backoff)

        async def arrivals() -> None:
            rng = random.Random(cfg.seed + os.getpid())
            tasks = []
            due = time.time()
            n = 0

            async def counted(number: int, scheduled: float) -> RequestRecord:
                record = await send(session, cfg, prompt(number), scheduled)
                failing.count(record)
                return record

            while due < t_window_end and failing.reason is None:
                await asyncio.sleep(max(0.0, due - time.time()))
                tasks.append(asyncio.create_task(counted(n, due)))
                n += 1
                due += rng.expovariate(level)
            records.extend(await asyncio.gather(*tasks))

        if cfg.mode == "open":
            await arrivals()
        else:
            await asyncio.gather(*(user(i) for i in range(users)))
        stop.set()
        await lag_task
    cpu = time.process_time() - cpu0
    return {
        "records": [asdict(r) for r in records], "lag": lag, "cpu_s": cpu, "wall_s": time.time() - t_start,
        "stopped": failing.reason,
    }  # fmt: skip


def _worker(args: tuple[BenchConfig, float, int, float, float, int]) -> dict[str, Any]:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    return asyncio.run(run_level_async(*args))


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_level(
    cfg: BenchConfig, level: int | float, first_request: int = 0, duration_s: float | None = None
) -> LevelResult:
    """Run one level (in ``cfg.workers`` processes) and judge it."""
    began = time.time()
    t_start = began + 0.5 + 0.002 * level  # time to open connections first
    t_window_start = t_start + cfg.warmup_s
    t_window_end = t_window_start + (duration_s or cfg.duration_s)
    workers = max(1, min(cfg.workers, int(level) if cfg.mode == "closed" else cfg.workers))
    # Each process numbers its requests from its own block, so no two send the same prompt.
    block = 10_000_000
    if cfg.mode == "closed":
        jobs = [(cfg, level, n, t_start, t_window_end, first_request + i * block)
                for i, n in enumerate(_shares(int(level), workers))]  # fmt: skip
    else:
        jobs = [(cfg, level / workers, 0, t_start, t_window_end, first_request + i * block) for i in range(workers)]
    if workers == 1:
        parts = [_worker(jobs[0])]
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            parts = pool.map(_worker, jobs)
    records = [RequestRecord(**r) for part in parts for r in part["records"]]
    lag = [x for part in parts for x in part["lag"]]
    cpu = sum(part["cpu_s"] for part in parts) / max(part["wall_s"] for part in parts)
    result = judge_level(cfg, level, records, lag, cpu / workers, t_window_start, t_window_end)
    result.wall_s = time.time() - began
    result.stopped_early = next((part["stopped"] for part in parts if part.get("stopped")), None)
    if result.stopped_early:
        result.valid = False
        result.invalid_reasons.append(result.stopped_early)
    return result


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
        goodput_requests_per_s=(sum(1 for m in metrics if meets_slo(m, cfg)) / window) if slo_set else None,
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


# --- the ladder ----------------------------------------------------------------


@dataclass
class BenchResult:
    config: dict[str, Any]
    levels: list[LevelResult]
    knee_index: int | None
    operating_point_index: int | None
    started: float
    finished: float
    fixed_length: dict[str, Any] = field(default_factory=dict)  # were ignore_eos/min_tokens sent, and why
    dialect: dict[str, Any] = field(default_factory=dict)  # how the server streams, as met
    gpu_source: str = "none"
    # the stand-in the GPU figures came from (the lab's FIXTURE exporter), None for a real GPU's
    gpu_stand_in: str | None = None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data; NaN (no samples) becomes null."""
        result: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str).replace("NaN", "null"))
        return result


def probe_fixed_length(cfg: BenchConfig) -> dict[str, Any]:
    """Does the server take vLLM's ignore_eos and min_tokens? One short request says."""
    if cfg.api == "kserve_v2" or cfg.fixed_length in ("on", "off"):
        used = cfg.fixed_length == "on" and cfg.api != "kserve_v2"
        return {"used": used, "why": f"fixed_length={cfg.fixed_length}" if cfg.api != "kserve_v2" else "kserve_v2"}
    import aiohttp

    async def probe() -> RequestRecord:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=cfg.request_timeout_s), headers=auth_headers(cfg)
        ) as session:
            return await send(session, replace(cfg, fixed_length="on"), prompt_for(cfg, -1), time.time(), 4)

    record = asyncio.run(probe())
    if record.error is None:
        return {"used": True, "why": "the server took ignore_eos and min_tokens in a probe request"}
    if record.error in ("http_400", "http_422"):
        return {
            "used": False,
            "why": f"the server refused ignore_eos/min_tokens ({record.error}: {record.error_detail})",
        }
    return {"used": False, "why": f"the probe request failed ({record.error}: {record.error_detail})"}


_CACHE_COUNTERS = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")


def server_cache_counters(base_url: str) -> tuple[float, float] | None:
    """vLLM's prefix-cache hits and queries (in tokens) from the server's own /metrics, if it has them."""
    from urllib.request import urlopen

    try:
        with urlopen(base_url.rstrip("/") + "/metrics", timeout=2) as response:
            text = response.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    sums = dict.fromkeys(_CACHE_COUNTERS, 0.0)
    found = False
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
            found = True
    return (sums[_CACHE_COUNTERS[0]], sums[_CACHE_COUNTERS[1]]) if found else None


def run_benchmark(cfg: BenchConfig, gpu: Any = None, server: Any = None) -> BenchResult:
    """Run the ladder. ``gpu`` (optional) is called with each LevelResult to fill its ``gpu``;
    its ``source`` attribute names where the figures come from. ``server`` (optional) likewise
    fills its ``server`` figures."""
    started = time.time()
    fixed = probe_fixed_length(cfg)
    run_cfg = replace(cfg, fixed_length="on" if fixed["used"] else "off")
    levels: list[LevelResult] = []
    warnings: list[str] = []
    ladder: list[int | float] = list(cfg.levels)
    if cfg.auto_ladder_max:
        ladder = [2**i for i in range(int(math.log2(cfg.auto_ladder_max)) + 1)]
    for position, level in enumerate(ladder):
        # A window must hold whole requests: lengthen it to a few E2E P50s of the level before.
        previous = [lv.e2e["p50"] for lv in levels if lv.completed and not math.isnan(lv.e2e["p50"])]
        duration = max(cfg.duration_s, cfg.window_e2e_multiple * previous[-1]) if previous else cfg.duration_s
        cache_before = server_cache_counters(cfg.base_url) if cfg.api != "kserve_v2" else None
        result = run_level(run_cfg, level, first_request=(position + 1) * 1_000_000_000, duration_s=duration)
        if duration > cfg.duration_s:
            result.warnings.append(
                f"window lengthened from {cfg.duration_s:g}s to {duration:.0f}s"
                f" ({cfg.window_e2e_multiple:g} x the previous level's E2E P50)"
            )
        cache_after = server_cache_counters(cfg.base_url) if cache_before else None
        if cache_before and cache_after and cache_after[1] > cache_before[1]:
            result.prefix_cache_hit_rate = (cache_after[0] - cache_before[0]) / (cache_after[1] - cache_before[1])
            result.prefix_cache_source = "the server's vllm:prefix_cache_hits_total / queries_total"
        for sampler in (gpu, server):
            if sampler is not None:
                try:
                    sampler(result)
                except Exception as exc:
                    result.warnings.append(f"no {getattr(sampler, 'source', 'sampler')} figures: {exc}")
        levels.append(result)
        if result.stopped_early:
            rest = ladder[position + 1 :]
            if rest:
                warnings.append(f"level {level:g} stopped early; levels {', '.join(f'{x:g}' for x in rest)} not run")
            break
        if cfg.auto_ladder_max and find_knee(levels, cfg.knee_gain) is not None:
            break
    if gpu is None:
        warnings.append("no GPU figures: no NVML on this host and no Prometheus URL given")
    if fixed["used"] is False and cfg.api != "kserve_v2":
        warnings.append(f"output length not fixed ({fixed['why']}): token counts are what arrived")
    dialect = next((lv.dialect for lv in levels if lv.dialect), {})
    return BenchResult(
        config={**asdict(cfg), "api_key": "(hidden)" if cfg.api_key else None},
        levels=levels,
        knee_index=find_knee(levels, cfg.knee_gain),
        operating_point_index=operating_point(levels, cfg.p99_slo_s, cfg.recommend_within),
        started=started,
        finished=time.time(),
        fixed_length=fixed,
        dialect=dialect,
        gpu_source=getattr(gpu, "source", "unnamed") if gpu is not None else "none",
        gpu_stand_in=getattr(gpu, "stand_in", None),
        warnings=warnings,
    )
