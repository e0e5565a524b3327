"""Safe model rollouts (issue #34), end to end on the lab's GPU cluster: the vllm role with
vllm_rollout canary renders an Argo Rollouts Rollout (the controller built from its Go module,
installed from the released chart by the argo_rollouts role), whose canary takes half the replicas,
pauses while an AnalysisTemplate compares it with the stable version on vLLM's own series (read from
the scaling Prometheus in the GPU cluster), and is promoted, or aborted and rolled back on its own.

The server is the CALIBRATION SERVER standing in for vLLM, each version told through vllm_extra_args
how to behave (--stand-in-ttft, --stand-in-fail-every; another flag it ignores makes a new version
that behaves the same). Argo Rollouts, the Prometheus, the ReplicaSets, the Services, the kubelets and
the scheduler are real. Users stream through the lab's vLLM Service all along.

benchmarks/canary_drill.py runs the version that fails 5 % of its requests too (caught by the error
ratio), and prints the figures (docs/performance.md).

The drill can fail: the same slower version rolled out with its analysis unable to fail (a limit of
1000% of stable) is promoted, and the users' TTFT P99 rises with it.

Triton's canary (triton_rollout canary), at the end, in the same cluster and controller (marked beyond_ci:
its 5.5 minutes do not fit the CI's budget; `make drills` runs them): two replicas of
the lab's Triton (the CALIBRATION SERVER behind Triton's command line, test_autoscaling's TRITON), a new
version a changed model config, judged on Triton's request failures read from each pod's metrics port.
A version whose config carries the stand-in's parameter stand_in_fail_every fails every 20th inference
(5 %) and is aborted; each version reads a repository of its own on the node, so a stable pod restarted
after the abort serves without a failure. Without a limit that can fail, it reaches every user.

The benchmark step (vllm_canary_bench): a version with half the slots is as fast as the stable one while
idle, and misses under a replica's load; the step's Job (the product's canary-bench image, from the lab's
registry through the fleet's mirror) runs the gate against the canary's Service and aborts it. Without the
step, the Prometheus analysis alone (an idle canary judges nothing) promotes it."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from urllib.parse import urlparse

import gpufleet_lab as lab
import pytest
from conftest import GPU_NODE, in_host
from gpufleet.lib.llm_bench import BenchConfig, gate
from gpufleet.lib.llm_bench.drill import outcome
from gpufleet.lib.llm_bench.http import auth_headers, send
from gpufleet.lib.llm_bench.prompts import prompt_for
from gpufleet.lib.llm_bench.records import RequestRecord
from kubernetes import client, config
from test_autoscaling import GPU_KUBECONFIG, TRITON, TRITON_INPUTS, TRITON_NODE_PORT, ansible_module, triton_removed
from test_drills import gpu_workloads, run_failure, vllm_failure

from gpufleet import runner

# Each replica 8 slots; the users stay below the two replicas' 16, so a version's TTFT is its own
# (no wait for a slot). The stable version's TTFT is 0.15 s, the slower one's 0.26 s: across vLLM's
# 0.25 s bucket bound. A P99 read from vLLM's buckets is no finer than they are, so a slowdown inside
# one bucket is invisible to it (docs/operations.md says so); at the H200's spread of TTFTs it is not.
# The same bound makes the stable version's margin: at 0.2 s, 1 % of a good canary's streams 50 ms late
# on the busy machine moved its P99 into the next bucket, 1.204 times the stable's (ci50: an A/A
# canary aborted); at 0.15 s it takes 100 ms.
SLOTS, TOKENS, USERS = 8, 50, 8
STABLE = ["--max-num-seqs", str(SLOTS), "--stand-in-ttft", "0.15"]
SLOWER = ["--max-num-seqs", str(SLOTS), "--stand-in-ttft", "0.26"]
FAILING = ["--max-num-seqs", str(SLOTS), "--stand-in-ttft", "0.15", "--stand-in-fail-every", "20"]
ANALYSIS = [{"metric": "ttft_p99", "limit": "120% of stable"}, {"metric": "error_ratio", "limit": "1%"}]
# Half the replicas for a minute (three 20 s measurements of each limit, one failure allowed), then all.
CANARY = {
    "vllm_rollout": "canary", "vllm_replicas": 2,
    "vllm_canary_steps": [{"weight": 50, "pause": "60s"}, {"weight": 100}],
    "vllm_canary_analysis": ANALYSIS, "vllm_canary_analysis_interval": "20s", "vllm_canary_analysis_failures": 1,
}  # fmt: skip


def canary(args: list[str], **overrides) -> runner.Summary:
    return gpu_workloads(**{**CANARY, "vllm_extra_args": args, **overrides})


@pytest.fixture(scope="module")
def kube(converged) -> client.ApiClient:
    return config.new_client_from_config(GPU_KUBECONFIG)


@pytest.fixture(scope="module")
def users(converged) -> BenchConfig:
    target = runner.bench_target(runner.inventory_vars(lab.LAB_INVENTORY.parent))
    assert target is not None
    return BenchConfig(base_url=target[0], model=target[1], api="chat", max_tokens=TOKENS, prompt_words=(5, 10),
                       request_timeout_s=30, fixed_length="on", stream=True)  # fmt: skip


def restore_lab() -> None:
    """The lab's own Deployment back, and Argo Rollouts and the scaling Prometheus out of the cluster
    (one controller per cluster: the argo_rollouts scenario installs its own; the chart keeps its CRDs)."""
    back = gpu_workloads()
    helm = str(next((lab.REPO_ROOT / ".cache/k8s").glob("*/bin/helm")))
    release = {"release_name": "argo-rollouts", "release_namespace": "argo-rollouts", "binary_path": helm, "wait": True}
    crds = [f"{kind}.argoproj.io" for kind in ("rollouts", "analysisruns", "analysistemplates",
                                               "clusteranalysistemplates", "experiments")]  # fmt: skip
    removed = [
        ansible_module("kubernetes.core.helm", {"kubeconfig": GPU_KUBECONFIG, "state": "absent", **release}, 300),
        *(ansible_module("kubernetes.core.k8s", {"kubeconfig": GPU_KUBECONFIG, "kind": "CustomResourceDefinition",
                         "api_version": "apiextensions.k8s.io/v1", "name": name, "state": "absent"}) for name in crds),
        *(ansible_module("kubernetes.core.k8s", {"kubeconfig": GPU_KUBECONFIG, "kind": "Namespace", "name": name,
                         "state": "absent", "wait": True, "wait_timeout": 180}, timeout=300)
          for name in ("argo-rollouts", "gpufleet-scaling")),
    ]  # fmt: skip
    assert back.ok, back.failures
    assert all(ok for ok, _ in removed), [answer for ok, answer in removed if not ok]


@pytest.fixture(scope="module")
def stable(converged):
    """vLLM switched to the canary strategy at the stable version (the Deployment goes once the Rollout
    serves); afterwards the lab as it was."""
    try:
        switched = canary(STABLE)
        assert switched.ok, switched.failures
        yield
    finally:
        restore_lab()


class Users(threading.Thread):
    """``users`` streams (or Triton's inferences) back to back through a Service (both versions' pods)
    until stopped, a fresh connection each (the Service picks a pod per connection); a request is
    complete with ``tokens`` tokens (an inference counts one)."""

    def __init__(self, cfg: BenchConfig, users: int = USERS, tokens: int = TOKENS) -> None:
        super().__init__(daemon=True)
        self.cfg, self.records, self.stop = cfg, [], threading.Event()
        self.records: list[RequestRecord]
        self.users, self.tokens = users, tokens

    def run(self) -> None:
        asyncio.run(self._streams())

    async def _streams(self) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.cfg.request_timeout_s)
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=auth_headers(self.cfg)
        ) as session:

            async def user(n: int) -> None:
                while not self.stop.is_set():
                    self.records.append(await send(session, self.cfg, prompt_for(self.cfg, n), time.time()))
                    n += self.users

            await asyncio.gather(*(user(i) for i in range(self.users)))

    def __enter__(self) -> Users:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.join()

    def failed(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(outcome(r, self.tokens) != "complete" for r in self.records if since <= r.start < until)

    def ttft_p99(self, since: float, until: float = float("inf")) -> float:
        ttfts = sorted(r.first_token - r.start for r in self.records if since <= r.start < until and r.first_token)
        return round(ttfts[int(0.99 * (len(ttfts) - 1))], 3) if ttfts else 0.0


class Rollout(threading.Thread):
    """The state of Rollout ``name`` every half second: when the new version's first pod was Ready (its
    first traffic), each step it reached, and when it was aborted."""

    def __init__(self, kube: client.ApiClient, name: str = "vllm") -> None:
        super().__init__(daemon=True)
        self.name = name
        self.custom, self.core = client.CustomObjectsApi(kube), client.CoreV1Api(kube)
        self.stop = threading.Event()
        self.steps: set[int] = set()
        self.canary_ready_at: float | None = None
        self.aborted_at: float | None = None
        self.status: dict = {}

    def run(self) -> None:
        while not self.stop.is_set():
            self.status = self.custom.get_namespaced_custom_object("argoproj.io", "v1alpha1", "inference", "rollouts",
                                                                   self.name).get("status") or {}  # fmt: skip
            current, stable_hash = self.status.get("currentPodHash"), self.status.get("stableRS")
            self.steps.add(int(self.status.get("currentStepIndex") or 0))
            if self.canary_ready_at is None and current and current != stable_hash:
                pods = self.core.list_namespaced_pod(
                    "inference", label_selector=f"rollouts-pod-template-hash={current}"
                )
                if any(c.type == "Ready" and c.status == "True" for p in pods.items for c in p.status.conditions or []):
                    self.canary_ready_at = time.time()
            # This canary's abort, after its first traffic (an earlier canary's abort reads true until
            # Argo Rollouts takes the new version).
            if self.aborted_at is None and self.canary_ready_at and self.status.get("abort"):
                self.aborted_at = time.time()
            self.stop.wait(0.5)

    def __enter__(self) -> Rollout:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.join()


def version_failures(
    kube: client.ApiClient, pod_hash: str, port: int, series: str, label: str = ""
) -> tuple[int, float]:
    """(pods, requests the engine failed) of one version's pods, from their own metrics ``port``: the sum
    of ``series``' samples (those with ``label`` where given)."""
    core = client.CoreV1Api(kube)
    pods = core.list_namespaced_pod("inference", label_selector=f"rollouts-pod-template-hash={pod_hash}").items
    failed = 0.0
    for pod in pods:
        text = core.connect_get_namespaced_pod_proxy_with_path(f"{pod.metadata.name}:{port}", "inference", "metrics")
        failed += sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith(series + "{") and label in line)  # fmt: skip
    return len(pods), failed


def served_errors(kube: client.ApiClient, pod_hash: str) -> tuple[int, float]:
    """vLLM's: the requests it finished with an error."""
    return version_failures(kube, pod_hash, 8000, "vllm:request_success_total", 'finished_reason="error"')


class ScaleOut(threading.Thread):
    """Mid-canary, at the pause at half the replicas, the Rollout scaled from 2 to 4 through its scale
    subresource, the call the HPA (KEDA's) makes: the canary's pods counted among those it then runs."""

    def __init__(self, kube: client.ApiClient, rollout: Rollout) -> None:
        super().__init__(daemon=True)
        self.custom, self.rollout = client.CustomObjectsApi(kube), rollout
        self.canary_pods: int | None = None
        self.replicas: int | None = None

    def run(self) -> None:
        deadline = time.time() + 240
        while time.time() < deadline and not (
            self.rollout.canary_ready_at and self.rollout.status.get("currentStepIndex") == 1
        ):
            time.sleep(0.5)
        self.custom.patch_namespaced_custom_object_scale("argoproj.io", "v1alpha1", "inference", "rollouts", "vllm",
                                                         {"spec": {"replicas": 4}})  # fmt: skip
        # The share is counted from the pods the Rollout created, the last reading at the pause; their
        # readiness only ends the wait early (ci48's busy machine had not readied them within the 60 s).
        while time.time() < deadline and self.rollout.status.get("currentStepIndex") == 1:
            status = self.rollout.status
            if status.get("replicas") == 4:
                self.canary_pods, self.replicas = status.get("updatedReplicas"), status.get("replicas")
                if status.get("availableReplicas") == 4:
                    return
            time.sleep(0.5)

    def __enter__(self) -> ScaleOut:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.join(timeout=5)


def test_a_good_canary_is_promoted_through_every_step_with_no_failed_stream(stable, kube, users):
    """Scaled out mid-canary (as the autoscaler would), the canary keeps its share: half of 4."""
    with Users(users) as load, Rollout(kube) as rollout, ScaleOut(kube, rollout) as scaled:
        started = time.time()
        first_stable = None
        while first_stable is None and time.time() - started < 10:
            first_stable = rollout.status.get("stableRS")
            time.sleep(0.2)
        promoted = canary([*STABLE, "--stand-in-revision", "2"])
        took = round(time.time() - started, 1)
    print(f"good canary: promoted in {took} s, steps {sorted(rollout.steps)}, {len(load.records)} streams,"
          f" {load.failed()} failed, TTFT P99 {load.ttft_p99(0)} s; scaled out at the pause: {scaled.canary_pods}"
          f" of {scaled.replicas} pods the canary's")  # fmt: skip
    assert promoted.ok, promoted.failures
    assert rollout.status["phase"] == "Healthy" and rollout.status["stableRS"] != first_stable, rollout.status
    assert {1, 2} <= rollout.steps, rollout.steps  # the pause at half the replicas, then all
    assert (scaled.canary_pods, scaled.replicas) == (2, 4)  # the canary's share kept through the scale-out
    assert len(load.records) > 100 and load.failed() == 0, load.failed()
    # `gpufleet verify`'s check (the module the run waited with): the phase and the last analysis.
    args = {"kubeconfig": GPU_KUBECONFIG, "namespace": "inference", "kind": "Rollout", "name": "vllm", "timeout": 30}
    passed, answer = ansible_module("gpufleet.platform.rollout_status", args)
    print(f"verify's canary check: {answer.strip()}")
    assert passed and "rolled out, Healthy" in answer and "Successful" in answer, answer


def bad_canary(kube: client.ApiClient, users: BenchConfig, version: list[str], **overrides) -> dict:
    """A bad version rolled out as a canary under load (``overrides``: more of the role's variables): the
    run's failure message, the seconds from the canary's first traffic to its abort, the streams (failed,
    and failed once the canary's pod had drained) and the stable version's pods and failed requests
    afterwards."""
    with Users(users) as load, Rollout(kube) as rollout:
        time.sleep(2)
        stable_hash = rollout.status["stableRS"]
        result = canary(version, **overrides)
        time.sleep(5)  # streams after the rollback
    ready, aborted = rollout.canary_ready_at, rollout.aborted_at
    pods, errors = served_errors(kube, stable_hash)
    return {
        "message": vllm_failure(result),
        "rolled_back": rollout.status["stableRS"] == stable_hash and bool(rollout.status.get("abort")),
        "first_traffic_to_abort_s": round(aborted - ready, 1) if aborted and ready else None,
        "streams": len(load.records),
        "failed": load.failed(),
        # The canary's pod drains its streams for up to its grace period once aborted.
        "failed_after_drain": load.failed(since=(aborted or time.time()) + 10),
        "stable_pods": pods,
        "stable_failed_requests": errors,
    }


def test_a_slower_canary_is_aborted_and_rolled_back_while_the_stable_version_serves(stable, kube, users):
    """+30 % TTFT: caught by the analysis' TTFT P99 against the stable's, within the first step."""
    result = bad_canary(kube, users, SLOWER)
    print(f"slower canary: {result}")
    assert "the canary was aborted and rolled back to the stable version" in result["message"], result
    assert "ttft-p99-vs-stable measured" in result["message"], result
    assert result["rolled_back"] and result["stable_pods"] == 2, result
    assert result["first_traffic_to_abort_s"] is not None and result["first_traffic_to_abort_s"] < 60, result
    assert result["failed"] == 0 and result["stable_failed_requests"] == 0, result


def test_a_canary_whose_analysis_cannot_be_read_is_refused_before_it_starts(stable, kube):
    """Bad input the API server cannot see: an analysis asking a Prometheus that is not there would pass
    every measurement (nothing to judge). The run's probe (a one-measurement AnalysisRun of each limit's
    series of the stable pods, through Argo Rollouts) names it before the new version starts."""
    rollouts = client.CustomObjectsApi(kube)
    before = rollouts.get_namespaced_custom_object("argoproj.io", "v1alpha1", "inference", "rollouts", "vllm")
    nowhere = "http://gpufleet-scaling-metrics.gpufleet-scaling.svc.cluster.local:9"
    message = vllm_failure(canary([*STABLE, "--stand-in-revision", "4"], vllm_canary_prometheus_url=nowhere))
    print(f"an analysis that cannot be read: {message}")
    assert "vllm_canary_analysis[0] (ttft_p99): the Prometheus at " + nowhere in message, message
    assert "(vllm_canary_prometheus_url) could not be asked" in message, message
    after = rollouts.get_namespaced_custom_object("argoproj.io", "v1alpha1", "inference", "rollouts", "vllm")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]  # the Rollout untouched
    runs = rollouts.list_namespaced_custom_object("argoproj.io", "v1alpha1", "inference", "analysisruns")["items"]
    assert not [r for r in runs if r["metadata"]["name"] == "vllm-series-probe"]  # the probe removed


@pytest.mark.protection_off
def test_without_a_limit_that_can_fail_the_slower_version_reaches_every_user(stable, kube, users):
    """The drill can fail: the slower version, its analysis unable to fail, is promoted, and the users'
    TTFT P99 rises to it (where the analysis above held it at the stable's)."""
    unbounded = [{"metric": "ttft_p99", "limit": "1000% of stable"}]
    # One measurement at half the replicas is enough for a limit that cannot fail (40 s less CI).
    steps = [{"weight": 50, "pause": "20s"}, {"weight": 100}]
    with Users(users) as load:
        started = time.time()
        time.sleep(10)
        # A new version (the aborted one stays aborted: a run with it again names the same analysis).
        promoted = canary(
            [*SLOWER, "--stand-in-revision", "3"], vllm_canary_analysis=unbounded, vllm_canary_steps=steps
        )
        switched = time.time()
        time.sleep(15)
    before, after = load.ttft_p99(started, started + 10), load.ttft_p99(switched)
    print(f"slower version without a limit that can fail: promoted {promoted.ok}, users' TTFT P99 {before} s before,"
          f" {after} s after")  # fmt: skip
    assert promoted.ok, promoted.failures
    assert before < 0.25 < after, (before, after)


# Half the slots, the stable's speed: a stream waits for a whole request once 4 run (TTFT about 2.8 s at
# the capacity file's 128 tokens and the stand-in's 20 ms a token), which no idle window shows.
HALF_SLOTS = ["--max-num-seqs", str(SLOTS // 2), "--stand-in-ttft", "0.15"]
# The step at a replica's slots per canary pod (explicit here: the lab measures no capacity file in this
# module), 15 s measured, limits the stable version meets with room (TTFT 0.15 s, TPOT 20 ms). Its Job on
# the lab inventory's GPU node, whose containerd the roles pointed at the fleet's mirror (the GPU
# cluster's second node is the Kubernetes suite's: no mirror there, so the pull went to the registry).
BENCH = {
    "vllm_canary_bench": True, "vllm_canary_bench_image": "{{ gpufleet_lab_canary_bench_image }}",
    "vllm_canary_bench_streams": SLOTS, "vllm_canary_bench_duration": "15s",
    "vllm_canary_bench_limits": {"ttft_p99": "500ms", "tpot_p99": "100ms"},
    "vllm_canary_bench_node_selector": {"kubernetes.io/hostname": GPU_NODE},
    "vllm_canary_bench_tolerations": [{"key": "gpufleet.io/lab-kubelet", "operator": "Exists", "effect": "NoSchedule"}],
}  # fmt: skip


def test_a_canary_that_misses_the_slo_only_under_load_is_caught_by_the_benchmark_step(stable, kube, users):
    """No user streams: the Prometheus analysis reads the idle canary as nothing to judge. The benchmark
    step loads it and aborts it, naming what it measured."""
    with Rollout(kube) as rollout:
        time.sleep(2)
        stable_hash = rollout.status["stableRS"]
        message = vllm_failure(canary([*HALF_SLOTS, "--stand-in-revision", "5"], **BENCH))
    ready, aborted = rollout.canary_ready_at, rollout.aborted_at
    took = round(aborted - ready, 1) if aborted and ready else None
    print(f"canary with half the slots, the benchmark step on: {message} (first traffic to abort {took} s)")
    assert "the canary was aborted and rolled back to the stable version" in message, message
    assert "bench: Job " in message and "missed: ttft_p99_s " in message, message
    assert rollout.status["stableRS"] == stable_hash, rollout.status


@pytest.mark.protection_off
def test_without_the_benchmark_step_the_prometheus_analysis_promotes_a_canary_that_misses_under_load(
    stable, kube, users
):
    """The drill can fail: the Prometheus analysis alone (one measurement of the idle canary) promotes
    the version with half the slots, which then misses the step's limit for every user under the same
    load per pod."""
    steps = [{"weight": 50, "pause": "20s"}, {"weight": 100}]
    promoted = canary([*HALF_SLOTS, "--stand-in-revision", "6"], vllm_canary_steps=steps)
    assert promoted.ok, promoted.failures
    # Both replicas now have half the slots: the step's load per pod, through the users' Service.
    load = ["--url", users.base_url, "--model", users.model, "--streams", str(2 * SLOTS), "--warmup", "3",
            "--duration", "15", "--max-tokens", "128", "--input-len", "96:160", "--ttft-p99", "0.5"]  # fmt: skip
    missed = gate.main(load)
    print(f"the same version promoted without the step: the gate at {2 * SLOTS} streams exits {missed}")
    assert missed == 1


# Triton's canary: two replicas of 4 instances each. 4 users keep about 40 inferences a second going,
# half of them to a canary's pod, so a version failing 5 % fails about one a second: every 10 s window
# sees it, and two failed windows abort it well within the minute's pause.
TRITON_USERS = 4
TRITON_CANARY = {
    **TRITON, "triton_replicas": 2, "triton_rollout": "canary",
    "triton_canary_steps": [{"weight": 50, "pause": "60s"}, {"weight": 100}],
    "triton_canary_analysis": [{"metric": "failure_ratio", "limit": "1%"}],
    "triton_canary_analysis_interval": "10s", "triton_canary_analysis_failures": 1,
}  # fmt: skip


def triton_version(**parameters: str) -> dict:
    """The lab's Triton model with these config parameters (string values, as Triton's): a version of it."""
    models = copy.deepcopy(TRITON["triton_models"])
    models[0]["config"]["parameters"] = {key: {"string_value": value} for key, value in parameters.items()}
    return {"triton_models": models}


def triton_canary(revision: str, fail_every: str = "", **overrides) -> runner.Summary:
    """The Triton play of playbooks/gpu_cluster.yml alone (the GPU nodes': vLLM's play, on the controller,
    is left as it is), at a version of the model's config (failing every ``fail_every``-th inference where
    given); Argo Rollouts and the scaling Prometheus are the vLLM canary's above."""
    parameters = {"revision": revision, **({"stand_in_fail_every": fail_every} if fail_every else {})}
    extravars = {"gpu_operator_enabled": False, **TRITON_CANARY, **triton_version(**parameters), **overrides}
    return runner.run_playbook("playbooks/gpu_cluster.yml", lab.LAB_INVENTORY.parent, limit="gpu_nodes", quiet=True,
                               extravars=extravars)  # fmt: skip


@pytest.fixture(scope="module")
def triton_users(converged) -> BenchConfig:
    """Triton's users: inferences through its NodePort on the lab's GPU node (the vLLM endpoint's host)."""
    target = runner.bench_target(runner.inventory_vars(lab.LAB_INVENTORY.parent))
    assert target is not None
    return BenchConfig(base_url=f"http://{urlparse(target[0]).hostname}:{TRITON_NODE_PORT}", model="embed",
                       api="kserve_v2", kserve_inputs=TRITON_INPUTS, request_timeout_s=30)  # fmt: skip


@pytest.fixture(scope="module")
def triton_stable(stable):
    """Triton under the canary strategy at its first version (a new Rollout starts all stable); afterwards
    its objects out of the cluster, before the vLLM canary's teardown takes Argo Rollouts."""
    try:
        first = triton_canary("1")
        assert first.ok, first.failures
        yield
    finally:
        assert not triton_removed(canary=True)


def failing_triton_canary(kube: client.ApiClient, users: BenchConfig, revision: str, **overrides) -> dict:
    """The version failing 5 % (a new one at each ``revision``: an aborted version stays aborted) rolled
    out under load: the run, the seconds from the canary's first traffic to its abort, and the inferences
    failed in all and from 10 s past the abort or the promotion (the canary's pods gone, or everyone's)."""
    with Users(users, TRITON_USERS, 1) as load, Rollout(kube, "triton") as rollout:
        time.sleep(2)
        stable_hash = rollout.status["stableRS"]
        result = triton_canary(revision, fail_every="20", **overrides)
        ended = time.time()
        time.sleep(15)
    ready, aborted = rollout.canary_ready_at, rollout.aborted_at
    return {
        "result": result,
        "stable_hash": stable_hash,
        "status": rollout.status,
        "first_traffic_to_abort_s": round(aborted - ready, 1) if aborted and ready else None,
        "inferences": len(load.records),
        "failed": load.failed(),
        "failed_after": load.failed(since=(aborted or ended) + 10),
    }


@pytest.mark.beyond_ci
def test_a_failing_triton_canary_is_aborted_and_the_stable_pods_keep_their_own_repository(
    triton_stable, kube, triton_users
):
    """5 % failed inferences: caught by the failure ratio within the first step and rolled back. The stable
    pods served no failure, and one restarted afterwards (as a scale-up or a node's restart starts one)
    reads the stable version's repository, not the aborted canary's config."""
    drill = failing_triton_canary(kube, triton_users, "2")
    message = run_failure(drill["result"])
    pods, stable_failed = version_failures(kube, drill["stable_hash"], 8002, "nv_inference_request_failure")
    print(f"failing Triton canary: {message}; first traffic to abort {drill['first_traffic_to_abort_s']} s,"
          f" {drill['inferences']} inferences, {drill['failed']} failed (the canary's),"
          f" {drill['failed_after']} after the rollback; the stable pods' failures {stable_failed:g}")  # fmt: skip
    assert "the canary was aborted and rolled back to the stable version" in message, message
    assert "failure-ratio measured" in message, message
    assert drill["status"]["stableRS"] == drill["stable_hash"] and pods == 2, drill["status"]
    assert drill["first_traffic_to_abort_s"] is not None and drill["first_traffic_to_abort_s"] < 60, drill
    assert drill["failed_after"] == 0 and stable_failed == 0, drill

    core = client.CoreV1Api(kube)
    selector = f"rollouts-pod-template-hash={drill['stable_hash']}"
    restarted = core.list_namespaced_pod("inference", label_selector=selector).items[0].metadata.name
    core.delete_namespaced_pod(restarted, "inference", grace_period_seconds=0)
    ready: list = []
    deadline = time.time() + 120
    while len(ready) < 2 and time.time() < deadline:
        time.sleep(1)
        pods_now = core.list_namespaced_pod("inference", label_selector=selector).items
        ready = [p for p in pods_now if p.metadata.name != restarted and p.metadata.deletion_timestamp is None
                 and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]  # fmt: skip
    assert len(ready) == 2, "the restarted stable pod was not Ready within 120 s"
    with Users(triton_users, TRITON_USERS, 1) as load:
        time.sleep(10)
    print(f"a stable pod restarted after the abort: {len(load.records)} inferences, {load.failed()} failed")
    assert len(load.records) > 100 and load.failed() == 0, load.failed()


@pytest.mark.beyond_ci
def test_a_good_triton_canary_is_promoted_through_every_step_with_no_failed_inference(
    triton_stable, kube, triton_users
):
    with Users(triton_users, TRITON_USERS, 1) as load, Rollout(kube, "triton") as rollout:
        time.sleep(2)
        first_stable = rollout.status.get("stableRS")
        started = time.time()
        promoted = triton_canary("3")
        took = round(time.time() - started, 1)
    print(f"good Triton canary: promoted in {took} s, steps {sorted(rollout.steps)}, {len(load.records)}"
          f" inferences, {load.failed()} failed")  # fmt: skip
    assert promoted.ok, promoted.failures
    assert rollout.status["phase"] == "Healthy" and rollout.status["stableRS"] != first_stable, rollout.status
    assert {1, 2} <= rollout.steps, rollout.steps
    assert len(load.records) > 500 and load.failed() == 0, load.failed()
    # One repository version on the node: the promoted one's (the first stable's and an aborted canary's went).
    versions = in_host(GPU_NODE, "ls /srv/triton/models").stdout.split()
    print(f"Triton's repository versions on {GPU_NODE} after the promotion: {versions}")
    assert len(versions) == 1, versions
    # `gpufleet verify`'s Triton canary check: the phase and the last analysis.
    args = {"kubeconfig": GPU_KUBECONFIG, "namespace": "inference", "kind": "Rollout", "name": "triton", "timeout": 30}
    passed, answer = ansible_module("gpufleet.platform.rollout_status", args)
    print(f"verify's Triton canary check: {answer.strip()}")
    assert passed and "rolled out, Healthy" in answer and "Successful" in answer, answer


@pytest.mark.beyond_ci
@pytest.mark.protection_off
def test_without_a_limit_that_can_fail_the_failing_triton_version_reaches_every_user(triton_stable, kube, triton_users):
    """The drill can fail: the failing version, its failure ratio allowed up to 100 %, is promoted, and the
    users' inferences go on failing after it (where the analysis above stopped them)."""
    unbounded = [{"metric": "failure_ratio", "limit": "100%"}]
    drill = failing_triton_canary(kube, triton_users, "4", triton_canary_analysis=unbounded)
    print(f"failing Triton canary, no limit that can fail: {drill['inferences']} inferences, {drill['failed']}"
          f" failed, {drill['failed_after']} after the promotion")  # fmt: skip
    assert drill["result"].ok, drill["result"].failures
    assert drill["status"]["stableRS"] != drill["stable_hash"], drill["status"]
    assert drill["failed_after"] > 0, drill
