"""The built-in lab: Debian 12 systemd hosts in podman containers, reached over SSH.

The lab inventory (``lab/inventory/hosts.yml``) names the clusters' real nodes (``lab.nodes``,
started with the control planes by ``lab.k8s``); a scale inventory names plain hosts, which
this module starts, so the inventory Ansible uses and the containers that exist never
disagree. Everything the lab writes lives under ``.lab/`` in the checkout: a project-local
containers.conf (podman's quirks on this kind of machine, without touching /etc), the SSH key
Ansible logs in with, and the pinned known_hosts.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

# The lab wing of the checkout (lab/), and the checkout whose collection it runs: the lab is never
# installed apart from its checkout.
LAB_ROOT = Path(__file__).resolve().parents[2]
REPO_ROOT = LAB_ROOT.parent
LAB_INVENTORY = LAB_ROOT / "inventory" / "hosts.yml"
# The playbook of scale inventories: site.yml and the plain hosts' stand-in exporter.
PLAYBOOK = "lab/site.yml"
DEBIAN_REQUIREMENTS = REPO_ROOT / "requirements" / "debian.txt"
NETWORK = "gpufleet-lab"
SUBNET = "10.213.7.0/24"
IMAGE = "localhost/gpufleet-lab-base"
CONTAINER_PREFIX = "gpufleet-lab-"
RECIPE_LABEL = "io.gpufleet.recipe"
KEY_LABEL = "io.gpufleet.ssh-key"

# Packages baked into the base image: what a freshly installed Debian server
# with SSH has, plus python3-apt so Ansible's apt module needs no bootstrap.
BASE_PACKAGES = [
    "python3",
    "python3-apt",
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "sudo",
    "iproute2",
    "procps",
    "ca-certificates",
]

CONTAINERS_CONF = """\
# Written by gpufleet lab: podman settings this lab needs (see README.md, "The lab").
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
"""

# Run inside the debootstrapped tree: each container makes its own SSH host
# keys on first boot (a shared image must not share host keys), and apt in the
# lab uses the same Debian mirror as the machine that built it, with package
# lists fetched, as on a freshly installed server.
IMAGE_SETUP = """\
set -e
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\\nExecStartPre=\\nExecStartPre=/usr/bin/ssh-keygen -A\\nExecStartPre=/usr/sbin/sshd -t\\n' \
  > /etc/systemd/system/ssh.service.d/10-host-keys.conf
printf 'PermitRootLogin prohibit-password\\nPasswordAuthentication no\\n' > /etc/ssh/sshd_config.d/gpufleet-lab.conf
printf 'deb {mirror} bookworm main\\ndeb {mirror} bookworm-updates main\\n' > /etc/apt/sources.list
truncate -s 0 /etc/machine-id
rm -f /var/lib/dbus/machine-id
apt-get -qq update
apt-get clean
"""


class LabError(RuntimeError):
    """A lab operation failed; the message says what to fix."""


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


def mac_of(address: str) -> str:
    """Fixed, like a real NIC's: a restarted host keeps it, so the neighbour caches of the machine
    and of the other hosts stay right (a new MAC made SSH time out)."""
    return "02:67:66:" + ":".join(f"{b:02x}" for b in ipaddress.ip_address(address).packed[1:])


def lab_dir() -> Path:
    return Path(os.environ.get("GPUFLEET_LAB_DIR", REPO_ROOT / ".lab"))


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


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line format)."""
    for sources in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for stanza in sources.read_text().split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines() if re.match(r"^[A-Za-z-]+:", line))
            suites = fields.get("Suites", "").split()
            if "bookworm" in suites and "URIs" in fields:
                return fields["URIs"].split()[0]
    one_line = apt_dir / "sources.list"
    if one_line.exists():
        for line in one_line.read_text().splitlines():
            words = re.sub(r"\[[^]]*\]", "", line).split()  # drop [arch=...] options
            if len(words) >= 3 and words[0] == "deb" and words[2] == "bookworm":
                return words[1]
    raise LabError("no Debian bookworm mirror found in /etc/apt; the lab image needs one to debootstrap")


def recipe_hash(mirror: str) -> str:
    recipe = "\n".join([*BASE_PACKAGES, IMAGE_SETUP, mirror])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


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
    """The clusters' real nodes (name -> address): `lab.k8s.up` starts them, not `up`."""
    from gpufleet_lab.nodes import REAL_NODES  # lab.nodes imports this module

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


def debian_requirements(path: Path = DEBIAN_REQUIREMENTS) -> dict[str, list[str]]:
    """Debian package -> the programs the lab and the tests run from it (requirements/debian.txt)."""
    table = {}
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            table[words[0]] = words[1:]
    return table


def _installed(program: str) -> bool:
    return Path(program).exists() if program.startswith("/") else shutil.which(program) is not None


def check_prerequisites(path: Path = DEBIAN_REQUIREMENTS) -> None:
    """Name every missing program, its package and the fix, before the lab touches anything."""
    missing = {
        package: absent
        for package, programs in debian_requirements(path).items()
        if (absent := [p for p in programs if not _installed(p)])
    }
    if missing:
        found = "; ".join(f"{', '.join(programs)} (package {package})" for package, programs in missing.items())
        raise LabError(
            f"missing lab prerequisites: {found}. Run scripts/setup.sh, or: apt-get install {' '.join(missing)}"
        )
    problems = chart_problems()
    if problems:
        raise LabError(f"missing lab prerequisites: {'; '.join(problems)}")


# The real charts, as released, travel with the checkout (lab/charts, each checked against its
# SHA256SUMS line): no chart repository is reachable from the lab, and a clone needs nothing beside it.
CHARTS_DIR = LAB_ROOT / "charts"
LAB_CHARTS = ("kube-prometheus-stack-79.0.1.tgz", "gpu-operator-v25.3.4.tgz")


def charts_dir() -> Path:
    """lab/charts, or another folder of released charts (GPUFLEET_CHARTS_DIR) holding the same files."""
    return Path(os.environ.get("GPUFLEET_CHARTS_DIR", CHARTS_DIR))


def chart_checksums() -> dict[str, str]:
    """chart file -> sha256, from lab/charts/SHA256SUMS (sha256sum's format)."""
    sums = {}
    for line in (CHARTS_DIR / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        if digest:
            sums[name.strip()] = digest
    return sums


def chart_problems() -> list[str]:
    """Each chart SHA256SUMS lists that is missing from charts_dir() or differs from its checksum."""
    problems = []
    for name, digest in chart_checksums().items():
        path = charts_dir() / name
        if not path.is_file():
            problems.append(f"the released chart {name} is not in {charts_dir()}")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{path} is not the released chart: its sha256 differs from lab/charts/SHA256SUMS")
    return problems


def ensure_image(log: bool = True) -> str:
    """Build the base image unless one from the same recipe exists; return its name."""
    mirror = debian_mirror()
    wanted = recipe_hash(mirror)
    tag = f"{IMAGE}:latest"
    found = podman("image", "inspect", "--format", f'{{{{index .Labels "{RECIPE_LABEL}"}}}}', tag, check=False)
    if found.returncode == 0 and found.stdout.strip() == wanted:
        return tag
    if log:
        print(f"lab: building {tag} (recipe {wanted}) with debootstrap, about a minute", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-rootfs-") as rootfs:
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES), "bookworm", rootfs, mirror],
            check=True,
            capture_output=True,
        )
        subprocess.run(["chroot", rootfs, "/bin/sh", "-c", IMAGE_SETUP.format(mirror=mirror)], check=True)
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["podman", "import", "--change", "CMD=/sbin/init", "--change", f"LABEL {RECIPE_LABEL}={wanted}", "-", tag],
            stdin=tar.stdout,
            env=podman_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0:
            raise LabError(f"podman import failed: {imported.stderr.strip()}")
    return tag


def ensure_ssh_key() -> Path:
    key = lab_dir() / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-lab", "-f", str(key)], check=True
        )
    return key


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


def start_host(host: LabHost, image: str, pubkey: Path) -> None:
    podman(
        "run", "-d", "--name", host.container, "--hostname", host.name,
        "--network", NETWORK, "--ip", host.address, "--mac-address", host.mac,
        "--systemd=always", "--cap-add", "NET_ADMIN,NET_RAW,SYS_ADMIN",
        "--label", "io.gpufleet.lab=1", "--label", f"{KEY_LABEL}={key_id(pubkey)}",
        "-v", f"{pubkey}:/root/.ssh/authorized_keys:ro",
        image, "/sbin/init",
    )  # fmt: skip


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


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")


def ensure_inotify_instances(hosts: int) -> None:
    """Each systemd host takes several inotify instances, all charged to root on this machine:
    the default limit (128) stops the 30th or so host from booting. Raised at runtime, not persisted."""
    wanted = 64 + 16 * hosts
    try:
        if int(INOTIFY_INSTANCES.read_text()) < wanted:
            INOTIFY_INSTANCES.write_text(str(wanted))
    except OSError as exc:
        raise LabError(f"{hosts} hosts need fs.inotify.max_user_instances >= {wanted}: {exc}") from exc


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


def pin_host_keys(containers: Sequence[Container], deadline: float) -> None:
    """Add (or replace) these containers' host keys in the lab's known_hosts, once their sshd runs."""
    known = lab_dir() / "ssh" / "known_hosts"
    addresses = {c.address for c in containers}
    kept = [line for line in (known.read_text().splitlines() if known.exists() else [])
            if line.split(" ", 1)[0] not in addresses]  # fmt: skip
    keys = [f"{c.address} {' '.join(wait_for_sshd(c, deadline).split()[:2])}" for c in containers]
    write_private(known, "\n".join(kept + keys) + "\n")


def write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
