"""The plain hosts of a lab inventory (a scale inventory's): started, keyed, torn down."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from gpufleet_lab import KEY_LABEL, LAB_INVENTORY, NETWORK, lab_dir
from gpufleet_lab.containers import container_key, ensure_network, key_id, pin_host_keys, podman, running_hosts
from gpufleet_lab.image import ensure_image
from gpufleet_lab.inventory import LabHost, real_node_names, split_hosts
from gpufleet_lab.prerequisites import check_prerequisites, ensure_inotify_instances


def ensure_ssh_key() -> Path:
    key = lab_dir() / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-lab", "-f", str(key)], check=True
        )
    return key


def start_host(host: LabHost, image: str, pubkey: Path) -> None:
    podman(
        "run", "-d", "--name", host.container, "--hostname", host.name,
        "--network", NETWORK, "--ip", host.address, "--mac-address", host.mac,
        "--systemd=always", "--cap-add", "NET_ADMIN,NET_RAW,SYS_ADMIN",
        "--label", "io.gpufleet.lab=1", "--label", f"{KEY_LABEL}={key_id(pubkey)}",
        "-v", f"{pubkey}:/root/.ssh/authorized_keys:ro",
        image, "/sbin/init",
    )  # fmt: skip


def up(inventory: Path = LAB_INVENTORY, timeout: float | None = None) -> list[LabHost]:
    """Start the inventory's plain hosts (the real nodes it names are the clusters': `lab.k8s.up`)."""
    hosts, _ = split_hosts(inventory)
    check_prerequisites()
    ensure_inotify_instances(len(hosts) + len(real_node_names()))
    image = ensure_image()
    key = ensure_ssh_key()
    ensure_network()
    pubkey = key.with_suffix(".pub")
    existing = running_hosts()
    for host in hosts:
        state = existing.get(host.container)
        if state is not None and container_key(host) != key_id(pubkey):
            # Started by another checkout, with another key: this one could not log in.
            podman("rm", "-f", "-t", "2", host.container)
            state = None
        if state is None:
            start_host(host, image, pubkey)
        elif state != "running":
            podman("start", host.container)
    # The hosts boot together on few cores: allow time for each of them.
    deadline = time.monotonic() + (timeout or max(120.0, 10.0 * len(hosts)))
    if hosts:
        pin_host_keys(hosts, deadline)
    return hosts


def down() -> list[str]:
    """Remove every lab container and the lab network; keep the cached image."""
    names = list(running_hosts())
    if names:
        podman("rm", "-f", "-t", "2", *names)
    if podman("network", "exists", NETWORK, check=False).returncode == 0:
        podman("network", "rm", "-f", NETWORK)
    return names
