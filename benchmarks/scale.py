#!/usr/bin/env python3
"""Benchmark: site.yml's node-level plays on 1, 8 and 32 lab GPU nodes.

Per host count it prints: first-converge and no-op re-run wall time, task executions
per host on the no-op re-run (by role, ran and skipped), the peak memory of the
controller's Ansible processes (sum of PSS, so forked workers' shared pages count once),
and the wall time of two floor playbooks of ansible.builtin.ping tasks on the same hosts:
one ping per task result of the no-op run, and one ping per task that ran (skipped ones
left out). On this 2-core machine the lab hosts share the cores with the controller:
read the ratios, not the absolute times.

Usage: benchmarks/scale.py [HOSTS ...]   (default 1 8 32; the lab is resized, then put back)
"""

from __future__ import annotations

import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

import gpufleet_lab as lab
import yaml
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab.measure import PeakMemory

from gpufleet import runner

NODE_PLAYS = "all:!localhost"  # site.yml without the plays that talk to cluster APIs


RESULTS = ("runner_on_ok", "runner_on_skipped", "runner_on_failed")


def timed_run(playbook: str, inventory: Path, per_role: collections.Counter[tuple[str, str, bool]] | None = None):
    """Wall time, peak memory and problems; per_role counts results by (host, role, skipped)."""

    def on_event(event: dict[str, Any]) -> None:
        data = event.get("event_data", {})
        if per_role is not None and event.get("event") in RESULTS:
            key = (data.get("host", "?"), data.get("role") or "(play)", event["event"] == "runner_on_skipped")
            per_role[key] += 1

    with PeakMemory() as memory:
        summary = runner.run_playbook(playbook, inventory, limit=NODE_PLAYS, quiet=True, on_event=on_event)
    problems = [f"{f.host}: {f.task}: {f.message}" for f in summary.failures]
    return summary.seconds, memory.peak_kib / 1024, problems


def floor_playbook(tasks_per_host: dict[str, int], path: Path) -> Path:
    """One play per distinct task count, each host running that many pings."""
    by_count: dict[int, list[str]] = collections.defaultdict(list)
    for host, count in tasks_per_host.items():
        by_count[count].append(host)
    plays = [
        {"name": f"{count} pings", "hosts": ":".join(sorted(hosts)), "gather_facts": False,
         "tasks": [{"name": f"ping {i}", "ansible.builtin.ping": {}} for i in range(count)]}
        for count, hosts in sorted(by_count.items())
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    return path


def measure(gpu_nodes: int) -> dict[str, Any]:
    inventory = labinventory.scale_inventory(gpu_nodes)
    started = time.monotonic()
    labhosts.up(inventory)
    lab_up_s = time.monotonic() - started
    first_s, first_mib, first_problems = timed_run(lab.PLAYBOOK, inventory.parent)
    per_role: collections.Counter[tuple[str, str, bool]] = collections.Counter()
    noop_s, noop_mib, noop_problems = timed_run(lab.PLAYBOOK, inventory.parent, per_role)
    # Two floors: one ping per task result (a skipped task counts as one), and the
    # stricter one, one ping per task that ran (skipped tasks count for nothing).
    every_task: dict[str, int] = collections.Counter()
    ran: dict[str, int] = collections.Counter()
    for (host, _role, skipped), count in per_role.items():
        every_task[host] += count
        ran[host] += 0 if skipped else count
    floors = {}
    for name, counts in (("ping_floor", every_task), ("ran_floor", ran)):
        floor = floor_playbook(counts, lab.lab_dir() / f"scale-{name.replace('_', '-')}-{gpu_nodes}.yml")
        # The floor playbook lives outside the repo: run it by absolute path.
        floors[name] = timed_run(str(floor), inventory.parent)

    def by_role(name: str) -> dict[str, str]:
        counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for (host, role, skipped), n in per_role.items():
            if host == name:
                counts[role][skipped] += n
        return {role: f"{ran_} ran, {skipped_} skipped" for role, (ran_, skipped_) in sorted(counts.items())}

    return {
        "gpu_nodes": gpu_nodes, "lab_up_s": round(lab_up_s, 1),
        "first_converge_s": first_s, "noop_rerun_s": noop_s,
        "ping_floor_s": floors["ping_floor"][0], "noop_over_floor": round(noop_s / floors["ping_floor"][0], 2),
        "ran_floor_s": floors["ran_floor"][0], "noop_over_ran_floor": round(noop_s / floors["ran_floor"][0], 2),
        "tasks_per_host_noop": {"gpu1": by_role("gpu1"), "m1": by_role("m1")},
        "peak_controller_mib": round(max(first_mib, noop_mib, *(f[1] for f in floors.values()))),
        "problems": first_problems + noop_problems + [p for f in floors.values() for p in f[2]],
    }  # fmt: skip


def main() -> int:
    counts = [int(a) for a in sys.argv[1:]] or [1, 8, 32]
    labk8s.up()  # the telemetry play publishes its objects in the main cluster
    results = []
    try:
        for n in counts:
            print(f"--- {n} GPU node(s)", file=sys.stderr, flush=True)
            results.append(measure(n))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        # Back to the lab's own shape: its clusters' nodes, and a converge that drops the plain hosts' objects.
        labk8s.remove_plain_hosts()
        runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True)
    print(f"{'nodes':>5} {'first s':>8} {'no-op s':>8} {'floor s':>8} {'no-op/floor':>11} {'ran floor s':>11}"
          f" {'no-op/ran floor':>15} {'peak MiB':>9}  problems")  # fmt: skip
    for r in results:
        print(f"{r['gpu_nodes']:5} {r['first_converge_s']:8.1f} {r['noop_rerun_s']:8.1f} {r['ping_floor_s']:8.1f}"
              f" {r['noop_over_floor']:11.2f} {r['ran_floor_s']:11.1f} {r['noop_over_ran_floor']:15.2f}"
              f" {r['peak_controller_mib']:9}  {len(r['problems'])}")  # fmt: skip
    print(json.dumps(results, indent=2))
    return 0 if all(not r["problems"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
