#!/usr/bin/env python3
"""Benchmark: what one Ansible controller costs at fleet size, running the node plays in check mode.

No lab here starts thousands of hosts, so the hosts are a STAND-IN: the benchmark first records what
one real, converged lab GPU node (and the controller, for the tasks delegated to it) answers to every
command of `playbooks/nodes.yml --check`, then runs the same playbook against 250, 1,000 and 5,000
inventory hosts whose connection (lab/plugins/connection/standin_replay.py) answers each command
from that recording. Ansible's controller does all of its own work for every host (inventory,
templating, strategy, fact cache, callbacks and their display) and no host process runs: what is
measured is the controller.

Per host count and forks setting it prints: wall time, peak memory of ansible-playbook and its
workers (summed PSS, so forked workers' shared pages count once), CPU time (user + system, the
workers included), host-tasks (each host's task results, from the recap) and CPU per host-task.
Goals (issue 38): under 2 GiB at 1,000 hosts; CPU per host-task flat, within 1.2x from the smallest
count to the largest. The display goes to a file, as AWX's job output would.

Usage: benchmarks/controller_scale.py [--forks 16,50] [--recording DIR] [HOSTS ...]   (default 250 1000 5000)
A recording is made (the lab must be up: `make lab-up`; the node plays converge worker-gpu1 first)
unless --recording names one made before.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from gpufleet_lab import LAB_INVENTORY, LAB_ROOT, REPO_ROOT, lab_dir, standin_answers
from gpufleet_lab import inventory as labinventory
from gpufleet_lab.measure import PeakMemory

PLAYBOOK = "playbooks/nodes.yml"
RECORDED = "worker-gpu1"  # the lab's real GPU node whose answers every stand-in host replays
WORK = REPO_ROOT / ".cache" / "controller-scale"
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)
GOAL_MIB_AT_1000 = 2048
GOAL_FLAT = 1.2


def environment(recording: Path, forks: int | None = None) -> dict[str, str]:
    env = dict(os.environ,
               ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO_ROOT / "collections"),
               ANSIBLE_CONNECTION_PLUGINS=str(LAB_ROOT / "plugins" / "connection"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
               # The lab's group_vars find the lab from the inventory's folder unless told.
               GPUFLEET_LAB_DIR=str(lab_dir()), GPUFLEET_CHARTS_DIR=str(LAB_ROOT / "charts"),
               GPUFLEET_STANDIN_RECORDING=str(recording))  # fmt: skip
    if forks:
        env["ANSIBLE_FORKS"] = str(forks)
    return env


def playbook(inventories: list[Path], env: dict[str, str], log: Path, *args: str) -> tuple[float, str]:
    """Runs ansible-playbook from the checkout; its display goes to log. Wall seconds and the display."""
    command = ["ansible-playbook", *(f"-i{i}" for i in inventories), PLAYBOOK, *args]
    started = time.monotonic()
    with log.open("w") as out:
        subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    return time.monotonic() - started, log.read_text()


def record(recording: Path) -> None:
    """worker-gpu1 converged by the node plays, then their check run with every answer kept."""
    address = next(host.address for host in labinventory.load_hosts() if host.name == RECORDED)
    shutil.rmtree(recording, ignore_errors=True)
    recording.mkdir(parents=True)
    env = environment(recording)
    limit = f"--limit={RECORDED},localhost"
    seconds, shown = playbook([LAB_INVENTORY], env, WORK / "converge.log", limit)
    problems = _problems(shown)
    if problems:
        sys.exit(f"the node plays did not converge {RECORDED}: {problems} (see {WORK / 'converge.log'})")
    # The controller's tasks through the recording local connection, the node's through the
    # recording ssh (no ControlPersist master: each call's answer is read to its end).
    overlay = WORK / "record-overlay.yml"
    overlay.write_text(
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "standin_record_local"}}}})
    )
    env |= {"GPUFLEET_STANDIN_HOST": RECORDED, "GPUFLEET_STANDIN_ADDR": address,
            "ANSIBLE_SSH_EXECUTABLE": str(LAB_ROOT / "scripts" / "standin-ssh-recorder"),
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(WORK / "facts-record")}  # fmt: skip
    shutil.rmtree(WORK / "facts-record", ignore_errors=True)
    seconds, shown = playbook([LAB_INVENTORY, overlay], env, WORK / "record.log", limit, "--check")
    problems = _problems(shown)
    if problems:
        sys.exit(f"the recorded check run failed: {problems} (see {WORK / 'record.log'})")
    answers = len(list(recording.glob("*.json")))
    metadata = {"host": RECORDED, "address": address, "answers": answers}
    (recording / standin_answers.METADATA).write_text(json.dumps(metadata))
    print(f"recorded {answers} answers of {RECORDED} and the controller in {seconds:.0f} s", file=sys.stderr)


def inventory(hosts: int) -> Path:
    """hosts stand-in GPU nodes with the lab GPU node's variables (its group_vars, and its groups)."""
    folder = WORK / f"inventory-{hosts}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "group_vars").symlink_to(LAB_INVENTORY.parent / "group_vars")
    lab = yaml.safe_load(LAB_INVENTORY.read_text())["all"]
    localhost = dict(lab["hosts"]["localhost"], ansible_connection="standin_replay")
    network = ipaddress.ip_network("10.128.0.0/9")  # never contacted: no host process runs
    nodes = {f"gpu-{i:05d}": {"ansible_host": str(network[i]), "ansible_connection": "standin_replay"}
             for i in range(1, hosts + 1)}  # fmt: skip
    groups = {name: {"hosts": dict.fromkeys(nodes, None)}
              for name, group in lab["children"].items() if RECORDED in (group.get("hosts") or {})}  # fmt: skip
    (folder / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"hosts": {"localhost": localhost, **nodes}, "children": groups}})
    )
    return folder / "hosts.yml"


def _problems(shown: str) -> list[str]:
    return [
        f"{host}: failed={failed} unreachable={unreachable}"
        for host, _ok, unreachable, failed, _skipped in RECAP.findall(shown)
        if int(failed) or int(unreachable)
    ]


def measure(recording: Path, hosts: int, forks: int) -> dict[str, Any]:
    env = environment(recording, forks) | {"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(WORK / "facts-replay")}
    shutil.rmtree(WORK / "facts-replay", ignore_errors=True)  # every run gathers facts, as a first run does
    path = inventory(hosts)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with PeakMemory(interval=0.5) as memory:
        wall, shown = playbook([path], env, WORK / f"replay-{hosts}-{forks}.log", "--check")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    recap = RECAP.findall(shown)
    host_tasks = sum(
        int(ok) + int(unreachable) + int(failed) + int(skipped) for _h, ok, unreachable, failed, skipped in recap
    )
    nodes = sum(1 for host, *_ in recap if host != "localhost")  # the controller only where a play runs on it
    problems = _problems(shown) + ([] if nodes == hosts else [f"{nodes} of {hosts} stand-in hosts in the recap"])
    return {"hosts": hosts, "forks": forks, "wall_s": round(wall, 1), "peak_mib": round(memory.peak_kib / 1024),
            "cpu_s": round(cpu, 1), "host_tasks": host_tasks,
            "cpu_ms_per_host_task": round(1000 * cpu / max(host_tasks, 1), 2),
            "problems": problems[:5], "problem_count": len(problems)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hosts", nargs="*", type=int, default=[250, 1000, 5000])
    parser.add_argument("--forks", default="16,50", help="comma-separated forks settings (default 16,50)")
    parser.add_argument("--recording", type=Path, help="a recording made before (default: record now)")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    recording = args.recording or WORK / "recording"
    if not args.recording:
        record(recording)
    results = []
    for hosts in args.hosts:
        for forks in (int(f) for f in args.forks.split(",")):
            print(f"--- {hosts} hosts, forks {forks}", file=sys.stderr, flush=True)
            results.append(measure(recording, hosts, forks))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(f"{'hosts':>6} {'forks':>5} {'wall s':>8} {'peak MiB':>9} {'CPU s':>8} {'host-tasks':>10}"
          f" {'CPU ms/host-task':>16}  problems")  # fmt: skip
    for r in results:
        print(f"{r['hosts']:6} {r['forks']:5} {r['wall_s']:8.1f} {r['peak_mib']:9} {r['cpu_s']:8.1f}"
              f" {r['host_tasks']:10} {r['cpu_ms_per_host_task']:16.2f}  {r['problem_count']}")  # fmt: skip
    for forks in sorted({r["forks"] for r in results}):
        runs = sorted((r for r in results if r["forks"] == forks), key=lambda r: r["hosts"])
        at_1000 = [r["peak_mib"] for r in runs if r["hosts"] == 1000]
        if at_1000:
            print(f"forks {forks}: peak at 1,000 hosts {at_1000[0]} MiB (goal under {GOAL_MIB_AT_1000})")
        if len(runs) > 1:
            ratio = runs[-1]["cpu_ms_per_host_task"] / runs[0]["cpu_ms_per_host_task"]
            print(f"forks {forks}: CPU per host-task at {runs[-1]['hosts']} over {runs[0]['hosts']} hosts: {ratio:.2f}x"
                  f" (goal at most {GOAL_FLAT}x)")  # fmt: skip
    print(json.dumps(results, indent=2))
    return 0 if all(not r["problem_count"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
