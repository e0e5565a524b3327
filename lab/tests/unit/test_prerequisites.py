"""What a fresh Debian 12 needs: requirements/debian.txt, which scripts/setup.sh installs and
`gpufleet lab up` checks, is kept true by asking dpkg which package ships each program."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import gpufleet_lab as lab
import pytest
from gpufleet_lab import prerequisites as labprerequisites

pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian machine")

# argv[0] of the programs the lab, the tests and the benchmarks start from Python.
CALLS = re.compile(
    r"""(?:subprocess\.(?:run|Popen|check_output|check_call)\(\s*\[\s*|shutil\.which\(\s*)"([A-Za-z0-9_.-]+)\""""
)
SOURCES = ("src", "tests", "benchmarks", "plugins", "lab")


def owner(program: str) -> str:
    """The Debian package that ships a program, by dpkg's own file list."""
    path = program if program.startswith("/") else shutil.which(program)
    assert path, f"{program} is not installed: run scripts/setup.sh"
    real = str(Path(path).resolve())
    # Debian 12 merged /bin into /usr/bin, but dpkg still lists many programs under /bin.
    for candidate in (path, real, *(p.replace("/usr", "", 1) for p in (path, real) if p.startswith("/usr/"))):
        found = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True, check=False)
        if found.returncode == 0:
            return found.stdout.split(":", 1)[0].split(",")[0]
    raise AssertionError(f"{program} ({path}) belongs to no Debian package")


def essential(package: str) -> bool:
    """Part of every Debian system: needs no install step."""
    fields = subprocess.run(
        ["dpkg-query", "-W", "-f=${Essential} ${Priority}", package], capture_output=True, text=True, check=True
    ).stdout.split()
    return fields[0] == "yes" or fields[-1] == "required"


def programs_started_from_python() -> set[str]:
    found = set()
    for folder in SOURCES:
        for source in (lab.REPO_ROOT / folder).rglob("*.py"):
            found |= set(CALLS.findall(source.read_text()))
    return found


def test_each_program_comes_from_the_package_the_table_names():
    for package, programs in labprerequisites.debian_requirements().items():
        for program in programs:
            assert owner(program) == package, f"requirements/debian.txt: {program} is not shipped by {package}"


def test_every_program_the_project_starts_is_installed_by_setup():
    listed = set(labprerequisites.debian_requirements())
    programs = programs_started_from_python()
    assert {"podman", "debootstrap", "promtool", "tmux"} <= programs  # the scan sees them
    for program in sorted(programs):
        package = owner(program)
        assert package in listed or essential(package), (
            f"{program} comes from {package}, which requirements/debian.txt (setup's list) lacks"
        )


def test_setup_installs_the_table():
    script = (lab.REPO_ROOT / "scripts/setup.sh").read_text()
    assert "requirements/debian.txt" in script


def test_a_missing_program_is_named_with_its_package(tmp_path):
    table = tmp_path / "debian.txt"
    table.write_text("# comment\nsh-tools  sh\niptables  /nonexistent/iptables  no-such-program\n")
    with pytest.raises(lab.LabError) as error:
        labprerequisites.check_prerequisites(table)
    message = str(error.value)
    assert "/nonexistent/iptables, no-such-program (package iptables)" in message
    assert "apt-get install iptables" in message and "sh-tools" not in message
