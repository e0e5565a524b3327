"""The telemetry_tunnel role's Kubernetes objects: the names and port names the operator needs agree."""

import json
import subprocess
import sys
from pathlib import Path

from gpufleet_lab import LAB_INVENTORY, REPO_ROOT
from kubernetes import client
from kubernetes.dynamic import DynamicClient

PLAYBOOK = Path(__file__).parent / "playbooks" / "telemetry_objects.yml"


VLLM = {"name": "vllm", "job": "gpufleet-vllm", "port": 30800, "port_offset": 100}


def converge(namespace: str, check: bool = False, extra: list[dict] | None = None) -> dict:
    test_vars = {"test_namespace": namespace, "test_extra_exporters": extra or []}
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(LAB_INVENTORY.parent), str(PLAYBOOK),
           "-e", json.dumps(test_vars)] + (["--check"] if check else [])  # fmt: skip
    env = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)["stats"]["localhost"]


def test_service_endpoints_and_monitor_agree(api, namespace):
    assert converge(namespace, check=True)["failures"] == 0
    assert converge(namespace)["changed"] > 0
    assert converge(namespace)["changed"] == 0  # re-applying changes nothing
    core = client.CoreV1Api(api)
    service = core.read_namespaced_service("dcgm-worker-gpu1", namespace)
    assert service.spec.cluster_ip == "None" and not service.spec.selector  # headless, selector-less
    endpoints = core.read_namespaced_endpoints("dcgm-worker-gpu1", namespace)
    assert endpoints.subsets[0].addresses[0].ip == "10.213.7.241"
    assert endpoints.subsets[0].ports[0].name == service.spec.ports[0].name == "metrics"
    assert endpoints.subsets[0].ports[0].port == service.spec.ports[0].port == 19401
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector="kubernetes.io/service-name=dcgm-worker-gpu1"
    )
    # Exactly one slice, mirrored from the Endpoints by the control plane.
    assert [(s.ports[0].name, s.ports[0].port) for s in slices.items] == [("metrics", 19401)]
    assert slices.items[0].metadata.labels["endpointslice.kubernetes.io/managed-by"] == (
        "endpointslicemirroring-controller.k8s.io"
    )
    monitors = DynamicClient(api).resources.get(api_version="monitoring.coreos.com/v1", kind="ServiceMonitor")
    monitor = monitors.get(name="dcgm-worker-gpu1", namespace=namespace).to_dict()
    assert monitor["metadata"]["labels"]["release"] == "monitoring"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["relabelings"][0] == {
        "targetLabel": "instance",
        "replacement": "worker-gpu1",
        "action": "replace",
    }
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service.metadata.labels.items()


def test_an_extra_exporter_gets_its_own_job_and_leaves_with_no_trace(api, namespace):
    """vLLM's metrics through the same tunnel: its objects beside the DCGM exporter's, at the node's
    port + its offset, under its own job; taken out of the list, they are removed."""
    converge(namespace, extra=[VLLM])
    assert converge(namespace, extra=[VLLM])["changed"] == 0
    core = client.CoreV1Api(api)
    service = core.read_namespaced_service("vllm-worker-gpu1", namespace)
    assert service.metadata.labels["gpufleet.io/scrape-job"] == "gpufleet-vllm"
    assert service.spec.ports[0].port == 19501
    assert core.read_namespaced_endpoints("vllm-worker-gpu1", namespace).subsets[0].ports[0].port == 19501
    monitors = DynamicClient(api).resources.get(api_version="monitoring.coreos.com/v1", kind="ServiceMonitor")
    monitor = monitors.get(name="vllm-worker-gpu1", namespace=namespace).to_dict()
    assert monitor["spec"]["selector"]["matchLabels"]["gpufleet.io/exporter"] == "vllm"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"

    assert converge(namespace)["changed"] > 0
    names = [s.metadata.name for s in core.list_namespaced_service(namespace).items]
    assert names == ["dcgm-worker-gpu1"]
    assert [m["metadata"]["name"] for m in monitors.get(namespace=namespace).to_dict()["items"]] == ["dcgm-worker-gpu1"]
