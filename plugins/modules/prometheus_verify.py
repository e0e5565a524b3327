#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: verify that Prometheus really has the metrics a platform promises."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: prometheus_verify
short_description: Check targets, metrics, labels, freshness and values through Prometheus's HTTP API
description:
  - Asks a Prometheus server which targets of a scrape job are up, then checks each expected metric for
    presence, required labels, sample freshness and value range.
  - The C(dcgm) profile expects dcgm-exporter's default counters. Fields that not every GPU model reports are
    checked only when present, and DCGM's blank sentinel values count as "not supported", never as readings.
  - The C(vllm) profile expects the vLLM series the collection's dashboard and alert rules read, each with its
    C(model_name) label.
  - Waits up to O(timeout) seconds for everything to hold, then fails with what is missing and the likely cause
    it can see (a target down with its last scrape error, no target in the job, labels missing).
  - Read-only, so check mode runs the same checks.
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
options:
  url:
    description: Base URL of the Prometheus server, for example C(http://prometheus.monitoring:9090).
    type: str
    required: true
  job:
    description: Scrape job (or scrape pool) whose targets and series are checked.
    type: str
    required: true
  instances:
    description: Instance label values that must each have a healthy target and every required metric.
    type: list
    elements: str
    default: []
  profile:
    description: A named expectation set. C(none) checks only O(metrics).
    type: str
    choices: [dcgm, vllm, none]
    default: none
  profiling_fields:
    description: With the dcgm profile, also check the DCGM_FI_PROF_* fields (they need SYS_ADMIN on the exporter).
    type: bool
    default: false
  metrics:
    description: Further expectations.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Metric name.
        type: str
        required: true
      labels:
        description: Labels each series must carry; C(a|b) accepts either name.
        type: list
        elements: str
        default: []
      min:
        description: Lowest acceptable value.
        type: float
      max:
        description: Highest acceptable value.
        type: float
      required:
        description: When false, a missing metric is reported but does not fail.
        type: bool
        default: true
  targets_from:
    description:
      - Where the job's targets are read. C(scrape) asks the server for its own scrape targets (the tunnel path).
      - C(up) reads the C(up) series remote-writing agents send (a receiver scrapes nothing itself). An C(up) of 0 names
        the node whose exporter is down, an C(up) with no recent sample the node whose agent or link is down.
    type: str
    choices: [scrape, up]
    default: scrape
  url_username:
    description: Basic-auth user for a Prometheus behind basic auth (a remote-write receiver).
    type: str
    default: ""
  url_password:
    description: Its password (from the vault).
    type: str
    default: ""
  ca_path:
    description: CA certificate (PEM, where the module runs) to verify an https URL against, instead of the system CAs.
    type: str
    default: ""
  max_sample_age:
    description: Seconds after which the newest sample of a metric counts as stale.
    type: float
    default: 120
  timeout:
    description: Seconds to keep polling until every expectation holds (a few scrape intervals).
    type: float
    default: 60
"""

EXAMPLES = r"""
- name: The GPU nodes' DCGM metrics arrive in the main cluster's Prometheus
  gpufleet.platform.prometheus_verify:
    url: http://10.0.0.5:9090
    job: gpufleet-dcgm
    profile: dcgm
    instances: "{{ groups['gpu_nodes'] }}"
    timeout: 90

- name: vLLM exports its queue metrics
  gpufleet.platform.prometheus_verify:
    url: http://prometheus:9090
    job: vllm
    metrics:
      - name: "vllm:num_requests_waiting"
        labels: [model_name]
        min: 0
"""

RETURN = r"""
msg:
  description: "One line: how many metrics are ok, from how many targets, and which the GPU does not support."
  returned: success
  type: str
ok:
  description: Whether every required expectation held.
  returned: always
  type: bool
targets:
  description: Targets of the job with health, last scrape error and scrape URL.
  returned: always
  type: list
  elements: dict
metrics:
  description: >-
    One result per expected metric; status is ok, missing, unsupported, missing_labels,
    out_of_range or stale.
  returned: always
  type: list
  elements: dict
failures:
  description: Human-readable reasons, one per failed expectation or unhealthy target.
  returned: always
  type: list
  elements: str
waited_s:
  description: Seconds spent polling.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.platform.plugins.module_utils.prometheus_verify import (
    PROFILES,
    Expectation,
    Server,
    verify,
)


def expectations_from_params(params: dict) -> list[Expectation]:
    expected = []
    if params["profile"] != "none":
        expected += PROFILES[params["profile"]](profiling=params["profiling_fields"])
    for item in params["metrics"]:
        labels = tuple(tuple(label.split("|")) for label in item["labels"])
        expected.append(Expectation(item["name"], labels, item.get("min"), item.get("max"), item["required"]))
    return expected


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "job": {"type": "str", "required": True},
            "instances": {"type": "list", "elements": "str", "default": []},
            "profile": {"type": "str", "choices": ["dcgm", "vllm", "none"], "default": "none"},
            "profiling_fields": {"type": "bool", "default": False},
            "metrics": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "labels": {"type": "list", "elements": "str", "default": []},
                    "min": {"type": "float"},
                    "max": {"type": "float"},
                    "required": {"type": "bool", "default": True},
                },
            },
            "targets_from": {"type": "str", "choices": ["scrape", "up"], "default": "scrape"},
            "url_username": {"type": "str", "default": ""},
            "url_password": {"type": "str", "default": "", "no_log": True},
            "ca_path": {"type": "str", "default": ""},
            "max_sample_age": {"type": "float", "default": 120},
            "timeout": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    if module.params["profile"] == "none" and not module.params["metrics"]:
        module.fail_json(msg="nothing to verify: set profile (e.g. dcgm) or list metrics")
    server = Server(
        module.params["url"], module.params["url_username"], module.params["url_password"], module.params["ca_path"]
    )
    report = verify(
        server,
        module.params["job"],
        expectations_from_params(module.params),
        module.params["instances"],
        max_age_s=module.params["max_sample_age"],
        timeout_s=module.params["timeout"],
        targets_from=module.params["targets_from"],
    )
    result = dict(changed=False, msg=report.summary, **report.as_dict())
    if not report.ok:
        del result["msg"]
        module.fail_json(
            msg=f"Prometheus at {module.params['url']}, job {module.params['job']}: " + "; ".join(report.failures),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
