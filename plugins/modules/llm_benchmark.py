#!/usr/bin/python
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: benchmark an OpenAI-compatible LLM server (or a KServe v2 endpoint)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llm_benchmark
short_description: Measure an LLM serving endpoint over a concurrency ladder
description:
  - Drives an OpenAI-compatible server (vLLM) through C(/v1/completions) or C(/v1/chat/completions), streaming
    or not, or a KServe v2 endpoint (Triton) through C(/v2/models/<model>/infer).
  - Per level it reports TTFT, TPOT, ITL, end-to-end latency and client queue time (P50/P90/P95/P99 and mean),
    requests/s, output tokens/s, errors by kind and goodput against optional SLOs, measured over a steady window
    after a warm-up. Token counts come from the server's usage report.
  - Marks a level C(client_bound) when the client itself could not keep up (event-loop lag, CPU, receive lag),
    instead of reporting the client's limits as the server's.
  - Finds the knee of the throughput curve and the recommended operating point for a P99 SLO.
  - With O(prometheus_url), adds per-level GPU utilisation, framebuffer used and energy (tokens per joule).
  - Sends load, so in check mode it does nothing and reports that it would have run.
version_added: 0.1.0
author: gpufleet maintainers
attributes:
  check_mode:
    support: full
    details: Nothing is sent in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.platform.inference_endpoint
options:
  api:
    description: Which API to drive.
    type: str
    choices: [completions, chat, kserve_v2]
    default: chat
  stream:
    description: Stream responses (SSE). TTFT and ITL need streaming.
    type: bool
    default: true
  levels:
    description: Concurrency per level (closed loop) or request rate per level in req/s (open loop).
    type: list
    elements: float
    default: [1, 5, 30]
  mode:
    description: C(closed) keeps N users busy back to back; C(open) sends arrivals at a rate, whatever the server does.
    type: str
    choices: [closed, open]
    default: closed
  arrival:
    description:
      - Open loop, the gaps between arrivals. C(poisson) exponential; C(gamma) of shape O(burstiness) with the same
        mean (as vLLM's bench and AIPerf define it); C(constant) evenly spaced.
    type: str
    choices: [poisson, gamma, constant]
    default: poisson
  burstiness:
    description: Open loop, gamma arrivals, the gamma's shape; 1 is Poisson, below 1 burstier, above 1 steadier.
    type: float
    default: 1.0
  max_concurrency:
    description: Open loop, at most this many requests in flight (0 for no cap); an arrival beyond it waits for a slot,
      and the wait counts as queue time.
    type: int
    default: 0
  repeats:
    description: Runs of each level, back to back (1 to 10); each figure is then their mean, with a 95% confidence
      interval, and the knee, the recommendation and drops read the intervals.
    type: int
    default: 1
  max_tokens_stddev:
    description: Output lengths drawn per request from a normal around O(max_tokens) with this deviation (seeded, at
      least 1); 0 for every request O(max_tokens).
    type: float
    default: 0
  auto_ladder_max:
    description: When above 0, ignore O(levels) and double concurrency from 1 up to this, stopping after the knee.
    type: int
    default: 0
  warmup:
    description: Seconds per level excluded before the steady window.
    type: float
    default: 5
  duration:
    description: Seconds of the steady window per level.
    type: float
    default: 30
  max_tokens:
    description: Output tokens per request; with a fixed length every request generates exactly this many.
    type: int
    default: 128
  fixed_length:
    description:
      - Ask the server for exactly O(max_tokens) output tokens with vLLM's C(ignore_eos) and C(min_tokens).
      - C(auto) sends them only when one probe request shows the server takes them (other servers refuse
        unknown fields); the result says whether they were used, and why.
    type: str
    choices: [auto, "on", "off"]
    default: auto
  prompt:
    description: Fixed prompt text (when neither O(prompt_words) nor O(dataset) is given).
    type: str
    default: Write a short story about a GPU that learns to dream.
  prompt_words:
    description:
      - Random prompts, unique per request from their first word (so a prefix cache cannot flatter TTFT), with
        lengths in words drawn uniformly from C([min, max]), seeded by O(seed).
    type: list
    elements: int
  dataset:
    description:
      - A file of prompts on the controller, used in turn. JSON Lines with a C(prompt) field per line, or plain
        text with one prompt per line.
    type: path
  seed:
    description: Seed for random prompt lengths and open-loop arrivals.
    type: int
    default: 0
  slo_ttft:
    description: Goodput SLO on TTFT, seconds.
    type: float
  slo_tpot:
    description: Goodput SLO on TPOT, seconds.
    type: float
  slo_e2e:
    description: Goodput SLO on end-to-end latency, seconds.
    type: float
  p99_slo:
    description: E2E P99 limit for the recommended operating point, seconds.
    type: float
  workers:
    description: Client processes to spread streams over (for high concurrency).
    type: int
    default: 1
  kserve_inputs:
    description: The C(inputs) list of a KServe v2 inference request (api=kserve_v2).
    type: list
    elements: dict
  max_error_rate:
    description: Share of failed requests above which a level is invalid (never the knee, never recommended).
    type: float
    default: 0.01
  gpu:
    description:
      - Where per-level GPU figures (power, utilisation, energy, tokens per joule) come from. C(auto) uses
        O(prometheus_url) when given, else NVML when the module runs on the GPU's host.
    type: str
    choices: [auto, nvml, prometheus, none]
    default: auto
  prometheus_url:
    description: Prometheus with the GPU's DCGM metrics, for per-level GPU correlation.
    type: str
  gpu_selector:
    description: Label matchers selecting the GPUs behind the endpoint, for example C(instance="gpu1").
    type: str
    default: ""
  fail_on_errors:
    description: Fail when any request of any level failed.
    type: bool
    default: false
requirements:
  - aiohttp (on the host that runs the module, usually the controller)
"""

EXAMPLES = r"""
- name: The seed users' 1/5/30 ladder against vLLM, with GPU figures
  gpufleet.platform.llm_benchmark:
    url: http://10.0.0.5:30800
    model: meta-llama/Llama-3.1-8B-Instruct
    levels: [1, 5, 30]
    max_tokens: 256
    p99_slo: 10
    prometheus_url: http://10.0.0.5:30090
    gpu_selector: instance="gpu-h200-1"
  delegate_to: localhost
  register: bench
"""

RETURN = r"""
levels:
  description: One result per level (latency summaries in seconds, throughput, errors, client_bound, gpu).
  returned: success
  type: list
  elements: dict
knee_index:
  description: Index in O(levels) of the knee, or null when throughput still scales.
  returned: success
  type: int
operating_point_index:
  description: The recommended level's index - the lowest valid level reaching 90% of the best valid throughput
    within O(p99_slo).
  returned: success
  type: int
fixed_length:
  description: Whether C(ignore_eos)/C(min_tokens) were sent, and why.
  returned: success
  type: dict
dialect:
  description: How the server streams, as met (a [DONE] marker, where usage comes, tokens per event).
  returned: success
  type: dict
gpu_source:
  description: Where the GPU figures came from (nvml, prometheus (DCGM) or none).
  returned: success
  type: str
gpu_stand_in:
  description: >-
    The stand-in exporter the GPU figures came from (its series carry the label gpufleet_stand_in,
    as the lab's FIXTURE dcgm-exporter's do): synthetic values, no GPU measured. Null for a real GPU.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import aiohttp  # noqa: F401

    HAS_AIOHTTP = True
except ImportError:
    HAS_AIOHTTP = False

from ansible_collections.gpufleet.platform.plugins.module_utils.bench_telemetry import NvmlGpu, PrometheusGpu, local_gpu
from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench import (
    BenchConfig,
    load_dataset,
    run_benchmark,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api": {"type": "str", "choices": ["completions", "chat", "kserve_v2"], "default": "chat"},
            "stream": {"type": "bool", "default": True},
            "levels": {"type": "list", "elements": "float", "default": [1, 5, 30]},
            "mode": {"type": "str", "choices": ["closed", "open"], "default": "closed"},
            "arrival": {"type": "str", "choices": ["poisson", "gamma", "constant"], "default": "poisson"},
            "burstiness": {"type": "float", "default": 1.0},
            "max_concurrency": {"type": "int", "default": 0},
            "max_tokens_stddev": {"type": "float", "default": 0},
            "repeats": {"type": "int", "default": 1},
            "auto_ladder_max": {"type": "int", "default": 0},
            "warmup": {"type": "float", "default": 5},
            "duration": {"type": "float", "default": 30},
            "max_tokens": {"type": "int", "default": 128},
            "fixed_length": {"type": "str", "choices": ["auto", "on", "off"], "default": "auto"},
            "prompt": {"type": "str", "default": "Write a short story about a GPU that learns to dream."},
            "prompt_words": {"type": "list", "elements": "int"},
            "dataset": {"type": "path"},
            "seed": {"type": "int", "default": 0},
            "slo_ttft": {"type": "float"},
            "slo_tpot": {"type": "float"},
            "slo_e2e": {"type": "float"},
            "p99_slo": {"type": "float"},
            "workers": {"type": "int", "default": 1},
            "kserve_inputs": {"type": "list", "elements": "dict"},
            "max_error_rate": {"type": "float", "default": 0.01},
            "gpu": {"type": "str", "choices": ["auto", "nvml", "prometheus", "none"], "default": "auto"},
            "prometheus_url": {"type": "str"},
            "gpu_selector": {"type": "str", "default": ""},
            "fail_on_errors": {"type": "bool", "default": False},
            "api_key": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not HAS_AIOHTTP:
        module.fail_json(msg=missing_required_lib("aiohttp"))
    if p["mode"] == "closed" and any(level < 1 or level != int(level) for level in p["levels"]):
        module.fail_json(msg=f"levels={p['levels']}: closed-loop levels are user counts, whole numbers >= 1")
    if not 1 <= p["repeats"] <= 10:
        module.fail_json(msg=f"repeats={p['repeats']}: from 1 to 10 runs of each level")
    if not p["burstiness"] > 0 or p["max_concurrency"] < 0 or p["max_tokens_stddev"] < 0:
        module.fail_json(
            msg=f"burstiness={p['burstiness']}, max_concurrency={p['max_concurrency']}, max_tokens_stddev="
            f"{p['max_tokens_stddev']}: burstiness above 0, the others 0 or more"
        )
    if p["prompt_words"] is not None and (
        len(p["prompt_words"]) != 2 or not 0 < p["prompt_words"][0] <= p["prompt_words"][1]
    ):
        module.fail_json(msg=f"prompt_words={p['prompt_words']}: give [min, max] with 0 < min <= max")
    dataset = None
    if p["dataset"]:
        try:
            dataset = load_dataset(p["dataset"])
        except (OSError, ValueError) as exc:
            module.fail_json(msg=f"dataset={p['dataset']}: {exc}")
    if p["api"] == "kserve_v2" and not p["kserve_inputs"]:
        module.fail_json(msg="api=kserve_v2 needs kserve_inputs (the v2 request's inputs list)")
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no load sent")
    cfg = BenchConfig(
        base_url=p["url"], model=p["model"], api=p["api"], stream=p["stream"] and p["api"] != "kserve_v2",
        levels=[int(x) if p["mode"] == "closed" else x for x in p["levels"]], mode=p["mode"], arrival=p["arrival"],
        burstiness=p["burstiness"], max_concurrency=p["max_concurrency"], max_tokens_stddev=p["max_tokens_stddev"],
        repeats=p["repeats"],
        auto_ladder_max=p["auto_ladder_max"], warmup_s=p["warmup"], duration_s=p["duration"],
        max_tokens=p["max_tokens"], fixed_length=p["fixed_length"], prompt=p["prompt"],
        prompt_words=tuple(p["prompt_words"]) if p["prompt_words"] else None, seed=p["seed"],
        slo_ttft_s=p["slo_ttft"], slo_tpot_s=p["slo_tpot"], slo_e2e_s=p["slo_e2e"], p99_slo_s=p["p99_slo"],
        workers=p["workers"], kserve_inputs=p["kserve_inputs"], dataset=dataset, max_error_rate=p["max_error_rate"],
        api_key=p["api_key"],
    )  # fmt: skip
    gpu: PrometheusGpu | NvmlGpu | None = None
    if p["gpu"] in ("auto", "prometheus") and p["prometheus_url"]:
        gpu = PrometheusGpu(p["prometheus_url"], p["gpu_selector"])
    elif p["gpu"] in ("auto", "nvml"):
        gpu = local_gpu()
    try:
        result = run_benchmark(cfg, gpu).as_dict()
    finally:
        if isinstance(gpu, NvmlGpu):
            gpu.close()
    failed = {k: v for level in result["levels"] for k, v in level["errors"].items()}
    if p["fail_on_errors"] and failed:
        module.fail_json(msg=f"requests failed: {failed}", **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
