# SPDX-License-Identifier: Apache-2.0
"""Jinja tests for preflight asserts: `x is gpufleet.platform.image_reference`, and so on."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import validate


class TestModule:
    def tests(self) -> dict[str, Any]:
        return {
            "image_reference": validate.image_reference,
            "ip_address": validate.ip_address,
            "ip_network": validate.ip_network,
            "duration": validate.duration,
            "k8s_quantity": validate.k8s_quantity,
            "byte_size": validate.byte_size,
            "dns_label": validate.dns_label,
        }
