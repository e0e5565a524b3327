"""The GPU remediation's plan: each alert's class, node, breaker and ladder, and what ends an alert."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import gpu_remediation as gr
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_health import XID_NODE_FAULTS
from ansible_collections.gpufleet.platform.plugins.module_utils.xid import XIDS

SETTINGS = {"xid_actions": {}, "unknown_xid": "none", "breaker": 1,
            "ladder": ["restart_services", "reset_gpu", "reload_driver", "reboot"]}  # fmt: skip
HOSTS = {"gpu-a": "gpu-a", "gpu-b": "gpu-b", "gpu-c": "gpu-c"}


def xid_alert(node: str, xid: int | str, fingerprint: str = "", status: str = "firing") -> dict:
    return {
        "status": status, "fingerprint": fingerprint or f"fp-{node}-{xid}", "startsAt": "2026-12-07T11:00:00Z",
        "labels": {"alertname": "GPUXidError", "Hostname": node, "gpu": "0", "UUID": "GPU-1", "xid": str(xid)},
    }  # fmt: skip


def node(name: str, quarantined: bool = False, labels: dict | None = None) -> dict:
    taints = [{"key": gr.QUARANTINE_TAINT, "value": "reset", "effect": "NoSchedule"}] if quarantined else []
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints}}


NODES = [node("gpu-a"), node("gpu-b"), node("gpu-c")]


def plan(alerts, nodes=NODES, handled=(), **settings):
    return gr.plan(alerts, nodes, HOSTS, list(handled), {**SETTINGS, **settings})


def outcomes(result) -> list[tuple[str, str]]:
    return [(d["node"], d["outcome"]) for d in result["decisions"]]


def test_application_xids_change_nothing_device_xids_quarantine():
    result = plan([xid_alert("gpu-a", 13), xid_alert("gpu-b", 48)])
    assert outcomes(result) == [("gpu-a", "nothing_to_do"), ("gpu-b", "quarantine")]
    [quarantine] = result["quarantine"]
    assert quarantine["cause"] == "XID 48 (double-bit ECC error)"
    assert quarantine["steps"] == SETTINGS["ladder"]


def test_a_gpu_off_the_bus_climbs_only_to_the_reboot_and_without_one_is_replaced():
    [decision] = plan([xid_alert("gpu-a", "79")])["quarantine"]
    assert (decision["action"], decision["steps"]) == ("reboot", ["reboot"])
    [decision] = plan([xid_alert("gpu-a", 79)], ladder=["restart_services"])["quarantine"]
    assert decision["steps"] == [] and "replacement" in decision["why"]


def test_row_remap_alerts_reset_or_replace():
    pending = {"status": "firing", "fingerprint": "p", "labels": {"alertname": "GPUUncorrectableRowsRemapped",
                                                                  "Hostname": "gpu-a"}}  # fmt: skip
    failed = {
        "status": "firing",
        "fingerprint": "f",
        "labels": {"alertname": "GPURowRemapFailure", "Hostname": "gpu-b"},
    }
    result = plan([pending, failed], breaker=2)
    assert [(d["action"], d["steps"][:1]) for d in result["quarantine"]] == [("reset", ["restart_services"]),
                                                                            ("replace", [])]  # fmt: skip


def test_the_breaker_stops_the_next_node_and_counts_nodes_already_out():
    result = plan([xid_alert("gpu-a", 48), xid_alert("gpu-b", 94), xid_alert("gpu-c", 95)], breaker=2)
    assert outcomes(result) == [("gpu-a", "quarantine"), ("gpu-b", "quarantine"), ("gpu-c", "breaker")]
    assert "2 of at most 2" in result["decisions"][2]["why"]
    already = plan([xid_alert("gpu-b", 48)], nodes=[node("gpu-a", quarantined=True), node("gpu-b"), node("gpu-c")])
    assert outcomes(already) == [("gpu-b", "breaker")]
    assert already["quarantined_before"] == ["gpu-a"]


def test_a_node_already_quarantined_resumes_without_counting_twice():
    result = plan([xid_alert("gpu-a", 48)], nodes=[node("gpu-a", quarantined=True), node("gpu-b")])
    assert outcomes(result) == [("gpu-a", "quarantine")]
    assert result["quarantine"][0]["why"].startswith("resumes")


def test_a_share_of_the_fleet_rounds_down_but_lets_one_out():
    assert gr.breaker_limit("10%", 32) == 3
    assert gr.breaker_limit("10%", 3) == 1
    assert gr.breaker_limit(2, 3) == 2


def test_several_alerts_of_one_node_make_one_quarantine_of_the_worst_class():
    result = plan([xid_alert("gpu-a", 48), xid_alert("gpu-a", 79)])
    [decision] = result["quarantine"]
    assert decision["action"] == "reboot" and decision["keys"] == ["fp-gpu-a-48@2026-12-07T11:00:00Z",
                                                                   "fp-gpu-a-79@2026-12-07T11:00:00Z"]  # fmt: skip
    assert "XID 79" in decision["cause"] and "XID 48" in decision["cause"]


def test_unknown_nodes_resolved_and_unrelated_alerts():
    unrelated = {"status": "firing", "labels": {"alertname": "GPUTemperatureHigh", "Hostname": "gpu-a"}}
    result = plan([xid_alert("elsewhere", 48), xid_alert("gpu-a", 48, status="resolved"), unrelated])
    assert outcomes(result) == [("elsewhere", "unknown_node")]


def test_a_node_labelled_for_replacement_is_only_reported():
    result = plan([xid_alert("gpu-a", 48)], nodes=[node("gpu-a", True, {gr.REPLACE_LABEL: "xid-79"})])
    assert outcomes(result) == [("gpu-a", "already_replacing")]


def test_unknown_xids_follow_the_setting_and_overrides_win():
    assert plan([xid_alert("gpu-a", 150)])["decisions"][0]["outcome"] == "nothing_to_do"
    assert plan([xid_alert("gpu-a", 150)], unknown_xid="reset")["decisions"][0]["outcome"] == "quarantine"
    assert plan([xid_alert("gpu-a", 13)], xid_actions={"13": "reset"})["decisions"][0]["outcome"] == "quarantine"


def test_handled_keys_come_from_final_rows_only():
    rows = [
        {"outcome": "released", "keys": ["a@1", "b@1"]},
        {"outcome": "nothing_to_do", "key": "c@1"},
        {"outcome": "breaker", "key": "d@1"},
        {"outcome": "quarantined", "keys": ["e@1"]},
        {"outcome": "released", "keys": ["f@1"], "check_mode": True},
    ]
    text = "\n".join(json.dumps(r) for r in rows) + "\nnot json\n"
    assert gr.handled_keys(text) == ["a@1", "b@1", "c@1"]
    alert = xid_alert("gpu-a", 48)
    assert plan([alert], handled=[gr.alert_key(alert)])["decisions"] == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"xid_actions": {"abc": "reset"}}, "gpu_remediation_xid_actions: key 'abc' is not an XID number"),
        ({"xid_actions": {48: "drain"}}, "gpu_remediation_xid_actions[48]='drain' is not one of"),
        ({"breaker": 0}, "gpu_remediation_breaker=0 must be at least 1 node"),
        ({"breaker": "0%"}, "gpu_remediation_breaker='0%': a share of the fleet must be above 0%"),
        ({"ladder": ["restart_services", "reflash"]}, "gpu_remediation_ladder[1]='reflash' is no remediation step"),
        (
            {"ladder": ["reboot", "reboot"]},
            "gpu_remediation_ladder[1]='reboot' is already at gpu_remediation_ladder[0]",
        ),
    ],
)
def test_problems_name_the_variable_and_item(settings, message):
    found = gr.problems({**SETTINGS, **settings})
    assert len(found) == 1 and found[0].startswith(message), found


def test_the_shipped_values_have_no_problem_and_the_gate_reads_the_same_table():
    assert gr.problems(SETTINGS) == []
    assert {x for x, (action, _) in XIDS.items() if action != "none"} == XID_NODE_FAULTS
    assert {13, 31, 43, 45}.isdisjoint(XID_NODE_FAULTS) and {48, 79, 94, 95}.issubset(XID_NODE_FAULTS)


def test_quarantined_nodes_give_cause_age_and_whether_a_person_is_needed():
    out = node("gpu-b", True, {gr.REPLACE_LABEL: "health-gate"})
    out["metadata"]["annotations"] = {"gpufleet.io/gpu-quarantine-cause": "XID 94 (contained ECC error)",
                                      "gpufleet.io/gpu-quarantined-at": "2026-12-07T10:00:00Z"}  # fmt: skip
    busy = node("gpu-a", True)
    busy["metadata"]["annotations"] = {"gpufleet.io/gpu-quarantined-at": "2026-12-07T11:59:30Z"}
    rows = gr.quarantined_nodes([out, busy, node("gpu-c")], "2026-12-07T12:00:00Z")
    assert [(r["node"], r["age_seconds"], r["replace"]) for r in rows] == [("gpu-b", 7200, "health-gate"),
                                                                          ("gpu-a", 30, "")]  # fmt: skip
    assert rows[0]["line"] == ("gpu-b: XID 94 (contained ECC error), out since 2026-12-07T10:00:00Z (2 h), "
                               "labelled for replacement (gpufleet.io/replace=health-gate)")  # fmt: skip
    assert rows[1]["line"].endswith("(30 s), remediating") and "gpu-a: reset" in rows[1]["line"]


def test_a_release_by_request_brings_back_only_a_node_held_out():
    nodes = [node("gpu-a", True, {gr.REPLACE_LABEL: "health-gate"}), node("gpu-b"), node("gpu-c")]
    result = plan([], nodes=nodes, release=["gpu-a", "gpu-b", "gone"])
    assert outcomes(result) == [("gpu-a", "release"), ("gpu-b", "not_quarantined"), ("gone", "unknown_node")]
    assert [d["node"] for d in result["quarantine"]] == ["gpu-a"]
    assert gr.handled_keys('{"outcome": "released", "key": "", "keys": []}') == []
