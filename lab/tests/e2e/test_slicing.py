"""The node stage sliced as AWX slices a job (docs/operations.md, "Under AWX"): three slices at once
on three fresh lab hosts reach the state one run reaches, so one unsliced run after them changes
nothing, and neither do the slices again (about 50 s with the hosts' start)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gpufleet_lab as lab
import pytest
from gpufleet_lab import hosts as labhosts
from gpufleet_lab import inventory as labinventory
from gpufleet_lab import k8s as labk8s
from gpufleet_lab import slicing

from gpufleet import runner

SLICES = 3
# The sliceable node stage that does work on the lab's plain hosts: images.yml, the other, has none
# to do there (no image listed, and a plain host has no container engine to pull with).
STAGE = "playbooks/node_software.yml"


@pytest.fixture(scope="module")
def fleet():
    """Three fresh plain GPU hosts with their container engine (and the scale inventory's m1), removed
    afterwards."""
    labk8s.remove_plain_hosts()  # fresh hosts: what a slice meets on a first run
    inventory = labinventory.scale_inventory(SLICES)
    labhosts.up(inventory)
    # The engine a GPU node brings (gpufleet installs none but k3s's): Debian's containerd, whose
    # registry configuration the node stage writes.
    install = ["ansible", "gpu_nodes", "-i", str(inventory.parent), "-m", "ansible.builtin.apt",
               "-a", "name=containerd update_cache=true cache_valid_time=3600"]  # fmt: skip
    env = {**os.environ, **runner.ansible_env()}
    subprocess.run(install, env=env, cwd=lab.REPO_ROOT, check=True, capture_output=True)
    slices = slicing.write_slices(inventory, SLICES, lab.lab_dir() / "inventories" / "slices")
    yield inventory, slices
    labk8s.remove_plain_hosts()


def run_at_once(playbook: str, inventories: list[Path]) -> list[runner.Summary]:
    """The runs of one playbook, each on its own inventory, at the same time (as AWX's slice jobs)."""
    with ThreadPoolExecutor(len(inventories)) as pool:
        return list(pool.map(lambda path: runner.run_playbook(playbook, path.parent, quiet=True), inventories))


def changed(summary: runner.Summary) -> dict[str, list[str]]:
    return {host: [task for tasks in roles.values() for task in tasks] for host, roles in summary.changes.items()}


def test_the_sliced_node_stage_reaches_what_one_run_reaches(fleet):
    inventory, slices = fleet
    first = run_at_once(STAGE, slices)
    for number, summary in enumerate(first, 1):
        assert summary.ok, f"slice {number} of {SLICES}: {summary.failures}"
        assert any(changed(summary).values()), f"slice {number}: a fresh host's first run changed nothing"
    whole = runner.run_playbook(STAGE, inventory.parent, quiet=True)
    assert whole.ok, f"unsliced: {whole.failures}"
    assert not any(changed(whole).values()), f"one run after the slices changed {changed(whole)}"
    again = run_at_once(STAGE, slices)
    for number, summary in enumerate(again, 1):
        assert summary.ok, f"slice {number} again: {summary.failures}"
        assert not any(changed(summary).values()), f"slice {number} again changed {changed(summary)}"
