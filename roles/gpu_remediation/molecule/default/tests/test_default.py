"""The GPU remediation on two FIXTURE nodes of the lab's GPU cluster (see molecule.yml): rem-a's ECC error
cleared by the ladder's first step and the node released, rem-b's fault surviving every step and the node
left out for replacement; then drills - the circuit breaker, an application XID, and check mode."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import testinfra
import yaml
from kubernetes import client, config

REPO = Path(os.environ["GPUFLEET_REPO"])
AUDIT = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "gpu-remediation.jsonl"
TAINT = "gpufleet.io/gpu-quarantine"
NAMESPACE = "remediation-test"


@pytest.fixture(scope="module")
def core():
    return client.CoreV1Api(config.new_client_from_config(str(REPO / ".lab/k8s/gpu/admin.kubeconfig")))


def audit() -> list[dict]:
    return [json.loads(line) for line in AUDIT.read_text().splitlines()]


def remediate(alerts: list[dict], *extra: str) -> subprocess.CompletedProcess:
    """playbooks/gpu_remediation.yml on other alerts, as the rulebook would run it for another webhook."""
    inventory = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    alerts_file = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "drill-alerts.yml"
    alerts_file.write_text(yaml.safe_dump({"gpu_remediation_alerts": alerts}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"), ANSIBLE_FORCE_COLOR="0")
    argv = ["ansible-playbook", "-i", str(inventory), str(REPO / "playbooks/gpu_remediation.yml"),
            "-e", f"@{alerts_file}", *extra]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)


def xid(node: str, number: int, fingerprint: str) -> dict:
    return {"status": "firing", "fingerprint": fingerprint, "startsAt": "2026-12-07T11:00:00Z",
            "labels": {"alertname": "GPUXidError", "Hostname": node, "gpu": "0", "xid": str(number)}}  # fmt: skip


def quarantined(node) -> bool:
    return any(t.key == TAINT for t in node.spec.taints or [])


def test_each_alert_got_its_decision():
    decided = {(r["node"], r["cause"].split(" (")[0]): r["outcome"] for r in audit() if r["outcome"] != "step"}
    assert decided[("rem-a", "XID 13")] == "nothing_to_do"
    assert decided[("elsewhere", "XID 48")] == "unknown_node"
    assert decided[("rem-a", "XID 48")] == "released"
    assert decided[("rem-b", "XID 94")] == "replace"


def test_rem_a_passed_the_gate_after_the_first_step_and_is_back_in_service(core):
    steps = [(r["step"], r["healthy"]) for r in audit() if r["node"] == "rem-a" and r["outcome"] == "step"]
    assert steps == [("restart_services", True)]
    node = core.read_node("rem-a")
    assert not node.spec.unschedulable and not quarantined(node)
    assert "gpufleet.io/gpu-quarantine-cause" not in (node.metadata.annotations or {})


def test_rem_b_climbed_the_whole_ladder_and_stays_out_for_replacement(core):
    rows = [r for r in audit() if r["node"] == "rem-b"]
    steps = [(r["step"], r["healthy"]) for r in rows if r["outcome"] == "step"]
    # No reboot: gpu_remediation_reboot is false. The driver reload fails in a container (no module to unload).
    assert steps == [("restart_services", False), ("reset_gpu", False), ("reload_driver", False)]
    assert [r["step"] for r in rows if r["outcome"] == "step_failed"] == ["reload_driver"]
    [replace] = [r for r in rows if r["outcome"] == "replace"]
    assert "row_remapping" in replace["why"] and "a remap waits for a GPU reset" in replace["why"]
    node = core.read_node("rem-b")
    assert node.spec.unschedulable and quarantined(node)
    assert node.metadata.labels["gpufleet.io/replace"] == "health-gate"
    assert node.metadata.annotations["gpufleet.io/gpu-quarantine-cause"].startswith("XID 94 (contained ECC error)")
    pods = core.list_namespaced_pod(NAMESPACE, field_selector="spec.nodeName=rem-b").items
    assert pods == []


def test_each_node_has_its_events(core):
    events = core.list_namespaced_event("default", field_selector="source=gpufleet-remediation").items
    reasons = {(e.involved_object.name, e.reason) for e in events}
    assert {("rem-a", "GPURemediationQuarantined"), ("rem-a", "GPURemediationReleased"),
            ("rem-b", "GPURemediationQuarantined"), ("rem-b", "GPURemediationReplace")} <= reasons  # fmt: skip
    assert not any(name == "elsewhere" for name, _ in reasons)


def test_the_breaker_stops_the_next_quarantine(core):
    # rem-b is out; with a breaker of 1 a device fault on rem-a is reported, not acted on.
    result = remediate([xid("rem-a", 95, "breaker-drill")], "-e", "gpu_remediation_breaker=1")
    assert result.returncode == 0, result.stdout[-3000:]
    [row] = [r for r in audit() if "breaker-drill@" in r.get("key", "")]
    assert row["outcome"] == "breaker" and "1 of at most 1" in row["why"] and "rem-b" in row["why"]
    assert not quarantined(core.read_node("rem-a")) and not core.read_node("rem-a").spec.unschedulable


def test_an_application_xid_evicts_nothing(core):
    before = {p.metadata.uid for p in core.list_namespaced_pod(NAMESPACE).items}
    result = remediate([xid("rem-a", 31, "app-drill")])
    assert result.returncode == 0, result.stdout[-3000:]
    assert {p.metadata.uid for p in core.list_namespaced_pod(NAMESPACE).items} == before
    assert not core.read_node("rem-a").spec.unschedulable


def test_check_mode_prints_the_plan_and_changes_nothing(core):
    rows = len(audit())
    result = remediate([xid("rem-a", 79, "check-drill")], "--check", "-e", "gpu_remediation_breaker=2")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "rem-a: XID 79 (GPU has fallen off the bus) (GPUXidError, GPU 0) -> quarantine" in result.stdout
    assert len(audit()) == rows
    assert not quarantined(core.read_node("rem-a"))


# Last: it brings rem-b back, which the breaker drill above needs out.
def test_a_node_out_for_replacement_comes_back_by_request_once_the_gate_passes(core):
    host = testinfra.get_host("ansible://rem-b", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    refused = remediate([], "-e", '{"gpu_remediation_release": ["rem-b"]}')
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "row_remapping: GPU 0" in out, out[-3000:]
    assert "a remap waits for a GPU reset" in out
    assert core.read_node("rem-b").spec.unschedulable  # the GPU still faulty: it stays out
    host.run_expect([0], "rm -f /etc/gpufleet-fixture-row-remap-pending")  # the GPU replaced
    result = remediate([], "-e", '{"gpu_remediation_release": ["rem-b"]}')
    assert result.returncode == 0, result.stdout[-3000:]
    node = core.read_node("rem-b")
    assert not node.spec.unschedulable and not quarantined(node)
    assert "gpufleet.io/replace" not in (node.metadata.labels or {})
    assert [r["outcome"] for r in audit() if r["node"] == "rem-b"][-1] == "released"
