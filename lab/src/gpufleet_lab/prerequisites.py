"""What the lab needs of the machine before it starts anything: Debian's programs, the released charts,
inotify instances."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from gpufleet_lab import DEBIAN_REQUIREMENTS, LAB_ROOT, LabError


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
