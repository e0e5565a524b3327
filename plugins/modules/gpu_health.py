#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: the health gate of a GPU node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health
short_description: Check a GPU node's health before it takes work
description:
  - Named checks, each with a verdict (pass, warn, fail, skip) and its evidence - C(xid_errors) (NVRM Xid lines in
    the kernel log since boot), C(row_remapping) (pending or failed row remaps), C(retired_pages),
    C(ecc_uncorrectable) (volatile uncorrectable ECC errors, unrepairable memory), C(pcie_link) (width or
    generation below the maximum; a lower generation on an idle GPU is a warning), C(persistence_mode),
    C(throttle_reasons) (hardware and thermal slowdowns), C(fabric) (NVSwitch systems - fabric state Completed)
    and C(dcgm_diag) (C(dcgmi diag -r 1), where DCGM is installed).
  - Fails when any check fails, naming each failed check and its evidence. Read-only; runs the same in check mode.
version_added: 0.7.0
author: gpufleet maintainers
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.platform.nvidia_smi
options:
  pci_devices_dir:
    description: Where the PCI devices are listed, to count NVSwitches (tests point it at a fixture tree).
    type: path
    default: /sys/bus/pci/devices
  dcgm_diag:
    description: Run C(dcgmi diag -r 1) when dcgmi is installed (about a minute; needs nv-hostengine).
    type: bool
    default: true
  ignore:
    description: Names of checks whose failure is reported as a warning (a known, accepted condition).
    type: list
    elements: str
    default: []
  kernel_log_since:
    description:
      - Read the kernel log from this time on (seconds since the epoch), not since boot - a remediation's gate after a
        GPU reset, when the XID that caused it is still in the log. Needs the journal (C(journalctl -k --since)); where
        there is none, the ring buffer since boot is read.
    type: int
    version_added: 0.10.0
"""

EXAMPLES = r"""
- name: Health gate before the node takes work again
  gpufleet.platform.gpu_health:
    ignore: [persistence_mode]
"""

RETURN = r"""
checks:
  description: One dict per check - name, verdict, evidence.
  returned: always
  type: list
  elements: dict
msg:
  description: The failed checks with their evidence, or a count of passed checks.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_facts import GpuFactsError
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_health import (
    FAIL,
    WARN,
    count_nvswitches,
    evaluate,
    pci_listing,
)

CHECK_NAMES = ("xid_errors", "row_remapping", "retired_pages", "ecc_uncorrectable", "pcie_link",
               "persistence_mode", "throttle_reasons", "fabric", "dcgm_diag")  # fmt: skip


def kernel_log(module: AnsibleModule) -> str | None:
    """The kernel log since boot (or since kernel_log_since): the journal where there is one, else the ring buffer."""
    since = module.params["kernel_log_since"]
    window = ["--since", f"@{since}"] if since else ["-b"]
    for argv in (["journalctl", "-k", *window, "--no-pager", "-o", "short-monotonic"], ["dmesg"]):
        binary = module.get_bin_path(argv[0])
        if binary:
            rc, out, _ = module.run_command([binary, *argv[1:]])
            if rc == 0 and out.strip() and "No entries" not in out:
                return out
            if rc == 0 and since and argv[0] == "journalctl":
                return out  # nothing logged since then: the ring buffer would bring back what came before
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "pci_devices_dir": {"type": "path", "default": "/sys/bus/pci/devices"},
            "dcgm_diag": {"type": "bool", "default": True},
            "ignore": {"type": "list", "elements": "str", "default": []},
            "kernel_log_since": {"type": "int"},
        },
        supports_check_mode=True,
    )
    unknown = sorted(set(module.params["ignore"]) - set(CHECK_NAMES))
    if unknown:
        module.fail_json(msg=f"ignore: unknown check(s) {unknown}; the checks are {list(CHECK_NAMES)}")
    binary = module.get_bin_path(module.params["nvidia_smi"])
    if binary is None:
        module.fail_json(msg="nvidia-smi not found: the NVIDIA driver is not installed (run the nvidia_driver role)")
    rc, xml, err = module.run_command([binary, "-q", "-x"])
    if rc != 0:
        module.fail_json(msg=f"nvidia-smi failed (rc={rc}): {(err or xml).strip()}")
    diag, reason = None, "dcgmi is not installed"
    dcgmi = module.get_bin_path("dcgmi")
    if dcgmi and module.params["dcgm_diag"]:
        rc, diag, err = module.run_command([dcgmi, "diag", "-r", "1", "-j"])
        if rc != 0 and not diag.strip().startswith("{"):
            diag, reason = None, f"dcgmi diag failed (rc={rc}): {(err or diag).strip()[:200]}"
    elif dcgmi:
        reason = "dcgm_diag=false"
    try:
        checks = evaluate(xml, kernel_log(module), count_nvswitches(pci_listing(module.params["pci_devices_dir"])),
                          diag, reason)  # fmt: skip
    except GpuFactsError as exc:
        module.fail_json(msg=str(exc))
    for item in checks:
        if item["verdict"] == FAIL and item["name"] in module.params["ignore"]:
            item.update(verdict=WARN, evidence="ignored by request: " + item["evidence"])
    failed = [c for c in checks if c["verdict"] == FAIL]
    if failed:
        module.fail_json(msg="; ".join(f"{c['name']}: {c['evidence']}" for c in failed), checks=checks)
    counts = {v: sum(c["verdict"] == v for c in checks) for v in ("pass", "warn", "skip")}
    module.exit_json(changed=False, checks=checks, msg=", ".join(f"{n} {v}" for v, n in counts.items()))


if __name__ == "__main__":
    main()
