# SPDX-License-Identifier: Apache-2.0
"""Streams through a disruption: a closed loop of fixed-length streams while a replica goes away (a
SIGTERM, a scale-down, a rolling update, a node drain), each stream's outcome counted.

A stream is *complete* when it delivered every token it asked for (the output length is fixed, so a
short one was cut), *truncated* when it had started and did not, and *refused* when it never got a
first token (a refused connection, an HTTP error): a request that was turned away can be retried by
its client, a truncated stream cannot be. The drills judge a shutdown by its truncated streams.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from .http import auth_headers, send
from .prompts import prompt_for
from .records import BenchConfig, RequestRecord


def outcome(record: RequestRecord, tokens: int) -> str:
    """complete, truncated or refused (see the module's docstring)."""
    if not record.error and record.tokens >= tokens:
        return "complete"
    return "refused" if record.first_token is None else "truncated"


async def streams_through(
    cfg: BenchConfig,
    users: int,
    duration_s: float,
    disrupt: Callable[[], Awaitable[Any]] | None = None,
    disrupt_at_s: float = 0.0,
    stop_new_at_disruption: bool = False,
    records: list[RequestRecord] | None = None,
) -> dict[str, Any]:
    """``users`` streams back to back for ``duration_s``; ``disrupt`` is awaited ``disrupt_at_s`` in.

    ``stop_new_at_disruption``: no new stream starts once the disruption begins (a server killed in
    place, with no Service to send the next ones elsewhere); the streams in flight are still counted.
    ``records``: a list each stream's record is appended to, for a caller that judges them by time.
    """
    import aiohttp

    cfg = replace(cfg, fixed_length="on", stream=True)
    records = [] if records is None else records
    in_flight: set[int] = set()
    disrupted = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s, sock_read=cfg.request_timeout_s)
    # A fresh connection per request: the Service (kube-proxy) picks a pod per connection, so a
    # kept-alive connection would pin a user to the pod it first reached.
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    started = time.time()
    end = started + duration_s
    at_disruption: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=auth_headers(cfg)) as session:

        async def user(index: int) -> None:
            await asyncio.sleep(min(duration_s, 2.0) * index / max(users, 1))  # spread, not in lockstep
            n, backoff = index, 0.0
            while time.time() < end and not (stop_new_at_disruption and disrupted.is_set()):
                in_flight.add(n)
                record = await send(session, cfg, prompt_for(cfg, n), time.time())
                in_flight.discard(n)
                records.append(record)
                n += users
                backoff = min(1.0, backoff * 2 or 0.05) if record.error else 0.0
                await asyncio.sleep(backoff)

        async def disruption() -> None:
            if disrupt is None:
                return
            await asyncio.sleep(max(0.0, started + disrupt_at_s - time.time()))
            at_disruption.update(at_s=round(time.time() - started, 3), in_flight=len(in_flight))
            disrupted.set()
            result = await disrupt()
            at_disruption.update(done_at_s=round(time.time() - started, 3), result=result)

        await asyncio.gather(disruption(), *(user(i) for i in range(users)))
    outcomes = Counter(outcome(r, cfg.max_tokens) for r in records)
    cut_at = started + at_disruption.get("at_s", duration_s)
    running = [r for r in records if r.start <= cut_at <= (r.end or cut_at)]
    return {
        "users": users,
        "duration_s": duration_s,
        "max_tokens": cfg.max_tokens,
        "requests": len(records),
        "complete": outcomes["complete"],
        "truncated": outcomes["truncated"],
        "refused": outcomes["refused"],
        "errors": dict(Counter(r.error for r in records if r.error)),
        # Streams that were running when the disruption began, and how they ended.
        "in_flight_at_disruption": dict(Counter(outcome(r, cfg.max_tokens) for r in running)),
        # How long the last of them still ran: the drain the disruption needed.
        "last_in_flight_end_s": round(max((r.end for r in running), default=cut_at) - cut_at, 3),
        "disruption": at_disruption,
        "wall_s": round(time.time() - started, 3),
    }


def run_streams_through(cfg: BenchConfig, users: int, duration_s: float, **kwargs: Any) -> dict[str, Any]:
    """``streams_through`` from synchronous code."""
    return asyncio.run(streams_through(cfg, users, duration_s, **kwargs))


SLICE_S = 0.1


async def arrivals_through(
    cfg: BenchConfig,
    rate: Callable[[float], float],
    duration_s: float,
    records: list[RequestRecord],
    seed: int = 0,
) -> float:
    """Open-loop streams for ``duration_s``: Poisson arrivals at ``rate(seconds since the start)`` per
    second (0 for none), each a fresh connection, whatever the server's pace (real users do not wait
    for one another); each stream's record is appended to ``records``. Returns the time the schedule
    counts from."""
    import aiohttp

    cfg = replace(cfg, fixed_length="on", stream=True)
    rng = random.Random(seed)
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s, sock_read=cfg.request_timeout_s)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    started = time.time()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=auth_headers(cfg)) as session:

        async def one(number: int) -> None:
            records.append(await send(session, cfg, prompt_for(cfg, number), time.time()))

        tasks: list[asyncio.Task[None]] = []
        now, slice_end = 0.0, SLICE_S
        while now < duration_s:
            # The rate is read at the start of each tenth of a second; a gap that ends past it means no
            # arrival in the rest of it, and the next is drawn afresh at the next one's rate (exact for
            # a rate constant within each tenth: the exponential gap has no memory).
            per_s = rate(slice_end - SLICE_S)
            gap = rng.expovariate(per_s) if per_s > 0 else float("inf")
            if now + gap >= slice_end:
                now, slice_end = slice_end, round(slice_end + SLICE_S, 6)
                continue
            now += gap
            if now < duration_s:
                await asyncio.sleep(max(0.0, started + now - time.time()))
                tasks.append(asyncio.create_task(one(len(tasks))))
        await asyncio.gather(*tasks)
    return started
