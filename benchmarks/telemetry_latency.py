#!/usr/bin/env python3
"""Benchmark: how fast GPU telemetry reaches Prometheus, and how fast the tunnel heals.

On the lab (started by this script), prints:
  - converge end -> first fresh DCGM sample of the GPU node in Prometheus (goal: one scrape interval + 5 s)
  - recovery time after the tunnel's ssh process is killed (goal: under 15 s), over several kills
It resets the telemetry path first: the node's tunnel removed from the tunnel host, so the converge
makes it again.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "tests" / "e2e"))

import gpufleet_lab as lab
from conftest import GPU_NODE, PROMETHEUS, TUNNEL_HOST, in_host, wait_for_tunnel
from gpufleet_lab import k8s as labk8s

from gpufleet import runner

QUERY = f'timestamp(DCGM_FI_DEV_GPU_UTIL{{instance="{GPU_NODE}"}})'


def newest_sample() -> float:
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": QUERY})
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return max((float(r["value"][1]) for r in json.load(response)["data"]["result"]), default=0.0)
    except OSError:
        return 0.0


def main() -> None:
    labk8s.up()  # the lab inventory's hosts are the clusters' nodes
    assert runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True).ok
    # Reset: no tunnel for the node, so the next converge makes it from nothing.
    in_host(TUNNEL_HOST, f"systemctl stop gpufleet-tunnel@{GPU_NODE} && rm /etc/gpufleet/tunnels/{GPU_NODE}.env")
    summary = runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True)
    converged, converged_at = time.monotonic(), time.time()
    assert summary.ok, summary.failures
    while newest_sample() <= converged_at:
        if time.monotonic() - converged > 60:
            sys.exit("no fresh DCGM sample in Prometheus 60 s after converge")
        time.sleep(0.1)
    print(
        f"converge end -> first DCGM sample in Prometheus: {time.monotonic() - converged:.1f} s"
        " (scrape interval 5 s; goal <= 10 s)"
    )
    recoveries = []
    for _ in range(5):
        wait_for_tunnel()
        killed = time.monotonic()
        in_host(TUNNEL_HOST, "pkill -KILL -u gpufleet-tunnel -x ssh")
        wait_for_tunnel(timeout=30)
        recoveries.append(time.monotonic() - killed)
    print(
        f"tunnel recovery after kill -9 of ssh, 5 runs: median {statistics.median(recoveries):.2f} s,"
        f" max {max(recoveries):.2f} s (goal < 15 s)"
    )


if __name__ == "__main__":
    main()
