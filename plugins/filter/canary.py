# SPDX-License-Identifier: Apache-2.0
"""Filters for a serving workload's canary under Argo Rollouts: what makes its steps, analysis or
replicas unusable, its steps as Argo Rollouts takes them, the AnalysisTemplate that judges it, the
probe that its analysis' series are there, its benchmark step, and the weights Argo Rollouts set on
its route through a mesh."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import canary


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "canary_problems": canary.problems,
            "canary_steps": canary.rollout_steps,
            "canary_analysis_interval": canary.analysis_interval,
            "canary_analysis_template": canary.analysis_template,
            "canary_route_weights": canary.route_weights,
            "canary_series_probe": canary.series_probe,
            "canary_probe_problems": canary.probe_problems,
            "canary_bench_problems": canary.bench_problems,
            "canary_bench_template": canary.bench_template,
        }
