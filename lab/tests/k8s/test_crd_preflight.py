"""cluster_common's CRD preflight (the cluster roles' check before objects of a kind another project
installs) against a real API server: it passes once the CRD is there and fails, with the caller's
message, once it is gone."""

import subprocess
import sys
from pathlib import Path

from conftest import wait_for
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import k8s as labk8s
from kubernetes import client

PLAYBOOK = Path(__file__).parent / "playbooks" / "crd_preflight.yml"
GROUP, PLURAL = "preflight.gpufleet.io", "probes"
CRD = f"{PLURAL}.{GROUP}"


def preflight() -> subprocess.CompletedProcess:
    kubeconfig = labk8s.kubeconfig_path("gpu")
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(PLAYBOOK),
           "-e", f"test_crd={CRD}", "-e", f"gpufleet_gpu_cluster_kubeconfig={kubeconfig}",
           "-e", f"ansible_python_interpreter={sys.executable}"]  # fmt: skip
    env = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False, timeout=120)


def test_the_preflight_passes_with_the_crd_and_names_it_without(gpu_api):
    extensions = client.ApiextensionsV1Api(gpu_api)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    extensions.create_custom_resource_definition({
        "metadata": {"name": CRD},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "probe", "kind": "Probe"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    })  # fmt: skip
    try:
        found = preflight()
        assert found.returncode == 0, found.stdout[-2000:]
    finally:
        extensions.delete_custom_resource_definition(CRD)
    names = lambda: not [c for c in extensions.list_custom_resource_definition().items if c.metadata.name == CRD]  # noqa: E731
    wait_for(names, f"the CRD {CRD} gone")
    missing = preflight()
    assert missing.returncode == 2, missing.stdout[-2000:]
    assert f"{CRD} is not installed: install the project that serves it" in missing.stdout
    assert "the cluster has the CRD" in missing.stdout  # the assert refused it, not a connection error
