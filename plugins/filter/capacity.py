# SPDX-License-Identifier: Apache-2.0
"""Filters over a capacity file of `gpufleet bench`: what makes it unusable, and the drain it implies."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import capacity


def capacity_problems(doc: Any, variable: str, model: str = "", engine: str = "") -> list[str]:
    return capacity.problems(doc, variable, model, engine)


def capacity_shutdown_seconds(doc: Any, headroom: float) -> int:
    return capacity.shutdown_seconds(doc, headroom)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"capacity_problems": capacity_problems, "capacity_shutdown_seconds": capacity_shutdown_seconds}
