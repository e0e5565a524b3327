# SPDX-License-Identifier: Apache-2.0
"""Filters of the GPU remediation's plan (module_utils/gpu_remediation.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import gpu_remediation


def gpu_remediation_plan(
    alerts: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    hosts: dict[str, str],
    handled: list[str],
    settings: dict[str, Any],
) -> dict[str, Any]:
    return gpu_remediation.plan(alerts, nodes, hosts, handled, settings)


def gpu_remediation_problems(settings: dict[str, Any]) -> list[str]:
    return gpu_remediation.problems(settings)


def gpu_remediation_handled(audit_log: str) -> list[str]:
    return gpu_remediation.handled_keys(audit_log)


def gpu_remediation_quarantined(nodes: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    return gpu_remediation.quarantined_nodes(nodes, now)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "gpu_remediation_plan": gpu_remediation_plan,
            "gpu_remediation_problems": gpu_remediation_problems,
            "gpu_remediation_handled": gpu_remediation_handled,
            "gpu_remediation_quarantined": gpu_remediation_quarantined,
        }
