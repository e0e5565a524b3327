# SPDX-License-Identifier: Apache-2.0
"""duration_seconds: a duration such as 10m or 1h30m, in seconds (for timeouts given as durations)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.platform.plugins.module_utils.validate import duration_seconds as _seconds


def duration_seconds(value: str) -> int:
    try:
        return round(_seconds(value))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"duration_seconds": duration_seconds}
