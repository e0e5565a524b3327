"""What the lab is made of: the clusters' real nodes and the plain hosts a lab inventory names."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpufleet_lab import CONTAINER_PREFIX, LAB_INVENTORY, PLAYBOOK, SUBNET, LabError, lab_dir
from gpufleet_lab.containers import mac_of


@dataclass(frozen=True)
class RealNode:
    name: str  # the Node's name and the container's hostname
    cluster: str
    address: str
    pod_subnet: str

    @property
    def container(self) -> str:
        return f"{CONTAINER_PREFIX}{self.name}"


_net = ipaddress.ip_network(SUBNET)
# Two in the GPU cluster, so that a drained node's pods have somewhere to go.
REAL_NODES = (
    RealNode("worker-main", "main", str(_net[241]), "10.244.1.0/24"),
    RealNode("worker-gpu1", "gpu", str(_net[242]), "10.244.2.0/24"),
    RealNode("worker-gpu2", "gpu", str(_net[243]), "10.244.3.0/24"),
)


@dataclass(frozen=True)
class LabHost:
    name: str
    group: str
    address: str

    @property
    def container(self) -> str:
        return CONTAINER_PREFIX + self.name

    @property
    def mac(self) -> str:
        return mac_of(self.address)


def load_hosts(inventory: Path = LAB_INVENTORY) -> list[LabHost]:
    """Hosts of a lab inventory: each host where a group gives it an ansible_host."""
    data = yaml.safe_load(inventory.read_text()) or {}
    subnet = ipaddress.ip_network(SUBNET)
    hosts: dict[str, LabHost] = {}
    for group, body in (data.get("all", {}).get("children") or {}).items():
        for name, hostvars in ((body or {}).get("hosts") or {}).items():
            address = (hostvars or {}).get("ansible_host")
            if address is None:
                continue  # listed again in a functional group, e.g. telemetry_tunnel_hosts
            if ipaddress.ip_address(address) not in subnet:
                raise LabError(f"{inventory}: host {name} has ansible_host {address}, outside the lab's {SUBNET}")
            hosts.setdefault(name, LabHost(name, group, address))
    if not hosts:
        raise LabError(f"{inventory} lists no host with an ansible_host")
    return list(hosts.values())


def real_node_names() -> dict[str, str]:
    """The clusters' real nodes (name -> address): `k8s.up` starts them, not `hosts.up`."""
    return {n.name: n.address for n in REAL_NODES}


def split_hosts(inventory: Path = LAB_INVENTORY) -> tuple[list[LabHost], list[LabHost]]:
    """An inventory's plain hosts (started by `up`) and the clusters' real nodes it names."""
    real = real_node_names()
    hosts = load_hosts(inventory)
    for host in hosts:
        if host.name in real and real[host.name] != host.address:
            raise LabError(f"{inventory}: host {host.name} is a lab node at {real[host.name]}, not {host.address}")
    return [h for h in hosts if h.name not in real], [h for h in hosts if h.name in real]


def scale_inventory(gpu_nodes: int) -> Path:
    """An inventory of plain hosts, m1 plus gpu1..gpuN, for scale tests and benchmarks that need more
    GPU nodes than the clusters have: each runs the FIXTURE exporter as a systemd service (the lab's
    playbook, lab/site.yml), and m1 holds their tunnels. Written under .lab/."""
    if not 1 <= gpu_nodes <= 200:
        raise LabError("--hosts must be between 1 and 200")
    base = yaml.safe_load(LAB_INVENTORY.read_text())
    net = ipaddress.ip_network(SUBNET)
    gpu_hosts = {f"gpu{i}": {"ansible_host": str(net[20 + i])} for i in range(1, gpu_nodes + 1)}
    inventory = {"all": {"hosts": base["all"]["hosts"], "children": {
        "main_cluster": {"hosts": {"m1": {"ansible_host": str(net[11])}}},
        "gpu_nodes": {"hosts": gpu_hosts},
        "telemetry_tunnel_hosts": {"hosts": {"m1": None}},
        "lab_fixture_exporters": {"children": {"gpu_nodes": None}},
    }}}  # fmt: skip
    target = lab_dir() / "inventories" / f"scale-{gpu_nodes}"
    target.mkdir(parents=True, exist_ok=True)
    # The lab's group_vars apply unchanged, except that the lab directory is given absolutely (the
    # relative default assumes lab/inventory) and the playbook adds the plain hosts' exporter.
    group_vars = target / "group_vars"
    group_vars.mkdir(exist_ok=True)
    for source in (LAB_INVENTORY.parent / "group_vars").glob("*.yml"):
        dest = group_vars / source.name
        dest.unlink(missing_ok=True)
        if source.name == "all.yml":
            common = yaml.safe_load(source.read_text())
            common.update(gpufleet_lab_dir=str(lab_dir()), gpufleet_site_playbook=PLAYBOOK)
            dest.write_text(yaml.safe_dump(common, sort_keys=False))
        else:
            dest.symlink_to(source)
    (target / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return target / "hosts.yml"
