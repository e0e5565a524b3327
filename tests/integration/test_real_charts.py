"""The helm roles against the real charts, as released (lab/charts): kube-prometheus-stack
79.0.1 and 77.14.0, gpu-operator v24.9.2, v25.3.4 and v25.10.1.

- Every key of the roles' tables exists in that chart version (its values.yaml, a subchart's, or
  a `.Values.` reference in its templates): a key the chart dropped is refused, not ignored.
- `helm template` of the real chart with the values the roles render (the prod example, and
  every feature on) gives the objects production needs: the ClusterPolicy and Prometheus specs,
  Services, ServiceMonitors, and only images the versions file lists for mirroring.

The install into a real API server is lab/tests/k8s/test_real_chart_installs.py and the molecule
scenarios of the monitoring and gpu_operator roles."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.platform.plugins.filter.manifests import k8s_manifest_objects
from gpufleet_lab import REPO_ROOT
from gpufleet_lab import k8s as labk8s
from gpufleet_lab.prerequisites import charts_dir

HELM = labk8s.bin_dir() / "helm"
CHARTS = charts_dir()
pytestmark = pytest.mark.skipif(not HELM.exists(), reason="helm is built by `make k8s`")
CHART = {"gpu_operator": "gpu-operator-{}.tgz", "monitoring": "kube-prometheus-stack-{}.tgz"}
FEATURES = {
    "gpu_operator_mig_strategy": "mixed",
    "gpu_operator_mig_layouts": {"h200-7x1g": {"1g.18gb": 7}},
    "gpu_operator_mig_config_default": "h200-7x1g",
    "gpu_operator_time_slicing_replicas": 4,
    "gpu_operator_cdi_default": True,
    "gpu_operator_dcgm_exporter_enabled": True,
    "monitoring_grafana_service_type": "NodePort",
    "monitoring_grafana_node_port": 30300,
    "monitoring_prometheus_service_type": "NodePort",
    "monitoring_control_plane_monitors": False,
    "monitoring_alertmanager_config": {"route": {"receiver": "r"}, "receivers": [{"name": "r"}]},
}


def table(role: str) -> dict[str, list[str]]:
    """The role's chart-key table, with its YAML anchors and list sums resolved."""
    raw = yaml.safe_load((REPO_ROOT / "roles" / role / "vars" / "main.yml").read_text())
    common = raw[f"_{role}_common_keys"]
    resolved = {}
    for version, keys in raw[f"_{role}_chart_keys"].items():
        extra = re.findall(r"'([^']+)'", keys.split("+", 1)[1]) if "+" in keys else []
        resolved[str(version)] = common + extra
    return resolved


@cache
def chart_files(archive: str) -> dict[str, str]:
    with tarfile.open(CHARTS / archive) as tar:
        return {
            m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile() and (m.name.endswith("values.yaml") or "/templates/" in m.name)
        }


def has_path(values: Any, path: list[str]) -> bool:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return False
        values = values[key]
    return True


def chart_knows(archive: str, key: str) -> bool:
    files = chart_files(archive)
    root = archive.split("-v")[0] if archive.startswith("gpu-operator") else "kube-prometheus-stack"
    path = key.removesuffix(".*").split(".")
    if has_path(yaml.safe_load(files[f"{root}/values.yaml"]), path):
        return True
    sub = f"{root}/charts/{path[0]}/values.yaml"  # a subchart's own values, e.g. grafana
    if sub in files and has_path(yaml.safe_load(files[sub]), path[1:]):
        return True
    referenced = [(f"{root}/templates/", ".Values." + ".".join(path)),
                  (f"{root}/charts/{path[0]}/templates/", ".Values." + ".".join(path[1:]))]  # fmt: skip
    return any(ref in text for name, text in files.items() for where, ref in referenced if name.startswith(where))


@pytest.mark.parametrize(("role", "version"), [(role, v) for role in CHART for v in table(role)], ids=lambda x: str(x))
def test_every_key_of_the_table_exists_in_the_released_chart(role, version):
    archive = CHART[role].format(version)
    unknown = [key for key in table(role)[version] if not chart_knows(archive, key)]
    assert unknown == [], f"{archive} has no {unknown}: the chart would ignore them silently"


def test_the_check_catches_a_key_a_chart_dropped():
    # operator.defaultRuntime went away in v25.3.0: present in v24.9.2's chart, gone from v25's.
    assert chart_knows("gpu-operator-v24.9.2.tgz", "operator.defaultRuntime")
    assert not chart_knows("gpu-operator-v25.3.4.tgz", "operator.defaultRuntime")


def render_values(out: Path, inventory: str = "localhost,", **extra: Any) -> dict[str, Any]:
    env = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "PATH": "/usr/bin:/bin", "ANSIBLE_FORCE_COLOR": "0"}
    extra_vars = {"gpufleet_helm_values_dir": str(out), "ansible_python_interpreter": sys.executable, **extra}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, "-c", "local",
         str(REPO_ROOT / "playbooks/helm_values.yml"), "-e", json.dumps(extra_vars)],
        capture_output=True, text=True, cwd=REPO_ROOT, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:]
    return {role: out / f"{role}.yml" for role in CHART}


def helm_template(archive: str, values: Path, namespace: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(HELM), "template", namespace, str(CHARTS / archive), "-n", namespace, "-f", str(values)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return k8s_manifest_objects(proc.stdout)


def only(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return doc


@pytest.fixture(scope="module")
def prod(tmp_path_factory) -> dict[str, Path]:
    """The values the prod example inventory renders."""
    return render_values(tmp_path_factory.mktemp("prod"), str(REPO_ROOT / "inventories/prod"))


@pytest.mark.parametrize("version", sorted(table("gpu_operator")))
def test_the_prod_example_on_every_gpu_operator_version(prod, tmp_path, version):
    values = render_values(tmp_path, str(REPO_ROOT / "inventories/prod"), gpu_operator_chart_version=version)
    policy = only(helm_template(f"gpu-operator-{version}.tgz", values["gpu_operator"], "gpu-operator"),
                  "ClusterPolicy")["spec"]  # fmt: skip
    # k3s: the host's toolkit and k3s own the containerd configuration (one owner).
    assert policy["toolkit"]["enabled"] is False
    assert policy["driver"]["enabled"] is False
    # The dcgm_exporter role's exporter carries the metrics through the tunnel instead.
    assert policy["dcgmExporter"]["enabled"] is False
    assert ("defaultRuntime" in policy["operator"]) == (version == "v24.9.2")


@pytest.mark.parametrize("version", sorted(table("gpu_operator")))
def test_every_gpu_operator_feature_reaches_the_cluster_policy(tmp_path, version):
    values = render_values(tmp_path, **FEATURES, gpu_operator_chart_version=version)
    docs = helm_template(f"gpu-operator-{version}.tgz", values["gpu_operator"], "gpu-operator")
    policy = only(docs, "ClusterPolicy")["spec"]
    assert policy["mig"]["strategy"] == "mixed" and policy["migManager"]["enabled"] is True
    assert policy["migManager"]["config"] == {"name": "gpufleet-mig-parted-config", "default": "h200-7x1g"}
    parted = yaml.safe_load(only(docs, "ConfigMap", "gpufleet-mig-parted-config")["data"]["config.yaml"])
    assert parted["mig-configs"]["h200-7x1g"][0]["mig-devices"] == {"1g.18gb": 7}
    assert policy["devicePlugin"]["config"] == {"name": "gpufleet-time-slicing", "default": "any"}
    # The operator's own exporter, where chosen: instance = the node's name, as on the other path.
    assert policy["dcgmExporter"]["serviceMonitor"]["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance", "action": "replace"}
    ]
    assert policy["toolkit"]["enabled"] is True  # containerd (not k3s): the operator's toolkit may run


def test_the_prod_example_gives_prometheus_a_volume_a_node_port_and_no_control_plane_gaps(prod):
    docs = helm_template("kube-prometheus-stack-79.0.1.tgz", prod["monitoring"], "monitoring")
    spec = only(docs, "Prometheus")["spec"]
    claim = spec["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "200Gi" and "storageClassName" not in claim
    assert spec["retention"] == "30d" and spec["retentionSize"] == "170GB"  # 85 % of 200Gi (Prometheus's GB is a GiB)
    service = only(docs, "Service", "monitoring-kube-prometheus-prometheus")["spec"]
    # gpufleet_prometheus_url is http://192.0.2.10:30090 in the prod example.
    assert service["type"] == "NodePort"
    assert [p["nodePort"] for p in service["ports"] if p["name"] == "http-web"] == [30090]


@pytest.mark.parametrize("version", sorted(table("monitoring")))
def test_every_monitoring_feature_reaches_the_chart(tmp_path, version):
    values = render_values(tmp_path, **FEATURES, monitoring_chart_version=version)
    docs = helm_template(f"kube-prometheus-stack-{version}.tgz", values["monitoring"], "monitoring")
    monitors = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitors and not [m for m in monitors if re.search("etcd|controller-manager|scheduler|kube-proxy", m)]
    # ... and their alerts, which would otherwise fire forever on k3s and managed clusters.
    alerts = {
        r.get("alert") for d in docs if d["kind"] == "PrometheusRule" for g in d["spec"]["groups"] for r in g["rules"]
    }
    assert alerts and not alerts & {
        "KubeSchedulerDown",
        "KubeControllerManagerDown",
        "KubeProxyDown",
        "etcdMembersDown",
    }
    assert only(docs, "Alertmanager")["spec"]["configSecret"] == "gpufleet-alertmanager"  # pragma: allowlist secret
    assert only(docs, "Prometheus")["spec"]["storage"]["volumeClaimTemplate"]["spec"]["resources"] == {
        "requests": {"storage": "50Gi"}
    }
    assert "enableRemoteWriteReceiver" not in only(docs, "Prometheus")["spec"]  # tunnel mode: no receiver


@pytest.mark.parametrize("version", sorted(table("monitoring")))
def test_the_remote_write_mode_turns_the_receiver_on(tmp_path, version):
    values = render_values(tmp_path, gpufleet_telemetry_mode="remote_write", monitoring_chart_version=version)
    docs = helm_template(f"kube-prometheus-stack-{version}.tgz", values["monitoring"], "monitoring")
    assert only(docs, "Prometheus")["spec"]["enableRemoteWriteReceiver"] is True


@pytest.mark.parametrize("version", sorted(table("monitoring")))
def test_a_stack_placed_on_tainted_nodes_with_its_own_prometheus_and_no_certgen_or_state_metrics(tmp_path, version):
    """What the lab asks for (its images are built here, kube-webhook-certgen and kube-state-metrics
    cannot be), and what an airgapped fleet with dedicated monitoring nodes asks for."""
    toleration = {"key": "dedicated", "operator": "Equal", "value": "monitoring", "effect": "NoSchedule"}
    values = render_values(
        tmp_path,
        monitoring_chart_version=version,
        monitoring_prometheus_image="registry.internal:5000/prometheus/prometheus:v2.42.0",
        monitoring_kube_state_metrics_enabled=False,
        monitoring_admission_webhooks_enabled=False,
        monitoring_node_selector={"node-role.example/monitoring": "true"},
        monitoring_tolerations=[toleration],
    )
    docs = helm_template(f"kube-prometheus-stack-{version}.tgz", values["monitoring"], "monitoring")
    prometheus = only(docs, "Prometheus")["spec"]
    assert prometheus["image"] == "registry.internal:5000/prometheus/prometheus:v2.42.0"
    assert prometheus["version"] == "v2.42.0"  # the operator writes flags and configuration for it
    operator = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator"))
    for spec in (prometheus, operator["spec"]["template"]["spec"], only(docs, "Alertmanager")["spec"]):
        assert spec["nodeSelector"] == {"node-role.example/monitoring": "true"}
        assert spec["tolerations"] == [toleration]
    assert not [
        d for d in docs if d["kind"] in ("Job", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]
    assert not [d for d in docs if d["kind"] != "PrometheusRule" and "kube-state-metrics" in d["metadata"]["name"]]
    assert not operator["spec"]["template"]["spec"].get("volumes")  # no TLS Secret to mount
    daemonset = only(docs, "DaemonSet")["spec"]["template"]["spec"]  # node-exporter: every node still
    assert "nodeSelector" not in daemonset or daemonset["nodeSelector"] == {"kubernetes.io/os": "linux"}


def images(docs: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                if key == "image" and isinstance(child, str):
                    found.add(child)
                walk(child)
        elif isinstance(node, list):
            for child in node:
                if isinstance(child, str) and child.startswith("--prometheus-config-reloader="):
                    found.add(child.split("=", 1)[1])
                walk(child)

    walk([d for d in docs if d["kind"] != "Pod"])  # Pods are helm tests (grafana's bats)
    return found


def test_the_versions_file_lists_every_image_the_pinned_charts_deploy(tmp_path):
    pins = yaml.safe_load((REPO_ROOT / "roles/versions/defaults/main.yml").read_text())
    values = render_values(tmp_path, **FEATURES)
    kps = helm_template(f"kube-prometheus-stack-{pins['versions_kube_prometheus_stack_chart']}.tgz",
                        values["monitoring"], "monitoring")  # fmt: skip
    assert images(kps) <= set(pins["versions_kube_prometheus_stack_images"])
    operator = helm_template(f"gpu-operator-{pins['versions_gpu_operator_chart']}.tgz",
                             values["gpu_operator"], "gpu-operator")  # fmt: skip
    policy = only(operator, "ClusterPolicy")["spec"]
    # The operands this collection's paths can turn on (sandbox and vGPU workloads are off).
    operands = {
        f"{policy[c]['repository']}/{policy[c]['image']}:{policy[c]['version']}"
        for c in ("validator", "devicePlugin", "gfd", "toolkit", "migManager", "dcgmExporter")
    }
    deployed = {i for i in images(operator) if "/" in i and ":" in i}  # the operator's and NFD's pods
    assert deployed and deployed | operands <= set(pins["versions_gpu_operator_images"])


def test_the_versions_file_lists_every_image_the_pinned_keda_chart_deploys(tmp_path):
    pins = yaml.safe_load((REPO_ROOT / "roles/versions/defaults/main.yml").read_text())
    values = tmp_path / "keda.yml"
    values.write_text(yaml.safe_dump({"image": {"pullPolicy": "IfNotPresent"}, "webhooks": {"enabled": True}}))
    keda = helm_template(f"keda-{pins['versions_keda_chart']}.tgz", values, "keda")
    assert images(keda) == set(pins["versions_keda_images"])
    assert {d["kind"] for d in keda} >= {"APIService", "ValidatingWebhookConfiguration", "CustomResourceDefinition"}


def test_the_argo_rollouts_chart_deploys_the_pinned_controller_with_no_rights_on_a_mesh_unless_named(tmp_path):
    """The argo_rollouts role's values on the released chart: the pinned controller's image alone (the
    dashboard off), and rights on a traffic router's objects only for the providers the fleet names."""
    pins = yaml.safe_load((REPO_ROOT / "roles/versions/defaults/main.yml").read_text())

    def rendered(providers: list[str], plugins: list[dict] | None = None) -> list[dict]:
        names = ["istio", "smi", "ambassador", "awsLoadBalancerController", "awsAppMesh", "traefik", "apisix",
                 "contour", "glooPlatform", "gatewayAPI"]  # fmt: skip
        values = tmp_path / "argo-rollouts.yml"
        values.write_text(yaml.safe_dump({
            "controller": {"replicas": 2, "trafficRouterPlugins": plugins or []}, "dashboard": {"enabled": False},
            "providerRBAC": {"enabled": bool(providers), "providers": {n: n in providers for n in names}},
        }))  # fmt: skip
        return helm_template(f"argo-rollouts-{pins['versions_argo_rollouts_chart']}.tgz", values, "argo-rollouts")

    def api_groups(docs: list[dict]) -> set[str]:
        role = only(docs, "ClusterRole", "argo-rollouts")
        return {group for rule in role["rules"] for group in rule.get("apiGroups", [])}

    plain = rendered([])
    assert images(plain) == set(pins["versions_argo_rollouts_images"])
    assert {"argoproj.io", "apps", ""} <= api_groups(plain)
    assert "networking.istio.io" not in api_groups(plain) and "gateway.networking.k8s.io" not in api_groups(plain)
    assert "networking.istio.io" in api_groups(rendered(["istio"]))
    # The Gateway API through Argo Rollouts' plugin: its rights, and the plugin with its checksum in the
    # controller's configuration (argo_rollouts_traffic_router_plugins), which the controller checks.
    plugin = {"name": "argoproj-labs/gatewayAPI", "location": "file:///plugins/gatewayapi", "sha256": "a" * 64}
    gateway = rendered(["gatewayAPI"], [plugin])
    assert "gateway.networking.k8s.io" in api_groups(gateway) and "networking.istio.io" not in api_groups(gateway)
    config = only(gateway, "ConfigMap", "argo-rollouts-config")
    assert yaml.safe_load(config["data"]["trafficRouterPlugins"]) == [plugin]
    assert "trafficRouterPlugins" not in (only(plain, "ConfigMap", "argo-rollouts-config").get("data") or {})
