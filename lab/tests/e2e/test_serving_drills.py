"""Serving drills: a replica taken away while streams run through vLLM's Service (a scale-down from 2
replicas to 1, then a rolling update of 2), once with the vllm role's graceful shutdown off (vLLM's
defaults: streams in flight are cut, and the Service still sends new ones to the pod that is going)
and once on (the preStop keeps the pod in service until its endpoint is gone, then vLLM drains).

The server is the CALIBRATION SERVER standing in for vLLM, with vLLM 0.23's SIGTERM behaviour as
measured on an H200 (tests/fixtures/device/h200-vllm-sigterm/); the Deployment, the Service,
kube-proxy, the EndpointSlice controller and the kubelet's preStop and grace period are real.
Each drill runs about 1,000 streams; the figures are printed (docs/operations.md has them)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import gpufleet_lab as lab
import pytest
from conftest import protection_off_and_on
from gpufleet.lib.llm_bench import BenchConfig
from gpufleet.lib.llm_bench.drill import run_streams_through
from kubernetes import client, config
from test_drills import gpu_workloads

from gpufleet import runner

# 64 streams of 50 tokens (about 1.2 s each on the stand-in's schedule) for 40 s: about 2,000 streams.
USERS, TOKENS, DURATION_S, DISRUPT_AT_S = 64, 50, 40.0, 8.0


@pytest.fixture(scope="module", autouse=True)
def lab_restored_after():
    """The lab's own deployment back once the drills end (each converges the one it needs first)."""
    yield
    back = gpu_workloads()
    assert back.ok, back.failures


@pytest.fixture(scope="module")
def apps() -> client.AppsV1Api:
    return client.AppsV1Api(config.new_client_from_config(str(lab.lab_dir() / "k8s/gpu/admin.kubeconfig")))


@pytest.fixture(scope="module")
def discovery() -> client.DiscoveryV1Api:
    return client.DiscoveryV1Api(config.new_client_from_config(str(lab.lab_dir() / "k8s/gpu/admin.kubeconfig")))


@pytest.fixture(scope="module")
def endpoint(converged) -> tuple[str, str]:
    target = runner.bench_target(runner.inventory_vars(lab.LAB_INVENTORY.parent))
    assert target is not None
    return target[0], target[1]


def scale_down(apps: client.AppsV1Api) -> None:
    apps.patch_namespaced_deployment_scale("vllm", "inference", {"spec": {"replicas": 1}})


def rolling_update(apps: client.AppsV1Api) -> None:
    restarted = {"kubectl.kubernetes.io/restartedAt": datetime.now(UTC).isoformat()}
    apps.patch_namespaced_deployment(
        "vllm", "inference", {"spec": {"template": {"metadata": {"annotations": restarted}}}}
    )


def terminating_seen(discovery: client.DiscoveryV1Api, since: float, timeout: float = 20) -> float | None:
    """Seconds from ``since`` until an endpoint of vLLM's Service reads terminating: from then on
    kube-proxy sends it no new connection while a ready one is left."""
    while time.monotonic() - since < timeout:
        for piece in discovery.list_namespaced_endpoint_slice(
            "inference", label_selector="kubernetes.io/service-name=vllm"
        ).items:
            if any(e.conditions and e.conditions.terminating for e in piece.endpoints or []):
                return round(time.monotonic() - since, 2)
        time.sleep(0.05)
    return None


def drill(endpoint, apps, discovery, disruption) -> dict:
    url, model = endpoint
    # The stand-in holds an aborted stream until its client gives up; 10 s is this client's patience.
    cfg = BenchConfig(
        base_url=url, model=model, api="chat", max_tokens=TOKENS, prompt_words=(5, 10), request_timeout_s=10
    )
    seen: dict[str, float | None] = {}

    async def disrupt() -> None:
        started = time.monotonic()
        await asyncio.to_thread(disruption, apps)
        seen["terminating_after_s"] = await asyncio.to_thread(terminating_seen, discovery, started)

    result = run_streams_through(cfg, USERS, DURATION_S, disrupt=disrupt, disrupt_at_s=DISRUPT_AT_S)
    result.update(seen)
    shown = ("requests", "complete", "truncated", "refused", "errors", "terminating_after_s")
    print(f"{disruption.__name__}: { ({k: result[k] for k in shown}) }")
    return result


@pytest.mark.parametrize("graceful", protection_off_and_on("graceful"))
def test_a_replica_taken_away_cuts_streams_only_without_graceful_shutdown(
    converged, endpoint, apps, discovery, graceful
):
    two = gpu_workloads(vllm_replicas=2, vllm_graceful_shutdown=graceful)
    assert two.ok, two.failures
    scaled = drill(endpoint, apps, discovery, scale_down)
    two = gpu_workloads(vllm_replicas=2, vllm_graceful_shutdown=graceful)
    assert two.ok, two.failures
    rolled = drill(endpoint, apps, discovery, rolling_update)
    for result in (scaled, rolled):
        assert result["requests"] >= 1000, result
        if graceful:
            # Not one stream cut, and not one turned away: the pod served until no new one came.
            assert result["truncated"] == 0 and result["refused"] == 0, result
        else:
            # The drill can fail: vLLM's defaults cut the streams the going replica was serving.
            assert result["truncated"] > 0, result
