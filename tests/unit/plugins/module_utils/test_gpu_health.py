"""The health gate against a real H200's capture (tests/fixtures/device/h200-health, taken on the
device machine: nvidia-smi -q -x, the NVRM lines of its kernel log, its PCI bus) and against
faults written into that capture, one per check."""

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_health import count_nvswitches, evaluate

CAPTURE = Path(__file__).resolve().parents[3] / "fixtures/device/h200-health"
XML = (CAPTURE / "nvidia-smi-q-x.xml").read_text()
LOG = (CAPTURE / "kernel-log.txt").read_text()
PCI = {s: (v, c) for s, v, c in (line.split() for line in (CAPTURE / "pci-vendor-class.txt").read_text().splitlines())}


def verdicts(xml=XML, log=LOG, nvswitches=0, diag=None):
    return {c["name"]: c for c in evaluate(xml, log, nvswitches, diag)}


def test_same_verdicts_as_on_the_gpu_machine():
    # tests/fixtures/device/capture_gpu_health.sh ran the gate on the H200 itself.
    on_device = json.loads((CAPTURE / "gpu_health.json").read_text())
    assert evaluate(XML, LOG, count_nvswitches(PCI)) == on_device


def test_the_real_h200_passes_every_check_it_can_run():
    checks = verdicts(nvswitches=count_nvswitches(PCI))
    assert {n for n, c in checks.items() if c["verdict"] == "fail"} == set()
    assert checks["pcie_link"]["evidence"].endswith("x16 of x16, gen 5 of 5")
    assert checks["persistence_mode"]["verdict"] == "pass"
    assert checks["row_remapping"]["evidence"].endswith("pending=No, failure=No, uncorrectable rows remapped=0")
    assert checks["throttle_reasons"]["evidence"].endswith("active: gpu_idle")
    # No NVSwitch on this machine (one H200, PCIe): the fabric is N/A and that passes.
    assert count_nvswitches(PCI) == 0 and checks["fabric"]["verdict"] == "pass"
    assert checks["xid_errors"]["verdict"] == "pass"
    assert checks["dcgm_diag"] == {"name": "dcgm_diag", "verdict": "skip", "evidence": "dcgmi is not installed"}


@pytest.mark.parametrize(
    ("name", "old", "new", "verdict", "said"),
    [
        ("row_remapping", "<remapped_row_pending>No", "<remapped_row_pending>Yes", "fail", "waits for a GPU reset"),
        ("row_remapping", "<remapped_row_failure>No", "<remapped_row_failure>Yes", "fail", "needs service"),
        (
            "ecc_uncorrectable",
            "<dram_uncorrectable>0</dram_uncorrectable>\n\t\t\t</volatile>",
            "<dram_uncorrectable>2</dram_uncorrectable>\n\t\t\t</volatile>",
            "fail",
            "volatile uncorrectable=2",
        ),
        ("ecc_uncorrectable", "<unrepairable_memory>No", "<unrepairable_memory>Yes", "fail", "unrepairable memory=Yes"),
        ("pcie_link", "<current_link_width>16x", "<current_link_width>8x", "fail", "x8 of x16"),
        ("pcie_link", "<current_link_gen>5", "<current_link_gen>1", "warn", "gen 1 of 5 while idle"),
        ("persistence_mode", "<persistence_mode>Enabled", "<persistence_mode>Disabled", "fail", "nvidia-persistenced"),
        (
            "throttle_reasons",
            "<clocks_event_reason_hw_thermal_slowdown>Not Active",
            "<clocks_event_reason_hw_thermal_slowdown>Active",
            "fail",
            "hw_thermal_slowdown",
        ),
        (
            "throttle_reasons",
            "<clocks_event_reason_sw_power_cap>Not Active",
            "<clocks_event_reason_sw_power_cap>Active",
            "warn",
            "power limit",
        ),
        ("retired_pages", "<pending_retirement>N/A", "<pending_retirement>Yes", "fail", "waits for a GPU reset"),
    ],
)
def test_each_fault_is_named_with_its_evidence(name, old, new, verdict, said):
    assert XML.count(old) == 1
    result = verdicts(xml=XML.replace(old, new))[name]
    assert result["verdict"] == verdict and said in result["evidence"], result
    assert "GPU 0 (00000000:00:06.0)" in result["evidence"]


def test_pcie_generation_under_load_fails():
    xml = XML.replace("<current_link_gen>5", "<current_link_gen>3").replace(
        "<clocks_event_reason_gpu_idle>Active", "<clocks_event_reason_gpu_idle>Not Active"
    )
    assert verdicts(xml=xml)["pcie_link"]["verdict"] == "fail"


def test_xids_node_faults_fail_application_faults_warn():
    fallen = LOG + "[ 812.1] NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off the bus.\n"
    app = LOG + "[ 90.2] NVRM: Xid (PCI:0000:00:06): 13, pid=4242, name=python3, Graphics Exception\n"
    assert verdicts(log=fallen)["xid_errors"]["verdict"] == "fail"
    assert "node-level XIDs [79]" in verdicts(log=fallen)["xid_errors"]["evidence"]
    assert verdicts(log=app)["xid_errors"]["verdict"] == "warn"
    assert verdicts(log=None)["xid_errors"]["verdict"] == "skip"


def test_nvswitch_systems_need_a_completed_fabric():
    hgx = dict(PCI, **{f"0000:0{i}:00.0": ("0x10de", "0x068000") for i in range(7, 9)})
    assert count_nvswitches(hgx) == 2
    # The real capture has fabric N/A: on an HGX that means the fabric manager never ran.
    assert verdicts(nvswitches=2)["fabric"]["verdict"] == "fail"
    done = XML.replace("<state>N/A</state>", "<state>Completed</state>").replace(
        "<status>N/A</status>", "<status>Success</status>"
    )
    assert verdicts(xml=done, nvswitches=2)["fabric"]["verdict"] == "pass"


def test_dcgm_diag_results():
    ok = '{"tests": [{"name": "Deployment", "results": [{"status": "Pass"}]}, {"name": "PCIe", "status": "Pass"}]}'
    bad = '{"tests": [{"name": "Memory", "status": "Fail"}]}'
    assert verdicts(diag=ok)["dcgm_diag"]["verdict"] == "pass"
    assert verdicts(diag=bad)["dcgm_diag"] == {"name": "dcgm_diag", "verdict": "fail", "evidence": "Memory: Fail"}
    assert verdicts(diag="Error: unable to connect to host engine")["dcgm_diag"]["verdict"] == "fail"
