"""CALIBRATION SERVER: an OpenAI-compatible stand-in for vLLM with a scripted schedule.

It also answers the KServe v2 routes Triton serves (health, model ready, infer), with
the first-token delay as the inference time, ``--max-num-seqs`` as the model's instances (beyond
them requests wait in the scheduler's queue), Triton's series beside vLLM's on /metrics (requests,
queue time as a counter and a summary, pending requests), and ``--metrics-port`` answering as
Triton's metrics port does. On SIGTERM with ``--shutdown-timeout`` it finishes the inferences in
flight as Triton's ``--exit-timeout-secs`` does.

Not a model. It answers /v1/completions and /v1/chat/completions (streaming or not)
on a schedule the tests know in advance: time to first token, inter-token interval,
token count, tokens per SSE event, an optional role-only first chunk, a final usage
chunk, seeded jitter, and injected failures (HTTP 500, a stream cut mid-way). Each
event carries the server's send time (``gpufleet_sent``, Unix seconds) so a client
can tell server pacing from its own lag.

/metrics answers the vLLM series the collection's dashboard, alerts and `gpufleet verify`
read (names, types, labels and buckets as vLLM 0.23 exports them, tests/fixtures/device/
h200-vllm/metrics.txt), counting the requests it really served: the lab's Prometheus
scrapes it where production scrapes vLLM.

One replica's capacity, as vLLM's scheduler has it: ``--max-num-seqs`` requests run at once, the
rest wait (vllm:num_requests_waiting, vllm:request_queue_time_seconds) and their first token comes
that much later; vllm:kv_cache_usage_perc reads the share of the slots in use. There is no KV cache
or preemption here.

SIGTERM as vLLM 0.23 answers it (measured on an H200, tests/fixtures/device/h200-vllm-sigterm/):
with ``--shutdown-timeout 0`` (vLLM's default) every stream in flight stops where it is and the
server holds the broken connections until it is killed; with N > 0 it stops accepting, lets the
streams in flight finish for up to N seconds, cuts what is left and exits.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies, chunked SSE
responses) on a raw asyncio Protocol, under uvloop when present, so that it is not
the bottleneck of the benchmark it calibrates.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# What each answer reports as its prompt's length: the server reads no prompt.
PROMPT_TOKENS = 8


@dataclass
class Schedule:
    ttft_s: float = 0.1
    itl_s: float = 0.02
    tokens: int = 64  # default output length when the request gives no max_tokens
    tokens_per_event: int = 1
    role_chunk: bool = True
    jitter_s: float = 0.0  # each delay + uniform(-jitter, +jitter), seeded
    fail_every: int = 0  # every n-th request gets HTTP 500
    cut_every: int = 0  # every n-th request's stream stops half-way without [DONE]
    seed: int = 1
    model: str = "calibration"
    # Like vLLM's --api-key: /v1/* answers 401 without "Authorization: Bearer <key>"; /health is open.
    api_key: str | None = None
    max_num_seqs: int = 0  # requests served at once (0: no limit); the others wait
    shutdown_timeout: int = 0  # seconds to drain on SIGTERM; 0 aborts, as vLLM does
    counters: dict[str, int] = field(default_factory=lambda: {"requests": 0, "events": 0})
    metrics: EngineMetrics = field(default_factory=lambda: EngineMetrics())
    triton: TritonMetrics = field(default_factory=lambda: TritonMetrics())
    aborted: bool = False  # SIGTERM with no drain: streams stop where they are
    streams: set[Handler] = field(default_factory=set)  # serving a request now
    _slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        self.metrics.slots = self.max_num_seqs  # the KV-cache gauge's denominator

    def slots(self) -> asyncio.Semaphore | None:
        """vLLM's --max-num-seqs: made in the server's event loop, on first use."""
        if self.max_num_seqs and self._slots is None:
            self._slots = asyncio.Semaphore(self.max_num_seqs)
        return self._slots


# vLLM 0.23's histogram buckets (seconds), as in its /metrics.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float, times: int = 1) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.buckets):
            self.counts[index] += times
        self.total += value * times
        self.count += times

    def lines(self, name: str, labels: str) -> list[str]:
        cumulative, out = 0, []
        for bound, count in zip(self.buckets, self.counts or [0] * len(self.buckets), strict=True):
            cumulative += count
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
        out += [f'{name}_bucket{{{labels},le="+Inf"}} {self.count}', f"{name}_count{{{labels}}} {self.count}"]
        return [*out, f"{name}_sum{{{labels}}} {self.total}"]


@dataclass
class EngineMetrics:
    """What the server really did, in vLLM's series."""

    running: int = 0
    waiting: int = 0
    slots: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"length": 0, "abort": 0, "error": 0})
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))

    def finish(self, reason: str, tokens: int, ttft_s: float, e2e_s: float, queued_s: float = 0.0) -> None:
        """One request done: its tokens, first-token time, mean gap (once per gap), total time, wait."""
        self.finished[reason] += 1
        self.prompt_tokens += PROMPT_TOKENS
        self.generation_tokens += tokens
        self.ttft.observe(ttft_s)
        if tokens > 1:
            self.itl.observe((e2e_s - ttft_s) / (tokens - 1), tokens - 1)
            self.tpot.observe((e2e_s - ttft_s) / (tokens - 1))  # once per request, as vLLM's TPOT
        self.e2e.observe(e2e_s)
        self.queue.observe(queued_s)

    def exposition(self, model: str) -> bytes:
        labels = f'engine="0",model_name="{model}"'
        gauges = {
            "num_requests_running": self.running,
            "num_requests_waiting": self.waiting,
            "kv_cache_usage_perc": self.running / self.slots if self.slots else 0.0,
        }
        counters = {
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "num_preemptions": 0,
        }
        out: list[str] = []
        for name, value in gauges.items():
            out += [f"# TYPE vllm:{name} gauge", f"vllm:{name}{{{labels}}} {value}"]
        for name, value in counters.items():
            out += [f"# TYPE vllm:{name}_total counter", f"vllm:{name}_total{{{labels}}} {value}"]
        out.append("# TYPE vllm:request_success_total counter")
        out += [f'vllm:request_success_total{{{labels},finished_reason="{k}"}} {v}' for k, v in self.finished.items()]
        for name, histogram in (
            ("time_to_first_token_seconds", self.ttft),
            ("inter_token_latency_seconds", self.itl),
            ("request_time_per_output_token_seconds", self.tpot),
            ("e2e_request_latency_seconds", self.e2e),
            ("request_queue_time_seconds", self.queue),
        ):
            out += [f"# TYPE vllm:{name} histogram", *histogram.lines(f"vllm:{name}", labels)]
        return ("\n".join(out) + "\n").encode()


# Triton's queue summary: the quantiles it reports by default, over a sliding window of the last
# minute's requests (prometheus-cpp's summary keeps a time window; Triton's is its default).
TRITON_QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
TRITON_WINDOW_S = 60.0


@dataclass
class TritonMetrics:
    """What the server did for KServe v2 requests, in Triton's series (its /metrics, 23.04 and later,
    with --metrics-config summary_latencies=true): requests served, their queue time (a counter and a
    summary), and those waiting for an instance now."""

    success: int = 0
    failure: int = 0  # requests the server failed (Triton's reason BACKEND: the model's execution)
    queue_us_total: float = 0.0
    pending: int = 0
    executing: int = 0  # not a series: what a drain on SIGTERM waits for, beside the pending ones
    window: list[tuple[float, float]] = field(default_factory=list)  # (when, queue time in us)

    def finish(self, queued_s: float, now: float) -> None:
        self.success += 1
        self.queue_us_total += queued_s * 1e6
        self.window.append((now, queued_s * 1e6))

    def exposition(self, model: str, now: float) -> list[str]:
        self.window = [(t, v) for t, v in self.window if t > now - TRITON_WINDOW_S]
        labels = f'model="{model}",version="1"'
        values = sorted(v for _t, v in self.window)
        out = [
            "# TYPE nv_inference_request_success counter", f"nv_inference_request_success{{{labels}}} {self.success}",
            "# TYPE nv_inference_request_failure counter",
            f'nv_inference_request_failure{{{labels},reason="BACKEND"}} {self.failure}',
            "# TYPE nv_inference_queue_duration_us counter",
            f"nv_inference_queue_duration_us{{{labels}}} {self.queue_us_total:.0f}",
            "# TYPE nv_inference_pending_request_count gauge",
            f"nv_inference_pending_request_count{{{labels}}} {self.pending}",
            "# TYPE nv_inference_queue_summary_us summary",
        ]  # fmt: skip
        for q in TRITON_QUANTILES:
            # The nearest rank over the window; NaN with no request in it, as Triton reports.
            value = f"{values[min(len(values) - 1, int(q * len(values)))]:.0f}" if values else "NaN"
            out.append(f'nv_inference_queue_summary_us{{{labels},quantile="{q}"}} {value}')
        return [*out, f"nv_inference_queue_summary_us_count{{{labels}}} {self.success}",
                f"nv_inference_queue_summary_us_sum{{{labels}}} {self.queue_us_total:.0f}"]  # fmt: skip


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Handler(asyncio.Protocol):
    def __init__(self, schedule: Schedule, rng: random.Random) -> None:
        self.schedule = schedule
        self.rng = rng
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.arrived = 0.0
        self.authorization = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.closed = asyncio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def data_received(self, data: bytes) -> None:
        # The schedule runs from the moment the request arrived, not from when its task starts.
        self.arrived = asyncio.get_running_loop().time()
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buffer[:head_end].decode("latin-1")
        lines = head.split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
        length = int(headers.get("content-length", "0"))
        if len(self.buffer) < head_end + 4 + length:
            return
        body = self.buffer[head_end + 4 : head_end + 4 + length]
        self.buffer = self.buffer[head_end + 4 + length :]
        self.busy = True
        self.authorization = headers.get("authorization", "")
        asyncio.get_running_loop().create_task(self._serve(method, path.split("?")[0], body))

    def _send(self, data: bytes) -> None:
        if self.transport and not self.transport.is_closing():
            self.transport.write(data)

    def _respond(self, status: str, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self._send(
            b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status.encode(), len(body), body)
        )

    def _delay(self, base: float) -> float:
        jitter = self.schedule.jitter_s
        return max(0.0, base + (self.rng.uniform(-jitter, jitter) if jitter else 0.0))

    async def _serve(self, method: str, path: str, body: bytes) -> None:
        try:
            if method == "GET" and path == "/health":
                self._respond("200 OK", {})
            elif method == "GET" and path == "/metrics":
                triton = self.schedule.triton.exposition(self.schedule.model, time.time())
                body = self.schedule.metrics.exposition(self.schedule.model) + ("\n".join(triton) + "\n").encode()
                self._send(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
            elif (
                path.startswith("/v1/")
                and self.schedule.api_key
                and self.authorization != f"Bearer {self.schedule.api_key}"
            ):
                self._respond("401 Unauthorized", {"error": "Unauthorized"})
            elif method == "GET" and path == "/v1/models":
                self._respond("200 OK", {"object": "list", "data": [{"id": self.schedule.model, "object": "model"}]})
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                await self._generate(path.endswith("chat/completions"), json.loads(body or b"{}"))
            elif method == "GET" and path in (
                "/v2/health/live",
                "/v2/health/ready",
                f"/v2/models/{self.schedule.model}/ready",
            ):
                self._respond("200 OK", {})
            elif method == "POST" and path == f"/v2/models/{self.schedule.model}/infer":
                await self._infer(json.loads(body or b"{}"))
            else:
                self._respond("404 Not Found", {"error": {"message": f"no route {method} {path}"}})
        finally:
            self.busy = False
            if self.buffer:
                self._next_request()

    async def _infer(self, request: dict[str, Any]) -> None:
        """KServe v2 (Triton's HTTP API): one output echoing the first input's shape, after TTFT."""
        s = self.schedule
        s.counters["requests"] += 1
        if s.fail_every and s.counters["requests"] % s.fail_every == 0:
            s.triton.failure += 1
            self._respond("500 Internal Server Error", {"error": "injected failure (calibration server)"})
            return
        loop = asyncio.get_running_loop()
        slots = s.slots()  # the model's instances: beyond them requests wait in Triton's scheduler queue
        if slots is not None:
            s.triton.pending += 1
            try:
                await slots.acquire()
            finally:
                s.triton.pending -= 1
        queued = max(0.0, loop.time() - (self.arrived or loop.time())) if slots is not None else 0.0
        s.triton.executing += 1
        try:
            await asyncio.sleep(self._delay(s.ttft_s))
        finally:
            s.triton.executing -= 1
            if slots is not None:
                slots.release()
        s.triton.finish(queued, time.time())
        first = (request.get("inputs") or [{"shape": [1], "datatype": "FP32"}])[0]
        size = 1
        for dim in first.get("shape", [1]):
            size *= int(dim)
        output = {"name": "output", "shape": first.get("shape", [1]), "datatype": "FP32", "data": [0.5] * size}
        self._respond("200 OK", {"model_name": s.model, "model_version": "1", "outputs": [output]})

    async def _generate(self, chat: bool, request: dict[str, Any]) -> None:
        s = self.schedule
        s.counters["requests"] += 1
        number = s.counters["requests"]
        if s.fail_every and number % s.fail_every == 0:
            s.metrics.finished["error"] += 1
            self._respond("500 Internal Server Error", {"error": {"message": "injected failure (calibration server)"}})
            return
        loop = asyncio.get_running_loop()
        slots = s.slots()
        if slots is not None:
            s.metrics.waiting += 1
            try:
                await slots.acquire()
            finally:
                s.metrics.waiting -= 1
        queued = max(0.0, loop.time() - (self.arrived or loop.time())) if slots is not None else 0.0
        s.metrics.running += 1
        s.streams.add(self)
        try:
            await self._answer(chat, request, number, queued)
        finally:
            s.metrics.running -= 1
            s.streams.discard(self)
            if slots is not None:
                slots.release()

    async def _answer(self, chat: bool, request: dict[str, Any], number: int, queued: float = 0.0) -> None:
        s = self.schedule
        tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or s.tokens)  # vLLM takes both
        started = time.time()
        kind = "chat.completion" if chat else "text_completion"
        if not request.get("stream"):
            ttft = self._delay(s.ttft_s)
            await asyncio.sleep(ttft + self._delay(s.itl_s) * (tokens - 1))
            s.metrics.finish("length", tokens, queued + ttft, queued + time.time() - started, queued)
            text = " tok" * tokens
            answer: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            answer.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            usage = {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": tokens,
                "total_tokens": tokens + PROMPT_TOKENS,
            }
            self._respond(
                "200 OK",
                {
                    "id": f"cal-{number}",
                    "object": kind,
                    "model": s.model,
                    "choices": [answer],
                    "usage": usage,
                    "created": int(started),
                },
            )
            return
        self._send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        loop = asyncio.get_running_loop()
        t0 = self.arrived or loop.time()
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        kind_chunk = "chat.completion.chunk" if chat else "text_completion"

        def event(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> None:
            payload: dict[str, Any] = {
                "id": f"cal-{number}",
                "object": kind_chunk,
                "model": s.model,
                "choices": choices,
                "gpufleet_sent": time.time(),
            }
            if usage is not None:
                payload["usage"] = usage
            self._send(_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n"))
            s.counters["events"] += 1

        head = b'data: {"id":"cal-%d","object":"%s","model":"%s","choices":[{"index":0,%s"' % (
            number,
            kind_chunk.encode(),
            s.model.encode(),
            b'"delta":{"content":' if chat else b'"text":',
        )
        tail = b'"%s,"finish_reason":%%s}],"gpufleet_sent":%%.6f}\n\n' % (b"}" if chat else b"")
        if chat and s.role_chunk:
            event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        cut_at = tokens // 2 if s.cut_every and number % s.cut_every == 0 else None
        sent = 0
        first_token_s = 0.0
        # A request that waited for a slot starts its schedule when it got one; its TTFT counts the wait.
        due = t0 + queued + self._delay(s.ttft_s)
        while sent < tokens:
            await asyncio.sleep(max(0.0, due - loop.time()))
            if s.aborted:  # vLLM's abort: no more tokens, the connection held until the client gives up
                await self.closed.wait()
                return
            batch = min(s.tokens_per_event, tokens - sent)
            if not sent:
                first_token_s = loop.time() - t0
            sent += batch
            # Content events are formatted from a template, not json.dumps: they are the hot path.
            finish = b'"length"' if sent == tokens else b"null"
            self._send(_chunk(head + (b" tok" * batch) + tail % (finish, time.time())))
            s.counters["events"] += 1
            if cut_at is not None and sent >= cut_at:
                if self.transport:
                    self.transport.close()  # mid-stream: no terminating chunk, no [DONE]
                s.metrics.finish("abort", sent, first_token_s, loop.time() - t0, queued)
                return
            due += sum(self._delay(s.itl_s) for _ in range(batch))
        if include_usage:
            event(
                [],
                {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": tokens, "total_tokens": tokens + PROMPT_TOKENS},
            )
        self._send(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        s.metrics.finish("length", tokens, first_token_s, loop.time() - t0, queued)


async def shutdown(schedule: Schedule, server: asyncio.AbstractServer, done: asyncio.Future[None]) -> None:
    """SIGTERM, as vLLM 0.23 answers it (the module's docstring): no new connections, then abort or drain."""
    server.close()
    loop = asyncio.get_running_loop()
    if not schedule.shutdown_timeout:
        # The streams in flight stop, and the server exits once their clients have closed them (on
        # the H200, vLLM held them until it was killed 120 s later: a pod's grace period ends it).
        schedule.aborted = True
        print(f"calibration server: SIGTERM, mode=abort in flight={len(schedule.streams)}", flush=True)
        while schedule.streams:
            await asyncio.sleep(0.05)
        done.set_result(None)
        return
    deadline = loop.time() + schedule.shutdown_timeout
    print(f"calibration server: SIGTERM, mode=drain timeout={schedule.shutdown_timeout}s "
          f"in flight={in_flight(schedule)}", flush=True)  # fmt: skip
    while in_flight(schedule) and loop.time() < deadline:
        await asyncio.sleep(0.02)
    for handler in list(schedule.streams):  # what the drain did not finish is cut
        if handler.transport:
            handler.transport.close()
    done.set_result(None)


def in_flight(schedule: Schedule) -> int:
    """Requests running or waiting: streams (vLLM's scheduler) and inferences (Triton's)."""
    m, t = schedule.metrics, schedule.triton
    return m.running + m.waiting + t.executing + t.pending


async def serve(schedule: Schedule, host: str = "127.0.0.1", port: int = 8100) -> asyncio.AbstractServer:
    rng = random.Random(schedule.seed)
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: Handler(schedule, rng), host, port, backlog=4096, reuse_address=True)


def launch(port: int = 0, *args: str, prefix: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """Start a calibration server in its own process; return it and its URL once it accepts.

    Port 0 picks a free one. ``prefix`` wraps the command (e.g. taskset to pin a core).
    """
    if not port:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
    command = [*prefix, sys.executable, "-m", "gpufleet.calibration_server", "--port", str(port), *args]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError(f"calibration server did not start on port {port}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--ttft", type=float, default=0.1, help="seconds to the first token")
    parser.add_argument("--itl", type=float, default=0.02, help="seconds between tokens")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--no-role-chunk", action="store_true")
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--cut-every", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", default="calibration", help="the model name it lists and answers as")
    parser.add_argument("--api-key-env", metavar="VAR", help="require the bearer key held in this variable")
    parser.add_argument("--max-num-seqs", type=int, default=0, help="requests served at once (0: no limit)")
    parser.add_argument("--shutdown-timeout", type=int, default=0, help="seconds to drain on SIGTERM (0: abort)")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="also answer on this port (Triton serves /metrics on its own, 8002)")  # fmt: skip
    args = parser.parse_args(argv)
    schedule = Schedule(
        args.ttft,
        args.itl,
        args.tokens,
        args.tokens_per_event,
        not args.no_role_chunk,
        args.jitter,
        args.fail_every,
        args.cut_every,
        args.seed,
        model=args.model,
        api_key=os.environ[args.api_key_env] if args.api_key_env else None,
        max_num_seqs=args.max_num_seqs,
        shutdown_timeout=args.shutdown_timeout,
    )
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is in the pinned set
        pass

    async def run() -> None:
        server = await serve(schedule, args.host, args.port)
        metrics = await serve(schedule, args.host, args.metrics_port) if args.metrics_port else None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(shutdown(schedule, server, done)))
        if metrics is not None:  # scraped through the drain, as Triton's metrics port is
            done.add_done_callback(lambda _done: metrics.close())
        print(f"calibration server (a stand-in, not vLLM) on http://{args.host}:{args.port}", flush=True)
        await done

    asyncio.run(run())


if __name__ == "__main__":
    main()
