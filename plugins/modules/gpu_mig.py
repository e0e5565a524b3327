#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: a MIG layout on every GPU of a host, with nvidia-smi (hosts without the GPU Operator)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_mig
short_description: Apply a MIG layout to every GPU of a host with nvidia-smi
description:
  - For hosts without the GPU Operator (whose MIG manager applies the C(nvidia.com/mig.config) label instead).
  - Reads each GPU's MIG mode and GPU instances (C(nvidia-smi mig -lgi)); a GPU already in the layout is not
    touched. Otherwise enables or disables MIG mode, destroys the GPU's compute and GPU instances and creates the
    layout's (C(nvidia-smi mig -cgi PROFILES -C)), then reads them back.
  - A mode change that stays pending (the GPU needs a reset and is in use) fails, saying so. Callers drain the
    node and stop what holds the GPU first (the gpu_mig role does).
  - Check mode reports what would change on each GPU.
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
  layout:
    description: "Profile to count, for example C({1g.18gb: 7}); empty disables MIG."
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Seven 1g.18gb instances on each H200
  gpufleet.platform.gpu_mig:
    layout: {1g.18gb: 7}
"""

RETURN = r"""
changes:
  description: GPU index to the steps taken (or, in check mode, that would be).
  returned: always
  type: dict
instances:
  description: GPU index to profile counts after the run.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.platform.plugins.module_utils.mig import expand, gpu_changes, gpu_instances


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "layout": {"type": "dict", "default": {}},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )
    smi = module.get_bin_path(module.params["nvidia_smi"], required=True)
    layout = {str(k): int(v) for k, v in module.params["layout"].items()} or None

    def run(*args: str) -> str:
        rc, out, err = module.run_command([smi, *args])
        if rc != 0:
            module.fail_json(msg=f"nvidia-smi {' '.join(args)} failed (rc={rc}): {(err or out).strip()}")
        return out

    def read() -> tuple[dict[int, str], dict[int, str], dict[int, dict[str, int]]]:
        rows = run("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader")
        current, pending = {}, {}
        for line in filter(None, rows.splitlines()):
            index, now, next_ = (field.strip() for field in line.split(","))
            current[int(index)], pending[int(index)] = now, next_
        rc, out, _ = module.run_command([smi, "mig", "-lgi"])  # no instances (or MIG off): not an error here
        return current, pending, gpu_instances(out if rc == 0 else "")

    current, pending, instances = read()
    changes = gpu_changes(current, instances, layout)
    if module.check_mode or not changes:
        module.exit_json(changed=bool(changes), changes=changes, instances=instances)
    for gpu, steps in changes.items():
        index = str(gpu)
        if "destroy instances" in steps:
            module.run_command([smi, "mig", "-i", index, "-dci"])  # fails when there are none: fine
            run("mig", "-i", index, "-dgi")
        if "enable MIG" in steps or "disable MIG" in steps:
            run("-i", index, "-mig", "1" if layout else "0")
        if layout:
            run("mig", "-i", index, "-cgi", ",".join(expand(layout)), "-C")
    current, pending, instances = read()
    stuck = {g: f"{current[g]} (pending {pending[g]})" for g in current if current[g] != pending[g]}
    if stuck:
        module.fail_json(
            msg=f"MIG mode change pending on GPU(s) {stuck}: the GPU needs a reset and something holds it;"
            " stop its clients or reboot the node, then re-run",
            changes=changes,
        )
    left = gpu_changes(current, instances, layout)
    if left:
        module.fail_json(msg=f"after reconfiguring, GPU(s) still differ from the layout: {left}", changes=changes)
    module.exit_json(changed=True, changes=changes, instances=instances)


if __name__ == "__main__":
    main()
