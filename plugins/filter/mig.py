# SPDX-License-Identifier: Apache-2.0
"""Filters for MIG layouts (module_utils/mig.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.mig import (
    layout_problems,
    parted_config,
    single_strategy_problems,
)


def mig_layout_problems(layouts: object, variable: str, gpu_name: str | None = None) -> list[str]:
    if not isinstance(layouts, dict):
        return [f"{variable} must map layout names to layouts, e.g. {{h200-7x1g: {{1g.18gb: 7}}}}"]
    return [p for name, layout in layouts.items() for p in layout_problems(f"{variable}.{name}", layout, gpu_name)]


def mig_single_strategy_problems(layouts: object, variable: str) -> list[str]:
    return single_strategy_problems(variable, layouts)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "mig_layout_problems": mig_layout_problems,
            "mig_parted_config": parted_config,
            "mig_single_strategy_problems": mig_single_strategy_problems,
        }
