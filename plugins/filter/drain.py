# SPDX-License-Identifier: Apache-2.0
"""The pods a drain must move off a node (k8s_info resources in): evictable_pods, their names as
namespace/name, and longest_grace_seconds, the longest of their termination grace periods."""

from __future__ import annotations

from typing import Any


def _evictable(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leaves out what a drain leaves: DaemonSet pods (they stay on every node), mirror pods of
    static manifests (the kubelet owns them) and pods that already finished."""
    found = []
    for pod in pods:
        meta = pod.get("metadata", {})
        owners = {ref.get("kind") for ref in meta.get("ownerReferences") or []}
        mirror = "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
        finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if "DaemonSet" not in owners and not mirror and not finished:
            found.append(pod)
    return found


def evictable_pods(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}" for p in _evictable(pods))


# Kubernetes' default, where a pod's spec leaves it out (the API server fills it in).
DEFAULT_GRACE_SECONDS = 30


def longest_grace_seconds(pods: list[dict[str, Any]]) -> int:
    """How long the slowest of the evictable pods may take to finish once evicted: its
    terminationGracePeriodSeconds (vLLM's is its drain of the streams in flight); 0 where none is left."""
    graces = [(p.get("spec") or {}).get("terminationGracePeriodSeconds") for p in _evictable(pods)]
    return max((DEFAULT_GRACE_SECONDS if g is None else int(g) for g in graces), default=0)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"evictable_pods": evictable_pods, "longest_grace_seconds": longest_grace_seconds}
