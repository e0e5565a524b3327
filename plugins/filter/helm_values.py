# SPDX-License-Identifier: Apache-2.0
"""Filters that check rendered helm values against a chart version's known keys."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.helm_values import unknown_keys, value_paths


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"helm_value_paths": value_paths, "helm_unknown_keys": unknown_keys}
