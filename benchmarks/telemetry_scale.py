#!/usr/bin/env python3
"""Benchmark: the tunnel's scraping against remote write, at 32, 128 and 512 GPU nodes (not a test).

Runs on the telemetry_agent molecule scenario's two hosts, converged first:

    cd roles/telemetry_agent && molecule -c ../../molecule/config.yml converge
    python benchmarks/telemetry_scale.py [--nodes 32,128,512] [--window 60]

On rw-gpu one FIXTURE exporter process simulates N GPU nodes (one port each, 4 GPUs each, the
collection's DCGM fields). Then, per N:

- scrape: the main Prometheus (rw-main) scrapes the N exporters across the link, as it does
  through the tunnel (without ssh's own bytes and processes: a lower bound on the tunnel's cost);
- remote_write: the agent on rw-gpu scrapes them on loopback and remote-writes to rw-main over
  TLS with basic auth (one agent for N simulated nodes: production runs one per node, whose
  smaller batches compress a little less).

Prints, per mode and N: the main Prometheus's CPU (cores) and resident memory, the bytes on the
link per sample carried, and the seconds from the configuration's change to the last node's
first sample at the main side. Restores the scenario's configuration at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import yaml
from gpufleet.lib import prometheus_verify as pv
from gpufleet_lab import containers as labcontainers

INTERVAL = 5  # both Prometheus servers scrape every 5 s in the scenario
BASE_PORT = 20000
FILE_SD = "/etc/prometheus/file_sd/gpufleet-dcgm.yml"  # the main Prometheus's job gpufleet-dcgm reads it


def run(container: str, *command: str) -> str:
    return labcontainers.podman("exec", container, *command).stdout


def write(container: str, path: str, text: str) -> None:
    subprocess.run(
        ["podman", "exec", "-i", container, "sh", "-c", f"cat > {path}"],
        input=text, text=True, check=True, env=labcontainers.podman_env(),
    )  # fmt: skip


def main_process() -> tuple[float, float]:
    """CPU seconds and resident MiB of the main Prometheus, from /proc (its API is behind TLS and
    auth, and it does not scrape itself there)."""
    pid = run("rw-main", "systemctl", "show", "prometheus", "-p", "MainPID", "--value").strip()
    fields = run("rw-main", "cat", f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in ticks of 1/100 s
    rss = int(fields[21]) * 4096 / 2**20
    return cpu, rss


def link_bytes() -> int:
    rx, tx = (int(run("rw-gpu", "cat", f"/sys/class/net/eth0/statistics/{d}_bytes")) for d in ("rx", "tx"))
    return rx + tx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="32,128,512")
    parser.add_argument("--window", type=int, default=60, help="seconds measured per mode and size")
    args = parser.parse_args()
    pki = sorted(Path.home().glob(".ansible/tmp/molecule.*.default/pki"), key=lambda p: p.stat().st_mtime)[-1]
    main_address = run("rw-main", "hostname", "-I").split()[0]
    gpu_address = run("rw-gpu", "hostname", "-I").split()[0]
    server = pv.Server(
        f"https://{main_address}:9090", "gpufleet-agent", (pki / "agent-password").read_text().split()[0],
        str(pki / "ca.crt"),
    )  # fmt: skip
    agent_config = run("rw-gpu", "cat", "/etc/prometheus/prometheus.yml")
    largest = max(int(n) for n in args.nodes.split(","))
    run(
        "rw-gpu", "systemd-run", "--unit", "gpufleet-simulated-nodes", "python3",
        "/usr/local/lib/gpufleet/dcgm_fixture_exporter.py", "--counters", "/etc/gpufleet/dcgm-fixture-counters.csv",
        "--listen", f"0.0.0.0:{BASE_PORT}", "--nodes", str(largest), "--gpus", "4", "--node-name", "sim",
    )  # fmt: skip
    time.sleep(3)

    def value(promql: str) -> float:
        result = pv.query(server, promql)
        return float(result[0]["value"][1]) if result else 0.0

    def measure(mode: str, nodes: int, apply) -> None:
        changed = time.time()
        apply()
        while value('count(count by (instance) (DCGM_FI_DEV_GPU_TEMP{instance=~"sim-.*"}))') < nodes:
            if time.time() - changed > 300:
                raise SystemExit(f"{mode}: fewer than {nodes} nodes at the main side after 300 s")
            time.sleep(1)
        first = time.time() - changed
        time.sleep(2 * INTERVAL)
        (cpu0, _), bytes0, t0 = main_process(), link_bytes(), time.time()
        time.sleep(args.window)
        (cpu1, rss), bytes1, t1 = main_process(), link_bytes(), time.time()
        # One sample per series and scrape interval.
        samples = value('count({instance=~"sim-.*"})') * (t1 - t0) / INTERVAL
        print(
            f"{mode:>12} {nodes:>6} {(cpu1 - cpu0) / (t1 - t0):>10.2f} {rss:>8.0f} "
            f"{(bytes1 - bytes0) / max(samples, 1):>14.1f} {samples / (t1 - t0):>10.0f} {first:>14.1f}"
        )

    def scrape(nodes: int) -> None:
        run("rw-gpu", "systemctl", "stop", "prometheus")  # the agent: only the main side scrapes
        groups = [
            {"targets": [f"{gpu_address}:{BASE_PORT + i}"], "labels": {"instance": f"sim-{i}"}} for i in range(nodes)
        ]
        write("rw-main", FILE_SD, yaml.safe_dump(groups))

    def remote_write(nodes: int) -> None:
        write("rw-main", FILE_SD, "[]\n")
        config = yaml.safe_load(agent_config)
        config["scrape_configs"] = [{
            "job_name": "gpufleet-dcgm",
            "static_configs": [{"targets": [f"127.0.0.1:{BASE_PORT + i}"], "labels": {"instance": f"sim-{i}"}}
                               for i in range(nodes)],
        }]  # fmt: skip
        write("rw-gpu", "/etc/prometheus/prometheus.yml", json.dumps(config))
        run("rw-gpu", "systemctl", "restart", "prometheus")

    header = ("mode", "nodes", "main cores", "main MiB", "link B/sample", "samples/s", "last node s")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (12, 6, 10, 8, 14, 10, 14), strict=True)))
    try:
        for nodes in (int(n) for n in args.nodes.split(",")):
            for mode, apply in (("scrape", scrape), ("remote_write", remote_write)):
                measure(mode, nodes, lambda apply=apply, nodes=nodes: apply(nodes))
                # Let the series of this round go stale before the next one counts nodes.
                write("rw-main", FILE_SD, "[]\n")
                run("rw-gpu", "systemctl", "stop", "prometheus")
                time.sleep(6 * INTERVAL)
    finally:
        write("rw-main", FILE_SD, "[]\n")
        write("rw-gpu", "/etc/prometheus/prometheus.yml", agent_config)
        run("rw-gpu", "systemctl", "restart", "prometheus")
        run("rw-gpu", "systemctl", "stop", "gpufleet-simulated-nodes")


if __name__ == "__main__":
    main()
