"""gpufleet bench against AIPerf (NVIDIA's LLM benchmark, PyPI 0.13.0), the same servers, the same workload:
chat, streamed, 4 concurrent streams, 16 output tokens each, the server's own token counts.

- Against the CALIBRATION SERVER (its schedule is the ground truth: TTFT 100 ms, then a token every
  20 ms, so E2E 400 ms): both tools within 5 % of the schedule and of each other.
- Against transformers serve on CPU (a real engine), pinned to one core and the clients to the other:
  within the spread this engine shows between runs here (below), printed for the reconciliation table.

The figures that agree by definition: TTFT P50 (send -> first token), AIPerf's inter-token latency
against gpufleet's TPOT ((E2E - TTFT) / (N - 1), both per request), request latency against E2E, and
the output tokens/s and requests/s. AIPerf counts its throughput over its whole run (ramp and drain
in), gpufleet over a steady window: at 30 rounds of 4 streams that costs AIPerf about 1/30 of it.
(The file's name sorts after test_transformers_serve.py: the engine those tests warm up for a minute
drifts less; fresh, it sped up by 40 % between two runs a minute apart.)
docs/benchmark.md keeps the reconciliation table with the figures this test prints."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

from gpufleet import calibration_server

STREAMS, TOKENS, REQUESTS = 4, 16, 120
TTFT, ITL = 0.1, 0.02


def aiperf_figures(
    aiperf: Path, url: str, model: str, out: Path, *extra: str, prefix: Sequence[str] = (), input_tokens: int = 30
) -> dict[str, float]:
    """AIPerf's run, as the figures gpufleet gives (seconds, per second); ``prefix`` wraps its command."""
    command = [
        *prefix, str(aiperf), "profile", "--model", model, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--concurrency", str(STREAMS), "--request-count", str(REQUESTS), "--warmup-request-count", str(2 * STREAMS),
        "--synthetic-input-tokens-mean", str(input_tokens), "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", str(TOKENS), "--output-tokens-stddev", "0", "--use-legacy-max-tokens",
        "--use-server-token-count", "--tokenizer", str(out.parent / "tokenizer"), "--random-seed", "1",
        "--output-artifact-dir", str(out), "--no-auto-plot", "--no-gpu-telemetry", "--no-server-metrics",
        "--ui-type", "none", *extra,
    ]  # fmt: skip
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=out.parent)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    data = json.loads((out / "profile_export_aiperf.json").read_text())
    assert not data["error_summary"], data["error_summary"]
    return {
        "ttft_p50": data["time_to_first_token"]["p50"] / 1000,
        "tpot_p50": data["inter_token_latency"]["p50"] / 1000,
        "e2e_p50": data["request_latency"]["p50"] / 1000,
        "output_tokens_per_s": data["output_token_throughput"]["avg"],
        "requests_per_s": data["request_throughput"]["avg"],
    }


def gpufleet_figures(url: str, model: str, **settings) -> dict[str, float]:
    settings = {"warmup_s": 1.0, "duration_s": 8.0, **settings}
    cfg = lb.BenchConfig(base_url=url, model=model, api="chat", max_tokens=TOKENS, prompt_words=(30, 30),
                         levels=[STREAMS], **settings)  # fmt: skip
    (level,) = lb.run_benchmark(cfg).levels
    assert level.errors == {} and level.valid, (level.errors, level.invalid_reasons)
    return {
        "ttft_p50": level.ttft["p50"], "tpot_p50": level.tpot["p50"], "e2e_p50": level.e2e["p50"],
        "output_tokens_per_s": level.output_tokens_per_s, "requests_per_s": level.requests_per_s,
        "input_tokens": level.input_tokens["p50"],
    }  # fmt: skip


def table(name: str, rows: dict[str, dict[str, float]]) -> None:
    figures = list(next(iter(rows.values())))
    print(f"\n{name}: " + " | ".join(figures))
    for tool, values in rows.items():
        print(f"  {tool}: " + " | ".join(f"{values[f]:.4g}" for f in figures))


@pytest.fixture(scope="module")
def tokenizer(engine, tmp_path_factory) -> Path:
    """A working folder whose `tokenizer` is the tiny model's (AIPerf loads one, and would download one)."""
    work = tmp_path_factory.mktemp("aiperf")
    (work / "tokenizer").symlink_to(engine.model)
    return work


def test_aiperf_and_gpufleet_agree_on_the_calibration_servers_schedule(aiperf, tokenizer):
    process, url = calibration_server.launch(0, "--ttft", str(TTFT), "--itl", str(ITL))
    try:
        fixed = ["--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{TOKENS}"]
        theirs = aiperf_figures(aiperf, url, "calibration", tokenizer / "calibration", *fixed)
        ours = gpufleet_figures(url, "calibration", fixed_length="on")
    finally:
        process.terminate()
    e2e = TTFT + (TOKENS - 1) * ITL
    schedule = {"ttft_p50": TTFT, "tpot_p50": ITL, "e2e_p50": e2e, "output_tokens_per_s": STREAMS * TOKENS / e2e,
                "requests_per_s": STREAMS / e2e}  # fmt: skip
    table("calibration server", {"schedule": schedule, "gpufleet": ours, "AIPerf": theirs})
    for figure, truth in schedule.items():
        assert ours[figure] == pytest.approx(truth, rel=0.05), (figure, ours[figure], truth)
        assert theirs[figure] == pytest.approx(truth, rel=0.05), (figure, theirs[figure], truth)
        assert theirs[figure] == pytest.approx(ours[figure], rel=0.05), (figure, theirs[figure], ours[figure])


@pytest.fixture
def apart(engine):
    """The engine on the first core and the benchmark clients on the second, then both cores to each again.
    On CPU the server and the client share the machine: AIPerf's services (its workers, record
    processors and message bus) took enough CPU from transformers serve on two shared cores to halve its
    throughput (281 tok/s against gpufleet's 640 on a quiet machine); pinned apart, each tool measures
    the same server."""
    every = os.sched_getaffinity(0)
    subprocess.run(["taskset", "-a", "-cp", "0", str(engine.pid)], check=True, capture_output=True)
    os.sched_setaffinity(0, {1})
    try:
        yield ["taskset", "-c", "1"]
    finally:
        os.sched_setaffinity(0, every)
        subprocess.run(["taskset", "-a", "-cp", ",".join(map(str, sorted(every))), str(engine.pid)], check=True,
                       capture_output=True)  # fmt: skip


def test_aiperf_and_gpufleet_agree_on_a_real_engine_within_its_drift(aiperf, engine, tokenizer, apart):
    """transformers serve refuses vLLM's fixed length (HTTP 422): both tools count what arrived, by the
    server's usage; its random tiny model rarely ends before 16 tokens. The engine speeds up over its
    first minutes at 4 streams (E2E 0.86 s, then 0.14 s, measured beside the lab), so a first run warms it
    and is no figure."""
    url, model = engine.url, engine.model
    gpufleet_figures(url, model, fixed_length="off", duration_s=20.0)  # warm-up: no figure
    before = gpufleet_figures(url, model, fixed_length="off")
    # The same prompt length in tokens as gpufleet's prompts measured by the server (words are not tokens).
    theirs = aiperf_figures(aiperf, url, model, tokenizer / "transformers-serve", prefix=apart,
                            input_tokens=round(before["input_tokens"]))  # fmt: skip
    theirs["input_tokens"] = before["input_tokens"]
    after = gpufleet_figures(url, model, fixed_length="off")
    table("transformers serve (CPU)", {"gpufleet before": before, "AIPerf": theirs, "gpufleet after": after})
    for figure in ("tpot_p50", "e2e_p50", "output_tokens_per_s", "requests_per_s"):
        ours = (before[figure] + after[figure]) / 2
        drift = abs(before[figure] - after[figure]) / ours
        # Measured on this machine (session 38, a 2-core VM): this engine's figures moved by up to 53 %
        # between gpufleet's runs a minute apart, and where it held still (within 12 %) AIPerf agreed within
        # 5 to 13 %. So the bound is that spread, not the 5 % the calibration server holds: it still catches
        # what a defect does (a token count, a window, a client starving the server: half or double).
        assert theirs[figure] == pytest.approx(ours, rel=max(0.6, drift)), (figure, theirs[figure], before, after)
    # TTFT (17 to 23 ms here) is printed, not asserted: AIPerf's services share its one core with the
    # worker that stamps the first chunk, and its reading moved from 1.5 ms below gpufleet's to 3.5 ms
    # above between runs. The calibration server's test holds TTFT to 5 %, both tools with both cores.
