"""The lab's two clusters for tests (`gpufleet lab up --k8s`; `make k8s-tests` does it): `api` is the
main cluster, `gpu_api` the GPU cluster."""

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import nodes as labnodes
from gpufleet_lab import registry as labregistry
from kubernetes import client, config


@pytest.fixture(scope="session")
def api() -> Iterator[client.ApiClient]:
    """The lab API; started for the session unless it was already running, and then left so."""
    was_running = all(labk8s.status().values())
    yield config.new_client_from_config(str(labk8s.up()))
    if not was_running:
        labk8s.down()


@pytest.fixture(scope="session")
def gpu_api(api: client.ApiClient) -> client.ApiClient:
    """The lab's GPU cluster (its own API server, CA and CRDs), started with the main one."""
    return config.new_client_from_config(str(labk8s.kubeconfig_path("gpu")))


@pytest.fixture(scope="session")
def published_images(api: client.ApiClient) -> Iterator[None]:
    """The lab's vLLM and dcgm-exporter stand-in images in every real node under their local names,
    for tests that run them without a mirror; removed afterwards with the layers only they held, so
    that the main job's pods still pull theirs through the fleet's mirror (`lab up` imports neither)."""
    archives = labnodes.build_images(labk8s.bin_dir())
    published = {name: archives[name] for name in labregistry.PUBLISHED}
    for node in labinventory.REAL_NODES:
        labnodes.import_images(node, published)
    yield
    for node in labinventory.REAL_NODES:
        labnodes.forget_images(node, published, {}, everything=True)


@pytest.fixture
def namespace(api: client.ApiClient, gpu_api: client.ApiClient, request: pytest.FixtureRequest):
    """A fresh namespace of that name in both clusters."""
    name = "t-" + request.node.name.lower().replace("_", "-")[5:35].strip("-") + "-" + uuid.uuid4().hex[:6]
    for cluster in (api, gpu_api):
        client.CoreV1Api(cluster).create_namespace({"metadata": {"name": name}})
    yield name
    for cluster in (api, gpu_api):
        client.CoreV1Api(cluster).delete_namespace(name)


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> object:
    """Poll until check() returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
