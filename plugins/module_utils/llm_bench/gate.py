# SPDX-License-Identifier: Apache-2.0
"""A canary's benchmark step: one level of streams against one endpoint, judged against limits; the
exit status is the verdict (0 met them, 1 missed one, 2 could not run), so a Kubernetes Job that runs it
succeeds or fails with it (Argo Rollouts' job metric reads exactly that).

    python3 -m gpufleet.lib.llm_bench.gate --url http://vllm-canary:8000 --model M --streams 8 \\
        --duration 30 --ttft-p99 0.61 --tpot-p99 0.0083

The roles' canaries run it with the capacity file's workload (API, output tokens, prompt lengths) at
a share of the level a replica was measured to sustain, and its figures there as the limits: the new
version, given less load than the old one was measured at, must do at least as well. One JSON line says
what was measured and which limit was missed. A level the client could not keep up with (client-bound)
or that no request survived judges nothing, and is a miss: a canary is promoted on a measurement only.
Needs Python and aiohttp alone (the lab's image: Debian's python3-aiohttp and this package)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from typing import Any

from .ladder import probe_fixed_length
from .level import run_level
from .records import BenchConfig, LevelResult


def verdict(level: LevelResult, ttft_p99_s: float | None, tpot_p99_s: float | None) -> dict[str, Any]:
    """What one level measured against the limits (pure: unit-tested)."""
    measured = {"ttft_p99_s": level.ttft.get("p99", math.nan), "tpot_p99_s": level.tpot.get("p99", math.nan)}
    missed = [
        f"{name} {measured[name]:.4g} s > {limit:.4g} s"
        for name, limit in (("ttft_p99_s", ttft_p99_s), ("tpot_p99_s", tpot_p99_s))
        if limit is not None and not measured[name] <= limit  # NaN (nothing measured) misses too
    ]
    if not level.valid:
        missed.append("the level judges nothing: " + "; ".join(level.invalid_reasons))
    return {
        "streams": level.level,
        "requests": level.requests,
        "errors": sum(level.errors.values()),
        "error_rate": round(level.error_rate, 4),
        **{name: round(value, 4) if not math.isnan(value) else None for name, value in measured.items()},
        "limits": {"ttft_p99_s": ttft_p99_s, "tpot_p99_s": tpot_p99_s, "error_rate": None},
        "missed": missed,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m gpufleet.lib.llm_bench.gate", description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="the endpoint, such as http://vllm-canary:8000")
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument("--streams", type=int, required=True, help="concurrent streams (closed loop)")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds before the window")
    p.add_argument("--duration", type=float, default=30.0, help="the window's seconds")
    p.add_argument("--api", choices=["chat", "completions"], default="chat")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--input-len", default="96:160", help="random prompts of MIN[:MAX] words")
    p.add_argument("--fixed-length", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--ttft-p99", type=float, help="limit (s) on the TTFT P99")
    p.add_argument("--tpot-p99", type=float, help="limit (s) on the TPOT P99")
    p.add_argument("--max-error-rate", type=float, default=BenchConfig.max_error_rate)
    p.add_argument("--api-key-env", metavar="VAR", help="the bearer key is in this environment variable")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    low, _, high = args.input_len.partition(":")
    if args.streams < 1 or args.duration <= 0:
        print("gate: --streams at least 1 and --duration above 0", file=sys.stderr)
        return 2
    cfg = BenchConfig(
        base_url=args.url, model=args.model, api=args.api, max_tokens=args.max_tokens,
        prompt_words=(int(low), int(high or low)), fixed_length=args.fixed_length, warmup_s=args.warmup,
        duration_s=args.duration, max_error_rate=args.max_error_rate, request_timeout_s=120,
        api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
    )  # fmt: skip
    try:
        fixed = probe_fixed_length(cfg)
        level = run_level(replace(cfg, fixed_length="on" if fixed["used"] else "off"), args.streams)
    except Exception as exc:  # the endpoint cannot be reached at all: no verdict
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 2
    found = verdict(level, args.ttft_p99, args.tpot_p99)
    found["limits"]["error_rate"] = args.max_error_rate
    print(json.dumps(found), flush=True)  # the figures before the verdict, whose line ends the log
    if found["missed"]:
        print(f"gate: {args.url} at {args.streams} streams missed: {'; '.join(found['missed'])}", file=sys.stderr)
        return 1
    print(f"gate: {args.url} at {args.streams} streams met every limit", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
