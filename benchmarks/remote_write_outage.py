#!/usr/bin/env python3
"""Benchmark: what a Prometheus agent's remote write keeps across a silent link outage (not a test).

Runs on the telemetry_agent molecule scenario's two hosts, converged first:

    cd roles/telemetry_agent && molecule -c ../../molecule/config.yml converge
    python benchmarks/remote_write_outage.py [--outages 600] [--restart-at 0]

For each outage length, every packet between the GPU node (rw-gpu) and the receiver (rw-main) is
dropped in rw-gpu's network namespace (no reset, as a failed WAN link), then the link heals.
Prints the samples the receiver should hold for the outage window (one per scrape interval), the
samples it holds, the seconds missing, and how long after the link healed it caught up. With
--restart-at S the agent is restarted S seconds into each outage (upstream drops what its queue
had not sent: prometheus/prometheus#8809).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from gpufleet.lib import prometheus_verify as pv
from gpufleet_lab import containers as labcontainers

INTERVAL = 5  # the scenario's telemetry_agent_scrape_interval
SERIES = 'DCGM_FI_DEV_GPU_TEMP{job="gpufleet-dcgm",instance="rw-gpu",gpu="0"}'


def scenario_dir() -> Path:
    """The scenario's ephemeral directory (molecule's, under ~/.ansible/tmp), where its PKI and password are."""
    found = sorted(Path.home().glob(".ansible/tmp/molecule.*.default/pki"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit("converge the telemetry_agent scenario first (see this file's docstring)")
    return found[-1]


def in_container(name: str, *command: str) -> str:
    return labcontainers.podman("exec", name, *command).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outages", default="600", help="outage lengths in seconds")
    parser.add_argument("--restart-at", type=int, default=0, help="restart the agent this many seconds in (0: never)")
    args = parser.parse_args()
    pki = scenario_dir()
    address = in_container("rw-main", "hostname", "-I").split()[0]
    password = (pki / "agent-password").read_text().split()[0]
    server = pv.Server(f"https://{address}:9090", "gpufleet-agent", password, str(pki / "ca.crt"))

    def newest() -> float:
        result = pv.query(server, f"timestamp({SERIES})")
        return float(result[0]["value"][1]) if result else 0.0

    print(f"{'outage s':>9} {'restart s':>9} {'expected':>9} {'held':>6} {'missing s':>10} {'caught up s':>12}")
    for outage in (int(x) for x in args.outages.split(",")):
        with labcontainers.silent_link_outage("rw-gpu", address):
            started = time.time()
            if args.restart_at:
                time.sleep(args.restart_at)
                in_container("rw-gpu", "systemctl", "restart", "prometheus")
            time.sleep(max(0.0, outage - (time.time() - started)))
            ended = time.time()
        healed = time.time()
        while time.time() - newest() > 2 * INTERVAL and time.time() - healed < 600:
            time.sleep(1)
        caught_up = time.time() - healed
        window = int(ended - started) + 2 * INTERVAL
        result = pv.query(server, f"{SERIES}[{window}s]", ended + INTERVAL)
        stamps = [float(t) for t, _ in result[0]["values"]] if result else []
        missing = sum(b - a - INTERVAL for a, b in itertools.pairwise(stamps) if b - a > 1.5 * INTERVAL)
        print(
            f"{outage:>9} {args.restart_at or '-':>9} {window // INTERVAL:>9} {len(stamps):>6} "
            f"{missing:>10.0f} {caught_up:>12.1f}"
        )


if __name__ == "__main__":
    main()
