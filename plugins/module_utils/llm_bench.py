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

The hot path uses aiohttp with an unlimited connector and one session per worker;
connections are opened during warm-up so TTFT never includes connection set-up.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
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
    ignore_eos: bool = True
    prompt: str = "Write a short story about a GPU that learns to dream."
    prompt_words: tuple[int, int] | None = None  # random prompt length range (words), seeded
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
    """Index of the first level whose throughput gain over the previous one falls
    below ``min_gain`` while E2E P99 grows; None when throughput still scales."""
    for i in range(1, len(levels)):
        prev, cur = levels[i - 1], levels[i]
        if prev.output_tokens_per_s <= 0:
            continue
        gain = cur.output_tokens_per_s / prev.output_tokens_per_s - 1
        if gain < min_gain and cur.e2e["p99"] > prev.e2e["p99"]:
            return i
    return None


def operating_point(levels: Sequence[LevelResult], p99_slo_s: float | None) -> int | None:
    """Index of the highest-throughput level whose E2E P99 meets the SLO."""
    ok = [i for i, lv in enumerate(levels) if p99_slo_s is None or lv.e2e["p99"] <= p99_slo_s]
    return max(ok, key=lambda i: levels[i].output_tokens_per_s) if ok else None


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


def make_prompts(cfg: BenchConfig, count: int) -> list[str]:
    if cfg.dataset:
        return [cfg.dataset[i % len(cfg.dataset)] for i in range(count)]
    if cfg.prompt_words:
        rng = random.Random(cfg.seed)
        low, high = cfg.prompt_words
        return [" ".join("token" for _ in range(rng.randint(low, high))) for _ in range(count)]
    return [cfg.prompt] * count


def request_body(cfg: BenchConfig, prompt: str) -> tuple[str, dict[str, Any]]:
    if cfg.api == "kserve_v2":
        return f"/v2/models/{cfg.model}/infer", {"inputs": cfg.kserve_inputs or []}
    body: dict[str, Any] = {"model": cfg.model, "max_tokens": cfg.max_tokens, "stream": cfg.stream}
    if cfg.ignore_eos:
        body.update(ignore_eos=True, min_tokens=cfg.max_tokens)  # vLLM extensions: a fixed output length
    if cfg.stream:
        body["stream_options"] = {"include_usage": True}
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


_SENT = b'"gpufleet_sent":'


def classify_event(raw: bytes, record: RequestRecord, now: float) -> str:
    """Account one SSE event on the record; returns "done", "content", "usage" or "other".

    Content events from the usual servers are recognised without parsing JSON
    (a hot path at thousands of events per second); anything unusual is parsed.
    """
    if not raw.startswith(b"data:"):
        return "other"
    data = raw[5:].strip()
    if data == b"[DONE]":
        return "done"
    at = data.rfind(_SENT)
    if at >= 0:
        end = at + len(_SENT)
        stop = min(i for i in (data.find(b",", end), data.find(b"}", end), len(data)) if i >= 0)
        record.receive_lags.append(now - float(data[end:stop]))
    fast = -1
    for key in (b'"content":"', b'"text":"'):
        fast = data.find(key)
        if fast >= 0:
            fast += len(key)
            break
    if fast >= 0 and b'"usage"' not in data:
        if data[fast : fast + 1] == b'"':
            return "other"  # empty text: a role-only or keep-alive chunk is not a token
    else:
        event = json.loads(data)
        if event.get("usage") and not event.get("choices"):
            record.tokens = int(event["usage"].get("completion_tokens") or 0)
            return "usage"
        if not any(_content_of(c) for c in event.get("choices") or ()):
            return "other"
    record.content_events += 1
    record.event_times.append(now)
    if record.first_token is None:
        record.first_token = now
    return "content"


def _content_of(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return choice["text"] or ""
    return (choice.get("delta") or {}).get("content") or ""


async def send(session: Any, cfg: BenchConfig, prompt: str, scheduled: float) -> RequestRecord:
    """One request; every failure becomes an error kind on the record, never an exception."""
    import aiohttp

    path, body = request_body(cfg, prompt)
    record = RequestRecord(scheduled=scheduled, start=time.time())
    try:
        async with session.post(cfg.base_url.rstrip("/") + path, json=body) as response:
            if response.status != 200:
                await response.read()
                record.error = f"http_{response.status}"
                return record
            if not cfg.stream or cfg.api == "kserve_v2":
                payload = await response.json(content_type=None)
                record.end = record.first_token = time.time()
                usage = payload.get("usage") or {}
                record.tokens = int(usage.get("completion_tokens") or (1 if cfg.api == "kserve_v2" else 0))
                return record
            done = False
            pending = b""
            # Read whatever bytes arrived and split SSE events ourselves: one pass per
            # network read, not per line, keeps the client cheap under bursts.
            async for block in response.content.iter_any():
                now = time.time()
                pending += block
                *events, pending = pending.split(b"\n\n")
                for raw in events:
                    kind = classify_event(raw, record, now)
                    if kind == "done":
                        done = True
            if pending.strip():
                classify_event(pending, record, time.time())
            record.end = time.time()
            if not done:
                record.error = "broken_stream"
            elif record.tokens == 0:
                record.error = "no_usage"  # the server did not honour stream_options.include_usage
    except TimeoutError:
        record.error = "timeout"
    except aiohttp.ClientPayloadError:
        record.error = "broken_stream"
    except aiohttp.ServerDisconnectedError:
        record.error = "broken_stream"
    except aiohttp.ClientError as exc:
        record.error = "connect_" + type(exc).__name__
    return record


# --- one level in one process -------------------------------------------------


async def _loop_lag(samples: list[float], stop: asyncio.Event, period: float = 0.005) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(period)
        samples.append(loop.time() - before - period)


async def run_level_async(
    cfg: BenchConfig, level: float, users: int, t_start: float, t_window_end: float
) -> dict[str, Any]:
    """Run a level from ``t_start`` (wall clock) until the window ends and drain.

    Closed loop: ``users`` users each send back to back. Open loop: Poisson arrivals
    at ``level`` req/s (this process's share), each in its own task.
    """
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300, force_close=False)
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s, sock_read=cfg.request_timeout_s)
    records: list[RequestRecord] = []
    lag: list[float] = []
    stop = asyncio.Event()
    cpu0 = time.process_time()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # Open the connections before the clock starts.
        warm = max(users, 1)
        await asyncio.gather(*(session.get(cfg.base_url.rstrip("/") + "/health") for _ in range(warm)),
                             return_exceptions=True)  # fmt: skip
        lag_task = asyncio.create_task(_loop_lag(lag, stop))
        await asyncio.sleep(max(0.0, t_start - time.time()))
        prompts = make_prompts(cfg, 1024)

        async def user(index: int) -> None:
            # Users start spread over the warm-up, so the window sees steady traffic,
            # not every user in lockstep (a thundering herd no real client produces).
            await asyncio.sleep(max(0.0, t_start + cfg.warmup_s * 0.8 * index / max(users, 1) - time.time()))
            n = index
            while time.time() < t_window_end:
                records.append(await send(session, cfg, prompts[n % len(prompts)], time.time()))
                n += users

        async def arrivals() -> None:
            rng = random.Random(cfg.seed + os.getpid())
            tasks = []
            due = time.time()
            n = 0
            while due < t_window_end:
                await asyncio.sleep(max(0.0, due - time.time()))
                scheduled = due
                tasks.append(asyncio.create_task(send(session, cfg, prompts[n % len(prompts)], scheduled)))
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
    return {"records": [asdict(r) for r in records], "lag": lag, "cpu_s": cpu, "wall_s": time.time() - t_start}


def _worker(args: tuple[BenchConfig, float, int, float, float]) -> dict[str, Any]:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    return asyncio.run(run_level_async(*args))


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_level(cfg: BenchConfig, level: int | float) -> LevelResult:
    """Run one level (in ``cfg.workers`` processes) and judge it."""
    t_start = time.time() + 0.5 + 0.002 * level  # time to open connections first
    t_window_start = t_start + cfg.warmup_s
    t_window_end = t_window_start + cfg.duration_s
    workers = max(1, min(cfg.workers, int(level) if cfg.mode == "closed" else cfg.workers))
    if cfg.mode == "closed":
        jobs = [(cfg, level, n, t_start, t_window_end) for n in _shares(int(level), workers)]
    else:
        jobs = [(cfg, level / workers, 0, t_start, t_window_end) for _ in range(workers)]
    if workers == 1:
        parts = [_worker(jobs[0])]
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            parts = pool.map(_worker, jobs)
    records = [RequestRecord(**r) for part in parts for r in part["records"]]
    lag = [x for part in parts for x in part["lag"]]
    cpu = sum(part["cpu_s"] for part in parts) / max(part["wall_s"] for part in parts)
    return judge_level(cfg, level, records, lag, cpu / workers, t_window_start, t_window_end)


def judge_level(
    cfg: BenchConfig,
    level: int | float,
    records: list[RequestRecord],
    loop_lag: list[float],
    cpu_per_process: float,
    window_start: float,
    window_end: float,
) -> LevelResult:
    """Statistics of the requests sent inside the steady window (pure; unit-tested)."""
    in_window = [r for r in records if window_start <= r.start < window_end]
    good = [r for r in in_window if r.error is None]
    errors: dict[str, int] = {}
    for r in in_window:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
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
        e2e=summarize([m["e2e"] for m in metrics]),
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

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data; NaN (no samples) becomes null."""
        result: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str).replace("NaN", "null"))
        return result


def run_benchmark(cfg: BenchConfig, gpu: Any = None) -> BenchResult:
    """Run the ladder. ``gpu`` (optional) is called with (level, window) to fill ``LevelResult.gpu``."""
    started = time.time()
    levels: list[LevelResult] = []
    ladder: list[int | float] = list(cfg.levels)
    if cfg.auto_ladder_max:
        ladder = [2**i for i in range(int(math.log2(cfg.auto_ladder_max)) + 1)]
    for level in ladder:
        result = run_level(cfg, level)
        if gpu is not None:
            gpu(result)
        levels.append(result)
        if cfg.auto_ladder_max and find_knee(levels, cfg.knee_gain) is not None:
            break
    return BenchResult(
        config=asdict(cfg),
        levels=levels,
        knee_index=find_knee(levels, cfg.knee_gain),
        operating_point_index=operating_point(levels, cfg.p99_slo_s),
        started=started,
        finished=time.time(),
    )


# --- GPU correlation through Prometheus -------------------------------------------


def gpu_sampler(prometheus_url: str, selector: str = "", exporter_interval_s: float = 30.0) -> Any:
    """A callback for run_benchmark: per level, mean GPU utilisation and framebuffer
    used over the steady window, and energy as the delta of the energy counter."""
    from ansible_collections.gpufleet.platform.plugins.module_utils.prometheus_verify import query

    def scalar(promql: str, at: float) -> float | None:
        result = query(prometheus_url, promql, at)
        return float(result[0]["value"][1]) if result else None

    def fill(level: LevelResult) -> None:
        window = level.window_end - level.window_start
        span = f"[{max(1, round(window))}s]"
        sel = "{" + selector + "}"
        energy = f"sum(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{sel})"
        end, start = scalar(energy, level.window_end), scalar(energy, level.window_start)
        joules = (end - start) / 1000 if end is not None and start is not None else None
        tokens = level.output_tokens_per_s * window
        level.gpu = {
            "util_mean_pct": scalar(f"avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{sel}{span}))", level.window_end),
            "fb_used_mean_mib": scalar(f"avg(avg_over_time(DCGM_FI_DEV_FB_USED{sel}{span}))", level.window_end),
            "energy_j": joules,
            "tokens_per_joule": tokens / joules if joules else None,
        }
        if window < exporter_interval_s:
            level.warnings.append(
                f"level window {window:.0f}s is shorter than the exporter interval {exporter_interval_s:.0f}s:"
                " GPU figures rest on one or two samples"
            )

    return fill
