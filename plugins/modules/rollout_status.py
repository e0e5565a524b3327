#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: wait for a workload's rollout, and name the cause when it cannot finish."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rollout_status
short_description: Wait for a Deployment, DaemonSet, StatefulSet or Argo Rollout to roll out; fail early with the cause
description:
  - Waits as C(kubectl rollout status) does (every replica runs the latest spec and is available). An Argo Rollouts
    Rollout is waited for through its canary steps until its new version is promoted (Healthy); one aborted by its
    analysis fails the task at once, naming each failed metric of the AnalysisRun, its last measured value and its
    limit (Argo Rollouts has rolled it back to the stable version by then).
  - Meanwhile reads the workload's pods and their nodes. A cause no wait can fix fails the task at once
    (an invalid image name, a missing Secret or ConfigMap, a container crashing 3 times in a row). An image
    that cannot be pulled, a pod the scheduler cannot place, or a node whose kubelet stopped (NotReady, or its
    lease not renewed for 40 s) fails the task once it has lasted O(grace).
  - The failure names the pod, its node, the container and image, and Kubernetes' own reason and message.
  - Read-only. In check mode it does nothing (the workload was not changed).
version_added: 0.9.0
author: gpufleet maintainers
requirements: [kubernetes]
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  kubeconfig:
    description: Path of the kubeconfig of the cluster the workload runs in (default, the client's own).
    type: path
  namespace:
    description: The workload's namespace.
    type: str
    required: true
  kind:
    description: The workload's kind.
    type: str
    choices: [Deployment, DaemonSet, StatefulSet, Rollout]
    required: true
  name:
    description: The workload's name.
    type: str
    required: true
  timeout:
    description: Seconds to wait for the rollout in all (a large model can take minutes to load).
    type: float
    default: 600
  grace:
    description: Seconds a pull error, an unschedulable pod or a stopped kubelet may last before it is the cause.
    type: float
    default: 60
"""

EXAMPLES = r"""
- name: vLLM is rolled out, or the reason it is not
  gpufleet.platform.rollout_status:
    kubeconfig: /etc/gpufleet/gpu-cluster.kubeconfig
    namespace: inference
    kind: Deployment
    name: vllm
    timeout: 1200
"""

RETURN = r"""
msg:
  description: The rollout's state in one line, or the cause it cannot finish.
  returned: always
  type: str
seconds:
  description: Seconds waited.
  returned: always
  type: float
aborted:
  description: True when a Rollout's canary was aborted (by its analysis or by hand) and rolled back.
  returned: when a Rollout's canary was aborted
  type: bool
"""

import datetime
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.platform.plugins.module_utils.rollout import (
    Problem,
    Watch,
    analysis_failure,
    canary_done,
    last_analysis,
    pod_problem,
    rollout_done,
)

try:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    HAS_KUBERNETES = True
except ImportError:
    HAS_KUBERNETES = False

POLL_S = 3.0
ARGO = ("argoproj.io", "v1alpha1")
READERS = {
    "Deployment": "read_namespaced_deployment",
    "DaemonSet": "read_namespaced_daemon_set",
    "StatefulSet": "read_namespaced_stateful_set",
}


class Cluster:
    def __init__(self, kubeconfig: str | None) -> None:
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.apps, self.core = client.AppsV1Api(self.api), client.CoreV1Api(self.api)
        self.leases = client.CoordinationV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def plain(self, obj):
        return self.api.sanitize_for_serialization(obj) if obj is not None else None

    def workload(self, kind: str, namespace: str, name: str):
        if kind == "Rollout":
            return self.custom.get_namespaced_custom_object(*ARGO, namespace, "rollouts", name)
        return self.plain(getattr(self.apps, READERS[kind])(name, namespace))

    def analysis_runs(self, namespace: str, rollout: str) -> list:
        """The Rollout's AnalysisRuns, newest first."""
        runs = self.custom.list_namespaced_custom_object(*ARGO, namespace, "analysisruns")["items"]
        mine = [r for r in runs if any(o.get("kind") == "Rollout" and o.get("name") == rollout
                                       for o in r["metadata"].get("ownerReferences") or [])]  # fmt: skip
        return sorted(mine, key=lambda r: r["metadata"].get("creationTimestamp", ""), reverse=True)

    def job_verdicts(self, run: dict) -> dict:
        """Each failed job metric's Job's verdict (the benchmark gate's line, else its last line), by metric."""
        verdicts = {}
        for result in (run.get("status") or {}).get("metricResults") or []:
            job = ((result.get("measurements") or [{}])[-1].get("metadata") or {}).get("job-name")
            if result.get("phase") not in ("Failed", "Error") or not job:
                continue
            namespace = run["metadata"]["namespace"]
            try:
                for pod in self.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items:
                    # The gate's figures (stdout) and its verdict (stderr) are two streams whose order in the
                    # log is the runtime's: its verdict line is the one it starts with "gate:".
                    lines = self.core.read_namespaced_pod_log(pod.metadata.name, namespace, tail_lines=4).split("\n")
                    lines = [line.strip() for line in lines if line.strip()]
                    said = ([line for line in lines if line.startswith("gate: ")] or lines)[-1:]
                    verdicts[result["name"]] = f"Job {job}: {said[0]}" if said else f"Job {job} failed"
            except ApiException as error:
                verdicts[result["name"]] = f"Job {job} failed (its output cannot be read: {error.status})"
        return verdicts

    def pods(self, namespace: str, selector: dict) -> list:
        labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        return self.plain(self.core.list_namespaced_pod(namespace, label_selector=labels).items)

    def node_and_lease(self, name: str):
        try:
            node = self.plain(self.core.read_node(name))
        except ApiException as error:
            if error.status != 404:
                raise
            return None, None
        try:
            lease = self.plain(self.leases.read_namespaced_lease(name, "kube-node-lease"))
        except ApiException:
            lease = None  # a cluster without node leases: the Ready condition alone tells
        return node, lease


def problems_of(cluster: Cluster, namespace: str, workload: dict) -> list[Problem]:
    selector = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    now = datetime.datetime.now(datetime.UTC)
    nodes: dict = {}
    found = []
    for pod in cluster.pods(namespace, selector):
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and node_name not in nodes:
            nodes[node_name] = cluster.node_and_lease(node_name)
        node, lease = nodes.get(node_name, (None, None))
        problem = pod_problem(pod, node, lease, now)
        if problem:
            found.append(problem)
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "kubeconfig": {"type": "path"},
            "namespace": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True, "choices": [*sorted(READERS), "Rollout"]},
            "name": {"type": "str", "required": True},
            "timeout": {"type": "float", "default": 600},
            "grace": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    what = f"{p['kind']} {p['namespace']}/{p['name']}"
    if module.check_mode:
        module.exit_json(changed=False, msg=f"{what}: not waited for in check mode", seconds=0.0)
    cluster = Cluster(p["kubeconfig"])
    watch, started = Watch(p["grace"]), time.monotonic()
    summary, problems = "not read yet", []
    while True:
        waited = round(time.monotonic() - started, 1)
        try:
            workload = cluster.workload(p["kind"], p["namespace"], p["name"])
        except ApiException as error:
            module.fail_json(msg=f"{what}: cannot be read ({error.status} {error.reason})", seconds=waited)
        done, summary = canary_done(workload) if p["kind"] == "Rollout" else rollout_done(p["kind"], workload)
        if done:
            if p["kind"] == "Rollout":
                summary += last_analysis(cluster.analysis_runs(p["namespace"], p["name"]))
            module.exit_json(changed=False, msg=f"{what}: rolled out, {summary}", seconds=waited)
        if p["kind"] == "Rollout" and (workload.get("status") or {}).get("abort"):
            failed = [r for r in cluster.analysis_runs(p["namespace"], p["name"])
                      if (r.get("status") or {}).get("phase") in ("Failed", "Error")]  # fmt: skip
            cause = (analysis_failure(failed[0], cluster.job_verdicts(failed[0])) if failed
                     else (workload.get("status") or {}).get("message", ""))  # fmt: skip
            module.fail_json(msg=f"{what}: the canary was aborted and rolled back to the stable version: {cause}",
                             seconds=waited, aborted=True)  # fmt: skip
        problems = problems_of(cluster, p["namespace"], workload)
        cause = watch.verdict(problems, time.monotonic())
        if cause:
            module.fail_json(msg=f"{what} cannot roll out ({summary}): {cause.describe()}", seconds=waited)
        if waited >= p["timeout"]:
            seen = "; ".join(problem.describe() for problem in problems) or "no pod reports a problem yet"
            module.fail_json(msg=f"{what} not rolled out after {waited:.0f} s ({summary}): {seen}", seconds=waited)
        time.sleep(POLL_S)


if __name__ == "__main__":
    main()
