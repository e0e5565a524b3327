"""The yardstick run on a real H100 (tests/fixtures/device/run_vllm_h200.sh yardstick; the card the device
tool lent, see h100-vllm-yardstick/README.md): the benchmark's three ways of measuring one vLLM 0.23 server,
and beside them, read-only, the NVML XID watcher and the health gate, replayed with today's code."""

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import gpu_health

EVIDENCE = Path(__file__).parents[2] / "fixtures" / "device" / "h100-vllm-yardstick"


def bench(run: str) -> dict:
    return json.loads((EVIDENCE / run / "benchmark.json").read_text())


def test_the_xid_watcher_saw_no_event_through_the_whole_load():
    [line] = (EVIDENCE / "xid-watch.jsonl").read_text().splitlines()
    summary = json.loads(line)["summary"]
    assert summary["events"] == 0 and summary["faults"] == 0
    assert summary["seconds"] > 300 and all(gpu["xid_events"] for gpu in summary["gpus"])


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_health_gate_passes_before_and_after_the_load_replayed_with_todays_code(when):
    captured = EVIDENCE / f"health-{when}"
    pci = {}
    for line in (captured / "pci-vendor-class.txt").read_text().splitlines():
        slot, vendor, cls = line.split()
        pci[slot] = (vendor, cls)
    checks = gpu_health.evaluate((captured / "nvidia-smi-q-x.xml").read_text(),
                                 (captured / "kernel-log.txt").read_text() or None,
                                 gpu_health.count_nvswitches(pci))  # fmt: skip
    assert [c["name"] for c in checks if c["verdict"] == "fail"] == []
    assert {c["name"]: c["verdict"] for c in checks}["xid_errors"] in ("pass", "skip")


def test_each_way_of_measuring_ran_without_an_error():
    closed, opened = bench("closed"), bench("open")
    assert [(lv["level"], lv["repeats"]) for lv in closed["levels"]] == [(64, 2), (128, 2), (256, 2)]
    assert {lv["mode"] for lv in opened["levels"]} == {"open"}
    assert all(not lv["errors"] for run in (closed, opened, bench("search")) for lv in run["levels"])  # by kind


def test_the_capacity_search_found_a_level_within_the_slo():
    capacity = json.loads((EVIDENCE / "search" / "capacity.json").read_text())
    assert capacity["gpu"] == "NVIDIA H100 80GB HBM3" and capacity["engine"] == {"name": "vllm", "version": "0.23.0"}
    assert capacity["replica"]["streams"] == 88 and capacity["replica"]["ttft_p99_s"] <= capacity["slo"]["ttft_s"]
    assert capacity["replica"]["e2e_p99_s"] <= capacity["slo"]["e2e_s"]
