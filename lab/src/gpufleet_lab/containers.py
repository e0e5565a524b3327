"""podman and the lab's containers: its settings, the commands, the network, each container's key and host key."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from gpufleet_lab import CONTAINER_PREFIX, KEY_LABEL, NETWORK, SUBNET, LabError, lab_dir, write_private

CONTAINERS_CONF = """\
# Written by gpufleet lab: podman settings this lab needs (see README.md, "The lab").
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
"""


def mac_of(address: str) -> str:
    """Fixed, like a real NIC's: a restarted host keeps it, so the neighbour caches of the machine
    and of the other hosts stay right (a new MAC made SSH time out)."""
    return "02:67:66:" + ":".join(f"{b:02x}" for b in ipaddress.ip_address(address).packed[1:])


def podman_env() -> dict[str, str]:
    conf = lab_dir() / "containers.conf"
    if not conf.exists():
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], env=podman_env(), text=True, capture_output=capture, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"podman {' '.join(args[:3])} failed: {proc.stderr.strip()}")
    return proc


@contextmanager
def silent_link_outage(container: str, peer: str) -> Iterator[None]:
    """Every packet between a lab container and a peer address silently dropped, as a failed WAN
    link drops them (no reset, no ICMP): DROP rules in the container's own network namespace,
    removed on exit. For drills in the lab's tests and the molecule scenarios."""
    pid = podman("inspect", container, "--format", "{{.State.Pid}}").stdout.strip()
    rules = [["INPUT", "-s", peer], ["OUTPUT", "-d", peer]]
    for rule in rules:
        subprocess.run(["nsenter", "-t", pid, "-n", "iptables", "-w", "-I", *rule, "-j", "DROP"], check=True)
    try:
        yield
    finally:
        for rule in rules:
            subprocess.run(["nsenter", "-t", pid, "-n", "iptables", "-w", "-D", *rule, "-j", "DROP"], check=True)


def ensure_network() -> None:
    if podman("network", "exists", NETWORK, check=False).returncode != 0:
        podman("network", "create", "--subnet", SUBNET, NETWORK)


def running_hosts() -> dict[str, str]:
    """Container name -> state (running, exited, created...), for every lab container. From the JSON:
    the template's {{.State}} is the human status ("Up 23 minutes ago")."""
    out = podman("ps", "-a", "--filter", f"name=^{CONTAINER_PREFIX}", "--format", "json").stdout
    return {c["Names"][0]: c["State"] for c in json.loads(out or "[]")}


def key_id(pubkey: Path) -> str:
    return hashlib.sha256(pubkey.read_bytes()).hexdigest()[:16]


class Container(Protocol):
    """A lab host or a real node: its name, its container's and its address."""

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def container(self) -> str: ...


def container_key(host: Container) -> str:
    fmt = f'{{{{index .Config.Labels "{KEY_LABEL}"}}}}'
    return podman("container", "inspect", "--format", fmt, host.container, check=False).stdout.strip()


def wait_for_sshd(host: Container, deadline: float) -> str:
    """Wait until sshd runs in the host; return its ed25519 host key line."""
    while time.monotonic() < deadline:
        probe = podman("exec", host.container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub", check=False)
        ready = podman("exec", host.container, "systemctl", "is-active", "ssh", check=False)
        if probe.returncode == 0 and ready.stdout.strip() == "active":
            return probe.stdout.strip()
        time.sleep(0.3)
    raise LabError(f"{host.name}: sshd not active after waiting; see `podman logs {host.container}`")


def pin_host_keys(containers: Sequence[Container], deadline: float) -> None:
    """Add (or replace) these containers' host keys in the lab's known_hosts, once their sshd runs."""
    known = lab_dir() / "ssh" / "known_hosts"
    addresses = {c.address for c in containers}
    kept = [line for line in (known.read_text().splitlines() if known.exists() else [])
            if line.split(" ", 1)[0] not in addresses]  # fmt: skip
    keys = [f"{c.address} {' '.join(wait_for_sshd(c, deadline).split()[:2])}" for c in containers]
    write_private(known, "\n".join(kept + keys) + "\n")
