# SPDX-License-Identifier: Apache-2.0
"""Repeats of a level: its runs combined into one level whose figures are the runs' means, each with a
95 % confidence interval over the runs (Student's t: a handful of runs, not a normal's many).

Back-to-back runs on one vLLM server on the H200 differed by 10 to 15 % at 128 and 256 streams: one
run's figure cannot say whether the next level is better, so the verdicts read the intervals where a
level has them (``interval``)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import replace
from typing import Any

from .records import LevelResult

# Student's t at 97.5 % (a two-sided 95 % interval) by degrees of freedom; the normal's 1.96 beyond 30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)  # fmt: skip

# The figures given with an interval: name -> (the LevelResult's field, the percentile, or None for a number).
FIGURES: dict[str, tuple[str, str | None]] = {
    "output_tokens_per_s": ("output_tokens_per_s", None),
    "requests_per_s": ("requests_per_s", None),
    "goodput_requests_per_s": ("goodput_requests_per_s", None),
    "goodput_share": ("goodput_share", None),
    **{f"{name}_{pct}": (name, pct) for name in ("ttft", "tpot", "itl", "e2e") for pct in ("p50", "p99")},
}


def figure(level: LevelResult, name: str) -> float | None:
    """One run's figure of FIGURES."""
    field_name, pct = FIGURES[name]
    value = getattr(level, field_name)
    found = value[pct] if pct else value
    return None if found is None else float(found)


def interval(values: list[float | None]) -> dict[str, Any]:
    """Mean and 95 % confidence interval of ``values`` (NaN and None left out), the runs beside them."""
    runs = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not runs:
        return {"mean": math.nan, "low": math.nan, "high": math.nan, "runs": []}
    mean = statistics.fmean(runs)
    if len(runs) < 2:
        return {"mean": mean, "low": mean, "high": mean, "runs": runs}
    t = _T975[len(runs) - 2] if len(runs) - 1 <= len(_T975) else 1.96
    half = t * statistics.stdev(runs) / math.sqrt(len(runs))
    return {"mean": mean, "low": mean - half, "high": mean + half, "runs": runs}


def _mean_dict(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers averaged key by key over the runs that have them; the rest as the first run had them."""
    merged: dict[str, Any] = dict(parts[0]) if parts else {}
    for key in merged:
        numbers = [float(v) for p in parts if isinstance(v := p.get(key), int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(parts):
            merged[key] = statistics.fmean(numbers)
    return merged


def combine(runs: list[LevelResult]) -> LevelResult:
    """One level from its repeats: each figure the runs' mean (percentiles too: the mean of each run's
    P99), counts summed, valid only where every run was, and ``intervals`` giving each figure's."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    mean = {name: interval([figure(lv, name) for lv in runs]) for name in FIGURES}

    def latency(name: str) -> dict[str, float]:
        return _mean_dict([getattr(lv, name) for lv in runs])

    errors: Counter[str] = Counter()
    for lv in runs:
        errors.update(lv.errors)
    reasons = [f"repeat {n + 1}: {reason}" for n, lv in enumerate(runs) for reason in lv.invalid_reasons]
    return replace(
        first,
        window_s=sum(lv.window_s for lv in runs),
        requests=sum(lv.requests for lv in runs),
        completed=sum(lv.completed for lv in runs),
        errors=dict(errors),
        output_tokens=sum(lv.output_tokens for lv in runs),
        requests_per_s=mean["requests_per_s"]["mean"],
        output_tokens_per_s=mean["output_tokens_per_s"]["mean"],
        goodput_requests_per_s=None if first.goodput_requests_per_s is None else mean["goodput_requests_per_s"]["mean"],
        goodput_share=None if first.goodput_share is None else mean["goodput_share"]["mean"],
        ttft=latency("ttft"), tpot=latency("tpot"), itl=latency("itl"), e2e=latency("e2e"),
        queue=latency("queue"), receive_lag=latency("receive_lag"),
        client_cpu=max(lv.client_cpu for lv in runs),
        loop_lag_p99_s=max(lv.loop_lag_p99_s for lv in runs),
        client_bound=any(lv.client_bound for lv in runs),
        client_bound_reasons=sorted({r for lv in runs for r in lv.client_bound_reasons}),
        window_start=first.window_start, window_end=runs[-1].window_end,
        ttft_histogram=first.ttft_histogram,
        gpu=_mean_dict([lv.gpu for lv in runs]) if all(lv.gpu for lv in runs) else first.gpu,
        server=_mean_dict([lv.server for lv in runs]) if all(lv.server for lv in runs) else first.server,
        warnings=list(dict.fromkeys(w for lv in runs for w in lv.warnings)),
        wall_s=sum(lv.wall_s for lv in runs),
        error_rate=statistics.fmean(lv.error_rate for lv in runs),
        valid=all(lv.valid for lv in runs),
        invalid_reasons=reasons,
        stopped_early=next((lv.stopped_early for lv in runs if lv.stopped_early), None),
        repeats=len(runs),
        intervals=mean,
    )  # fmt: skip
