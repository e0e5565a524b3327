"""Triton's series that autoscaling reads, through a real Prometheus (Debian's): the CALIBRATION SERVER,
standing in for Triton with 2 instances of its model (beyond them requests wait in the scheduler
queue), exports Triton's pending requests and queue summary; the autoscaling triggers' own queries
and the bench's Triton figures (`gpufleet bench --server triton`) read them as Prometheus answers.

The stand-in's figures are checked against what the client saw (each request's wait), so the
queries are tested against load, not against numbers we wrote down. Triton's series names and
types are those of its metrics documentation (no Triton server runs here)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import autoscaling, bench_telemetry
from ansible_collections.gpufleet.platform.plugins.module_utils import prometheus_verify as pv

from gpufleet import calibration_server

INFER_S, INSTANCES, USERS, LOAD_S = 0.2, 2, 6, 8.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scraping(work: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    """A real Prometheus scraping ``target`` (the stand-in's URL) every second as the scaling
    Prometheus labels Triton's pods (namespace inference, workload triton), once it has a sample."""
    port = free_port()
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: triton\n"
        f"    static_configs: [{{targets: ['{target.removeprefix('http://')}'],"
        " labels: {namespace: inference, workload: triton}}]\n"
    )
    prometheus = subprocess.Popen(
        [shutil.which("prometheus") or "prometheus", f"--config.file={work / 'prometheus.yml'}",
         f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not (_ready(url) and pv.query(url, "nv_inference_request_success", time.time())):
        if time.monotonic() > deadline:
            prometheus.terminate()
            raise AssertionError("Prometheus did not scrape the stand-in")
        time.sleep(0.5)
    return prometheus, url


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """The stand-in under 6 users for 8 s (each waits for one of 2 instances), scraped every second:
    (Prometheus's URL, the load's start and end, each request's time in the client)."""
    process, url = calibration_server.launch(0, "--ttft", str(INFER_S), "--max-num-seqs", str(INSTANCES))
    prometheus, prometheus_url = None, ""
    try:
        prometheus, prometheus_url = scraping(tmp_path_factory.mktemp("prometheus"), url)
        time.sleep(1.5)  # a scrape of the idle server before the load
        body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}]}
        times: list[float] = []

        async def user(client: httpx.AsyncClient, end: float) -> None:
            while time.time() < end:
                sent = time.time()
                answer = await client.post(f"{url}/v2/models/calibration/infer", json=body)
                assert answer.status_code == 200, answer.text
                times.append(time.time() - sent)

        async def load() -> None:
            async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=USERS)) as client:
                end = time.time() + LOAD_S
                await asyncio.gather(*(user(client, end) for _ in range(USERS)))

        started = time.time()
        asyncio.run(load())
        ended = time.time()
        time.sleep(2.5)  # the last scrape after the load
        yield prometheus_url, started, ended, times
    finally:
        process.terminate()
        if prometheus:
            prometheus.terminate()
            prometheus.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_queue_p99_trigger_reads_the_wait_the_clients_saw(loaded):
    url, _started, ended, times = loaded
    # 6 users on 2 instances of 0.2 s: each request waits two services (0.4 s) in the queue.
    waits = sorted(t - INFER_S for t in times)
    client_p99 = waits[int(0.99 * len(waits))]
    assert 0.3 < client_p99 < 0.6, client_p99
    query = autoscaling.query("nv_inference_queue_summary_us", "triton", "inference", "triton")
    (answer,) = pv.query(url, query, ended)
    assert float(answer["value"][1]) == pytest.approx(client_p99, abs=0.05), (query, answer)


def test_the_pending_requests_trigger_counts_the_requests_waiting_for_an_instance(loaded):
    url, started, ended, _times = loaded
    query = autoscaling.query("nv_inference_pending_request_count", "triton", "inference", "triton")
    readings = [float(r["value"][1]) for at in range(int(started) + 2, int(ended)) for r in pv.query(url, query, at)]
    assert readings and max(readings) == USERS - INSTANCES and min(readings) >= USERS - INSTANCES - 2, readings


def test_an_idle_triton_reads_0_and_a_missing_one_nothing(loaded):
    """Before the load no request was in the summary's window (its quantiles NaN, as Triton's are):
    the trigger reads 0, no load. Where the series is missing (a broken scrape or selector) it reads
    nothing, which the trigger takes as an error, not as no load."""
    url, started, ended, _times = loaded
    query = autoscaling.query("nv_inference_queue_summary_us", "triton", "inference", "triton")
    (idle,) = pv.query(url, query, started - 0.5)
    assert float(idle["value"][1]) == 0.0, idle
    assert pv.query(url, query.replace('workload="triton"', 'workload="gone"'), ended) == []


def test_the_bench_reads_tritons_queue_and_pending_requests_into_the_capacity_figures(loaded):
    url, started, ended, times = loaded

    class Level:  # the figures TritonServer reads from a finished level
        window_start, window_end, server = started + 1, ended, None

    level = Level()
    bench_telemetry.TritonServer(url, 'workload="triton"')(level)  # type: ignore[arg-type]
    figures = level.server
    waits = sorted(t - INFER_S for t in times)
    assert figures["source"] == "prometheus (Triton)"
    assert figures["waiting_max"] == USERS - INSTANCES
    assert figures["queue_time_mean_s"] == pytest.approx(sum(waits) / len(waits), abs=0.05)
    assert figures["queue_time_p99_s"] == pytest.approx(waits[int(0.99 * len(waits))], abs=0.05)


def test_the_stand_in_answers_on_tritons_metrics_port_and_finishes_inferences_in_flight_on_sigterm():
    """Triton's metrics port (8002 beside 8000) and its exit: with --exit-timeout-secs (the stand-in's
    --shutdown-timeout) the inferences in flight at SIGTERM finish, and the metrics port answers until
    the server exits."""
    import signal

    metrics_port = free_port()
    process, url = calibration_server.launch(
        0, "--ttft", "1.0", "--max-num-seqs", "2", "--shutdown-timeout", "5", "--metrics-port", str(metrics_port)
    )
    body = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [0]}]}

    async def four_then_sigterm() -> list[int]:
        async with httpx.AsyncClient(timeout=10) as client:
            tasks = [
                asyncio.create_task(client.post(f"{url}/v2/models/calibration/infer", json=body)) for _ in range(4)
            ]
            await asyncio.sleep(0.3)
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            scraped = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
            assert 'nv_inference_pending_request_count{model="calibration",version="1"} 2' in scraped, scraped
            return [(await task).status_code for task in tasks]

    try:
        assert asyncio.run(four_then_sigterm()) == [200, 200, 200, 200]  # two ran, two waited, all finished
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()


def test_gpufleet_bench_measures_a_tritons_capacity_file_and_the_role_s_thresholds_follow(tmp_path):
    """`gpufleet bench --api kserve_v2 --server triton` as a Triton user runs it, against the stand-in
    with 2 instances of 0.2 s and no dynamic batching, its series read through a real Prometheus: the
    capacity file names Triton, and its recommended level is the instances (more users only wait). The
    queue trigger's default is the wait the SLO still allows there; the pending requests, 0 at that level,
    need a threshold of the user's own, and the role's check names it."""
    process, url = calibration_server.launch(0, "--ttft", str(INFER_S), "--max-num-seqs", str(INSTANCES))
    prometheus = None
    try:
        (tmp_path / "prometheus").mkdir()
        prometheus, prometheus_url = scraping(tmp_path / "prometheus", url)
        inputs = '[{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}]'
        bench = subprocess.run(
            [sys.executable, "-m", "gpufleet.cli", "bench", "--url", url, "--model", "calibration",
             "--api", "kserve_v2", "--kserve-inputs", inputs, "--levels", "2,4,8", "--duration", "4", "--warmup", "1",
             "--p99-slo", "0.8",
             "--gpu", "none", "--server", "triton", "--prometheus-url", prometheus_url,
             "--server-selector", 'workload="triton"', "--out", str(tmp_path / "bench")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert bench.returncode == 0, bench.stderr[-3000:]
    finally:
        process.terminate()
        if prometheus:
            prometheus.terminate()
            prometheus.wait(timeout=30)
    measured = json.loads((tmp_path / "bench/capacity.json").read_text())
    replica = measured["replica"]
    print(f"capacity of the Triton stand-in: {replica}")
    assert measured["engine"]["name"] == "triton" and measured["workload"]["api"] == "kserve_v2", measured
    # 2 users keep both instances busy at 10 inferences/s; 4 and 8 get no more, only a wait.
    assert replica["streams"] == INSTANCES and replica["waiting_max"] == 0, replica
    assert replica["e2e_p99_s"] == pytest.approx(INFER_S, abs=0.05) and replica["queue_time_p99_s"] < 0.05, replica
    queue = [{"metric": "nv_inference_queue_summary_us"}]
    assert autoscaling.problems(queue, measured, 0.8, "triton", "v", "c") == []
    [trigger] = autoscaling.keda_triggers(queue, measured, 0.8, "triton", "inference", "triton", "http://p:9090")
    allowed = 0.8 * (replica["queue_time_p99_s"] + 0.8 - replica["e2e_p99_s"])
    assert float(trigger["metadata"]["threshold"]) == pytest.approx(allowed, abs=0.001), trigger
    [problem] = autoscaling.problems([{"metric": "nv_inference_pending_request_count"}], measured, 0.8, "triton",
                                     "triton_autoscaling_triggers", "triton_capacity_file")  # fmt: skip
    assert problem.startswith("triton_autoscaling_triggers[0].threshold: none given"), problem


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([], "--api kserve_v2 needs --kserve-inputs"),
        (["--kserve-inputs", "[{"], "--kserve-inputs is not JSON"),
        (["--kserve-inputs", '[{"name": "x", "shape": [1]}]'], "--kserve-inputs[0] has no datatype, data"),
    ],
)
def test_gpufleet_bench_names_a_missing_or_malformed_kserve_input_before_sending_anything(extra, named):
    bench = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "bench", "--url", "http://127.0.0.1:9", "--model", "m",
         "--api", "kserve_v2", *extra], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bench.returncode == 2 and named in bench.stderr, bench.stderr
