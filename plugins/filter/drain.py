# SPDX-License-Identifier: Apache-2.0
"""evictable_pods: the pods a drain must move off a node, as namespace/name (k8s_info resources in)."""

from __future__ import annotations

from typing import Any


def evictable_pods(pods: list[dict[str, Any]]) -> list[str]:
    """Leaves out what a drain leaves: DaemonSet pods (they stay on every node), mirror pods of
    static manifests (the kubelet owns them) and pods that already finished."""
    names = []
    for pod in pods:
        meta = pod.get("metadata", {})
        owners = {ref.get("kind") for ref in meta.get("ownerReferences") or []}
        mirror = "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
        finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if "DaemonSet" not in owners and not mirror and not finished:
            names.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(names)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"evictable_pods": evictable_pods}
