# SPDX-License-Identifier: Apache-2.0
"""Filters for Kubernetes manifests as charts render them."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ansible_collections.gpufleet.platform.plugins.module_utils.manifests import manifest_objects
from ansible_collections.gpufleet.platform.plugins.module_utils.validate import quantity_value

# Stamped on every object k8s_unapplied stamps: the label finds them, the annotation says which
# rendering was applied last.
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpufleet")
APPLIED_SHA256 = "gpufleet.io/applied-sha256"


def k8s_memory_sum(quantities: list[str]) -> str:
    """The sum of memory quantities (e.g. a process's memory and its memory-backed /dev/shm), in Mi."""
    return f"{math.ceil(sum(quantity_value(q) for q in quantities) / 2**20)}Mi"


def k8s_manifest_objects(text: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The objects of a multi-document manifest, optionally only those of one kind."""
    return manifest_objects(text, kind)


def k8s_unapplied(text: str, kind: str, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of one kind in a rendered manifest that the cluster does not hold as rendered
    (missing, or last applied from another rendering), each stamped with the sha256 of its
    rendering and the managed-by label.

    `live`: the cluster's objects of that kind with the label. Applying only these makes an
    unchanged chart's CRDs cost one read instead of a server-side apply of megabytes of schema (11
    to 15 s on the lab). Like `kubectl apply`, it compares with what it applied last: a hand edit
    of a CRD's schema that keeps the stamp is not undone until the chart's CRDs change. It parses
    the text itself: Ansible's lazily templated containers make copying rendered objects slow.
    """
    applied = {o["metadata"]["name"]: (o["metadata"].get("annotations") or {}).get(APPLIED_SHA256) for o in live}
    changed = []
    for obj in k8s_manifest_objects(text, kind):
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        if applied.get(obj["metadata"]["name"]) == digest:
            continue
        obj["metadata"].setdefault("labels", {})[MANAGED_BY[0]] = MANAGED_BY[1]
        obj["metadata"].setdefault("annotations", {})[APPLIED_SHA256] = digest
        changed.append(obj)
    return changed


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "k8s_manifest_objects": k8s_manifest_objects,
            "k8s_memory_sum": k8s_memory_sum,
            "k8s_unapplied": k8s_unapplied,
        }
