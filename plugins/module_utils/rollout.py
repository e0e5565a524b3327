# SPDX-License-Identifier: Apache-2.0
"""Why a workload's rollout is not done: read from its object, its pods and their nodes.

A bare "timed out waiting for the Deployment" after twenty minutes is what a helm or k8s wait gives
when an image is missing, a node's kubelet died or the scheduler finds no GPU. This module reads the
same objects an SRE would (`kubectl rollout status`, `describe pod`, `get node`) and names the cause:
the pod, its node, the container and image, the reason and the message Kubernetes gave.

Pure functions on the API's objects as dicts (`ApiClient.sanitize_for_serialization`), so that the
module and the unit tests run the very same code.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

# Waiting reasons no retry can fix: the pod spec itself is wrong.
FATAL_WAITING = {"InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError"}
# An image that cannot be pulled: transient for a while (a registry restart), then a cause.
PULL_WAITING = {"ErrImagePull", "ImagePullBackOff"}
# A container restarted this many times in a row is a cause, not a slow start.
CRASH_RESTARTS = 3
# A kubelet renews its node's lease every 10 s; this long without renewal is a dead kubelet.
LEASE_STALE_S = 40.0


@dataclass
class Problem:
    """What keeps one pod from becoming ready."""

    pod: str
    node: str
    reason: str
    message: str
    fatal: bool = False  # no point in waiting: fail at once

    def describe(self) -> str:
        where = f" on node {self.node}" if self.node else ""
        return f"pod {self.pod}{where}: {self.reason}: {self.message}"


def _int(value: Any) -> int:
    return int(value or 0)


def rollout_done(kind: str, obj: dict[str, Any]) -> tuple[bool, str]:
    """Done as `kubectl rollout status` means it: the controller saw the latest spec, every replica
    runs it and is available. Returns (done, a one-line count)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    seen = _int(status.get("observedGeneration")) >= _int((obj.get("metadata") or {}).get("generation"))
    if kind == "DaemonSet":
        want = _int(status.get("desiredNumberScheduled"))
        updated, available = _int(status.get("updatedNumberScheduled")), _int(status.get("numberAvailable"))
        return seen and updated == want and available == want, f"{available}/{want} nodes' pods available"
    want = _int(spec.get("replicas", 1))
    updated, ready = _int(status.get("updatedReplicas")), _int(status.get("readyReplicas"))
    if kind == "StatefulSet":
        return seen and ready == want and updated in (0, want), f"{ready}/{want} replicas ready"
    available, total = _int(status.get("availableReplicas")), _int(status.get("replicas"))
    done = seen and updated == want and total == want and available == want
    return done, f"{available}/{want} replicas available ({updated} updated)"


def canary_done(obj: dict[str, Any]) -> tuple[bool, str]:
    """An Argo Rollouts Rollout: done once its latest spec is the stable version and Healthy (a canary
    promoted through every step). Returns (done, a one-line state)."""
    status = obj.get("status") or {}
    seen = str(status.get("observedGeneration", "")) == str((obj.get("metadata") or {}).get("generation", ""))
    want = _int((obj.get("spec") or {}).get("replicas", 1))
    available, updated = _int(status.get("availableReplicas")), _int(status.get("updatedReplicas"))
    phase = status.get("phase") or "Progressing"
    promoted = bool(status.get("stableRS")) and status.get("stableRS") == status.get("currentPodHash")
    steps = len((((obj.get("spec") or {}).get("strategy") or {}).get("canary") or {}).get("steps") or [])
    step = f", step {status.get('currentStepIndex')}/{steps}" if not promoted and steps else ""
    summary = f"{phase}{step}, {available}/{want} replicas available ({updated} of the new version)"
    return seen and promoted and phase == "Healthy", summary


_LIMIT = re.compile(r"<=\s*([-+0-9.eE]+)")


def analysis_failure(run: dict[str, Any], job_verdicts: dict[str, str] | None = None) -> str:
    """What an AnalysisRun that failed measured: each failed metric's last value against its limit, or for a
    job metric (the benchmark step) its Job's own verdict (``job_verdicts``, by metric)."""
    limits = {m.get("name"): m.get("successCondition", "") for m in (run.get("spec") or {}).get("metrics") or []}
    status = run.get("status") or {}
    failed = []
    for result in status.get("metricResults") or []:
        if result.get("phase") not in ("Failed", "Error"):
            continue
        name = result.get("name")
        if name in (job_verdicts or {}):
            failed.append(f"{name}: {job_verdicts[name]}")  # type: ignore[index]
            continue
        last = (result.get("measurements") or [{}])[-1]
        bound = _LIMIT.search(limits.get(name) or "")
        limit = f"limit {bound.group(1)}" if bound else f"condition {limits.get(name)!r}"
        detail = f"{result.get('failed', 0)} of {result.get('count', 0)} measurements failed"
        if result.get("phase") == "Error":
            detail = (
                f"{result.get('error', 0)} measurements errored: {result.get('message') or last.get('message', '')}"
            )
        failed.append(f"{name} measured {last.get('value', 'nothing')} ({limit}; {detail})")
    name = (run.get("metadata") or {}).get("name", "?")
    return f"analysis {name}: " + ("; ".join(failed) or f"{status.get('phase')}: {status.get('message', '')}")


def last_analysis(runs: list[dict[str, Any]]) -> str:
    """The newest AnalysisRun's name and phase, for a line about a Rollout (``runs``: newest first)."""
    if not runs:
        return "; no analysis has run yet"
    return f"; last analysis {runs[0]['metadata'].get('name')}: {(runs[0].get('status') or {}).get('phase', 'Pending')}"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _age_s(timestamp: Any, now: datetime.datetime) -> float | None:
    if not timestamp:
        return None
    if isinstance(timestamp, str):
        timestamp = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return float((now - timestamp).total_seconds())


def node_problem(node: dict[str, Any] | None, lease: dict[str, Any] | None, now: datetime.datetime) -> str | None:
    """Why a node cannot start pods: NotReady as the node controller sees it, or, before that, a
    kubelet whose lease went stale (the controller waits its grace period before saying so)."""
    if node is None:
        return "the node does not exist"
    ready = _condition(node, "Ready")
    if ready and ready.get("status") != "True":
        return f"node NotReady ({ready.get('reason', '')}: {ready.get('message', '')})"
    renewed = _age_s(((lease or {}).get("spec") or {}).get("renewTime"), now)
    if renewed is not None and renewed > LEASE_STALE_S:
        return f"its kubelet has not renewed the node's lease for {renewed:.0f} s (kubelet stopped or cut off)"
    return None


def pod_problem(
    pod: dict[str, Any], node: dict[str, Any] | None, lease: dict[str, Any] | None, now: datetime.datetime
) -> Problem | None:
    """The first thing that keeps a pod from being ready, or None while it is simply on its way."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node_name = meta.get("name", "?"), spec.get("nodeName") or ""
    if meta.get("deletionTimestamp"):
        # An old replica on its way out; a Recreate rollout waits for it. Only its kubelet can end it.
        cause = node_problem(node, lease, now) if node_name else None
        return Problem(name, node_name, "cannot finish terminating", cause) if cause else None
    if _condition(pod, "Ready").get("status") == "True":
        return None
    scheduled = _condition(pod, "PodScheduled")
    if not node_name:
        if scheduled.get("status") == "False":
            return Problem(name, "", f"not scheduled ({scheduled.get('reason', '')})", scheduled.get("message", ""))
        return None
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    for container in statuses:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason, text = waiting.get("reason", ""), waiting.get("message", "")
        image = container.get("image", "")
        if reason in FATAL_WAITING:
            return Problem(name, node_name, f"container {container.get('name')} {reason}", text, fatal=True)
        if reason in PULL_WAITING:
            # One reason for ErrImagePull and ImagePullBackOff, which the kubelet alternates.
            return Problem(name, node_name, f"image {image} cannot be pulled", f"{reason}: {text}")
        if reason == "CrashLoopBackOff" and _int(container.get("restartCount")) >= CRASH_RESTARTS:
            last = (container.get("lastState") or {}).get("terminated") or {}
            detail = f"exit code {last.get('exitCode')} ({last.get('reason', '')}) {last.get('message', '')}".strip()
            return Problem(
                name, node_name,
                f"container {container.get('name')} crashed {container.get('restartCount')} times",
                f"{detail}; its log: kubectl logs -n {meta.get('namespace')} {name}"
                f" -c {container.get('name')} --previous",
                fatal=True,
            )  # fmt: skip
    cause = node_problem(node, lease, now)
    if cause:
        return Problem(name, node_name, "its node cannot run it", cause)
    return None


class Watch:
    """Problems over successive looks: a fatal one at once, the others once they have lasted `grace_s`
    (a registry restarting, a node rebooting, a GPU being freed are not causes yet)."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.first_seen: dict[tuple[str, str], float] = {}

    def verdict(self, problems: list[Problem], clock: float) -> Problem | None:
        current = {(p.pod, p.reason) for p in problems}
        self.first_seen = {key: t for key, t in self.first_seen.items() if key in current}
        for problem in problems:
            since = self.first_seen.setdefault((problem.pod, problem.reason), clock)
            if problem.fatal or clock - since >= self.grace_s:
                return problem
        return None
