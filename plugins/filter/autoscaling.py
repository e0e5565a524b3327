# SPDX-License-Identifier: Apache-2.0
"""Filters for a serving workload's ScaledObject: what makes its triggers unusable, and KEDA's
Prometheus triggers they render to (thresholds from the capacity file times the headroom)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import autoscaling


def autoscaling_problems(
    triggers: Any, doc: Any, headroom: float, engine: str, variable: str, capacity_variable: str
) -> list[str]:
    return autoscaling.problems(triggers, doc, headroom, engine, variable, capacity_variable)


def keda_triggers(
    triggers: list[dict[str, Any]],
    doc: Any,
    headroom: float,
    engine: str,
    namespace: str,
    workload: str,
    server_address: str,
) -> list[dict[str, Any]]:
    return autoscaling.keda_triggers(triggers, doc, headroom, engine, namespace, workload, server_address)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"autoscaling_problems": autoscaling_problems, "keda_triggers": keda_triggers}
