"""The real kube-prometheus-stack chart installed and upgraded by the monitoring role in the lab's
API server: the upgrade from 77.14.0 to 79.0.1 brings the newer chart's CRDs (helm alone keeps the
old ones, v0.85.0, since it never upgrades CRDs). The chart's node-exporter DaemonSet runs for real
on the main cluster's real node, at the version each chart pins."""

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from gpufleet_lab import LAB_INVENTORY, REPO_ROOT
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client

PLAYBOOK = Path(__file__).parent / "playbooks" / "monitoring_chart.yml"
HELM = labk8s.bin_dir() / "helm"
NODE_EXPORTER_PORT = 9109


def converge(namespace: str, version: str) -> dict:
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(LAB_INVENTORY.parent), str(PLAYBOOK),
           "-e", json.dumps({"test_namespace": namespace, "test_chart_version": version,
                             "test_node_exporter_port": NODE_EXPORTER_PORT})]  # fmt: skip
    env = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)["stats"]["localhost"]


def crd_versions(api: client.ApiClient) -> dict[str, str]:
    crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
    return {
        c.metadata.name: c.metadata.annotations.get("operator.prometheus.io/version")
        for c in crds
        if c.metadata.name.endswith(".monitoring.coreos.com")
    }


def node_exporter_version() -> str:
    """The version node_exporter reports on the main cluster's real node (host network)."""
    (node,) = labnodes.nodes_of("main")
    with urllib.request.urlopen(f"http://{node.address}:{NODE_EXPORTER_PORT}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            found = re.match(r'node_exporter_build_info\{.*[{,]version="([^"]+)"', line)
            if found:
                return found.group(1)
    return "none"


def test_an_upgrade_of_the_chart_upgrades_its_crds(api, namespace):
    try:
        converge(namespace, "77.14.0")
        assert set(crd_versions(api).values()) == {"0.85.0"}
        assert node_exporter_version() == "1.9.1"
        converge(namespace, "79.0.1")
        versions = crd_versions(api)
        assert len(versions) == 10 and set(versions.values()) == {"0.86.1"}, versions
        assert node_exporter_version() == "1.10.2"
        release = subprocess.run(
            [str(HELM), "--kubeconfig", str(labk8s.kubeconfig_path("main")), "list", "-n", namespace,
             "-o", "json"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        [status] = json.loads(release.stdout)
        assert (status["revision"], status["chart"]) == ("2", "kube-prometheus-stack-79.0.1")
        assert converge(namespace, "79.0.1")["changed"] == 0  # a re-run changes nothing
    finally:
        subprocess.run(
            [str(HELM), "--kubeconfig", str(labk8s.kubeconfig_path("main")), "uninstall", namespace,
             "-n", namespace, "--wait"],
            capture_output=True, check=False,
        )  # fmt: skip
