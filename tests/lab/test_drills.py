"""Fault drills on the lab: Prometheus restarted, a GPU node rebooted in the middle of a converge."""

import json
import subprocess
import sys
import time
import urllib.request

from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv
from conftest import PROMETHEUS, in_host, wait_for_tunnel

from gpufleet import lab, runner


def test_prometheus_rescheduled_keeps_its_configuration_and_its_data(converged):
    """The operator's Prometheus pod deleted, as a node drain or an eviction would: the StatefulSet
    brings it back with the configuration the operator generated, and the TSDB on its volume."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(lab.lab_dir() / "k8s/main/admin.kubeconfig")))
    # The StatefulSet, its pod, and the Secret holding the configuration the operator generated.
    generated = "prometheus-monitoring-kube-prometheus-prometheus"
    before = core.read_namespaced_secret(generated, "monitoring").data
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), ["gpu1"], max_age_s=15, timeout_s=60)
    assert report.ok, report.failures
    sampled_at = time.time()
    energy = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{instance="gpu1"}'
    assert pv.query(PROMETHEUS, energy, sampled_at)
    core.delete_namespaced_pod(f"{generated}-0", "monitoring")
    time.sleep(5)  # the old pod's API answers until it stops
    # Its jobs, rules and the GPU target come back by themselves, without a converge.
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), ["gpu1"], max_age_s=15, timeout_s=120)
    assert report.ok, report.failures
    assert core.read_namespaced_secret(generated, "monitoring").data == before
    # The samples from before the restart are still there: the TSDB is on the PersistentVolume.
    assert pv.query(PROMETHEUS, energy, sampled_at)
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/rules", timeout=5) as response:
        groups = {g["name"] for g in json.loads(response.read())["data"]["groups"]}
    assert {"gpufleet-gpu", "gpufleet-vllm", "gpufleet-triton"} <= groups


def test_gpu_node_rebooted_mid_converge_then_a_rerun_completes(converged):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpufleet.cli", "up"], stderr=subprocess.PIPE, text=True, cwd=lab.REPO_ROOT
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("play: Telemetry") or line.startswith("play: Tunnels"):
            break
    lab.podman("restart", "-t", "2", lab.CONTAINER_PREFIX + "gpu1")  # the node goes down and comes back
    rest = proc.stderr.read()
    code = proc.wait(timeout=300)
    # Whichever way that run went (the reboot may or may not have hit a task), the next one completes.
    assert code in (0, 3, 4), rest
    # The operator re-runs once the node is back, as after a real reboot.
    gpu1 = next(h for h in lab.load_hosts() if h.name == "gpu1")
    lab.wait_for_sshd(gpu1, time.monotonic() + 120)
    again = runner.run_playbook(lab.PLAYBOOK, lab.LAB_INVENTORY.parent, quiet=True)
    assert again.ok, again.failures
    wait_for_tunnel(timeout=60)
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), ["gpu1"], max_age_s=15, timeout_s=60)
    assert report.ok, report.failures
    # Nothing was duplicated by the interrupted run.
    assert len(in_host("gpu1", "cat /var/lib/gpufleet-tunnel/.ssh/authorized_keys").stdout.splitlines()) == 1
