# SPDX-License-Identifier: Apache-2.0
"""Filters that render dcgm-exporter data from the collection's one table."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.dcgm import counters_csv


def dcgm_counters_csv(_: Any = None, profiling: bool = False) -> str:
    """dcgm-exporter's counters file with the default fields (profiling ones on request)."""
    return counters_csv(profiling=profiling)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"dcgm_counters_csv": dcgm_counters_csv}
