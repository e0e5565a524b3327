"""Benchmark statistics and request shapes (pure functions)."""

import math

import pytest
from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb


def rec(start, ttft, itl, tokens, per_event=1, error=None, scheduled=None):
    events = [start + ttft + i * itl * per_event for i in range(math.ceil(tokens / per_event))]
    return lb.RequestRecord(
        scheduled=start if scheduled is None else scheduled,
        start=start,
        end=events[-1],
        first_token=events[0],
        tokens=tokens,
        content_events=len(events),
        event_times=events,
        error=error,
    )


def test_percentile_matches_linear_interpolation():
    assert lb.percentile([1, 2, 3, 4], 50) == 2.5
    assert lb.percentile([5], 99) == 5
    assert math.isnan(lb.percentile([], 50))


def test_multi_token_events_give_per_token_itl():
    m = lb.request_metrics(rec(0.0, 0.1, 0.02, 16, per_event=4))
    assert m["ttft"] == pytest.approx(0.1)
    assert all(x == pytest.approx(0.02) for x in m["itl"])  # an 80 ms gap carried 4 tokens
    assert m["tpot"] == pytest.approx((0.1 + 3 * 0.08 - 0.1) / 15)  # (E2E - TTFT) / (N - 1)


def test_window_excludes_warmup_and_counts_errors():
    cfg = lb.BenchConfig(base_url="http://x", slo_ttft_s=0.15)
    records = [
        rec(0.5, 0.1, 0.02, 10),
        rec(1.0, 0.1, 0.02, 10),
        rec(1.5, 0.2, 0.02, 10),
        lb.RequestRecord(scheduled=2.0, start=2.0, end=2.1, error="http_500"),
    ]
    level = lb.judge_level(cfg, 1, records, [0.001], 0.1, window_start=1.0, window_end=3.0)
    assert level.requests == 3 and level.completed == 2 and level.errors == {"http_500": 1}
    assert level.ttft["p50"] == pytest.approx(0.15)
    assert level.goodput_requests_per_s == pytest.approx(1 / 2.0)  # one of two meets TTFT <= 150 ms
    # tokens received inside [1, 3): all 10 of the 2nd and 3rd requests, none of the first
    assert level.output_tokens_per_s == pytest.approx(20 / 2.0)
    assert not level.client_bound


def test_client_bound_is_flagged_with_reasons():
    cfg = lb.BenchConfig(base_url="http://x")
    level = lb.judge_level(cfg, 1, [rec(1.0, 0.1, 0.02, 4)], [0.05] * 10, 0.97, 1.0, 2.0)
    assert level.client_bound and len(level.client_bound_reasons) == 2


def _level(tput, p99):
    lv = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [], [], 0, 0, 1)
    lv.output_tokens_per_s, lv.e2e = tput, {"p99": p99}
    return lv


def test_knee_and_operating_point():
    levels = [_level(100, 1.0), _level(190, 1.1), _level(200, 2.0), _level(205, 4.0)]
    assert lb.find_knee(levels, 0.10) == 2
    assert lb.operating_point(levels, 2.5) == 2
    assert lb.operating_point(levels, 0.5) is None
    assert lb.find_knee(levels[:2], 0.10) is None


def test_request_bodies():
    cfg = lb.BenchConfig(base_url="x", model="m", api="chat", max_tokens=7)
    path, body = lb.request_body(cfg, "hi")
    assert path == "/v1/chat/completions" and body["messages"][0]["content"] == "hi"
    assert body["stream_options"] == {"include_usage": True} and body["min_tokens"] == 7 and body["ignore_eos"]
    path, body = lb.request_body(lb.BenchConfig(base_url="x", model="m", api="completions", stream=False), "p")
    assert path == "/v1/completions" and body["prompt"] == "p" and "stream_options" not in body
    path, body = lb.request_body(
        lb.BenchConfig(base_url="x", model="emb", api="kserve_v2", kserve_inputs=[{"a": 1}]), ""
    )
    assert path == "/v2/models/emb/infer" and body == {"inputs": [{"a": 1}]}


def test_random_prompts_are_seeded():
    cfg = lb.BenchConfig(base_url="x", prompt_words=(3, 9), seed=4)
    assert lb.make_prompts(cfg, 20) == lb.make_prompts(cfg, 20)
    assert {len(p.split()) for p in lb.make_prompts(cfg, 50)} <= set(range(3, 10))


def test_dataset_files(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "a"}\n\n{"prompt": "b", "id": 2}\n')
    assert lb.load_dataset(str(jsonl)) == ["a", "b"]
    text = tmp_path / "p.txt"
    text.write_text("first prompt\nsecond prompt\n")
    assert lb.make_prompts(lb.BenchConfig(base_url="x", dataset=lb.load_dataset(str(text))), 3) == [
        "first prompt",
        "second prompt",
        "first prompt",
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    with pytest.raises(ValueError, match="line 1"):
        lb.load_dataset(str(bad))


def test_ttft_histogram_counts_every_request():
    bins = lb.histogram([0.1, 0.1, 0.2, 0.3], buckets=4)
    assert sum(n for _, n in bins) == 4 and bins[-1][0] == pytest.approx(0.3)
    assert lb.histogram([]) == []
