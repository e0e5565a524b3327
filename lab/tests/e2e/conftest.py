"""Fixtures for tests on the running lab (`gpufleet lab up`, done by `make lab-tests`)."""

import contextlib
import subprocess
import sys
import time
import urllib.request

import gpufleet_lab as lab
import pytest
import yaml
from gpufleet_lab import containers as labcontainers
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import inventory as labinventory

# The lab inventory's hosts, the clusters' real nodes: the GPU node runs the dcgm_exporter role's pod
# and vLLM; the main cluster's node runs kube-prometheus-stack's Prometheus and holds the tunnels.
_, _NODES = labinventory.split_hosts()
GPU_NODE, GPU_NODE_ADDRESS = next((h.name, h.address) for h in _NODES if h.group == "gpu_nodes")
TUNNEL_HOST, TUNNEL_HOST_ADDRESS = next((h.name, h.address) for h in _NODES if h.group == "main_cluster")
PROMETHEUS = f"http://{TUNNEL_HOST_ADDRESS}:30090"
TUNNEL_URL = f"http://{TUNNEL_HOST_ADDRESS}:19401/metrics"


def protection_off_and_on(name: str) -> list:
    """A drill's two runs: its protection off (marked protection_off: `make drills` shows the drill
    catches the fault) and on (the CI), as the test's boolean parameter."""
    return [
        pytest.param(False, id=f"{name}-off", marks=pytest.mark.protection_off),
        pytest.param(True, id=f"{name}-on"),
    ]


def in_host(name: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = labcontainers.podman("exec", lab.CONTAINER_PREFIX + name, "sh", "-c", command, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name}: {command}: {proc.stderr}")
    return proc


# A real node's container is never restarted or stopped here: on this machine (cgroup v1, podman's
# shared name=systemd hierarchy) that removed the other lab nodes' cgroups, and their pods stopped
# starting. A power cycle is done inside the node: its pods killed, its services stopped, started again.
NODE_SERVICES = "kubelet kube-proxy containerd ssh"


def power_off(node: str) -> None:
    """The node as a power cut leaves it: every container killed, its services stopped, SSH sessions
    cut (Debian's ssh.service leaves them running when stopped)."""
    in_host(node, "ctr -n k8s.io tasks ls -q | xargs -r -n1 ctr -n k8s.io tasks kill -a -s SIGKILL;"
                  f" systemctl stop {NODE_SERVICES}; pkill -KILL -x sshd; true")  # fmt: skip


def power_on(node: str) -> None:
    in_host(node, f"systemctl start {NODE_SERVICES}")


def link_outage() -> contextlib.AbstractContextManager[None]:
    """The link between the GPU node and the tunnel host silently drops every packet."""
    return labcontainers.silent_link_outage(lab.CONTAINER_PREFIX + GPU_NODE, TUNNEL_HOST_ADDRESS)


def wait_for_tunnel(timeout: float = 30) -> float:
    """Seconds until the GPU exporter answers through the tunnel on the tunnel host."""
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
    if not labcontainers.running_hosts():
        pytest.fail("the lab is down: run `gpufleet lab up` (make lab-tests does)")
    proc = gpufleet("--json", "up", "-i", str(lab.LAB_INVENTORY.parent))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.fixture
def tunnel_ssh(converged) -> str:
    """An ssh command line on the tunnel host, as the tunnel user with the tunnel key, to the GPU node."""
    return (
        "runuser -u gpufleet-tunnel -- ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes"
        f" -o UserKnownHostsFile=/var/lib/gpufleet-tunnel/.ssh/known_hosts.d/{GPU_NODE}"
        f" -i /var/lib/gpufleet-tunnel/.ssh/id_ed25519 gpufleet-tunnel@{GPU_NODE_ADDRESS}"
    )


@pytest.fixture
def second_gpu_node(converged, tmp_path):
    """A plain lab host gpu2 (a systemd container, no kubelet) running, for a run that adds it to
    the lab inventory; removed afterwards (the test converges the lab inventory again, which removes
    gpu2's tunnel and target)."""
    inventory = tmp_path / "gpu2.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"gpu2": SECOND_GPU_NODE}}}}}))
    labhosts.up(inventory)
    yield SECOND_GPU_NODE
    labcontainers.podman("rm", "-f", "-t", "2", lab.CONTAINER_PREFIX + "gpu2")


SECOND_GPU_NODE = {"ansible_host": "10.213.7.22"}
