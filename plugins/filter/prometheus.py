# SPDX-License-Identifier: Apache-2.0
"""Filters that check an Alertmanager configuration, name an alert, and read a remote-write queue's backlog."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.alertmanager import alert_summary, config_problems
from ansible_collections.gpufleet.platform.plugins.module_utils.remote_write import backlog_seconds


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "alert_summary": alert_summary,
            "alertmanager_config_problems": config_problems,
            "remote_write_backlog": backlog_seconds,
        }
