#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: NVIDIA GPU facts from nvidia-smi."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA driver, CUDA and per-GPU facts from nvidia-smi
description:
  - Runs C(nvidia-smi -q -x) and returns the driver and CUDA versions and, per GPU, name, UUID, PCI bus id,
    memory total and used, MIG mode, persistence mode, ECC mode and power limit, as C(ansible_facts.gpu).
  - Fails with a message that says what is wrong when there is no nvidia-smi (driver not installed), when the
    driver and library versions differ (a reboot is needed), or when fewer GPUs than O(min_gpus) are visible.
  - Read-only; runs the same in check mode.
version_added: 0.1.0
author: gpufleet maintainers
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - gpufleet.platform.nvidia_smi
options:
  min_gpus:
    description: Fail unless at least this many GPUs are visible.
    type: int
    default: 1
  min_driver_major:
    description: Fail when the driver branch is older (DCGM 3.5 needs 535).
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: GPU facts, requiring a driver new enough for DCGM 3.5
  gpufleet.platform.gpu_facts:
    min_driver_major: 535

- name: Show the GPUs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu.gpus | map(attribute='name') | list }} on driver {{ ansible_facts.gpu.driver_version }}"
"""

RETURN = r"""
msg:
  description: "One line: GPU count and model, driver and CUDA versions."
  returned: success
  type: str
ansible_facts:
  description: Facts under the key C(gpu).
  returned: success
  type: dict
  contains:
    gpu:
      description: driver_version, cuda_version, gpu_count and gpus (one dict per GPU).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.platform.plugins.module_utils.gpu_facts import (
    GpuFactsError,
    driver_major,
    parse_nvidia_smi_xml,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "min_gpus": {"type": "int", "default": 1},
            "min_driver_major": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    binary = module.get_bin_path(module.params["nvidia_smi"])
    if binary is None:
        module.fail_json(msg="nvidia-smi not found: the NVIDIA driver is not installed (run the nvidia_driver role)")
    rc, out, err = module.run_command([binary, "-q", "-x"])
    if "Driver/library version mismatch" in out + err:
        module.fail_json(msg="NVML: driver/library version mismatch: the driver was upgraded; reboot the host")
    if rc != 0:
        module.fail_json(msg=f"nvidia-smi failed (rc={rc}): {(err or out).strip()}", rc=rc, stdout=out, stderr=err)
    try:
        facts = parse_nvidia_smi_xml(out)
    except GpuFactsError as exc:
        module.fail_json(msg=str(exc), stdout=out)
    if facts["gpu_count"] < module.params["min_gpus"]:
        module.fail_json(msg=f"{facts['gpu_count']} GPU(s) visible, at least {module.params['min_gpus']} expected")
    major = driver_major(facts["driver_version"])
    if major is not None and major < module.params["min_driver_major"]:
        module.fail_json(
            msg=f"driver {facts['driver_version']} is older than branch {module.params['min_driver_major']}: "
            "upgrade the driver (nvidia_driver_branch) before deploying what needs it"
        )
    models = ", ".join(sorted({g["name"] for g in facts["gpus"]}))
    summary = f"{facts['gpu_count']} x {models}, driver {facts['driver_version']}, CUDA {facts['cuda_version']}"
    module.exit_json(changed=False, ansible_facts={"gpu": facts}, msg=summary)


if __name__ == "__main__":
    main()
