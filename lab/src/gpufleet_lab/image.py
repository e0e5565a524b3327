"""The lab's base image: Debian 12 debootstrapped with what a fresh server with SSH has, built once per recipe."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from pathlib import Path

from gpufleet_lab import IMAGE, RECIPE_LABEL, LabError
from gpufleet_lab.containers import podman, podman_env

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
