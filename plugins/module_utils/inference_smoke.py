# SPDX-License-Identifier: Apache-2.0
"""Smoke checks of inference endpoints: is it up, is the model there, does one request work?

Stdlib only. Each check returns a result naming what failed and where to look.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    seconds: float


@dataclass
class SmokeReport:
    url: str
    kind: str
    ok: bool
    checks: list[Check] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.ok]


def _call(url: str, body: dict[str, Any] | None, timeout: float, api_key: str | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw.strip() else {}
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:300]


def _check(
    report: SmokeReport,
    name: str,
    url: str,
    body: dict[str, Any] | None,
    judge: Any,
    timeout: float,
    api_key: str | None = None,
) -> None:
    started = time.monotonic()
    try:
        status, payload = _call(url, body, timeout, api_key)
        detail = judge(status, payload)
    except (OSError, ValueError) as exc:
        detail = f"cannot reach {url}: {exc}"
    report.checks.append(Check(name, detail is None, detail or "ok", round(time.monotonic() - started, 3)))


def _status_ok(status: int, payload: Any) -> str | None:
    return None if status == 200 else f"HTTP {status}: {payload}"


def check_openai(url: str, model: str, timeout: float = 30, api_key: str | None = None) -> SmokeReport:
    """vLLM: /health, the model in /v1/models, one short completion with text in it (the API with
    the bearer key where the server asks for one; /health is open)."""
    base = url.rstrip("/")
    report = SmokeReport(url, "openai", False)
    _check(report, "health", base + "/health", None, _status_ok, timeout)

    def has_model(status: int, payload: Any) -> str | None:
        if status != 200:
            return f"HTTP {status}: {payload}"
        served = [m.get("id") for m in payload.get("data", [])]
        return None if model in served else f"model {model!r} not served; the server has {served}"

    _check(report, "model listed", base + "/v1/models", None, has_model, timeout, api_key)

    def has_text(status: int, payload: Any) -> str | None:
        if status != 200:
            return f"HTTP {status}: {payload}"
        choices = payload.get("choices") or [{}]
        text = choices[0].get("text") or (choices[0].get("message") or {}).get("content")
        return None if text else f"completion without text: {json.dumps(payload)[:200]}"

    body = {"model": model, "prompt": "Say hello.", "max_tokens": 8}
    _check(report, "one completion", base + "/v1/completions", body, has_text, timeout, api_key)
    report.ok = all(c.ok for c in report.checks)
    return report


def check_kserve_v2(url: str, model: str, inputs: list[dict[str, Any]], timeout: float = 30) -> SmokeReport:
    """Triton: /v2/health/ready, /v2/models/<model>/ready, one inference with outputs."""
    base = url.rstrip("/")
    report = SmokeReport(url, "kserve_v2", False)
    _check(report, "server ready", base + "/v2/health/ready", None, _status_ok, timeout)
    _check(report, "model ready", f"{base}/v2/models/{model}/ready", None, _status_ok, timeout)

    def has_outputs(status: int, payload: Any) -> str | None:
        if status != 200:
            return f"HTTP {status}: {payload}"
        return None if payload.get("outputs") else f"inference without outputs: {json.dumps(payload)[:200]}"

    _check(report, "one inference", f"{base}/v2/models/{model}/infer", {"inputs": inputs}, has_outputs, timeout)
    report.ok = all(c.ok for c in report.checks)
    return report
