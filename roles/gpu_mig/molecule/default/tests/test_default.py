"""MIG layouts with nvidia-smi on a FIXTURE H200 host of the lab's GPU cluster (see molecule.yml)."""

import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import client, config

testinfra_hosts = ["ansible://mig-node"]
REPO = Path(os.environ["GPUFLEET_REPO"])


@pytest.fixture(scope="module")
def core():
    return client.CoreV1Api(config.new_client_from_config(str(REPO / ".lab/k8s/gpu/admin.kubeconfig")))


def apply(*extra: str) -> subprocess.CompletedProcess:
    inventory = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_FORCE_COLOR="0")
    argv = ["ansible-playbook", "-i", str(inventory), str(REPO / "playbooks/mig.yml"), *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


def instances(host) -> list[str]:
    return sorted(line.split()[3] for line in host.check_output("nvidia-smi mig -lgi").splitlines() if " MIG " in line)


def test_the_layout_is_on_the_gpu(host):
    assert "<current_mig>Enabled</current_mig>" in host.check_output("nvidia-smi -q -x")
    assert instances(host) == ["1g.18gb", "1g.18gb", "3g.71gb"]


def test_the_node_took_work_again(core):
    assert not core.read_node("mig-node").spec.unschedulable
    pods = core.list_namespaced_pod("gpu-mig-test").items
    assert [p.status.phase for p in pods] == ["Running"]


def test_a_gpu_held_by_a_client_stops_the_change_and_keeps_the_node_out(host, core):
    host.run("touch /var/lib/gpufleet-fixture/mig-busy")
    try:
        result = apply("-e", "gpufleet_mig_config=all-disabled")
        out = result.stdout + result.stderr
        assert result.returncode != 0
        assert "The MIG reconfiguration stopped at mig-node (all-disabled)" in out, out[-3000:]
        assert "pending" in out and "mig-node stays cordoned" in out
        assert core.read_node("mig-node").spec.unschedulable
    finally:
        host.run("rm -f /var/lib/gpufleet-fixture/mig-busy")
    # The client gone, a re-run completes: MIG off, the node back.
    result = apply("-e", "gpufleet_mig_config=all-disabled")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "<current_mig>Disabled</current_mig>" in host.check_output("nvidia-smi -q -x")
    assert not core.read_node("mig-node").spec.unschedulable


def test_an_unknown_profile_is_refused_before_any_change(host):
    result = apply("-e", '{"gpu_mig_layouts": {"odd": {"5g.90gb": 1}}, "gpufleet_mig_config": "odd"}')
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "gpu_mig_layouts.odd.5g.90gb: not a MIG profile" in out, out[-2000:]
    assert "<current_mig>Disabled</current_mig>" in host.check_output("nvidia-smi -q -x")
