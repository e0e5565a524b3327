# SPDX-License-Identifier: Apache-2.0
"""A filter that finds, in a free-form argument list, the flags a role renders from its own variables."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.validate import owned_flag_problems


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"owned_flag_problems": owned_flag_problems}
