#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: smoke-test a vLLM (OpenAI API) or Triton (KServe v2) endpoint."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: inference_smoke
short_description: Check that an inference endpoint is up, serves its model and answers one request
description:
  - For C(kind=openai) (vLLM) checks C(/health), that the model is listed in C(/v1/models), and one completion.
  - For C(kind=kserve_v2) (Triton) checks C(/v2/health/ready), C(/v2/models/<model>/ready) and one inference.
  - Fails with the check that failed, the HTTP status or connection error, and what the server said.
  - Read-only apart from one small request; runs in check mode too.
version_added: 0.1.0
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
  - gpufleet.platform.inference_endpoint
options:
  kind:
    description: The API the endpoint speaks.
    type: str
    choices: [openai, kserve_v2]
    default: openai
  inputs:
    description: The C(inputs) of the KServe v2 test inference (kind=kserve_v2).
    type: list
    elements: dict
    default: []
  timeout:
    description: Seconds per request.
    type: float
    default: 30
"""

EXAMPLES = r"""
- name: vLLM answers
  gpufleet.platform.inference_smoke:
    url: http://10.0.0.5:30800
    model: meta-llama/Llama-3.1-8B-Instruct

- name: Triton serves the embedding model
  gpufleet.platform.inference_smoke:
    url: http://10.0.0.5:30000
    kind: kserve_v2
    model: minilm
    inputs:
      - {name: input_ids, shape: [1, 8], datatype: INT64, data: [101, 7592, 2088, 102, 0, 0, 0, 0]}
"""

RETURN = r"""
msg:
  description: One line naming the checks that passed.
  returned: success
  type: str
checks:
  description: One entry per check with name, ok, detail and seconds.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.platform.plugins.module_utils.inference_smoke import check_kserve_v2, check_openai


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "kind": {"type": "str", "choices": ["openai", "kserve_v2"], "default": "openai"},
            "inputs": {"type": "list", "elements": "dict", "default": []},
            "timeout": {"type": "float", "default": 30},
            "api_key": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["kind"] == "kserve_v2":
        if not p["inputs"]:
            module.fail_json(msg="kind=kserve_v2 needs inputs for the test inference")
        report = check_kserve_v2(p["url"], p["model"], p["inputs"], p["timeout"])
    else:
        report = check_openai(p["url"], p["model"], p["timeout"], p["api_key"])
    result = dict(changed=False, **report.as_dict())
    if not report.ok:
        module.fail_json(msg=f"{p['kind']} endpoint {p['url']}: " + "; ".join(report.failures), **result)
    module.exit_json(
        msg=f"{p['kind']} endpoint {p['url']}: " + ", ".join(c.name for c in report.checks) + " ok", **result
    )


if __name__ == "__main__":
    main()
