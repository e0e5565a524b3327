"""GPUs claimed by what they are, through Kubernetes' dynamic resource allocation in the lab's GPU cluster:
the lab's DRA driver (a FIXTURE stand-in for NVIDIA's: lab/src/gpufleet_lab/dra.py) publishes each real GPU
node's devices with NVIDIA's attributes, the vllm role renders a ResourceClaimTemplate, and the real
scheduler, resource claim controller, kubelet and containerd (CDI) do the rest.

worker-gpu1 has a whole H200 (143771 MiB, from a real H200's nvidia-smi), worker-gpu2 a MIG device of it.

2.5 minutes, which the CI's budget cannot hold yet (about 84 of its 85 minutes): `make drills` runs it. The
CI checks the roles' rendering and values (tests/unit/plugins/module_utils/test_dra.py, the bad-input cases)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import dra as labdra
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from kubernetes import client

PLAYBOOK = Path(__file__).parent / "playbooks" / "dra_claim.yml"
pytestmark = pytest.mark.beyond_ci


@pytest.fixture(scope="module")
def dra_driver(gpu_api):
    labdra.install(gpu_api)
    yield
    labdra.uninstall(gpu_api)


def serve(namespace: str, **claim: object) -> subprocess.CompletedProcess:
    extra = {"vllm_kubeconfig": str(labk8s.kubeconfig_path("gpu")), "vllm_namespace": namespace,
             "vllm_image": labnodes.CALIBRATION_IMAGE, "ansible_python_interpreter": sys.executable,
             **claim}  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(PLAYBOOK),
           "-e", json.dumps(extra)]  # fmt: skip
    env = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=300)


def container_env(pod: client.V1Pod) -> dict[str, str]:
    """The environment containerd gave the pod's container (its OCI spec, read on the node)."""
    node = next(n for n in labinventory.REAL_NODES if n.name == pod.spec.node_name)
    container_id = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    spec = json.loads(labnodes.in_node(node, f"ctr -n k8s.io containers info {container_id}").stdout)["Spec"]
    return dict(item.split("=", 1) for item in spec["process"]["env"])


def test_each_gpu_node_publishes_its_devices_with_nvidias_attributes(gpu_api, dra_driver):
    slices = client.ResourceV1Api(gpu_api).list_resource_slice(field_selector=f"spec.driver={labdra.DRIVER}").items
    devices = {s.spec.node_name: s.spec.devices for s in slices}
    (h200,) = devices["worker-gpu1"]
    assert h200.attributes["productName"].string == "NVIDIA H200" and h200.attributes["type"].string == "gpu"
    assert h200.capacity["memory"].value == "143771Mi"
    (mig,) = devices["worker-gpu2"]
    assert mig.attributes["type"].string == "mig" and mig.attributes["profile"].string == labdra.MIG_PROFILE


def test_a_claim_by_memory_runs_on_the_node_with_such_a_gpu_and_gets_its_cdi_edits(
    gpu_api, namespace, dra_driver, published_images
):
    served = serve(namespace, vllm_dra_memory_at_least="40Gi", vllm_dra_product_name="NVIDIA H200")
    assert served.returncode == 0, served.stdout[-3000:]
    core, resource = client.CoreV1Api(gpu_api), client.ResourceV1Api(gpu_api)
    (pod,) = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=vllm").items
    assert pod.spec.node_name == "worker-gpu1"
    (claim,) = resource.list_namespaced_resource_claim(namespace).items
    (allocated,) = claim.status.allocation.devices.results
    assert (allocated.pool, allocated.device, allocated.driver) == ("worker-gpu1", "gpu-0", labdra.DRIVER)
    # The driver's CDI edits, applied by containerd: the device's UUID, as NVIDIA's container toolkit sets it.
    uuid = labdra.devices()["worker-gpu1"][0]["attributes"]["uuid"]["string"]
    assert container_env(pod)["NVIDIA_VISIBLE_DEVICES"] == uuid
    # A second run changes nothing; one with another claim rolls onto a new template and removes the old.
    (first,) = resource.list_namespaced_resource_claim_template(namespace).items
    changed = serve(namespace, vllm_dra_memory_at_least="100Gi")
    assert changed.returncode == 0, changed.stdout[-3000:]
    templates = [t.metadata.name for t in resource.list_namespaced_resource_claim_template(namespace).items]
    assert len(templates) == 1 and templates != [first.metadata.name], templates


def test_a_claim_no_device_satisfies_fails_the_run_with_the_schedulers_reason(gpu_api, namespace, dra_driver):
    served = serve(namespace, vllm_dra_memory_at_least="200Gi")
    assert served.returncode == 2, served.stdout[-3000:]
    assert "cannot allocate all claims" in served.stdout, served.stdout[-3000:]


def test_a_class_the_cluster_lacks_and_a_selector_that_does_not_compile_are_named_before_any_change(
    gpu_api, dra_driver
):
    namespace = "t-dra-refused"  # never created: the preflight stops first
    missing = serve(namespace, vllm_dra_device_class="gpu.example.com")
    assert missing.returncode == 2, missing.stdout[-3000:]
    assert "vllm_dra_device_class=gpu.example.com: the GPU cluster has no such DeviceClass" in missing.stdout
    assert "gpu.nvidia.com" in missing.stdout  # the classes it has
    broken = serve(namespace, vllm_dra_selectors=["device.driver == 'gpu.nvidia.com'", "device.attributes[[ oops"])
    assert broken.returncode == 2, broken.stdout[-3000:]
    assert "vllm_dra_selectors[1]: " in broken.stdout, broken.stdout[-3000:]
    names = [n.metadata.name for n in client.CoreV1Api(gpu_api).list_namespace().items]
    assert namespace not in names
