"""A MIG layout change on the GPU Operator path: the node is drained before its label changes and
uncordoned only once the MIG manager answers. The MIG manager cannot run here (NVIDIA's image, a
GPU): a thread stands in for it, answering on the node's state label as the real one does, and
records what it found when the new layout arrived."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import k8s as labk8s
from kubernetes import client

PLAYBOOK = Path(__file__).parent / "playbooks" / "mig_relabel.yml"
NODE = "mig-relabel-a"


def relabel(tmp_path: Path, layout: str) -> subprocess.CompletedProcess:
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_connection": "local", "gpufleet_mig_config": layout}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {NODE: host}}}))
    kubeconfig = labk8s.kubeconfig_path("gpu")
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK),
           "-e", f"test_node={NODE}", "-e", f"gpufleet_gpu_cluster_kubeconfig={kubeconfig}"]  # fmt: skip
    env = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=300)


class MigManagerStandIn(threading.Thread):
    """Answers a new nvidia.com/mig.config with nvidia.com/mig.config.state=<answer>."""

    def __init__(self, core: client.CoreV1Api, layout: str, answer: str) -> None:
        super().__init__(daemon=True)
        self.core, self.layout, self.answer, self.seen = core, layout, answer, None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            node = self.core.read_node(NODE)
            labels = node.metadata.labels or {}
            if labels.get("nvidia.com/mig.config") == self.layout and "nvidia.com/mig.config.state" not in labels:
                pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items
                # DaemonSets' pods (the lab's converge leaves some that run on every node) stay.
                moved = [p for p in pods if not any(o.kind == "DaemonSet" for o in p.metadata.owner_references or [])]
                self.seen = {"unschedulable": bool(node.spec.unschedulable), "pods": len(moved)}
                time.sleep(1)
                self.core.patch_node(NODE, {"metadata": {"labels": {"nvidia.com/mig.config.state": self.answer}}})
                return
            time.sleep(0.3)


def setup_node(core: client.CoreV1Api, apps: client.AppsV1Api, namespace: str) -> None:
    labels = {"kubernetes.io/hostname": NODE, "type": "kwok", "nvidia.com/mig.config": "all-1g.18gb",
              "nvidia.com/mig.config.state": "success"}  # fmt: skip
    core.create_node({
        "metadata": {"name": NODE, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
        "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110"},
                   "capacity": {"cpu": "16", "memory": "128Gi", "pods": "110"}},
    })  # fmt: skip
    pod = {"metadata": {"labels": {"app": "infer"}}, "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
           "containers": [{"name": "server", "image": "registry.invalid/inference:1"}]}}  # fmt: skip
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "infer"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "infer"}}, "template": pod},
    })  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(namespace).items
        if pods and pods[0].status.phase == "Running":
            return
        time.sleep(0.5)
    raise AssertionError("the workload did not start on the test node")


def test_a_layout_change_drains_first_and_waits_for_the_mig_manager(gpu_api, namespace, tmp_path):
    core, apps = client.CoreV1Api(gpu_api), client.AppsV1Api(gpu_api)
    setup_node(core, apps, namespace)
    try:
        manager = MigManagerStandIn(core, "all-3g.71gb", "success")
        manager.start()
        result = relabel(tmp_path, "all-3g.71gb")
        manager.stop.set()
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        # When the new layout reached the node, it was cordoned and empty.
        assert manager.seen == {"unschedulable": True, "pods": 0}
        node = core.read_node(NODE)
        assert node.metadata.labels["nvidia.com/mig.config.state"] == "success" and not node.spec.unschedulable

        # The MIG manager fails the next change: the run stops, naming the node, which stays cordoned.
        manager = MigManagerStandIn(core, "all-disabled", "failed")
        manager.start()
        result = relabel(tmp_path, "all-disabled")
        manager.stop.set()
        out = result.stdout + result.stderr
        assert result.returncode != 0 and f"could not apply all-disabled on {NODE}" in out, out[-3000:]
        assert core.read_node(NODE).spec.unschedulable
    finally:
        core.delete_node(NODE)
