"""ServiceMonitors to scrape configs, as the Prometheus Operator would write them."""

import subprocess

import pytest
import yaml
from gpufleet.lib.servicemonitor import UnsupportedServiceMonitor, endpoints_targets, scrape_configs, selects

SM = {
    "metadata": {"name": "dcgm-gpu1", "namespace": "gpu-telemetry", "labels": {"release": "monitoring"}},
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "gpu-telemetry", "gpufleet.io/gpu-node": "gpu1"}},
        "endpoints": [{"port": "metrics", "interval": "30s",
                       "relabelings": [{"targetLabel": "instance", "replacement": "gpu1", "action": "replace"}]}],
    },
}  # fmt: skip
SD = "/etc/prometheus/kubernetes"
LABELS = {"app.kubernetes.io/name": "gpu-telemetry", "gpufleet.io/gpu-node": "gpu1"}
SERVICE = {"metadata": {"name": "dcgm-gpu1", "namespace": "gpu-telemetry", "labels": LABELS}}
ENDPOINTS = {
    "metadata": {"name": "dcgm-gpu1", "namespace": "gpu-telemetry"},
    "subsets": [{"addresses": [{"ip": "10.213.7.11"}], "ports": [{"name": "metrics", "port": 19401}]}],
}


def test_a_service_monitor_becomes_an_endpoints_job():
    [config] = scrape_configs([SM], SD)
    assert config["job_name"] == "serviceMonitor/gpu-telemetry/dcgm-gpu1/0"
    assert config["scrape_interval"] == "30s"
    assert config["file_sd_configs"][0]["files"] == ["/etc/prometheus/kubernetes/gpu-telemetry.json"]
    keeps = [r for r in config["relabel_configs"] if r.get("action") == "keep"]
    assert keeps[0]["source_labels"] == [
        "__meta_kubernetes_service_label_app_kubernetes_io_name",
        "__meta_kubernetes_service_labelpresent_app_kubernetes_io_name",
    ]
    assert keeps[0]["regex"] == "(gpu\\-telemetry);true"
    assert keeps[-2] == {
        "action": "keep",
        "source_labels": ["__meta_kubernetes_endpoint_port_name"],
        "regex": "metrics",
    }
    # The ServiceMonitor's own relabeling comes last, so it wins.
    assert config["relabel_configs"][-1] == {"target_label": "instance", "replacement": "gpu1", "action": "replace"}


def test_the_prometheus_selector_decides():
    assert selects(SM, {"release": "monitoring"})
    assert not selects(SM, {"release": "kube-prometheus-stack"})


def test_unsupported_features_are_refused():
    with pytest.raises(UnsupportedServiceMonitor, match="matchExpressions"):
        scrape_configs([{**SM, "spec": {"selector": {"matchExpressions": [{"key": "a"}]}}}], SD)
    with pytest.raises(UnsupportedServiceMonitor, match="targetPort"):
        scrape_configs([{**SM, "spec": {"selector": {}, "endpoints": [{"targetPort": 9400}]}}], SD)


def test_endpoints_are_labelled_as_kubernetes_sd_labels_them():
    [group] = endpoints_targets([ENDPOINTS], [SERVICE])["gpu-telemetry"]
    assert group["targets"] == ["10.213.7.11:19401"]
    labels = group["labels"]
    assert labels["__meta_kubernetes_service_label_gpufleet_io_gpu_node"] == "gpu1"
    assert labels["__meta_kubernetes_endpoint_port_name"] == "metrics"
    assert labels["__meta_kubernetes_endpoint_ready"] == "true"


def test_endpoints_named_unlike_their_service_carry_no_service_labels():
    renamed = {**ENDPOINTS, "metadata": {"name": "dcgm-gpu-1", "namespace": "gpu-telemetry"}}
    [group] = endpoints_targets([renamed], [SERVICE])["gpu-telemetry"]
    assert not any(k.startswith("__meta_kubernetes_service_label_") for k in group["labels"])


def test_promtool_accepts_the_generated_config(tmp_path):
    config = {"scrape_configs": scrape_configs([SM], SD)}
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
