"""A clone of the repository needs nothing beside it: the released charts the lab and the tests
install travel with it (lab/charts, checked against SHA256SUMS), and no file reads a folder
outside the checkout.

The clone is of what is committed (HEAD), into an empty folder, as a user clones it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet_lab import REPO_ROOT

ANSIBLE = str(Path(sys.executable).parent / "ansible")  # beside this Python, as the CLI runs ansible-playbook
# Places outside a checkout that an earlier layout read (the lab machine's ../shared).
OUTSIDE = ("shared/charts", "shared/reference")


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("empty") / "gpufleet"
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO_ROOT), str(target)], check=True)
    return target


def env_without_overrides() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("GPUFLEET_CHARTS_DIR", "GPUFLEET_LAB_DIR")}


def test_the_lab_finds_its_prerequisites_inside_the_clone(clone):
    probe = "from gpufleet_lab import prerequisites as p; p.check_prerequisites(); print(p.charts_dir())"
    packages = f"{clone / 'src'}:{clone / 'lab' / 'src'}"  # the product's and the lab's, as cloned
    found = subprocess.run(
        [sys.executable, "-c", probe], env={**env_without_overrides(), "PYTHONPATH": packages},
        capture_output=True, text=True, cwd=clone,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == clone / "lab" / "charts"


def test_every_chart_in_the_clone_matches_its_checksum(clone):
    sums = dict(reversed(line.split("  ")) for line in (clone / "lab/charts/SHA256SUMS").read_text().splitlines())
    assert {"kube-prometheus-stack-79.0.1.tgz", "gpu-operator-v25.3.4.tgz"} <= sums.keys()
    for name, digest in sums.items():
        assert hashlib.sha256((clone / "lab/charts" / name).read_bytes()).hexdigest() == digest, name


def test_the_lab_inventory_resolves_its_charts_inside_the_clone(clone):
    shown = subprocess.run(
        [ANSIBLE, "localhost", "-i", str(clone / "lab/inventory"), "-c", "local", "-m", "ansible.builtin.debug",
         "-a", "msg={{ gpufleet_lab_charts }}"],
        env={**env_without_overrides(), "ANSIBLE_CONFIG": str(clone / "ansible.cfg"),
             "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
        capture_output=True, text=True, cwd=clone,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    charts = Path(shown.stdout.split('"msg": "', 1)[1].split('"', 1)[0]).resolve()
    assert charts == (clone / "lab" / "charts").resolve()
    # The monitoring and gpu_operator roles' pinned versions, as the lab installs them.
    assert (charts / "kube-prometheus-stack-79.0.1.tgz").is_file() and (charts / "gpu-operator-v25.3.4.tgz").is_file()


def test_no_file_reads_a_folder_beside_the_checkout(clone):
    tracked = subprocess.run(["git", "ls-files"], cwd=clone, capture_output=True, text=True, check=True)
    readers = [
        name
        for name in tracked.stdout.splitlines()
        if name.endswith((".py", ".sh", ".yml", ".yaml", ".cfg", ".j2")) or name == "Makefile"
        if name != "tests/integration/test_clone_stands_alone.py"
        if any(place in (clone / name).read_text(errors="replace") for place in OUTSIDE)
    ]
    assert readers == []
