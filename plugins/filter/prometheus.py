# SPDX-License-Identifier: Apache-2.0
"""Filters that turn ServiceMonitors into Prometheus scrape configs (the lab's operator stand-in),
check an Alertmanager configuration, and read a remote-write queue's backlog."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.platform.plugins.module_utils.alertmanager import config_problems
from ansible_collections.gpufleet.platform.plugins.module_utils.remote_write import backlog_seconds
from ansible_collections.gpufleet.platform.plugins.module_utils.servicemonitor import (
    UnsupportedServiceMonitor,
    endpoints_targets,
    scrape_configs,
    selects,
)


def servicemonitor_scrape_configs(
    service_monitors: list[dict[str, Any]],
    targets_dir: str,
    selector: dict[str, str] | None = None,
    namespaces: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The scrape configs of the ServiceMonitors a Prometheus picks with this serviceMonitorSelector
    and (when given) serviceMonitorNamespaceSelector's namespaces."""
    chosen = [
        sm for sm in service_monitors
        if selects(sm, selector or {}) and (not namespaces or sm["metadata"]["namespace"] in namespaces)
    ]  # fmt: skip
    try:
        return scrape_configs(chosen, targets_dir)
    except UnsupportedServiceMonitor as exc:
        raise AnsibleFilterError(str(exc)) from exc


def kubernetes_endpoints_targets(
    endpoints: list[dict[str, Any]], services: list[dict[str, Any]], namespaces: list[str] | None = None
) -> dict[str, Any]:
    """Discovered endpoints per namespace, limited to the given namespaces when there are any."""
    targets = endpoints_targets(endpoints, services)
    return {ns: groups for ns, groups in targets.items() if not namespaces or ns in namespaces}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "servicemonitor_scrape_configs": servicemonitor_scrape_configs,
            "kubernetes_endpoints_targets": kubernetes_endpoints_targets,
            "alertmanager_config_problems": config_problems,
            "remote_write_backlog": backlog_seconds,
        }
