#!/usr/bin/env python3
"""Benchmark: how fast GPU telemetry reaches Prometheus, and how fast the tunnel heals.

On the lab (started by this script), prints:
  - converge end -> first DCGM sample of gpu1 queryable in Prometheus (goal: one scrape interval + 5 s)
  - recovery time after the tunnel's ssh process is killed (goal: under 15 s), over several kills
It resets the telemetry path first (tunnel stopped, targets removed, Prometheus TSDB wiped).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lab"))

from conftest import PROMETHEUS, in_host, wait_for_tunnel

from gpufleet import lab, runner

QUERY = 'DCGM_FI_DEV_GPU_UTIL{instance="gpu1"}'


def sample_count() -> int:
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": QUERY})
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return len(json.load(response)["data"]["result"])
    except OSError:
        return 0


def main() -> None:
    lab.up()
    assert runner.run_playbook(lab.PLAYBOOK, lab.LAB_INVENTORY.parent, quiet=True).ok
    # Reset: no tunnel, no discovered targets, empty TSDB, so the next converge starts from nothing.
    in_host(
        "m1",
        "systemctl stop gpufleet-tunnel@gpu1 prometheus && rm -rf /var/lib/prometheus/metrics2/*"
        " /etc/prometheus/kubernetes/*.json && systemctl start prometheus",
    )
    summary = runner.run_playbook(lab.PLAYBOOK, lab.LAB_INVENTORY.parent, quiet=True)
    converged = time.monotonic()
    assert summary.ok, summary.failures
    while sample_count() == 0:
        if time.monotonic() - converged > 60:
            sys.exit("no DCGM sample in Prometheus 60 s after converge")
        time.sleep(0.1)
    print(
        f"converge end -> first DCGM sample in Prometheus: {time.monotonic() - converged:.1f} s"
        " (scrape interval 5 s; goal <= 10 s)"
    )
    recoveries = []
    for _ in range(5):
        wait_for_tunnel()
        killed = time.monotonic()
        in_host("m1", "pkill -KILL -u gpufleet-tunnel -x ssh")
        wait_for_tunnel(timeout=30)
        recoveries.append(time.monotonic() - killed)
    print(
        f"tunnel recovery after kill -9 of ssh, 5 runs: median {statistics.median(recoveries):.2f} s,"
        f" max {max(recoveries):.2f} s (goal < 15 s)"
    )


if __name__ == "__main__":
    main()
