"""Fault drills on the lab: Prometheus restarted, a GPU node rebooted in the middle of a converge."""

import json
import subprocess
import sys
import time
import urllib.request

from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv
from conftest import PROMETHEUS, in_host, wait_for_tunnel

from gpufleet import lab, runner


def test_prometheus_restart_keeps_its_configuration(converged):
    before = in_host(
        "m1", "sha256sum /etc/prometheus/prometheus.yml /etc/prometheus/rules/* /etc/prometheus/kubernetes/*"
    )
    in_host("m1", "systemctl restart prometheus")
    after = in_host(
        "m1", "sha256sum /etc/prometheus/prometheus.yml /etc/prometheus/rules/* /etc/prometheus/kubernetes/*"
    )
    assert before.stdout == after.stdout
    # Its jobs, rules and the GPU target come back by themselves, without a converge.
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), ["gpu1"], max_age_s=15, timeout_s=60)
    assert report.ok, report.failures
    with urllib.request.urlopen(f"{PROMETHEUS}/api/v1/rules", timeout=5) as response:
        assert len(json.loads(response.read())["data"]["groups"]) == 3


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
    again = runner.run_playbook("site.yml", lab.LAB_INVENTORY.parent, quiet=True)
    assert again.ok, again.failures
    wait_for_tunnel(timeout=60)
    report = pv.verify(PROMETHEUS, "gpufleet-dcgm", pv.dcgm_profile(), ["gpu1"], max_age_s=15, timeout_s=60)
    assert report.ok, report.failures
    # Nothing was duplicated by the interrupted run.
    assert len(in_host("gpu1", "cat /var/lib/gpufleet-tunnel/.ssh/authorized_keys").stdout.splitlines()) == 1
