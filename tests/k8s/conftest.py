"""The lab control plane for tests (`gpufleet lab k8s up`; `make k8s-tests` does it)."""

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client, config

from gpufleet import labk8s


@pytest.fixture(scope="session")
def api() -> Iterator[client.ApiClient]:
    """The lab API; started for the session unless it was already running, and then left so."""
    was_running = all(labk8s.status().values())
    yield config.new_client_from_config(str(labk8s.up()))
    if not was_running:
        labk8s.down()


@pytest.fixture
def namespace(api: client.ApiClient, request: pytest.FixtureRequest):
    name = "t-" + request.node.name.lower().replace("_", "-")[5:35].strip("-") + "-" + uuid.uuid4().hex[:6]
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> object:
    """Poll until check() returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
