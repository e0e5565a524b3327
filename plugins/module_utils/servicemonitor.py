# SPDX-License-Identifier: Apache-2.0
"""Prometheus scrape configs from ServiceMonitors, as the Prometheus Operator generates them.

The lab runs a real Prometheus (Debian's, which is built without Kubernetes service
discovery) and no operator. Two stand-ins take their place:
- `endpoints_targets` snapshots what Kubernetes service discovery (role endpoints)
  would hand Prometheus: one target per Endpoints address and port, with the same
  __meta_kubernetes_* labels, the Service's labels joined by the Endpoints' name.
- `scrape_configs` turns the ServiceMonitors into the scrape configs the operator
  writes: a keep rule per selector label and for the endpoint's port name, the
  operator's target labels, then the ServiceMonitor's own relabelings.
Prometheus itself applies those rules, so a ServiceMonitor whose labels, selector or
port name are wrong, or an Endpoints object whose name does not match its Service,
yields no target, as under the operator. Features the lab does not need
(matchExpressions, targetPort) are refused rather than ignored.
"""

from __future__ import annotations

import re
from typing import Any

_RELABEL_KEYS = {
    "sourceLabels": "source_labels", "targetLabel": "target_label", "separator": "separator",
    "regex": "regex", "replacement": "replacement", "modulus": "modulus", "action": "action",
}  # fmt: skip


class UnsupportedServiceMonitor(ValueError):
    pass


def _meta(label: str) -> str:
    """A Kubernetes label name as Prometheus's service discovery spells it in meta labels."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _relabeling(rule: dict[str, Any]) -> dict[str, Any]:
    out = {_RELABEL_KEYS[k]: v for k, v in rule.items() if k in _RELABEL_KEYS}
    if "action" in out:
        out["action"] = str(out["action"]).lower()
    return out


def selects(service_monitor: dict[str, Any], selector: dict[str, str]) -> bool:
    """Whether a Prometheus with this serviceMonitorSelector (matchLabels) picks the ServiceMonitor."""
    labels = service_monitor.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def endpoints_targets(
    endpoints: list[dict[str, Any]], services: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """file_sd target groups per namespace, labelled as Kubernetes SD (role endpoints) labels them."""
    by_name = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
    groups: dict[str, list[dict[str, Any]]] = {}
    for ep in endpoints:
        namespace, name = ep["metadata"]["namespace"], ep["metadata"]["name"]
        labels = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_endpoints_name": name}
        service = by_name.get((namespace, name))
        if service:
            labels["__meta_kubernetes_service_name"] = name
            for key, value in (service["metadata"].get("labels") or {}).items():
                labels[f"__meta_kubernetes_service_label_{_meta(key)}"] = str(value)
                labels[f"__meta_kubernetes_service_labelpresent_{_meta(key)}"] = "true"
        for subset in ep.get("subsets") or []:
            for port in subset.get("ports") or []:
                for ready, key in (("true", "addresses"), ("false", "notReadyAddresses")):
                    for address in subset.get(key) or []:
                        groups.setdefault(namespace, []).append({
                            "targets": [f"{address['ip']}:{port['port']}"],
                            "labels": {**labels, "__meta_kubernetes_endpoint_port_name": port.get("name", ""),
                                       "__meta_kubernetes_endpoint_port_protocol": port.get("protocol", "TCP"),
                                       "__meta_kubernetes_endpoint_ready": ready},
                        })  # fmt: skip
    return groups


def scrape_configs(service_monitors: list[dict[str, Any]], targets_dir: str) -> list[dict[str, Any]]:
    """Scrape configs reading the snapshot of endpoints_targets, written as <targets_dir>/<namespace>.json."""
    configs = []
    for sm in sorted(service_monitors, key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"])):
        meta, spec = sm["metadata"], sm.get("spec", {})
        where = f"ServiceMonitor {meta['namespace']}/{meta['name']}"
        selector = spec.get("selector", {})
        if selector.get("matchExpressions"):
            raise UnsupportedServiceMonitor(f"{where}: selector.matchExpressions is not supported by the lab stand-in")
        namespace_selector = spec.get("namespaceSelector", {})
        if namespace_selector.get("any"):
            files = [f"{targets_dir}/*.json"]
        else:
            files = [f"{targets_dir}/{ns}.json" for ns in namespace_selector.get("matchNames") or [meta["namespace"]]]
        for index, endpoint in enumerate(spec.get("endpoints", [])):
            if "port" not in endpoint:
                raise UnsupportedServiceMonitor(f"{where}: endpoint {index} has no port name (targetPort unsupported)")
            relabel: list[dict[str, Any]] = [
                {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
            ]
            for key, value in sorted((selector.get("matchLabels") or {}).items()):
                relabel.append({
                    "action": "keep",
                    "source_labels": [f"__meta_kubernetes_service_label_{_meta(key)}",
                                      f"__meta_kubernetes_service_labelpresent_{_meta(key)}"],
                    "regex": f"({re.escape(str(value))});true",
                })  # fmt: skip
            relabel += [
                {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"],
                 "regex": re.escape(endpoint["port"])},
                {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_ready"], "regex": "true"},
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
                {"target_label": "endpoint", "replacement": endpoint["port"]},
            ]  # fmt: skip
            job_label = spec.get("jobLabel")
            if job_label:
                relabel.append({"source_labels": [f"__meta_kubernetes_service_label_{_meta(job_label)}"],
                                "target_label": "job", "regex": "(.+)", "replacement": "${1}"})  # fmt: skip
            relabel += [_relabeling(r) for r in endpoint.get("relabelings", [])]
            config: dict[str, Any] = {
                "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "metrics_path": endpoint.get("path", "/metrics"),
                "scheme": endpoint.get("scheme", "http"),
                # Besides file events, re-read the snapshot every 30 s (the default is 5 minutes).
                "file_sd_configs": [{"files": files, "refresh_interval": "30s"}],
                "relabel_configs": relabel,
            }
            if "interval" in endpoint:
                config["scrape_interval"] = endpoint["interval"]
            if endpoint.get("metricRelabelings"):
                config["metric_relabel_configs"] = [_relabeling(r) for r in endpoint["metricRelabelings"]]
            configs.append(config)
    return configs
