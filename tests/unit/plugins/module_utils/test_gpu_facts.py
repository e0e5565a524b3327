"""GPU facts parsed from real nvidia-smi output captured on an H200 (tests/fixtures)."""

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_facts import (
    GpuFactsError,
    driver_major,
    parse_nvidia_smi_xml,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def test_h200_capture():
    facts = parse_nvidia_smi_xml((FIXTURES / "nvidia-smi-q-x.h200.xml").read_text())
    assert (facts["driver_version"], facts["cuda_version"], facts["gpu_count"]) == ("580.159.04", "13.0", 1)
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["uuid"].startswith("GPU-")
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert gpu["memory_total_mib"] == 143771
    assert gpu["mig_mode"] == "Disabled" and gpu["persistence_mode"] is True and gpu["ecc_mode"] is True
    assert gpu["power_limit_w"] == 700.0


def test_same_result_as_on_the_gpu_machine():
    # tests/fixtures/device/capture_gpu_health.sh ran this parser on the H200 itself.
    capture = FIXTURES / "device" / "h200-health"
    on_device = json.loads((capture / "gpu_facts.json").read_text())
    assert parse_nvidia_smi_xml((capture / "nvidia-smi-q-x.xml").read_text()) == on_device
    assert on_device["gpus"][0]["fabric_state"] is None  # N/A: no NVSwitch on this machine


def test_not_nvidia_smi_output_is_a_clear_error():
    with pytest.raises(GpuFactsError, match="not XML"):
        parse_nvidia_smi_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    with pytest.raises(GpuFactsError, match="nvidia_smi_log"):
        parse_nvidia_smi_xml("<other/>")


def test_no_gpu_and_driver_branch():
    assert (
        parse_nvidia_smi_xml("<nvidia_smi_log><driver_version>535.1</driver_version></nvidia_smi_log>")["gpu_count"]
        == 0
    )
    assert driver_major("580.159.04") == 580 and driver_major(None) is None
