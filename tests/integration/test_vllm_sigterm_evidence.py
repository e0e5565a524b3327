"""SIGTERM with 128 streams in flight on real vLLM 0.23 on the H200 (tests/fixtures/device/
run_vllm_h200.sh sigterm, sigterm_drill.py), served with the vllm role's command line rendered with
graceful shutdown off (vLLM's defaults) and on (the drain from the role's reference capacity file).

Replayed here: the command lines are still what the role renders (re-rendered now and compared),
each run's streams and the server's own shutdown log say what the drill counted, and the grace
period the role renders covers what vLLM was measured to need."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "tests/fixtures/device/h200-vllm-sigterm"


def run(label: str) -> dict:
    return json.loads((EVIDENCE / f"{label}.json").read_text())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("render")
    playbook = [
        str(Path(sys.executable).with_name("ansible-playbook")),
        str(REPO / "tests/fixtures/device/render_vllm_deployment.yml"),
    ]
    for label, extra in (("graceful-on", []), ("graceful-off", ["-e", "vllm_graceful_shutdown=false"])):
        subprocess.run(
            [*playbook, "-e", f"out_dir={out}", "-e", f"name={label}", *extra],
            check=True, capture_output=True, env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections")},
        )  # fmt: skip
    return out


@pytest.mark.parametrize("label", ["graceful-off", "graceful-on"])
def test_vllm_ran_the_command_the_role_renders_now(rendered, label):
    kept = json.loads((EVIDENCE / f"command-{label}.json").read_text())
    assert json.loads((rendered / f"command-{label}.json").read_text()) == kept
    assert run(label)["command"] == kept["command"][1:] + kept["args"]


def test_with_vllms_defaults_every_stream_in_flight_is_lost():
    off = run("graceful-off")
    assert "--shutdown-timeout" not in off["command"]
    assert off["disruption"]["in_flight"] == 128
    # Cut mid-stream, or never given a first token: none of the 128 finished.
    assert off["in_flight_at_disruption"] == {"truncated": 84, "refused": 44}
    assert off["truncated"] + off["refused"] == 128 and off["errors"] == {"broken_stream": 128}
    assert any("mode=abort timeout=0s" in line for line in off["shutdown_log"])
    # The abort left the HTTP server holding the broken streams: no exit within 120 s (SIGKILL).
    assert off["disruption"]["result"] == {"exit_s": pytest.approx(120, abs=1), "returncode": -9}


def test_with_the_roles_settings_every_stream_in_flight_finishes(rendered):
    on = run("graceful-on")
    timeout = int(on["command"][on["command"].index("--shutdown-timeout") + 1])
    assert timeout == 5  # ceil(E2E P99 1.354 s x headroom 3), from the reference capacity file
    assert on["disruption"]["in_flight"] == 128 and on["in_flight_at_disruption"] == {"complete": 128}
    assert on["truncated"] == on["refused"] == 0 and on["complete"] == on["requests"]
    assert any("draining in-flight requests count=128 timeout=5s" in line for line in on["shutdown_log"])
    assert on["disruption"]["result"]["returncode"] == 0
    # The pod's grace period covers the preStop, the drain and the measured exit, with room.
    deployment = next(
        d
        for d in yaml.safe_load_all((rendered / "deployment-graceful-on.yaml").read_text())
        if d["kind"] == "Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + math.ceil(on["disruption"]["result"]["exit_s"]) * 2
    off_pod = next(
        d
        for d in yaml.safe_load_all((rendered / "deployment-graceful-off.yaml").read_text())
        if d["kind"] == "Deployment"
    )["spec"]["template"]["spec"]
    assert "terminationGracePeriodSeconds" not in off_pod and "lifecycle" not in off_pod["containers"][0]


def test_the_roles_exit_allowance_is_the_measured_teardown_with_room():
    on = run("graceful-on")
    teardown = on["disruption"]["result"]["exit_s"] - on["last_in_flight_end_s"]
    allowance = yaml.safe_load((REPO / "roles/vllm/vars/main.yml").read_text())["_vllm_exit_seconds"]
    assert teardown == pytest.approx(4.0, abs=0.1) and allowance >= 2 * teardown
