# SPDX-License-Identifier: Apache-2.0
"""Statistics over latencies (pure): percentiles, summaries, histograms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .records import PERCENTILES, RequestRecord

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
