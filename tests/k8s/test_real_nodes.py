"""The lab's real nodes: kubelet, kube-proxy and containerd built from Go modules run pods in both
clusters. A pod starts from a lab image, passes its readiness probe and answers through its
Service's node port; the product's node_drain role evicts it (its PodDisruptionBudget respected)
and its replacement starts on the GPU cluster's other node."""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml
from conftest import wait_for
from kubernetes import client

from gpufleet import labk8s, labnodes
from gpufleet.lab import REPO_ROOT

ROLE = "gpufleet.platform.node_drain"
TOLERATION = {"key": labnodes.TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}


def calibration_server(namespace: str, replicas: int = 1) -> tuple[dict, dict]:
    labels = {"app": "calibration"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "calibration", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [TOLERATION],
                    "nodeSelector": {"gpufleet.io/lab-kubelet": "true"},
                    "terminationGracePeriodSeconds": 2,
                    "containers": [
                        {
                            "name": "server",
                            "image": labnodes.CALIBRATION_IMAGE,
                            "imagePullPolicy": "Never",
                            "args": ["--host", "0.0.0.0", "--port", "8000", "--tokens", "8"],
                            "ports": [{"containerPort": 8000}],
                            "readinessProbe": {"httpGet": {"path": "/v1/models", "port": 8000}, "periodSeconds": 1},
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "calibration", "namespace": namespace},
        "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 8000, "targetPort": 8000}]},
    }
    return deployment, service


def ready_pods(core: client.CoreV1Api, namespace: str) -> list:
    pods = core.list_namespaced_pod(namespace, label_selector="app=calibration").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def answer(request: urllib.request.Request) -> str | None:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def test_each_cluster_has_real_nodes_that_only_tolerating_pods_use(api, gpu_api):
    for cluster, api_client in (("main", api), ("gpu", gpu_api)):
        for real in labnodes.nodes_of(cluster):
            node = client.CoreV1Api(api_client).read_node(real.name)
            info = node.status.node_info
            assert info.kubelet_version == f"v{labk8s.K8S_VERSION}", info
            assert info.container_runtime_version == "containerd://" + labnodes.CONTAINERD_VERSION.lstrip("v"), info
            taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints or []]
            assert taints == [labnodes.TAINT], taints
            assert node.metadata.labels["gpufleet.io/lab-kubelet"] == "true"


def test_a_pod_starts_passes_its_probe_and_answers_through_its_service(gpu_api, namespace):
    core, apps = client.CoreV1Api(gpu_api), client.AppsV1Api(gpu_api)
    deployment, service = calibration_server(namespace)
    apps.create_namespaced_deployment(namespace, deployment)
    port = core.create_namespaced_service(namespace, service).spec.ports[0].node_port
    (pod,) = wait_for(lambda: ready_pods(core, namespace), "the calibration pod to pass its readiness probe", 120)
    node = next(n for n in labnodes.REAL_NODES if n.name == pod.spec.node_name)

    # The controller reaches the pod through kube-proxy's node port, as `gpufleet verify` does.
    request = urllib.request.Request(
        f"http://{node.address}:{port}/v1/chat/completions",
        data=json.dumps({"model": "calibration", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    # kube-proxy programs the port once the ready endpoint reaches it: allow it a moment.
    body = wait_for(lambda: answer(request), f"{request.full_url} to answer", 30)
    assert "calibration" in body, body[:300]

    # Logs come through the API server from the kubelet (its serving certificate checked).
    log = core.read_namespaced_pod_log(pod.metadata.name, namespace)
    assert "POST /v1/chat/completions" in log or log.strip(), log


def drain(tmp_path: Path, node: str, timeout: str) -> subprocess.CompletedProcess:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {node: {"ansible_connection": "local"}}}}))
    playbook = tmp_path / "drain.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Drain with the product's role",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {"ansible.builtin.include_role": {"name": ROLE}},
                        {"ansible.builtin.include_role": {"name": ROLE, "tasks_from": "uncordon"}},
                    ],
                }
            ]
        )
    )
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook),
           "-e", f"gpufleet_gpu_cluster_kubeconfig={labk8s.kubeconfig_path('gpu')}",
           "-e", f"node_drain_timeout={timeout}"]  # fmt: skip
    env = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=300)


def test_a_drain_evicts_the_pod_and_its_replacement_starts_on_the_other_node(gpu_api, namespace, tmp_path):
    core, apps = client.CoreV1Api(gpu_api), client.AppsV1Api(gpu_api)
    deployment, _ = calibration_server(namespace)
    apps.create_namespaced_deployment(namespace, deployment)
    client.PolicyV1Api(gpu_api).create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "calibration"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "calibration"}}},
        },
    )
    (before,) = wait_for(lambda: ready_pods(core, namespace), "the calibration pod to be ready", 120)
    first = before.spec.node_name

    # One replica under a budget of one: the eviction is refused until the run gives up, naming it.
    refused = drain(tmp_path, first, "10s")
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "disruption budget" in out, out[-2000:]
    assert [p.metadata.name for p in ready_pods(core, namespace)] == [before.metadata.name]

    # Two replicas: the budget allows one eviction at a time, and the evicted pod's replacement
    # starts on the other real node.
    core.patch_node(first, {"spec": {"unschedulable": False}})
    apps.patch_namespaced_deployment_scale(namespace=namespace, name="calibration", body={"spec": {"replicas": 2}})
    wait_for(lambda: len(ready_pods(core, namespace)) == 2, "two calibration pods to be ready", 120)
    drained = drain(tmp_path, first, "2m")
    assert drained.returncode == 0, (drained.stdout + drained.stderr)[-2000:]
    pods = wait_for(lambda: len(ready_pods(core, namespace)) == 2 and ready_pods(core, namespace), "replacement", 120)
    assert before.metadata.name not in [p.metadata.name for p in pods]
    assert all(p.spec.node_name != first for p in pods), [p.spec.node_name for p in pods]
    assert not core.read_node(first).spec.unschedulable  # the role's uncordon ran
