# SPDX-License-Identifier: Apache-2.0
"""Filters for helm values: checked against a chart version's known keys; images as charts take them."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.helm_values import (
    chart_image,
    unknown_keys,
    value_paths,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"helm_value_paths": value_paths, "helm_unknown_keys": unknown_keys, "helm_chart_image": chart_image}
