"""Fixtures for tests on the running lab (`gpufleet lab up`, done by `make lab-tests`)."""

import contextlib
import subprocess
import sys
import time
import urllib.request

import pytest

from gpufleet import lab

# kube-prometheus-stack's Prometheus on the main cluster's real node, as the lab inventory gives it.
PROMETHEUS = "http://10.213.7.241:30090"
TUNNEL_URL = "http://10.213.7.11:19401/metrics"


def in_host(name: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = lab.podman("exec", lab.CONTAINER_PREFIX + name, "sh", "-c", command, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name}: {command}: {proc.stderr}")
    return proc


def link_outage(node: str = "gpu1", peer: str = "10.213.7.11") -> contextlib.AbstractContextManager[None]:
    """The link between a GPU node and the tunnel host silently drops every packet."""
    return lab.silent_link_outage(lab.CONTAINER_PREFIX + node, peer)


def wait_for_tunnel(timeout: float = 30) -> float:
    """Seconds until the GPU exporter answers through the tunnel on m1."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            with urllib.request.urlopen(TUNNEL_URL, timeout=2) as response:
                if b"DCGM_FI_DEV_GPU_UTIL" in response.read():
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"tunnel {TUNNEL_URL} not serving after {timeout}s")


GPUFLEET = [sys.executable, "-m", "gpufleet.cli"]


def gpufleet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUFLEET, *args], capture_output=True, text=True, timeout=timeout, cwd=lab.REPO_ROOT)


@pytest.fixture(scope="session")
def converged() -> subprocess.CompletedProcess[str]:
    """The session's first converge, made as a user makes it: `gpufleet --json up` on the lab
    inventory (test_cli checks its output). Every converge costs a minute or more of CI, so the
    tests share this one."""
    if not lab.running_hosts():
        pytest.fail("the lab is down: run `gpufleet lab up` (make lab-tests does)")
    proc = gpufleet("--json", "up")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.fixture
def tunnel_ssh(converged) -> str:
    """An ssh command line on m1, as the tunnel user with the tunnel key, to gpu1."""
    return (
        "runuser -u gpufleet-tunnel -- ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes"
        " -o UserKnownHostsFile=/var/lib/gpufleet-tunnel/.ssh/known_hosts.d/gpu1"
        " -i /var/lib/gpufleet-tunnel/.ssh/id_ed25519 gpufleet-tunnel@10.213.7.21"
    )


@pytest.fixture
def second_gpu_node(converged):
    """The lab inventory's directory with a second GPU node, gpu2, running; removed afterwards
    (the test converges the lab inventory again, which removes gpu2's tunnel and target)."""
    inventory = lab.scale_inventory(2)
    lab.up(inventory)
    yield inventory.parent
    lab.podman("rm", "-f", "-t", "2", lab.CONTAINER_PREFIX + "gpu2")
    lab.up()  # known_hosts back to the lab's own hosts
