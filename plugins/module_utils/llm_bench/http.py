# SPDX-License-Identifier: Apache-2.0
"""The requests on the wire: their bodies and headers, and the server's streamed events (SSE) read as they arrive."""

from __future__ import annotations

import json
import time
from typing import Any

from .records import BenchConfig, RequestRecord


def auth_headers(cfg: BenchConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


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
