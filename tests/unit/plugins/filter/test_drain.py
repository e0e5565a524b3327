"""The pods a drain moves off a node, and how long the slowest may take to finish."""

from ansible_collections.gpufleet.platform.plugins.filter.drain import evictable_pods, longest_grace_seconds


def pod(name: str, grace: int | None = None, owner: str = "ReplicaSet", phase: str = "Running", **meta) -> dict:
    spec = {} if grace is None else {"terminationGracePeriodSeconds": grace}
    metadata = {"namespace": "inference", "name": name, "ownerReferences": [{"kind": owner}], **meta}
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


NODE = [
    pod("vllm-a", 75),
    pod("triton-b", 40),
    pod("dcgm-exporter-c", 3600, owner="DaemonSet"),  # stays: its grace is not waited for
    pod("kube-apiserver-d", 600, annotations={"kubernetes.io/config.mirror": "x"}),
    pod("job-e", 900, phase="Succeeded"),
]


def test_daemonsets_mirror_pods_and_finished_pods_stay():
    assert evictable_pods(NODE) == ["inference/triton-b", "inference/vllm-a"]


def test_the_wait_is_the_longest_grace_of_the_pods_that_leave():
    assert longest_grace_seconds(NODE) == 75
    assert longest_grace_seconds([pod("no-grace-given")]) == 30  # Kubernetes' default
    assert longest_grace_seconds(NODE[2:]) == 0  # nothing to wait for
