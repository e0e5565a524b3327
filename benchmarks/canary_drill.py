#!/usr/bin/env python3
"""Benchmark: the canary drills of issue #34, whole (not a test; the lab's suite runs the good and the
slower canary and the drill without a limit that can fail: lab/tests/e2e/test_rollouts.py).

On the converged lab, vLLM's stand-in (the calibration server, 8 slots, 2 replicas) under Argo
Rollouts with a canary of half the replicas for a minute, judged every 20 s on TTFT P99 (at most
120 % of stable) and the error ratio (at most 1 %), users streaming through the Service all along.
For each bad version (+30 % TTFT; 5 % of requests failed; half the slots, as fast while idle, with the
benchmark step on: a Job of the gate at a replica's slots against the canary's Service), prints: whether
it was aborted and rolled back, the seconds from its first traffic to the abort, the analysis that caught
it with its measured value and limit (the step's: the gate's verdict), the streams and those failed, and
the stable version's failed requests.

    python benchmarks/canary_drill.py [--versions slower,failing,half-slots]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The lab's suite's helpers, and the collection as pytest finds it (collections/ansible_collections).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collections"))

import gpufleet_lab as lab
from gpufleet.lib.llm_bench import BenchConfig
from gpufleet_lab import k8s as labk8s
from kubernetes import config
from test_autoscaling import GPU_KUBECONFIG
from test_rollouts import BENCH, FAILING, HALF_SLOTS, SLOWER, STABLE, bad_canary, canary, restore_lab

from gpufleet import runner

# Each a new version (its own --stand-in-revision: an aborted version stays aborted), and the role's
# variables it is rolled out with.
VERSIONS = {
    "slower": ([*SLOWER, "--stand-in-revision", "11"], {}),
    "failing": ([*FAILING, "--stand-in-revision", "12"], {}),
    "half-slots": ([*HALF_SLOTS, "--stand-in-revision", "13"], BENCH),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default=",".join(VERSIONS), help=f"of {', '.join(VERSIONS)}")
    args = parser.parse_args()
    labk8s.up()
    assert runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True).ok
    target = runner.bench_target(runner.inventory_vars(lab.LAB_INVENTORY.parent))
    assert target is not None
    users = BenchConfig(base_url=target[0], model=target[1], api="chat", max_tokens=50, prompt_words=(5, 10),
                        request_timeout_s=30, fixed_length="on", stream=True)  # fmt: skip
    kube = config.new_client_from_config(GPU_KUBECONFIG)
    try:
        assert canary(STABLE).ok
        for name in args.versions.split(","):
            version, overrides = VERSIONS[name]
            r = bad_canary(kube, users, version, **overrides)
            print(f"{name}: rolled back {r['rolled_back']}, {r['first_traffic_to_abort_s']} s from first traffic"
                  f" to abort; {r['streams']} streams, {r['failed']} failed ({r['failed_after_drain']} after the"
                  f" canary drained); stable pods {r['stable_pods']}, their failed requests"
                  f" {r['stable_failed_requests']:g}\n  {r['message']}", flush=True)  # fmt: skip
    finally:
        restore_lab()


if __name__ == "__main__":
    main()
