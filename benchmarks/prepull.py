#!/usr/bin/env python3
"""Benchmark: prepull a 320 MiB FIXTURE image to 1, 4 and 8 lab nodes, across a throttled "WAN".

An upstream registry (lab host up1, CNCF distribution) holds the image; its link is
throttled with tc (tbf, 200 Mbit/s by default) to stand for the WAN. Per node count,
three ways:
  direct  every node pulls from upstream
  proxy   through m1's pull-through mirror (registry_mirror, proxy mode), one node first
  sync    m1 copies the image in once (registry_mirror, sync mode), then nodes pull from it
Printed per run: bytes upstream sent (its interface counter, so protocol overhead
included), copies of the image that makes, the wall time of the Ansible runs, and the
transfer time: first pull (or copy-in) task start to last pull task end, which leaves
out Ansible's fixed overhead; the ratio to one node is taken on that.

Usage: benchmarks/prepull.py [NODES ...] [--rate 200mbit]   (default 1 4 8)
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
from datetime import datetime
from pathlib import Path

import gpufleet_lab as lab
import yaml
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import fixture_image
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import k8s as labk8s

from gpufleet import runner

LAYERS, LAYER_MIB = 4, 80
IMAGE_MIB = LAYERS * LAYER_MIB
NET = ipaddress.ip_network(lab.SUBNET)
UPSTREAM = str(NET[250])
REPOSITORY = "gpufleet/prepull-fixture:320m"
IMAGE = f"{UPSTREAM}:5000/{REPOSITORY}"


def inventory(nodes: int) -> Path:
    target = lab.lab_dir() / "inventories" / f"prepull-{nodes}"
    (target / "group_vars").mkdir(parents=True, exist_ok=True)
    hosts = {
        "all": {
            "hosts": {"localhost": {"ansible_connection": "local",
                                    "ansible_python_interpreter": "{{ ansible_playbook_python }}"}},
            "children": {
                "registry_upstream": {"hosts": {"up1": {"ansible_host": UPSTREAM}}},
                "registry_mirrors": {"hosts": {"m1": {"ansible_host": str(NET[11])}}},
                "gpu_nodes": {"hosts": {f"gpu{i}": {"ansible_host": str(NET[20 + i])} for i in range(1, nodes + 1)}},
            },
        }
    }  # fmt: skip
    (target / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    common = yaml.safe_load((lab.LAB_INVENTORY.parent / "group_vars" / "all.yml").read_text())
    common = {k: v for k, v in common.items() if k.startswith(("ansible_", "gpufleet_lab_dir"))}
    common["gpufleet_lab_dir"] = str(lab.lab_dir())
    (target / "group_vars" / "all.yml").write_text(yaml.safe_dump(common, sort_keys=False))
    return target


def sh(host: str, command: str) -> str:
    return labcontainers.podman("exec", lab.CONTAINER_PREFIX + host, "sh", "-c", command).stdout


TRANSFER_TASKS = ("Pull the images", "Copy in the images it lacks (each blob fetched from upstream once)")


def run(playbook: str, inv: Path, extravars: dict | None = None, limit: str | None = None) -> tuple[float, float]:
    """(wall seconds of the run, seconds from the first transfer task's start to the last one's end)."""
    spans: list[tuple[datetime, datetime]] = []

    def on_event(event: dict) -> None:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") in TRANSFER_TASKS and data.get("start"):
            spans.append((datetime.fromisoformat(data["start"]), datetime.fromisoformat(data["end"])))

    summary = runner.run_playbook(playbook, inv, limit=limit, quiet=True, extravars=extravars, on_event=on_event)
    if not summary.ok:
        problems = [(f.host, f.task, f.message) for f in summary.failures]
        raise SystemExit(f"{playbook} {summary.status} (rc {summary.rc}, {summary.run_dir}): {problems}")
    transfer = (max(e for _, e in spans) - min(s for s, _ in spans)).total_seconds() if spans else 0.0
    return summary.seconds, transfer


def reset(nodes: int) -> None:
    """Nodes without the image, the mirror empty."""
    for i in range(1, nodes + 1):
        # Every name of the image (CRI adds its config digest as one), so its content is collected.
        sh(f"gpu{i}", "ctr -n k8s.io images rm --sync $(ctr -n k8s.io images ls -q) >/dev/null 2>&1; true")
    sh("m1", "systemctl stop docker-registry 2>/dev/null; rm -rf /var/lib/docker-registry/docker; "
             "systemctl start docker-registry 2>/dev/null; true")  # fmt: skip


def upstream_tx() -> int:
    return int(sh("up1", "cat /sys/class/net/eth0/statistics/tx_bytes"))


def measure(mode: str, nodes: int, inv: Path) -> dict:
    reset(nodes)
    endpoint = f"http://{UPSTREAM}:5000" if mode == "direct" else f"http://{NET[11]}:5000"
    mirrors = [{"registry": f"{UPSTREAM}:5000", "upstream": f"http://{UPSTREAM}:5000", "endpoints": [endpoint]}]
    limit = ",".join(f"gpu{i}" for i in range(1, nodes + 1)) + ",m1"
    before, seconds, transfer = upstream_tx(), 0.0, 0.0
    if mode != "direct":
        mirror = (
            {"registry_mirror_remote_url": f"http://{UPSTREAM}:5000"}
            if mode == "proxy"
            else {
                "registry_mirror_sync_images": [IMAGE],
                "registry_mirror_sync_insecure_registries": [f"{UPSTREAM}:5000"],
            }
        )
        wall, copy_in = run("playbooks/registry_mirror.yml", inv, mirror, limit="m1")
        seconds, transfer = seconds + wall, transfer + copy_in
    # Warming one node first only helps a mirror; direct pulls all start together.
    prepull = {"gpufleet_gpu_present": False, "gpufleet_registry_mirrors": mirrors, "image_prepull_images": [IMAGE],
               "image_prepull_warm_first": mode != "direct"}  # fmt: skip
    wall, pulls = run("playbooks/nodes.yml", inv, prepull, limit=limit)
    seconds, transfer = seconds + wall, transfer + pulls
    sent = upstream_tx() - before
    return {"mode": mode, "nodes": nodes, "upstream_mib": round(sent / 2**20),
            "copies": round(sent / (IMAGE_MIB * 2**20), 2), "seconds": round(seconds, 1),
            "transfer_s": round(transfer, 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nodes", nargs="*", type=int, default=[1, 4, 8])
    parser.add_argument("--rate", default="200mbit", help="upstream link rate (tc tbf)")
    args = parser.parse_args()
    inv = inventory(max(args.nodes))
    labhosts.up(inv / "hosts.yml")
    run("benchmarks/prepull.yml", inv)
    fixture_image.push(fixture_image.build(IMAGE, LAYERS, LAYER_MIB), IMAGE)
    sh("up1", f"tc qdisc replace dev eth0 root tbf rate {args.rate} burst 256kb latency 100ms")
    results = []
    try:
        for nodes in args.nodes:
            for mode in ("direct", "proxy", "sync"):
                results.append(measure(mode, nodes, inv))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        labk8s.remove_plain_hosts()  # its hosts, the mirror on m1 with them
    print(f"upstream link {args.rate}, image {IMAGE_MIB} MiB ({LAYERS} layers)")
    header = ("nodes", "mode", "upstream MiB", "copies", "run s", "transfer s", "vs 1 node")
    print("{:>5} {:>7} {:>13} {:>7} {:>6} {:>10} {:>9}".format(*header))
    single = {r["mode"]: r["transfer_s"] for r in results if r["nodes"] == min(args.nodes)}
    for r in results:
        print(f"{r['nodes']:5} {r['mode']:>7} {r['upstream_mib']:13} {r['copies']:7.2f} {r['seconds']:6.1f}"
              f" {r['transfer_s']:10.1f} {r['transfer_s'] / single[r['mode']]:9.2f}")  # fmt: skip
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
