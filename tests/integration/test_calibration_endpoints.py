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
from gpufleet.lib.llm_bench.drill import arrivals_through

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
    assert {t for t in types if t.startswith("vllm:")} <= set(re.findall(r"^# TYPE (\S+ \S+)$", real, re.M))
    # Beside them, Triton's series for its KServe v2 route, typed as Triton's metrics documentation has them.
    assert {t for t in types if not t.startswith("vllm:")} == {
        "nv_inference_request_success counter", "nv_inference_request_failure counter",
        "nv_inference_queue_duration_us counter",
        "nv_inference_pending_request_count gauge", "nv_inference_queue_summary_us summary",
    }  # fmt: skip
    assert value(text, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total") == 8
    assert (
        value(text, "vllm:e2e_request_latency_seconds_count") - value(before, "vllm:e2e_request_latency_seconds_count")
        == 2
    )
    assert value(text, "vllm:num_requests_running") == 0
    if shutil.which("promtool"):  # it lints names (vLLM's colons) and help; a format error is "parsing"
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert "pars" not in lint.stderr + lint.stdout


def test_the_stand_in_serves_max_num_seqs_at_once_and_queues_the_rest():
    """One replica's capacity: 4 slots, 12 requests at once; 8 wait, and vLLM's series say so."""
    import asyncio

    process, url = calibration_server.launch(0, "--ttft", "0.2", "--itl", "0.01", "--max-num-seqs", "4")
    try:

        async def burst() -> list[float]:
            async with httpx.AsyncClient(timeout=10) as client:

                async def one() -> float:
                    body = {"model": "calibration", "max_tokens": 20, "prompt": "x"}
                    await client.post(f"{url}/v1/completions", json=body)
                    return 0.0

                tasks = [asyncio.create_task(one()) for _ in range(12)]
                await asyncio.sleep(0.1)
                metrics = (await client.get(f"{url}/metrics")).text
                await asyncio.gather(*tasks)
                names = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
                return [float(re.search(rf"^vllm:{name}{{[^}}]*}} (\S+)$", metrics, re.M).group(1)) for name in names]

        running, waiting, kv = asyncio.run(burst())
        assert (running, waiting, kv) == (4, 8, 1.0)
        metrics = httpx.get(f"{url}/metrics").text
        # The queued ones waited about one and two service times (0.2 + 19 x 0.01 s).
        queue_sum = float(re.search(r"^vllm:request_queue_time_seconds_sum\{[^}]*\} (\S+)$", metrics, re.M).group(1))
        assert 4 * 0.39 * 0.8 + 4 * 0.78 * 0.8 < queue_sum < 4 * 0.39 * 1.5 + 4 * 0.78 * 1.5
    finally:
        process.terminate()


def test_open_loop_arrivals_follow_the_rate_whatever_the_server_does(server):
    """Poisson arrivals at 40/s for 2 s, then none for 1 s, then 20/s for 2 s (the autoscaling soak's
    load): the counts in each phase are within 4 standard deviations of the rate's, none starts in the
    pause, and every stream completes."""
    import asyncio

    cfg = lb.BenchConfig(base_url=server, model="calibration", api="chat", max_tokens=5, request_timeout_s=10)
    records: list = []

    def rate(t: float) -> float:
        return 40.0 if t < 2 else 0.0 if t < 3 else 20.0

    began = asyncio.run(arrivals_through(cfg, rate, 5.0, records, seed=7))
    starts = [r.start - began for r in records]
    # (the pause's edges a few ms in: a stream due at 1.999 s may be sent at 2.001 s)
    for low, high, expected in ((0, 2, 80), (2.02, 2.98, 0), (3, 5, 40)):
        count = sum(low <= t < high for t in starts)
        assert abs(count - expected) <= 4 * expected**0.5, (low, high, count)
    assert all(r.tokens == 5 and not r.error for r in records), [r.error for r in records if r.error]


def test_bench_cli_runs_an_open_loop_with_repeats_and_writes_no_capacity_file(tmp_path, capsys):
    from gpufleet import cli

    argv = ["bench", "--calibration", "--calibration-port", "0", "--rates", "4", "--repeats", "2", "--warmup", "0.5",
            "--duration", "1.5", "--max-tokens", "8", "--gpu", "none", "--out", str(tmp_path)]  # fmt: skip
    assert cli.main(argv) == cli.EXIT_OK
    err = capsys.readouterr().err
    result = json.loads((tmp_path / "benchmark.json").read_text())
    (level,) = result["levels"]
    assert (
        result["config"]["mode"] == "open" and level["repeats"] == 2 and len(level["intervals"]["e2e_p99"]["runs"]) == 2
    )
    assert "load: open loop: poisson arrivals" in err and "4/s" in err
    assert "no capacity file" in err and not (tmp_path / "capacity.json").exists()
