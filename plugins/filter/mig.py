# SPDX-License-Identifier: Apache-2.0
"""Filters for MIG layouts (module_utils/mig.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.mig import layout_problems, parted_config


def mig_layout_problems(layouts: dict[str, Any], variable: str, gpu_name: str | None = None) -> list[str]:
    return [p for name, layout in layouts.items() for p in layout_problems(f"{variable}.{name}", layout, gpu_name)]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"mig_layout_problems": mig_layout_problems, "mig_parted_config": parted_config}
