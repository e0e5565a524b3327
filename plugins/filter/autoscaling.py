# SPDX-License-Identifier: Apache-2.0
"""Filters for a serving workload's ScaledObject: what makes its triggers or its bounds unusable, KEDA's
Prometheus triggers they render to (thresholds from the capacity file times the headroom), and the
ScaledObject itself."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import autoscaling


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "autoscaling_problems": autoscaling.problems,
            "autoscaling_bounds_problems": autoscaling.bounds_problems,
            "keda_triggers": autoscaling.keda_triggers,
            "keda_scaled_object": autoscaling.scaled_object,
        }
