#!/usr/bin/env python3
"""Benchmark: how fast the telemetry tunnel heals after the link silently fails (not a test).

On the converged lab, for each outage length, every packet between the GPU node (worker-gpu1) and
the tunnel host (worker-main) is dropped inside the node's network namespace (no reset, as a failed
WAN link), then the link heals.
Prints, per outage: seconds from the link healing to the exporter answering through the tunnel
(goal: 15 s, whatever the outage lasted), and to a fresh DCGM sample in Prometheus.

    python benchmarks/tunnel_outage.py [--outages 60,300,1800]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "tests" / "e2e"))

import gpufleet_lab as lab
from conftest import GPU_NODE, PROMETHEUS, link_outage, wait_for_tunnel
from gpufleet.lib import prometheus_verify as pv
from gpufleet_lab import k8s as labk8s

from gpufleet import runner

QUERY = f'DCGM_FI_DEV_GPU_UTIL{{instance="{GPU_NODE}"}}'


def fresh_sample_after(since: float, timeout: float = 120) -> float:
    """Seconds from `since` until Prometheus holds a sample of the GPU node newer than it."""
    while time.time() - since < timeout:
        result = pv.query(PROMETHEUS, f"timestamp({QUERY})", time.time())
        if result and float(result[0]["value"][1]) > since:
            return time.time() - since
        time.sleep(0.5)
    raise AssertionError(f"no fresh sample within {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outages", default="60,300,1800", help="outage lengths in seconds")
    args = parser.parse_args()
    labk8s.up()  # the lab inventory's hosts are the clusters' nodes
    assert runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True).ok
    wait_for_tunnel()
    print(f"{'outage s':>9} {'tunnel back s':>14} {'fresh sample s':>15}")
    for outage in (int(x) for x in args.outages.split(",")):
        with link_outage():
            time.sleep(outage)
        healed = time.time()
        tunnel = wait_for_tunnel(timeout=300)
        sample = fresh_sample_after(healed)
        print(f"{outage:>9} {tunnel:>14.1f} {sample:>15.1f}")


if __name__ == "__main__":
    main()
