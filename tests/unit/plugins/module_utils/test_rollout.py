"""Why a rollout cannot finish (plugins/module_utils/rollout.py), on objects shaped as the API returns them.
The lab's drills (lab/tests/e2e/test_drills.py) prove the same against a real kubelet and containerd."""

import datetime

from gpufleet.lib import rollout

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ago(seconds: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def pod(ready=False, node="gpu-a", waiting=None, restarts=0, last=None, scheduled=None):
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": "False", **scheduled})
    container = {"name": "vllm", "image": "mirror.example/vllm/vllm-openai:v0.23.0", "restartCount": restarts,
                 "state": {"waiting": waiting} if waiting else {"running": {}}}  # fmt: skip
    if last:
        container["lastState"] = {"terminated": last}
    return {
        "metadata": {"name": "vllm-7d9c", "namespace": "inference"},
        "spec": {"nodeName": node},
        "status": {"conditions": conditions, "containerStatuses": [container]},
    }


READY_NODE = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
FRESH_LEASE = {"spec": {"renewTime": ago(5)}}


def test_a_deployment_is_done_when_every_replica_runs_the_latest_spec_and_is_available():
    status = {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
    obj = {"metadata": {"generation": 2}, "spec": {"replicas": 2}, "status": status}
    assert rollout.rollout_done("Deployment", obj) == (True, "2/2 replicas available (2 updated)")
    # An old replica still around, or a spec the controller has not seen yet: not done.
    assert not rollout.rollout_done("Deployment", {**obj, "status": {**obj["status"], "replicas": 3}})[0]
    assert not rollout.rollout_done("Deployment", {**obj, "metadata": {"generation": 3}})[0]


def test_a_daemonset_is_done_on_every_selected_node():
    status = {"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1}
    obj = {"metadata": {"generation": 1}, "status": status}
    assert rollout.rollout_done("DaemonSet", obj) == (False, "1/2 nodes' pods available")
    status["numberAvailable"] = 2
    assert rollout.rollout_done("DaemonSet", obj)[0]


def test_a_pod_on_its_way_is_no_problem():
    assert rollout.pod_problem(pod(ready=True), READY_NODE, FRESH_LEASE, NOW) is None
    creating = pod(waiting={"reason": "ContainerCreating"})  # pulling a 16 GB image takes its time
    assert rollout.pod_problem(creating, READY_NODE, FRESH_LEASE, NOW) is None


def test_an_image_that_cannot_be_pulled_names_the_image_and_lasts_the_grace_before_failing():
    message = 'failed to pull "mirror.example/vllm/vllm-openai:v0.23.0": not found'
    problem = rollout.pod_problem(pod(waiting={"reason": "ErrImagePull", "message": message}), READY_NODE, None, NOW)
    assert problem is not None and not problem.fatal
    assert problem.describe() == (
        "pod vllm-7d9c on node gpu-a: image mirror.example/vllm/vllm-openai:v0.23.0 cannot be pulled:"
        f" ErrImagePull: {message}"
    )
    watch = rollout.Watch(grace_s=60)
    assert watch.verdict([problem], clock=100) is None
    # The kubelet alternates ErrImagePull and ImagePullBackOff; each is its own reason, both count as one cause.
    backoff = rollout.pod_problem(
        pod(waiting={"reason": "ImagePullBackOff", "message": "Back-off"}), READY_NODE, None, NOW
    )
    assert watch.verdict([backoff], clock=159) is None
    assert watch.verdict([problem], clock=160) is problem


def test_a_problem_that_goes_away_starts_its_grace_again():
    problem = rollout.Problem("p", "n", "not scheduled (Unschedulable)", "0/3 nodes are available")
    watch = rollout.Watch(grace_s=60)
    watch.verdict([problem], clock=0)
    watch.verdict([], clock=30)
    assert watch.verdict([problem], clock=70) is None
    assert watch.verdict([problem], clock=130) is problem


def test_causes_no_wait_can_fix_fail_at_once():
    invalid = pod(waiting={"reason": "InvalidImageName", "message": 'invalid reference format: "vllm:"'})
    problem = rollout.pod_problem(invalid, READY_NODE, FRESH_LEASE, NOW)
    assert problem is not None and problem.fatal and "InvalidImageName" in problem.reason
    crashing = pod(waiting={"reason": "CrashLoopBackOff"}, restarts=3,
                   last={"exitCode": 1, "reason": "Error", "message": "CUDA out of memory"})  # fmt: skip
    problem = rollout.pod_problem(crashing, READY_NODE, FRESH_LEASE, NOW)
    assert problem is not None and problem.fatal
    assert "crashed 3 times" in problem.reason and "exit code 1 (Error) CUDA out of memory" in problem.message
    assert "kubectl logs -n inference vllm-7d9c -c vllm --previous" in problem.message
    # Twice is a slow start, not yet a cause.
    crashing["status"]["containerStatuses"][0]["restartCount"] = 2
    assert rollout.pod_problem(crashing, READY_NODE, FRESH_LEASE, NOW) is None


def test_an_unschedulable_pod_names_the_schedulers_reason():
    unscheduled = pod(
        node=None, scheduled={"reason": "Unschedulable", "message": "0/3 nodes: 3 Insufficient nvidia.com/gpu"}
    )
    problem = rollout.pod_problem(unscheduled, None, None, NOW)
    assert problem is not None
    assert (
        problem.describe() == "pod vllm-7d9c: not scheduled (Unschedulable): 0/3 nodes: 3 Insufficient nvidia.com/gpu"
    )


def test_a_node_whose_kubelet_stopped_is_named_before_the_node_controller_calls_it_notready():
    stale = {"spec": {"renewTime": ago(55)}}
    problem = rollout.pod_problem(pod(), READY_NODE, stale, NOW)
    assert problem is not None and problem.node == "gpu-a"
    assert "has not renewed the node's lease for 55 s" in problem.message
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                            "message": "Kubelet stopped posting node status."}]}}  # fmt: skip
    problem = rollout.pod_problem(pod(), not_ready, stale, NOW)
    assert (
        problem is not None and "NotReady (NodeStatusUnknown: Kubelet stopped posting node status.)" in problem.message
    )
    assert rollout.pod_problem(pod(), READY_NODE, FRESH_LEASE, NOW) is None


def test_an_old_replica_that_cannot_terminate_names_its_node():
    """A Recreate rollout waits for the old pod; with its node's kubelet gone, it waits forever."""
    terminating = pod(ready=True)
    terminating["metadata"]["deletionTimestamp"] = ago(30)
    assert rollout.pod_problem(terminating, READY_NODE, FRESH_LEASE, NOW) is None
    problem = rollout.pod_problem(terminating, READY_NODE, {"spec": {"renewTime": ago(70)}}, NOW)
    assert problem is not None and problem.reason == "cannot finish terminating" and "lease for 70 s" in problem.message
