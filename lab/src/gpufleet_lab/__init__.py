"""The built-in lab: Debian 12 systemd hosts in podman containers, reached over SSH, and two
Kubernetes control planes with real nodes.

What the lab is made of is `inventory` (the clusters' real nodes, `nodes`, started with the control
planes by `k8s`; a scale inventory's plain hosts, started by `hosts`), so the inventory Ansible uses
and the containers that exist never disagree. `containers` runs podman, `image` builds the base
image, `prerequisites` checks the machine first. Everything the lab writes lives under ``.lab/`` in
the checkout: a project-local containers.conf (podman's quirks on this kind of machine, without
touching /etc), the SSH key Ansible logs in with, and the pinned known_hosts.

This module holds what every part shares: where the lab lives, its names, and its error.
"""

from __future__ import annotations

import os
from pathlib import Path

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


class LabError(RuntimeError):
    """A lab operation failed; the message says what to fix."""


def lab_dir() -> Path:
    return Path(os.environ.get("GPUFLEET_LAB_DIR", REPO_ROOT / ".lab"))


def write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
