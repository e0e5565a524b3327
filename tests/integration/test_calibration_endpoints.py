"""Smoke checks, KServe v2 benchmarking and GPU correlation against the calibration server."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import inference_smoke as smoke
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb
from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv

from gpufleet import calibration_server


@pytest.fixture(scope="module")
def server():
    process, url = calibration_server.launch(0, "--ttft", "0.01", "--itl", "0.001")
    yield url
    process.terminate()


def test_openai_smoke_passes(server):
    report = smoke.check_openai(server, "calibration")
    assert report.ok, report.failures
    assert [c.name for c in report.checks] == ["health", "model listed", "one completion"]


def test_openai_smoke_names_a_missing_model(server):
    report = smoke.check_openai(server, "llama-70b")
    assert not report.ok
    assert report.failures == ["model listed: model 'llama-70b' not served; the server has ['calibration']"]


def test_kserve_smoke_and_unreachable_endpoint(server):
    inputs = [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]
    assert smoke.check_kserve_v2(server, "calibration", inputs).ok
    down = smoke.check_kserve_v2("http://127.0.0.1:9", "calibration", inputs, timeout=1)
    assert not down.ok and "cannot reach" in down.failures[0]


def test_kserve_v2_ladder(server):
    cfg = lb.BenchConfig(
        base_url=server,
        model="calibration",
        api="kserve_v2",
        stream=False,
        warmup_s=0.3,
        duration_s=1.0,
        kserve_inputs=[{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}],
    )
    result = lb.run_benchmark(cfg)
    assert [lv.level for lv in result.levels] == [1, 5, 30]
    for level in result.levels:
        assert level.errors == {} and level.completed > 0
        assert level.e2e["p50"] >= 0.01


def test_streams_spread_over_worker_processes(server):
    cfg = lb.BenchConfig(
        base_url=server, model="calibration", api="completions", max_tokens=8, warmup_s=0.5, duration_s=1.5, workers=2
    )
    level = lb.run_level(cfg, 6)
    assert level.errors == {} and level.completed > 0
    assert level.output_tokens == level.completed * 8


@pytest.fixture(scope="module")
def keyed_server():
    """A server that asks for an API key, as vLLM with VLLM_API_KEY (vllm_api_key_secret) does."""
    import os
    import secrets

    key = secrets.token_urlsafe(24)
    os.environ["GPUFLEET_TEST_API_KEY"] = key
    try:
        process, url = calibration_server.launch(0, "--ttft", "0.01", "--itl", "0.001",
                                                 "--api-key-env", "GPUFLEET_TEST_API_KEY")  # fmt: skip
    finally:
        del os.environ["GPUFLEET_TEST_API_KEY"]
    yield url, key
    process.terminate()


def test_smoke_and_bench_send_the_api_key_and_never_show_it(keyed_server):
    url, key = keyed_server
    refused = smoke.check_openai(url, "calibration")
    assert refused.failures[0].startswith("model listed: HTTP 401")
    assert smoke.check_openai(url, "calibration", api_key=key).ok
    cfg = lb.BenchConfig(base_url=url, model="calibration", api="chat", levels=[2], warmup_s=0.2, duration_s=1,
                         max_tokens=8, api_key=key)  # fmt: skip
    result = lb.run_benchmark(cfg)
    assert result.levels[0].errors == {} and result.levels[0].completed > 0
    shown = json.dumps(result.as_dict())
    assert key not in shown and result.as_dict()["config"]["api_key"] == "(hidden)"
    assert key not in repr(cfg)


def test_metrics_are_vllms_series_counting_what_it_served(server):
    """The lab scrapes the stand-in where production scrapes vLLM: /metrics has every series the vllm
    profile (dashboard, alerts, verify) reads, typed as real vLLM 0.23 types them, and counts the
    requests it really served."""
    before = httpx.get(server + "/metrics").text
    for stream in (True, False):
        body = {"model": "calibration", "prompt": "x", "max_tokens": 4, "stream": stream}
        httpx.post(server + "/v1/completions", json=body, timeout=10).raise_for_status()
    text = httpx.get(server + "/metrics").text

    def value(exposition: str, series: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{re.escape(series)}{{[^}}]*}} (\S+)$", exposition, re.M))

    samples = {line.split("{")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for expected in pv.vllm_profile():
        assert expected.metric in samples
        assert f'{expected.metric}{{engine="0",model_name="calibration"' in text
    real = (Path(__file__).parents[1] / "fixtures/device/h200-vllm/metrics.txt").read_text()
    types = set(re.findall(r"^# TYPE (\S+ \S+)$", text, re.M))
    assert types <= set(re.findall(r"^# TYPE (\S+ \S+)$", real, re.M))
    assert value(text, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total") == 8
    assert (
        value(text, "vllm:e2e_request_latency_seconds_count") - value(before, "vllm:e2e_request_latency_seconds_count")
        == 2
    )
    assert value(text, "vllm:num_requests_running") == 0
    if shutil.which("promtool"):  # it lints names (vLLM's colons) and help; a format error is "parsing"
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert "pars" not in lint.stderr + lint.stdout
