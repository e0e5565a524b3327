"""The helm roles' rendered values, for every chart version in their tables, with every
feature on: each version accepts every key the role renders (preflight passes and the
values file is written), and a key a version lacks is refused with its name. What the real
charts make of these values: test_real_charts.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpufleet_lab import REPO_ROOT

FEATURES = {
    "gpu_operator_container_runtime": "k3s",
    "gpu_operator_mig_strategy": "mixed",
    "gpu_operator_mig_layouts": {"h200-balanced": {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}},
    "gpu_operator_mig_config_default": "h200-balanced",
    "gpu_operator_time_slicing_replicas": 4,
    "gpu_operator_cdi_default": True,
    "monitoring_retention_size": "40GB",
    "monitoring_grafana_service_type": "NodePort",
    "monitoring_grafana_node_port": 30300,
}


def versions(role: str) -> list[str]:
    table = yaml.safe_load((REPO_ROOT / "roles" / role / "vars" / "main.yml").read_text())[f"_{role}_chart_keys"]
    return sorted(table)


def render(out: Path, **extra: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(REPO_ROOT / "playbooks/helm_values.yml"),
         "-e", json.dumps({"gpufleet_helm_values_dir": str(out), "ansible_python_interpreter": sys.executable,
                           "versions_gpu_operator_chart": "v25.3.4", **FEATURES, **extra})],
        capture_output=True, text=True, cwd=REPO_ROOT, check=False,
        env={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"},
    )  # fmt: skip


@pytest.mark.parametrize("version", versions("gpu_operator"))
def test_every_gpu_operator_version_accepts_what_the_role_renders(tmp_path, version):
    proc = render(tmp_path, gpu_operator_chart_version=version)
    assert proc.returncode == 0, proc.stdout
    values = yaml.safe_load((tmp_path / "gpu_operator.yml").read_text())
    assert values["driver"]["enabled"] is False
    # cdi.default went away in v25.10: rendered only where the table has it.
    assert ("default" in values["cdi"]) == (version in ("v24.9.2", "v25.3.4"))


@pytest.mark.parametrize("version", versions("monitoring"))
def test_every_kube_prometheus_stack_version_accepts_what_the_role_renders(tmp_path, version):
    proc = render(tmp_path, monitoring_chart_version=version)
    assert proc.returncode == 0, proc.stdout
    values = yaml.safe_load((tmp_path / "monitoring.yml").read_text())
    assert values["prometheus"]["prometheusSpec"]["retentionSize"] == "40GB"
    assert "adminPassword" not in values["grafana"]


def test_a_key_the_chart_version_lacks_is_refused_by_name(tmp_path):
    proc = render(tmp_path, gpu_operator_chart_version="v25.10.1",
                  gpu_operator_extra_values={"cdi": {"default": True}, "driver": {"usePrecompiled": True}})  # fmt: skip
    assert proc.returncode != 0
    assert "cdi.default, driver.usePrecompiled" in proc.stdout and "v25.10.1" in proc.stdout
    assert not (tmp_path / "gpu_operator.yml").exists()


def test_an_unknown_chart_version_is_refused(tmp_path):
    proc = render(tmp_path, monitoring_chart_version="99.0.0")
    assert proc.returncode != 0 and "monitoring_chart_version=99.0.0" in proc.stdout
