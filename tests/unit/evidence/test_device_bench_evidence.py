"""What `gpufleet bench` measured on a real H200 against a real engine: `transformers serve
--continuous-batching` serving a random-initialised model of Qwen2.5-3B's shape
(tests/fixtures/device/bench_transformers_serve.sh). Before issue #15 this engine gave 0 tokens
at every level: every request was refused (HTTP 422), and then counted as a broken stream."""

import json
from pathlib import Path

import pytest

EVIDENCE = Path(__file__).parents[2] / "fixtures" / "device" / "h200-transformers-serve"


@pytest.fixture(scope="module")
def result():
    return json.loads((EVIDENCE / "benchmark.json").read_text())


def test_the_seed_ladder_and_beyond_at_128_tokens_without_an_error(result):
    assert [lv["level"] for lv in result["levels"]] == [1, 5, 30, 64, 128, 256]
    assert result["config"]["max_tokens"] == 128
    for level in result["levels"]:
        assert level["errors"] == {} and level["valid"], level
        assert level["completed"] > 0 and level["output_tokens_per_s"] > 0
        # Counted from the usage this server puts beside its last choice, not from events.
        assert level["output_tokens_per_request"]["p50"] == 128
        assert level["input_tokens"]["p50"] > 0


def test_the_engines_dialect_was_met_and_named(result):
    assert result["fixed_length"]["used"] is False
    assert "http_422" in result["fixed_length"]["why"] and "ignore_eos" in result["fixed_length"]["why"]
    assert result["dialect"]["done_marker"] is False
    assert result["dialect"]["usage"] == "in a chunk with choices"
    assert result["dialect"]["role_only_first_event"] is True
    assert result["dialect"]["tokens_per_event"] > 1  # this server sends several tokens per event


def test_gpu_figures_came_from_nvml_and_follow_the_load(result):
    assert result["gpu_source"] == "nvml"
    gpus = [lv["gpu"] for lv in result["levels"]]
    assert all(g["source"] == "nvml" and g["gpus"] == ["NVIDIA H200"] for g in gpus)
    assert all(g["energy_source"] == "energy counter" and g["tokens_per_joule"] > 0 for g in gpus)
    power = [g["power_mean_w"] for g in gpus]
    assert 80 < power[0] < power[-1] < 700  # idle-ish at one stream, far higher at 256 (H200 TDP 700 W)


def test_verdicts_throughput_scales_then_the_knee(result):
    tput = [lv["output_tokens_per_s"] for lv in result["levels"]]
    assert tput[0] < tput[1] < tput[2] < tput[3] < tput[4]
    knee, recommended = result["knee_index"], result["operating_point_index"]
    assert knee is not None and recommended is not None and recommended < knee
    assert result["levels"][recommended]["valid"] and result["levels"][knee]["valid"]


def test_the_report_is_one_page_with_its_charts():
    page = (EVIDENCE / "benchmark.html").read_text()
    assert page.count("<svg") == 4 and "concurrent streams (log scale)" in page
    assert "GPU power and efficiency (nvml)" in page and "server dialect: [DONE] marker no" in page
    table = (EVIDENCE / "bench.txt").read_text()
    assert "256 (knee)" in table and "! GPU figures: nvml" in table
