"""The capacity file: written from a benchmark result, refused for another model or engine, and the
drain it implies. The collection's reference file is what from_benchmark makes of the H200 run."""

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import capacity

REPO = Path(__file__).resolve().parents[4]
H200 = REPO / "tests/fixtures/device/h200-vllm/benchmark.json"
REFERENCE = REPO / "roles/vllm/files/reference-capacity.json"


@pytest.fixture
def measured() -> dict:
    result = json.loads(H200.read_text())
    return capacity.from_benchmark(result, {"name": "vllm", "version": "0.23.0"}, "NVIDIA H200")


def test_the_roles_reference_file_is_the_h200_runs_capacity(measured):
    assert json.loads(REFERENCE.read_text()) == measured


def test_the_replica_is_the_recommended_level_with_the_engines_own_figures(measured):
    assert measured["model"] == "qwen2.5-3b" and measured["gpu"] == "NVIDIA H200"
    assert measured["replica"]["streams"] == 128 and measured["knee_streams"] == 256
    assert measured["replica"]["e2e_p99_s"] == pytest.approx(1.354, abs=0.001)
    assert measured["replica"]["waiting_max"] == 14 and measured["replica"]["kv_cache_usage_max"] > 0
    assert measured["workload"] == {"api": "chat", "max_tokens": 128, "prompt_words": [96, 160], "fixed_length": True}


def test_no_recommended_level_no_file():
    result = json.loads(H200.read_text())
    result["operating_point_index"] = None
    assert capacity.from_benchmark(result, {"name": "vllm"}, None) is None


def test_a_usable_file_has_no_problems_and_gives_the_drain(measured):
    assert capacity.problems(measured, "vllm_capacity_file", "qwen2.5-3b", "vllm") == []
    assert capacity.problems(json.dumps(measured), "vllm_capacity_file") == []  # the file's text
    assert capacity.shutdown_seconds(measured, 3) == 5  # ceil(1.354 x 3)
    assert capacity.shutdown_seconds(measured, 1) == 2


def test_another_models_file_is_refused_naming_the_variable(measured):
    (problem,) = capacity.problems(measured, "vllm_capacity_file", "llama-3-8b", "vllm")
    assert problem.startswith("vllm_capacity_file: measured on model 'qwen2.5-3b', not 'llama-3-8b'")
    (problem,) = capacity.problems(measured, "triton_capacity_file", "qwen2.5-3b", "triton")
    assert problem == "triton_capacity_file: measured on engine 'vllm', not 'triton'"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("", "not a readable capacity file"),
        ("{not json", "not a readable capacity file"),
        ({"kind": "something-else"}, "not a readable capacity file"),
        ({"kind": "gpufleet-capacity", "version": 2}, "capacity file version 2"),
    ],
)
def test_what_is_not_a_capacity_file_is_named(doc, expected):
    (problem,) = capacity.problems(doc, "vllm_capacity_file")
    assert problem.startswith("vllm_capacity_file: " + expected)
    assert capacity.shutdown_seconds(doc, 3) == 0  # the preflight names why


@pytest.mark.parametrize("value", [0, -1.5, None, "1.3", True, float("inf")])
def test_a_figure_that_is_not_measured_above_zero_is_refused(measured, value):
    doc = copy.deepcopy(measured)
    doc["replica"]["e2e_p99_s"] = value
    (problem,) = capacity.problems(doc, "vllm_capacity_file")
    assert problem == f"vllm_capacity_file: replica.e2e_p99_s is {value!r}, not a measured figure above 0"


def test_a_kserve_v2_file_has_no_time_per_token_and_needs_none(measured):
    """Triton's inferences answer whole (gpufleet bench --api kserve_v2): no TPOT, and none is asked for;
    a chat file without one is still refused."""
    triton = copy.deepcopy(measured)
    triton["engine"], triton["workload"]["api"], triton["replica"]["tpot_p99_s"] = {"name": "triton"}, "kserve_v2", None
    assert capacity.problems(triton, "triton_capacity_file", "", "triton") == []
    triton["workload"]["api"] = "chat"
    (problem,) = capacity.problems(triton, "triton_capacity_file", "", "triton")
    assert problem == "triton_capacity_file: replica.tpot_p99_s is None, not a measured figure above 0"


def _pod(created: str, ready: str | None, status: str = "True") -> dict:
    conditions = [{"type": "Ready", "status": status, "lastTransitionTime": ready}] if ready else []
    return {"metadata": {"creationTimestamp": created}, "status": {"conditions": conditions}}


def test_the_cold_start_is_the_slowest_pods_creation_to_ready():
    pods = [
        _pod("2026-12-05T07:00:00Z", "2026-12-05T07:01:52Z"),  # 112 s, the H200's first start
        _pod("2026-12-05T07:10:00Z", "2026-12-05T07:11:02Z"),  # 62 s, with the compile cache
        _pod("2026-12-05T07:20:00Z", None),  # still starting: says nothing yet
        _pod("2026-12-05T07:20:00Z", "2026-12-05T07:30:00Z", status="False"),  # not Ready
    ]
    assert capacity.cold_start_seconds(pods) == 112.0
    assert capacity.cold_start_seconds(pods[2:]) is None
