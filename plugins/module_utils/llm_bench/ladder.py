# SPDX-License-Identifier: Apache-2.0
"""The ladder: the levels one after another, the fixed-length probe, and the benchmark's result."""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .http import auth_headers, send
from .level import run_level
from .prompts import prompt_for
from .records import BenchConfig, LevelResult, RequestRecord
from .repeats import combine
from .verdicts import capacity_level, drop_cause, find_drops, find_knee, next_search_level, operating_point

# --- the ladder ----------------------------------------------------------------


@dataclass
class BenchResult:
    config: dict[str, Any]
    levels: list[LevelResult]
    knee_index: int | None
    operating_point_index: int | None
    started: float
    finished: float
    drop_indices: list[int] = field(default_factory=list)  # levels whose throughput fell below a lower one's
    # The SLO capacity search's answer: the highest level within the SLO (None: none was, or no search).
    capacity_index: int | None = None
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

    def next_level(position: int) -> int | float | None:
        if cfg.search:
            found = next_search_level(cfg, levels)
            return None if found is None else int(found) if cfg.mode == "closed" else found
        return ladder[position] if position < len(ladder) else None

    position = 0
    while (level := next_level(position)) is not None:
        # A window must hold whole requests: lengthen it to a few E2E P50s of the level before.
        previous = [lv.e2e["p50"] for lv in levels if lv.completed and not math.isnan(lv.e2e["p50"])]
        duration = max(cfg.duration_s, cfg.window_e2e_multiple * previous[-1]) if previous else cfg.duration_s
        cache_before = server_cache_counters(cfg.base_url) if cfg.api != "kserve_v2" else None
        runs = []
        for repeat in range(max(1, cfg.repeats)):
            # Each repeat numbers its requests from its own block: no prompt is sent twice.
            first = (position + 1) * 1_000_000_000 + repeat * 100_000_000
            run = run_level(run_cfg, level, first_request=first, duration_s=duration)
            for sampler in (gpu, server):
                if sampler is not None:
                    try:
                        sampler(run)
                    except Exception as exc:
                        run.warnings.append(f"no {getattr(sampler, 'source', 'sampler')} figures: {exc}")
            runs.append(run)
            if run.stopped_early:
                break
        result = combine(runs)
        if duration > cfg.duration_s:
            result.warnings.append(
                f"window lengthened from {cfg.duration_s:g}s to {duration:.1f}s"
                f" ({cfg.window_e2e_multiple:g} x the previous level's E2E P50)"
            )
        cache_after = server_cache_counters(cfg.base_url) if cache_before else None
        if cache_before and cache_after and cache_after[1] > cache_before[1]:
            result.prefix_cache_hit_rate = (cache_after[0] - cache_before[0]) / (cache_after[1] - cache_before[1])
            result.prefix_cache_source = "the server's vllm:prefix_cache_hits_total / queries_total"
        levels.append(result)
        position += 1
        if result.stopped_early:
            rest = ", ".join(f"{x:g}" for x in ladder[position:])
            warnings.append(f"level {level:g} stopped early; " + ("the capacity search stopped there" if cfg.search
                            else f"levels {rest} not run" if rest else "it was the last"))  # fmt: skip
            break
        if cfg.auto_ladder_max and find_knee(levels, cfg.knee_gain) is not None:
            break
    if cfg.search:
        levels.sort(key=lambda lv: float(lv.level))  # probed out of order: the verdicts read them in order
    if gpu is None:
        warnings.append("no GPU figures: no NVML on this host and no Prometheus URL given")
    if fixed["used"] is False and cfg.api != "kserve_v2":
        warnings.append(f"output length not fixed ({fixed['why']}): token counts are what arrived")
    drops = find_drops(levels, cfg.knee_gain)
    for i, below in drops.items():
        best = levels[below]
        fell = 1 - levels[i].output_tokens_per_s / best.output_tokens_per_s
        warnings.append(
            f"level {levels[i].level:g}: throughput fell {fell:.0%} below level {best.level:g}'s"
            f" ({levels[i].output_tokens_per_s:.1f} against {best.output_tokens_per_s:.1f} tok/s); likely cause:"
            f" {drop_cause(levels[i], bool(fixed['used']))}"
        )
    streamed = [lv for lv in levels if lv.dialect]
    dialect = dict(streamed[0].dialect) if streamed else {}
    if streamed:
        # Servers pack more tokens into an event as their batches grow: each level's own figure, not the first's.
        by_level = {f"{lv.level:g}": lv.dialect["tokens_per_event"] for lv in streamed}
        dialect["tokens_per_event"] = sum(by_level.values()) / len(by_level)
        dialect["tokens_per_event_by_level"] = by_level
    return BenchResult(
        config={**asdict(cfg), "api_key": "(hidden)" if cfg.api_key else None},
        levels=levels,
        knee_index=find_knee(levels, cfg.knee_gain),
        operating_point_index=operating_point(levels, cfg.p99_slo_s, cfg.recommend_within),
        drop_indices=list(drops),
        capacity_index=capacity_level(cfg, levels) if cfg.search else None,
        started=started,
        finished=time.time(),
        fixed_length=fixed,
        dialect=dialect,
        gpu_source=getattr(gpu, "source", "unnamed") if gpu is not None else "none",
        gpu_stand_in=getattr(gpu, "stand_in", None),
        warnings=warnings,
    )
