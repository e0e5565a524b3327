"""The lab's real nodes: kubelet, kube-proxy and containerd built from Go modules run pods in both
clusters. A pod starts from a lab image, passes its readiness probe and answers through its
Service's node port; the product's node_drain role evicts it (its PodDisruptionBudget respected)
and its replacement starts on the GPU cluster's other node; a pod pulls its image through the
registry mirror that the registry_mirror and container_registries roles set up, under a
Harbor-style project prefix."""

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import yaml
from conftest import wait_for
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client

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


def test_a_pod_starts_passes_its_probe_and_answers_through_its_service(gpu_api, namespace, published_images):
    core, apps = client.CoreV1Api(gpu_api), client.AppsV1Api(gpu_api)
    deployment, service = calibration_server(namespace)
    apps.create_namespaced_deployment(namespace, deployment)
    port = core.create_namespaced_service(namespace, service).spec.ports[0].node_port
    (pod,) = wait_for(lambda: ready_pods(core, namespace), "the calibration pod to pass its readiness probe", 120)
    node = next(n for n in labinventory.REAL_NODES if n.name == pod.spec.node_name)

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


def test_a_drain_evicts_the_pod_and_its_replacement_starts_on_the_other_node(
    gpu_api, namespace, tmp_path, published_images
):
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


GRACE_S = 40


def test_a_drain_waits_out_the_grace_period_of_a_pod_still_finishing(gpu_api, namespace, tmp_path, published_images):
    """A pod that takes its whole grace period to finish (it ignores SIGTERM, as a replica draining
    long streams keeps serving): the drain waits for it, though node_drain_timeout is shorter, and the
    node is empty when the role says it is drained. Waiting only node_drain_timeout (the role before
    issue #33) leaves the pod on the node and fails, so the test can fail."""
    core, apps = client.CoreV1Api(gpu_api), client.AppsV1Api(gpu_api)
    deployment, _ = calibration_server(namespace)
    template = deployment["spec"]["template"]["spec"]
    template["terminationGracePeriodSeconds"] = GRACE_S
    ignores_sigterm = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(86400)"
    template["containers"][0].update(command=["python3", "-c", ignores_sigterm], args=[], readinessProbe=None)
    apps.create_namespaced_deployment(namespace, deployment)
    (pod,) = wait_for(lambda: ready_pods(core, namespace), "the SIGTERM-ignoring pod to run", 120)
    node = pod.spec.node_name
    started = time.monotonic()
    drained = drain(tmp_path, node, "5s")
    took = time.monotonic() - started
    assert drained.returncode == 0, (drained.stdout + drained.stderr)[-2000:]
    left = core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    assert [p.metadata.name for p in left if p.metadata.name == pod.metadata.name] == [], "the pod is still there"
    print(f"drain of a pod with a {GRACE_S} s grace period (node_drain_timeout 5s): {took:.1f} s")
    assert took >= GRACE_S - 5, took  # it was waited for, not killed early


MIRROR_PLAYBOOK = """
- name: The fleet's registry mirror (the product's role) on the main cluster's real node
  hosts: mirror
  gather_facts: true
  roles:
    - role: gpufleet.platform.registry_mirror
- name: The GPU node pulls through it (the product's role writes containerd's hosts.toml)
  hosts: node
  gather_facts: true
  roles:
    - role: gpufleet.platform.container_registries
      vars:
        container_registries_engines: [containerd]
        gpufleet_registry_mirrors:
          # Images referenced by a registry that cannot be reached (its name does not resolve here),
          # served by the mirror under a Harbor-style project prefix.
          - registry: registry.gpufleet.test
            endpoints: ["http://{mirror}:5000"]
            project: lab
"""


def probe_image(tag: str) -> str:
    """A small image of its own (the pause binary and a file unique to this run), so that the
    node has none of its layers and must pull them."""
    name = f"localhost/gpufleet-lab/mirror-probe:{tag}"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pause").write_bytes((labk8s.bin_dir() / "pause").read_bytes())
        (Path(tmp) / "pause").chmod(0o755)
        (Path(tmp) / "probe").write_text(tag)
        tar = subprocess.Popen(["tar", "-C", tmp, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["podman", "import", "--change", 'ENTRYPOINT ["/pause"]', "-", name],
                       stdin=tar.stdout, env=labcontainers.podman_env(), check=True, capture_output=True)  # fmt: skip
        tar.wait()
    return name


def test_a_pod_pulls_its_image_through_the_mirror_the_roles_set_up(gpu_api, namespace, tmp_path):
    (main_node,) = labnodes.nodes_of("main")
    gpu_node = labnodes.nodes_of("gpu")[-1]
    inventory = {
        "all": {
            "vars": {
                "ansible_connection": "containers.podman.podman",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "hosts": {
                "mirror": {"ansible_host": main_node.container, "registry_mirror_address": main_node.address},
                "node": {"ansible_host": gpu_node.container},
            },
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "mirror.yml").write_text(MIRROR_PLAYBOOK.replace("{mirror}", main_node.address))
    env = {**labcontainers.podman_env(), "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin:/sbin"}  # fmt: skip
    cmd = ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "mirror.yml")]
    converge = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=600)
    assert converge.returncode == 0, (converge.stdout + converge.stderr)[-3000:]

    # The image goes into the mirror under the project, as a Harbor proxy cache would hold it.
    tag = uuid.uuid4().hex[:12]
    local = probe_image(tag)
    labcontainers.podman(
        "push", "--tls-verify=false", local, f"docker://{main_node.address}:5000/lab/gpufleet/mirror-probe:{tag}"
    )
    image = f"registry.gpufleet.test/gpufleet/mirror-probe:{tag}"
    core = client.CoreV1Api(gpu_api)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "mirror-probe"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": gpu_node.name},
                "tolerations": [TOLERATION],
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Always"}],
            },
        },
    )

    def running() -> bool:
        pod = core.read_namespaced_pod("mirror-probe", namespace)
        waiting = [s.state.waiting for s in pod.status.container_statuses or [] if s.state.waiting]
        assert not any(w.reason in ("ErrImagePull", "ImagePullBackOff") for w in waiting), waiting
        return pod.status.phase == "Running"

    wait_for(running, f"the pod pulling {image} through the mirror", 90)
    log = labnodes.in_node(main_node, "journalctl -u docker-registry --no-pager -o cat").stdout
    # containerd 2.x resolved the tag at the mirror, under the project prefix, then fetched the layers.
    mine = [line for line in log.splitlines() if line.startswith(f"{gpu_node.address} - - ")]
    assert any(f'"HEAD /v2/lab/gpufleet/mirror-probe/manifests/{tag}?ns=registry.gpufleet.test' in x for x in mine), (
        mine
    )
    assert any('"GET /v2/lab/gpufleet/mirror-probe/blobs/sha256:' in x and '" 200 ' in x for x in mine), mine
    labcontainers.podman("rmi", local, check=False)
