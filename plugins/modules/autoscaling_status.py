#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: a ScaledObject that runs is Ready, its HPA scales, and every trigger's metric answers."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: autoscaling_status
short_description: Check a KEDA ScaledObject, the HPA it made and each trigger's metric; name what fails
description:
  - Reads the ScaledObject (its C(Ready) condition), the HPA its status names (C(AbleToScale) and
    C(ScalingActive)), and every external metric of that HPA through the cluster's external metrics API, as
    the HPA reads it. KEDA's metrics server runs each trigger's query when asked, so the value is fresh.
  - A trigger whose metric fails is named with its query, and with KEDA's own error (its KEDAScalerFailed
    events), such as a query that returns nothing (the series is missing - a broken scrape or selector), which
    the autoscaling filter's triggers read as an error, not as no load.
  - Retries until every check passes or O(timeout) runs out (a ScaledObject just applied waits for the HPA's
    first sync). Read-only; in check mode it reads as well.
version_added: 0.9.0
author: gpufleet maintainers
requirements: [kubernetes]
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  kubeconfig:
    description: Path of the kubeconfig of the cluster KEDA runs in (default, the client's own).
    type: path
  namespace:
    description: The ScaledObject's namespace.
    type: str
    required: true
  name:
    description: The ScaledObject's name.
    type: str
    required: true
  timeout:
    description: Seconds to wait for every check to pass.
    type: float
    default: 60
"""

EXAMPLES = r"""
- name: vLLM's autoscaling reads its metrics
  gpufleet.platform.autoscaling_status:
    kubeconfig: /etc/gpufleet/gpu-cluster.kubeconfig
    namespace: inference
    name: vllm
"""

RETURN = r"""
msg:
  description: The problems in one line, or the triggers' values against their thresholds.
  returned: always
  type: str
triggers:
  description: One row per trigger - C(trigger), C(metric) (the HPA's external metric), C(query), C(threshold),
    C(target_type), C(value) and C(error) (the metrics API's answer where it gave no value).
  returned: always
  type: list
  elements: dict
active:
  description: KEDA's C(Active) condition (a trigger above its activation value).
  returned: always
  type: bool
replicas:
  description: The HPA's current and desired replicas.
  returned: always
  type: dict
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.platform.plugins.module_utils.autoscaling import status_problems

try:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    HAS_KUBERNETES = True
except ImportError:
    HAS_KUBERNETES = False

POLL_S = 5.0


class Cluster:
    def __init__(self, kubeconfig: str | None) -> None:
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.custom, self.hpas = client.CustomObjectsApi(self.api), client.AutoscalingV2Api(self.api)
        self.core = client.CoreV1Api(self.api)

    def scaler_errors(self, namespace: str, name: str) -> list[str]:
        """The messages of KEDA's KEDAScalerFailed events on the ScaledObject (the scaler's own error)."""
        selector = f"involvedObject.kind=ScaledObject,involvedObject.name={name},reason=KEDAScalerFailed"
        events = self.core.list_namespaced_event(namespace, field_selector=selector).items
        return [event.message for event in events if event.message]

    def read(self, namespace: str, name: str) -> tuple[dict | None, dict | None, dict]:
        """The ScaledObject, its HPA and each external metric's value (or the API's error)."""
        try:
            scaled = self.custom.get_namespaced_custom_object("keda.sh", "v1alpha1", namespace, "scaledobjects", name)
        except ApiException as error:
            if error.status == 404:
                return None, None, {}
            raise
        hpa_name = (scaled.get("status") or {}).get("hpaName") or f"keda-hpa-{name}"
        try:
            hpa = self.api.sanitize_for_serialization(
                self.hpas.read_namespaced_horizontal_pod_autoscaler(hpa_name, namespace)
            )
        except ApiException as error:
            if error.status == 404:
                return scaled, None, {}
            raise
        answers = {}
        for metric in (hpa.get("spec") or {}).get("metrics") or []:
            if metric.get("type") == "External":
                external = metric["external"]["metric"]
                answers[external["name"]] = self.metric(namespace, external)
        return scaled, hpa, answers

    def metric(self, namespace: str, external: dict) -> float | str:
        labels = ",".join(
            f"{k}={v}" for k, v in sorted(((external.get("selector") or {}).get("matchLabels") or {}).items())
        )
        try:
            # GET /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC: the path of a namespaced list.
            answer = self.custom.list_namespaced_custom_object(
                "external.metrics.k8s.io", "v1beta1", namespace, external["name"], label_selector=labels
            )
        except ApiException as error:
            try:
                return f"{error.status} {json.loads(error.body)['message']}"
            except (TypeError, ValueError, KeyError):
                return f"{error.status} {error.reason}"
        items = (answer or {}).get("items") or []
        if not items:
            return "no value"
        return sum(_quantity(item["value"]) for item in items)


def _quantity(value: str) -> float:
    """A Kubernetes quantity as KEDA gives it (plain, or in thousandths: 6400m)."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _reading(row: dict, current: int | None) -> str:
    """A trigger's value as the HPA compares it: per replica for an AverageValue target."""
    if row["target_type"] == "AverageValue" and current:
        return f"{row['trigger']} {row['value'] / current:.3g} per replica (threshold {row['threshold']})"
    return f"{row['trigger']} {row['value']:.3g} (threshold {row['threshold']})"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "kubeconfig": {"type": "path"},
            "namespace": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "timeout": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    what = f"ScaledObject {p['namespace']}/{p['name']}"
    cluster, started = Cluster(p["kubeconfig"]), time.monotonic()
    while True:
        try:
            scaled, hpa, answers = cluster.read(p["namespace"], p["name"])
        except ApiException as error:
            module.fail_json(msg=f"{what}: cannot be read ({error.status} {error.reason})", triggers=[])
        errors = cluster.scaler_errors(p["namespace"], p["name"]) if scaled is not None else []
        found, rows = status_problems(scaled, hpa, answers, errors)
        if not found or time.monotonic() - started >= p["timeout"]:
            break
        time.sleep(POLL_S)
    active = any(c.get("type") == "Active" and c.get("status") == "True"
                 for c in ((scaled or {}).get("status") or {}).get("conditions") or [])  # fmt: skip
    status = (hpa or {}).get("status") or {}
    replicas = {"current": status.get("currentReplicas"), "desired": status.get("desiredReplicas")}
    result = {"triggers": rows, "active": active, "replicas": replicas}
    if found:
        module.fail_json(msg=f"{what}: " + "; ".join(found), **result)
    values = ", ".join(_reading(row, replicas["current"]) for row in rows)
    module.exit_json(
        changed=False,
        msg=f"{what}: Ready, HPA at {replicas['current']} (wants {replicas['desired']}): {values}",
        **result,
    )


if __name__ == "__main__":
    main()
