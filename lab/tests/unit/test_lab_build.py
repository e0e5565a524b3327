"""`gpufleet lab build` and `lab up` run the Go tools' build beside the network's work (the base
image): a failure of either stops the other, and nothing is left running."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

import gpufleet_lab as lab
import pytest
from gpufleet_lab import cli

ARGS = argparse.Namespace(json=False)


@pytest.fixture
def build_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A lab/scripts/build-lab-k8s.sh that writes its pid and its child's, then runs the body given."""

    def make(body: str) -> Path:
        script = tmp_path / "build-lab-k8s.sh"
        script.write_text(f"#!/bin/sh\nsleep 60 & echo $! > {tmp_path}/child\n{body}\n")
        script.chmod(0o755)
        monkeypatch.setattr(cli, "GO_TOOLS_BUILD", script)
        return tmp_path / "child"

    return make


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of an exited script is a zombie until init reaps it.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def wait_until_written(path: Path) -> int:
    deadline = time.monotonic() + 10
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.05)
    return int(path.read_text())


def test_the_work_s_result_comes_back_once_the_build_succeeds(build_script):
    build_script("kill $!; exit 0")
    assert cli._while_go_tools_build(ARGS, lambda: "hosts") == "hosts"


def test_a_failed_build_fails_the_command_after_the_work(build_script):
    build_script("kill $!; exit 3")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        cli._while_go_tools_build(ARGS, lambda: "hosts")
    assert failed.value.returncode == 3


def test_failed_work_stops_the_build_and_its_children(build_script):
    child = build_script("wait")

    def work() -> None:
        wait_until_written(child)
        raise lab.LabError("debootstrap failed")

    with pytest.raises(lab.LabError, match="debootstrap"):
        cli._while_go_tools_build(ARGS, work)
    pid = wait_until_written(child)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the build's go process outlived the failed work"
