"""Dynamic resource allocation in the lab's GPU cluster: the lab's DRA driver (lab/dra-driver, a FIXTURE
stand-in for NVIDIA's DRA driver for GPUs, which cannot be had here) as a DaemonSet on the real GPU nodes,
and the DeviceClasses NVIDIA's driver makes.

Each node's FIXTURE devices carry the attributes NVIDIA's driver publishes, taken from a real H200's
`nvidia-smi -q -x` (tests/fixtures/nvidia-smi-q-x.h200.xml): worker-gpu1 has the whole H200, worker-gpu2
one MIG device of it (1g.18gb), so a claim by memory or by class has one right node. The kubelet, the
scheduler, the resource claim controller and containerd's CDI are Kubernetes' and containerd's own."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import gpu_facts
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import gpufleet_lab as lab
from gpufleet_lab import nodes as labnodes

NAMESPACE = "gpufleet-lab-dra"
DRIVER = "gpu.nvidia.com"
REFERENCE = lab.REPO_ROOT / "tests/fixtures/nvidia-smi-q-x.h200.xml"
# NVIDIA's DeviceClasses: whole GPUs and MIG devices, told apart by the attribute `type`.
DEVICE_CLASSES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}
MIG_PROFILE = "1g.18gb"


def devices() -> dict[str, list[dict[str, Any]]]:
    """Each real GPU node's devices, as the driver's devices file has them."""
    facts = gpu_facts.parse_nvidia_smi_xml(REFERENCE.read_text())
    gpu = facts["gpus"][0]
    # A version attribute is semantic: three numbers without leading zeros (580.159.04 is 580.159.4).
    driver = ".".join(str(int(part)) for part in [*facts["driver_version"].split("."), "0", "0"][:3])
    common = {
        "productName": {"string": gpu["name"]},
        "architecture": {"string": gpu["architecture"]},
        "driverVersion": {"version": driver},
        "index": {"int": gpu["index"]},
    }
    whole = {
        "name": "gpu-0",
        "attributes": {**common, "type": {"string": "gpu"}, "uuid": {"string": gpu["uuid"]}},
        "capacity": {"memory": f"{gpu['memory_total_mib']}Mi"},
    }
    # The profile's name gives its memory (decimal gigabytes), as nvidia-smi lists it.
    mig = {
        "name": "gpu-0-mig-1g18gb-0",
        "attributes": {**common, "type": {"string": "mig"}, "profile": {"string": MIG_PROFILE},
                       "uuid": {"string": "MIG-" + gpu["uuid"].removeprefix("GPU-")},
                       "parentUUID": {"string": gpu["uuid"]}},
        "capacity": {"memory": "18G"},
    }  # fmt: skip
    return {"worker-gpu1": [whole], "worker-gpu2": [mig]}


def manifests() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": "gpufleet-lab-dra-driver"}
    devices_json = json.dumps(devices(), indent=1)
    # The driver reads its devices once, at start: changed devices restart its pods.
    annotations = {"gpufleet.io/devices": hashlib.sha256(devices_json.encode()).hexdigest()[:16]}
    hostpaths = {
        "plugins": "/var/lib/kubelet/plugins",
        "registry": "/var/lib/kubelet/plugins_registry",
        "cdi": "/var/run/cdi",
    }
    rules = [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    ]  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "dra-driver", "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "gpufleet-lab-dra-driver"}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "gpufleet-lab-dra-driver"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpufleet-lab-dra-driver"},
         "subjects": [{"kind": "ServiceAccount", "name": "dra-driver", "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "devices", "namespace": NAMESPACE},
         "data": {"devices.json": devices_json}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dra-driver", "namespace": NAMESPACE},
         "spec": {"selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels, "annotations": annotations}, "spec": {
             "serviceAccountName": "dra-driver",
             "nodeSelector": {labnodes.TAINT["key"]: "true"},
             "tolerations": [{"operator": "Exists"}],
             "containers": [{
                 "name": "driver", "image": labnodes.DRA_DRIVER_IMAGE, "imagePullPolicy": "Never",
                 "args": ["--driver-name", DRIVER],
                 "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                 "volumeMounts": [{"name": n, "mountPath": p} for n, p in hostpaths.items()]
                 + [{"name": "devices", "mountPath": "/etc/gpufleet-lab-dra"}],
             }],
             "volumes": [{"name": n, "hostPath": {"path": p, "type": "DirectoryOrCreate"}}
                         for n, p in hostpaths.items()]
             + [{"name": "devices", "configMap": {"name": "devices"}}],
         }}}},
        *(
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression":
                 f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"}}]}}
            for name, kind in DEVICE_CLASSES.items()
        ),
    ]  # fmt: skip


def install(api: client.ApiClient, timeout: float = 120) -> None:
    """The driver and its classes in the GPU cluster, applied server-side; returns once each real GPU node's
    kubelet plugin has published its ResourceSlice."""
    from kubernetes import dynamic

    resources = dynamic.DynamicClient(api).resources  # type: ignore[no-untyped-call]
    for obj in manifests():
        kind = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        kind.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"),
                               field_manager="gpufleet-lab", force_conflicts=True)  # fmt: skip
    deadline = time.monotonic() + timeout
    wanted = set(devices())
    while True:
        slices = client.ResourceV1Api(api).list_resource_slice().items
        published = {str(s.spec.node_name) for s in slices if s.spec.driver == DRIVER}
        if wanted <= published:
            return
        if time.monotonic() > deadline:
            pods = client.CoreV1Api(api).list_namespaced_pod(NAMESPACE).items
            states = {p.spec.node_name if p.spec else "?": p.status.phase if p.status else "?" for p in pods}
            names = [str(p.metadata.name) for p in pods if p.metadata]
            log = client.CoreV1Api(api).read_namespaced_pod_log(names[0], NAMESPACE, tail_lines=3) if names else ""
            raise lab.LabError(f"the lab's DRA driver published slices for {sorted(published)} only, not"
                               f" {sorted(wanted - published)}, in {timeout:.0f} s (its pods: {states}; the end of"
                               f" one's log: {log})")  # fmt: skip
        time.sleep(1)


def uninstall(api: client.ApiClient) -> None:
    """The driver, its classes and the slices it published."""
    from kubernetes import dynamic

    resources = dynamic.DynamicClient(api).resources  # type: ignore[no-untyped-call]
    for obj in reversed(manifests()):
        if obj["kind"] == "ConfigMap" or (obj["metadata"].get("namespace") and obj["kind"] != "Namespace"):
            continue  # gone with the namespace
        try:
            resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).delete(name=obj["metadata"]["name"])
        except ApiException as error:
            if error.status != 404:
                raise
    client.ResourceV1Api(api).delete_collection_resource_slice(field_selector=f"spec.driver={DRIVER}")
