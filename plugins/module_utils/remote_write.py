# SPDX-License-Identifier: Apache-2.0
"""What a Prometheus agent's remote-write queue has not sent yet, from its own /metrics."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_APPENDED = "prometheus_remote_storage_highest_timestamp_in_seconds"
_SENT = "prometheus_remote_storage_queue_highest_sent_timestamp_seconds"


def backlog_seconds(metrics_text: str) -> float:
    """Seconds between the newest sample in the WAL and the newest one the slowest queue has sent:
    what a restart would drop (the WAL is not re-read for samples after a restart, upstream
    prometheus/prometheus#8809). 0 when nothing was appended yet; a queue that never sent
    anything counts from the epoch, so it is never mistaken for caught up."""
    appended = 0.0
    sent: list[float] = []
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        if match["name"] == _APPENDED:
            appended = float(match["value"])
        elif match["name"] == _SENT:
            sent.append(float(match["value"]))
    if appended <= 0:
        return 0.0
    return max(0.0, appended - min(sent, default=0.0))
