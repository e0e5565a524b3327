#!/usr/bin/env python3
"""Benchmark: no flapping, the 10-minute soak of issue #33 (not a test; the lab's suite runs its
short form, lab/tests/e2e/test_autoscaling.py::test_a_swinging_load_flaps_the_replicas_only_without_the_cooldown).

On the converged lab, vLLM's stand-in (the calibration server, 8 slots) autoscaled by KEDA and the
GPU cluster's HPA between 2 and 3 replicas on running requests, thresholds from a capacity file the
bench measures first. For each load profile and cooldown, open-loop load for the given minutes:

- steady: Poisson arrivals whose mean sits between the HPA's tolerance above 2 replicas and the
  point where 3 would stay, so each reading may ask for either;
- swing: 30 s at 2.7 thresholds, 45 s at half of one, over and over.

Prints, per run: how often the HPA's desired replicas changed once the load began (goal with the
role's cooldown: at most once), when, the streams truncated and the share within the 2 s SLO.

    python benchmarks/autoscaling_soak.py [--minutes 10] [--profiles steady,swing] [--cooldowns 15,300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

# The lab's suite's helpers, and the collection as pytest finds it (collections/ansible_collections).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collections"))

import gpufleet_lab as lab
from gpufleet_lab import k8s as labk8s
from kubernetes import config
from test_autoscaling import measure_capacity, soak
from test_drills import gpu_workloads

from gpufleet import runner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0, help="each run's load, in minutes")
    parser.add_argument("--profiles", default="steady,swing")
    parser.add_argument("--cooldowns", default="15,300", help="the scale-down's stabilisation windows, seconds")
    parser.add_argument("--capacity-file", type=Path, help="a capacity file of the lab's vLLM (else measured)")
    args = parser.parse_args()
    labk8s.up()
    assert runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True).ok
    target = runner.bench_target(runner.inventory_vars(lab.LAB_INVENTORY.parent))
    assert target is not None
    endpoint = (target[0], target[1])
    kube = config.new_client_from_config(str(lab.lab_dir() / "k8s/gpu/admin.kubeconfig"))
    capacity_file = args.capacity_file or measure_capacity(Path(tempfile.mkdtemp(prefix="soak-")))
    print(f"capacity file: {capacity_file}")
    print(f"{'profile':>8} {'cooldown s':>10} {'minutes':>7} {'requests':>8} {'changes':>7} {'replicas':>8}"
          f" {'truncated':>9} {'within SLO':>10}  changed at (s, replicas)")  # fmt: skip
    try:
        for profile in args.profiles.split(","):
            for cooldown in (int(x) for x in args.cooldowns.split(",")):
                r = soak(endpoint, kube, capacity_file, profile, cooldown, args.minutes * 60)
                print(f"{profile:>8} {cooldown:>10} {args.minutes:>7g} {r['requests']:>8} {r['changes']:>7}"
                      f" {'-'.join(map(str, r['replicas'])):>8} {r['truncated']:>9} {r['within_slo_share']:>10.1%}"
                      f"  {r['changed_at']}", flush=True)  # fmt: skip
    finally:
        assert gpu_workloads().ok  # the lab's own deployment back


if __name__ == "__main__":
    main()
