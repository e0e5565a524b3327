"""What the node roles' checks captured on a real H200 (tests/fixtures/device/run_node_checks.sh).

The lab has no GPU: these files are the evidence that the parts the lab cannot run
(the driver role's verify mode, NVIDIA's nvidia-ctk generating CDI) work on one.
"""

from pathlib import Path

import yaml

EVIDENCE = Path(__file__).parents[2] / "fixtures" / "device" / "h200-node-checks"


def test_the_driver_role_verified_the_h200_and_changed_nothing():
    log = (EVIDENCE / "nvidia_driver_verify.log").read_text()
    assert "msg: 1 x NVIDIA H200, driver 580.159.04, CUDA 13.0" in log
    recap = log.split("PLAY RECAP")[1]
    assert "failed=0" in recap and "changed=0" in recap
    assert "nvidia_driver verify: rc=0" in (EVIDENCE / "host.txt").read_text()


def test_the_driver_role_named_a_wrong_branch():
    log = (EVIDENCE / "nvidia_driver_verify_wrong_branch.log").read_text()
    assert "runs driver 580.159.04, not branch 550" in log


def test_nvidia_ctk_generated_a_cdi_spec_for_the_gpu():
    spec = yaml.safe_load((EVIDENCE / "cdi-nvidia.yaml").read_text())
    assert spec["kind"] == "nvidia.com/gpu"
    names = {device["name"] for device in spec["devices"]}
    assert {"0", "all"} <= names and any(n.startswith("GPU-") for n in names)
    nodes = {node["path"] for node in spec["containerEdits"]["deviceNodes"]}
    assert "/dev/nvidiactl" in nodes
    assert "NVIDIA Container Toolkit CLI version 1.17.8" in (EVIDENCE / "cdi.log").read_text()
