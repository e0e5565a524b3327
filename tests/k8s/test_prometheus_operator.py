"""The real Prometheus Operator in the lab's main cluster. The monitoring role installs
kube-prometheus-stack 79.0.1, as released, onto the main cluster's real node: its operator (v0.86.1,
built from its Go module) reconciles a Prometheus (v3.7.2, built from its module too), the collection's
alert rules and the telemetry tunnel's ServiceMonitors into a running configuration, and that
Prometheus scrapes what the chart's ServiceMonitors select."""

import contextlib
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet import labk8s, labnodes
from gpufleet.lab import LAB_INVENTORY, REPO_ROOT, charts_dir

PLAYBOOK = Path(__file__).parent / "playbooks" / "prometheus_operator.yml"
NODE_PORT = 30190  # beside the lab's own release
NODE_EXPORTER_PORT = 9108
pytestmark = pytest.mark.skipif(not charts_dir().is_dir(), reason=f"the released charts are not in {charts_dir()}")


def release(namespace: str) -> str:
    """Unique within the chart's 26-character prefix of cluster-wide names (its ClusterRoles)."""
    return "op-" + namespace.rsplit("-", 1)[1]


def converge(namespace: str) -> dict:
    extra = {"test_namespace": namespace, "test_release": release(namespace),
             "test_prometheus_node_port": NODE_PORT, "test_node_exporter_port": NODE_EXPORTER_PORT}  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(LAB_INVENTORY.parent), str(PLAYBOOK),
           "-e", json.dumps(extra)]  # fmt: skip
    env = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)["stats"]["localhost"]


def query(path: str) -> Any:
    """Prometheus's HTTP API, through its NodePort on the main cluster's real node."""
    (node,) = labnodes.nodes_of("main")
    try:
        with urllib.request.urlopen(f"http://{node.address}:{NODE_PORT}{path}", timeout=5) as response:
            return json.loads(response.read())["data"]
    except OSError:
        return None


def ready_pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.status.container_statuses and all(c.ready for c in p.status.container_statuses)]


def test_the_operator_runs_prometheus_with_the_collections_rules_and_monitors(api, namespace):
    core = client.CoreV1Api(api)
    (node,) = labnodes.nodes_of("main")
    try:
        converge(namespace)
        [operator] = ready_pods(core, namespace, "app=kube-prometheus-stack-operator")  # helm waited for it
        assert operator.spec.node_name == node.name
        [pod] = wait_for(
            lambda: ready_pods(core, namespace, "app.kubernetes.io/name=prometheus"),
            "the Prometheus the operator made to be ready",
            timeout=180,
        )
        assert pod.spec.node_name == node.name
        assert {c.name: c.image for c in pod.spec.containers} == {
            "prometheus": "quay.io/prometheus/prometheus:v3.7.2",
            "config-reloader": "quay.io/prometheus-operator/prometheus-config-reloader:v0.86.1",
        }
        assert wait_for(lambda: query("/api/v1/status/buildinfo"), "Prometheus's API")["version"] == "3.7.2"

        def targets() -> dict[str, dict[str, dict]]:
            """Targets by scrape pool (one per ServiceMonitor endpoint, without the release's prefix)
            and scrape URL."""
            found: dict[str, dict[str, dict]] = {}
            for target in (query("/api/v1/targets") or {}).get("activeTargets", []):
                _, _, monitor, endpoint = target["scrapePool"].split("/")
                pool = f"{monitor.removeprefix(release(namespace) + '-')}/{endpoint}"
                found.setdefault(pool, {})[target["scrapeUrl"]] = target
            return found

        # What runs for real is scraped: Prometheus and the operator (pods on the real node), the
        # node-exporter and the kubelet there (the kubelet over TLS with Prometheus's token), and the
        # API server. kwok's simulated node m1 has no address to scrape; the telemetry tunnel on m1 is
        # not up in this test.
        wanted = {
            "kube-prometheus-prometheus/0": None,
            "kube-prometheus-operator/0": None,
            "prometheus-node-exporter/0": f"http://{node.address}:{NODE_EXPORTER_PORT}/metrics",
            "kube-prometheus-kubelet/0": f"https://{node.address}:10250/metrics",
            "kube-prometheus-kubelet/1": f"https://{node.address}:10250/metrics/cadvisor",
            "kube-prometheus-apiserver/0": None,
        }

        def scraped() -> dict[str, dict[str, dict]] | None:
            found = targets()
            for pool, url in wanted.items():
                healths = {scrape_url: target["health"] for scrape_url, target in found.get(pool, {}).items()}
                if not healths or (url is None and "up" not in healths.values()) or (url and healths.get(url) != "up"):
                    return None
            # The tunnel's ServiceMonitor, applied after Prometheus started, arrives with a reload:
            # present (its tunnel is not up here), whatever its health.
            return found if "dcgm-gpu1/0" in found else None

        found = wait_for(scraped, f"targets {sorted(wanted)} up and the tunnel's target present", timeout=120)
        [(url, tunnel)] = found["dcgm-gpu1/0"].items()
        assert url == "http://10.213.7.11:19401/metrics"
        assert tunnel["labels"]["instance"] == "gpu1"

        groups = {group["name"] for group in query("/api/v1/rules")["groups"]}
        assert {"gpufleet-gpu", "gpufleet-vllm", "gpufleet-triton"} <= groups, groups
        assert converge(namespace)["changed"] == 0  # a re-run changes nothing
    finally:
        subprocess.run(
            [str(labk8s.bin_dir() / "helm"), "--kubeconfig", str(labk8s.kubeconfig_path("main")), "uninstall",
             release(namespace), "-n", namespace, "--wait"],
            capture_output=True, check=False,
        )  # fmt: skip
        # The operator's kubelet Service (in kube-system) is the operator's, not the release's: helm leaves it.
        with contextlib.suppress(ApiException):
            core.delete_namespaced_service(f"{release(namespace)}-kube-prometheus-kubelet", "kube-system")
