# SPDX-License-Identifier: Apache-2.0
"""Filters for GPUs claimed through dynamic resource allocation (module_utils/dra.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils import dra


def dra_claim_template(request: dict[str, Any], name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return dra.claim_template(request, name, namespace, labels)


def dra_problems(request: dict[str, Any], prefix: str) -> list[str]:
    return dra.problems(request, prefix)


def dra_dry_run_problems(problems: list[str], request: dict[str, Any], prefix: str) -> list[str]:
    return dra.dry_run_problems(problems, request, prefix)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "dra_claim_template": dra_claim_template,
            "dra_problems": dra_problems,
            "dra_dry_run_problems": dra_dry_run_problems,
        }
