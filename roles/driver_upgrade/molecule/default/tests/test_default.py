"""The rolling driver upgrade on two FIXTURE nodes of the lab's GPU cluster (see molecule.yml),
then a drill: a PodDisruptionBudget that allows no eviction stops the rollout at the first node."""

import os
import subprocess
from pathlib import Path

import pytest
import testinfra
from kubernetes import client, config

testinfra_hosts = ["ansible://upgrade-a", "ansible://upgrade-b"]
REPO = Path(os.environ["GPUFLEET_REPO"])
NAMESPACE = "driver-upgrade-test"


@pytest.fixture(scope="module")
def core():
    return client.CoreV1Api(config.new_client_from_config(str(REPO / ".lab/k8s/gpu/admin.kubeconfig")))


def rollout(*extra: str) -> subprocess.CompletedProcess:
    inventory = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_FORCE_COLOR="0")
    argv = ["ansible-playbook", "-i", str(inventory), str(REPO / "playbooks/driver_upgrade.yml"), *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)


def test_the_new_driver_runs_and_is_held(host):
    assert host.package("nvidia-open-550").version == "550.163.02-1"
    assert "nvidia-open-550" in host.check_output("apt-mark showhold").split()
    assert "<driver_version>550.163.02</driver_version>" in host.check_output("nvidia-smi -q -x")


def test_the_fabric_manager_moved_with_the_driver_on_the_hgx_host(host):
    fabric_manager = host.package("nvidia-fabricmanager-550")
    if host.backend.hostname == "upgrade-a":
        assert not fabric_manager.is_installed  # no NVSwitch, no fabric manager
        return
    assert fabric_manager.version == "550.163.02-1"
    assert "nvidia-fabricmanager-550" in host.check_output("apt-mark showhold").split()
    service = host.service("nvidia-fabricmanager")
    assert service.is_running and service.is_enabled
    xml = host.check_output("nvidia-smi -q -x")
    assert "<state>Completed</state>" in xml and "<status>Success</status>" in xml


def test_the_node_is_back_in_service(host, core):
    node = core.read_node(host.backend.hostname)
    assert not node.spec.unschedulable


def test_the_workload_moved_and_the_daemonset_stayed(core):
    pods = core.list_namespaced_pod(NAMESPACE).items
    inference = [p for p in pods if p.metadata.labels.get("app") == "inference"]
    assert len(inference) == 4 and all(p.status.phase == "Running" for p in inference)
    # Every inference pod was evicted from its node at some point: all are replacements, newer
    # than the DaemonSet's pods, which a drain leaves alone.
    agents = [p for p in pods if p.metadata.labels.get("app") == "node-agent"]
    assert len(agents) == 2
    assert min(p.metadata.creation_timestamp for p in inference) > max(p.metadata.creation_timestamp for p in agents)


# Not parametrized by host, so it runs after every host's checks above (it changes the driver).
def test_a_blocking_budget_stops_the_rollout_at_the_first_node(core):
    host = testinfra.get_host("ansible://upgrade-a", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    policy = client.PolicyV1Api(core.api_client)
    # The workload's budget tightened to no disruption at all.
    policy.patch_namespaced_pod_disruption_budget("inference", NAMESPACE, {"spec": {"maxUnavailable": 0}})
    try:
        result = rollout("-e", "nvidia_driver_version=550.163.01", "-e", "driver_upgrade_drain_timeout=15s")
        out = result.stdout + result.stderr
        assert result.returncode != 0
        assert "The driver upgrade stopped at upgrade-a (550.163.02 -> 550.163.01)" in out, out[-3000:]
        assert "disruption budget" in out and "upgrade-a stays cordoned" in out
        assert core.read_node("upgrade-a").spec.unschedulable
        # Nothing after the failed node: upgrade-b untouched, upgrade-a's packages unchanged.
        assert not core.read_node("upgrade-b").spec.unschedulable
        assert host.package("nvidia-open-550").version == "550.163.02-1"
    finally:
        policy.patch_namespaced_pod_disruption_budget("inference", NAMESPACE, {"spec": {"maxUnavailable": 1}})
    # The budget fixed, a re-run completes on the node that stopped it (a downgrade is a change
    # like any other; limited to that node to keep the scenario short).
    result = rollout("-e", "nvidia_driver_version=550.163.01", "--limit", "upgrade-a")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert host.package("nvidia-open-550").version == "550.163.01-1"
    assert not core.read_node("upgrade-a").spec.unschedulable
