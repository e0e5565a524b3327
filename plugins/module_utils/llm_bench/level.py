# SPDX-License-Identifier: Apache-2.0
"""One level of the ladder: its streams, in one process or several."""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import asdict, replace
from typing import Any

from .http import auth_headers, send
from .prompts import max_tokens_for, prompt_for
from .records import BenchConfig, LevelResult, RequestRecord
from .verdicts import judge_level

# --- one level in one process -------------------------------------------------


async def _loop_lag(samples: list[float], stop: asyncio.Event, period: float = 0.005) -> None:
    """Every ``period``, how long a callback made ready waits for its turn: one pass of the loop's ready
    queue, the wait a stream's next event meets. Timed with perf_counter around call_soon, not a sleep's
    overshoot on loop.time(): uvloop's clock and timers step in whole milliseconds, so that read exactly
    1 ms at every level and could not see a lag below it."""
    loop = asyncio.get_running_loop()

    def turn(since: float) -> None:
        samples.append(time.perf_counter() - since)

    while not stop.is_set():
        await asyncio.sleep(period)
        loop.call_soon(turn, time.perf_counter())


def next_gap(rng: random.Random, rate: float, arrival: str = "poisson", burstiness: float = 1.0) -> float:
    """Seconds to the next arrival at ``rate`` per second: exponential (Poisson arrivals), gamma of shape
    ``burstiness`` with the same mean (vLLM's bench and AIPerf: shape 1 is Poisson), or constant."""
    if arrival == "constant":
        return 1.0 / rate
    if arrival == "gamma":
        return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    return rng.expovariate(rate)


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
                record = await send(session, cfg, prompt(n), time.time(), max_tokens_for(cfg, first_request + n))
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

            # A cap on the requests in flight: an arrival beyond it waits for a slot, from its due time.
            slots = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None

            async def counted(number: int, scheduled: float) -> RequestRecord:
                tokens = max_tokens_for(cfg, first_request + number)
                if slots is None:
                    record = await send(session, cfg, prompt(number), scheduled, tokens)
                else:
                    async with slots:
                        record = await send(session, cfg, prompt(number), scheduled, tokens)
                failing.count(record)
                return record

            while due < t_window_end and failing.reason is None:
                await asyncio.sleep(max(0.0, due - time.time()))
                tasks.append(asyncio.create_task(counted(n, due)))
                n += 1
                due += next_gap(rng, level, cfg.arrival, cfg.burstiness)
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
    workers = max(1, min(cfg.workers, int(level) if cfg.mode == "closed" else cfg.max_concurrency or cfg.workers))
    # Each process numbers its requests from its own block, so no two send the same prompt.
    block = 10_000_000
    if cfg.mode == "closed":
        jobs = [(cfg, level, n, t_start, t_window_end, first_request + i * block)
                for i, n in enumerate(_shares(int(level), workers))]  # fmt: skip
    else:
        # Each process draws its share of the rate, and holds its share of the cap on requests in flight.
        caps = _shares(cfg.max_concurrency, workers) if cfg.max_concurrency else [0] * workers
        jobs = [(replace(cfg, max_concurrency=caps[i]), level / workers, 0, t_start, t_window_end,
                 first_request + i * block) for i in range(workers)]  # fmt: skip
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
