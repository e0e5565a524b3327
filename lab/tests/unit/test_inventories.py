"""The lab inventory is shaped like the prod example: the same groups (bar the named exceptions) and
the same cluster variables, so that what the main job proves on the lab is what a fleet runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufleet_lab import LAB_INVENTORY, REPO_ROOT

INVENTORIES = {"prod": REPO_ROOT / "inventories" / "prod", "lab": LAB_INVENTORY.parent}
# Groups the lab lacks, and why. Lab-only groups are named lab_* (lab/site.yml uses them).
NOT_IN_THE_LAB = {
    "k3s_nodes": "k3s cannot be had here (no release binary, no source): the lab's GPU cluster is a "
    "control plane built from Kubernetes' modules, with real kubelet nodes",
}
# What the plays need to know about the two clusters and the main Prometheus.
CLUSTER_VARIABLES = (
    "gpufleet_main_cluster_kubeconfig",
    "gpufleet_gpu_cluster_kubeconfig",
    "gpufleet_gpu_cluster_service_monitors",
    "gpufleet_prometheus_url",
    "gpufleet_vllm_metrics_job",
)


def groups(inventory: str) -> set[str]:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(INVENTORIES[inventory]), "--list"],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT,
    )  # fmt: skip
    return {name for name in json.loads(proc.stdout) if name not in ("_meta", "all", "ungrouped")}


def all_vars(inventory: str) -> dict:
    found: dict = {}
    for path in sorted((INVENTORIES[inventory] / "group_vars").glob("all*")):
        for file in sorted(path.glob("*.yml")) if path.is_dir() else [path]:
            found.update(yaml.safe_load(file.read_text()) or {})
    return found


def test_the_lab_has_the_groups_of_the_prod_example():
    prod, lab = groups("prod"), groups("lab")
    assert prod - lab == set(NOT_IN_THE_LAB), "groups of the prod example missing from the lab"
    assert all(name.startswith("lab_") for name in lab - prod), "lab-only groups are named lab_*"


@pytest.mark.parametrize("variable", CLUSTER_VARIABLES)
def test_both_describe_the_clusters_with_the_same_variables(variable):
    prod, lab = all_vars("prod"), all_vars("lab")
    assert variable in prod and variable in lab
    if isinstance(prod[variable], bool):
        assert prod[variable] == lab[variable], f"{variable}: the lab must run as the prod example does"


def test_both_carry_the_gpu_metrics_to_the_operator_the_same_way():
    """The tunnel publishes for kube-prometheus-stack's operator (a file_sd file on the tunnel host
    reaches no Prometheus in a pod), and carries the same exporters beside DCGM's."""
    prod, lab = ({**all_vars(inv), **yaml.safe_load((INVENTORIES[inv] / "group_vars/telemetry_tunnel_hosts.yml")
                  .read_text())} for inv in ("prod", "lab"))  # fmt: skip
    for tunnel in (prod, lab):
        assert tunnel["telemetry_tunnel_kubernetes"] is True and "telemetry_tunnel_file_sd_path" not in tunnel
    jobs = [[e["job"] for e in tunnel["telemetry_tunnel_extra_exporters"]] for tunnel in (prod, lab)]
    assert jobs[0] == jobs[1] == [prod["gpufleet_vllm_metrics_job"]]
