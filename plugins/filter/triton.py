# SPDX-License-Identifier: Apache-2.0
"""Filters rendering Triton model configs, checked against Triton's own protobuf schema."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.platform.plugins.module_utils.triton_config import TritonConfigError, config_pbtxt


def triton_config_pbtxt(model: dict[str, Any]) -> str:
    """config.pbtxt for one model mapping; a mapping outside the schema fails naming the field."""
    try:
        return config_pbtxt(model)
    except TritonConfigError as exc:
        raise AnsibleFilterError(f"triton_models: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"triton_config_pbtxt": triton_config_pbtxt}
