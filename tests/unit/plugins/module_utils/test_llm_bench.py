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
    assert level.error_rate == pytest.approx(1 / 4)  # every request of the level counts, warm-up included
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


def _ladder(*points):
    levels = []
    for concurrency, tput, p99 in points:
        lv = _level(tput, p99)
        lv.level = concurrency
        levels.append(lv)
    return levels


def test_knee_and_operating_point():
    levels = _ladder((1, 100, 1.0), (2, 190, 1.1), (4, 200, 2.0), (8, 205, 4.0))
    assert lb.find_knee(levels, 0.10) == 2
    assert lb.operating_point(levels, 2.5) == 1  # 190 is within 90% of the best (200) under 2.5 s
    assert lb.operating_point(levels, 2.5, within=1.0) == 2
    assert lb.operating_point(levels, 0.5) is None
    assert lb.find_knee(levels[:2], 0.10) is None


def test_a_level_whose_throughput_fell_is_a_drop_not_the_knee():
    """The H200's 256 closed-loop streams gave a quarter less than 128: it was labelled the knee."""
    levels = _ladder((64, 9000, 3.0), (128, 14000, 4.0), (256, 10500, 19.0))
    assert lb.find_drops(levels, 0.10) == {2: 1}  # fell below 128 streams
    assert lb.find_knee(levels, 0.10) == 1  # the last level before throughput fell
    # Within the knee's gain it is noise, not a drop; an invalid level is neither.
    assert lb.find_drops(_ladder((1, 100, 1.0), (2, 95, 2.0)), 0.10) == {}
    levels[1].valid = False
    assert lb.find_drops(levels, 0.10) == {}


def test_a_drop_names_its_likely_cause_from_the_servers_figures():
    (level,) = _ladder((256, 10500, 19.0))
    level.gpu = {"util_mean_pct": 58.0}
    cause = lb.drop_cause(level, fixed_length=True)
    assert "closed loop with one fixed output length" in cause and "GPU utilisation 58 %" in cause
    level.server = {"preemptions": 12.0}
    assert lb.drop_cause(level, fixed_length=False).startswith("the engine preempted 12 requests")


def test_the_dialect_names_each_levels_tokens_per_event(monkeypatch):
    """A server packs more tokens into an event as its batch grows: the first level's figure is not the
    server's (1.00 was reported where the H200 packed 1.1 to 2.1 at 64 and 128 streams)."""
    from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench import ladder

    def level(cfg, n, **_):
        records = [rec(1.0 + i * 0.01, 0.1, 0.02, 8, per_event=1 if n == 1 else 2) for i in range(4)]
        return lb.judge_level(cfg, n, records, [0.0001], 0.1, 1.0, 3.0)

    monkeypatch.setattr(ladder, "run_level", level)
    monkeypatch.setattr(ladder, "server_cache_counters", lambda url: None)
    cfg = lb.BenchConfig(base_url="http://x", levels=[1, 64], fixed_length="on")
    dialect = ladder.run_benchmark(cfg).dialect
    assert dialect["tokens_per_event_by_level"] == {"1": 1.0, "64": 2.0}


def test_the_event_loop_lag_sees_below_a_millisecond():
    """uvloop's clock steps in whole milliseconds: the lag read on it was 0 or 1 ms, its P99 exactly 1 ms
    at every level. Read with perf_counter, an idle loop's lag takes many values below a millisecond,
    and a loop blocked 3 ms at a time says so."""
    import asyncio
    import time

    import uvloop
    from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench.level import _loop_lag

    async def lag(block_s: float) -> list[float]:
        samples: list[float] = []
        stop = asyncio.Event()
        task = asyncio.create_task(_loop_lag(samples, stop))
        end = time.perf_counter() + 0.4
        while block_s and time.perf_counter() < end:  # always ready, so each pass waits behind a block
            blocked = time.perf_counter()
            while time.perf_counter() - blocked < block_s:
                pass
            await asyncio.sleep(0)
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        stop.set()
        await task
        return samples

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        idle, blocked = runner.run(lag(0.0)), runner.run(lag(0.003))
    assert len({round(s, 6) for s in idle}) > 10 and lb.percentile(idle, 50) < 0.001, sorted(idle)
    assert lb.percentile(blocked, 99) > 0.002, sorted(blocked)


def test_invalid_levels_are_never_the_knee_or_recommended():
    levels = _ladder((1, 100, 1.0), (2, 190, 1.1), (4, 400, 1.2))
    levels[2].valid = False  # e.g. all of its requests failed fast, or the client was the bottleneck
    assert lb.operating_point(levels, None) == 1
    levels = _ladder((1, 100, 1.0), (2, 190, 1.1), (4, 195, 5.0))
    levels[2].valid = False
    assert lb.find_knee(levels, 0.10) is None


def test_the_recommendation_holds_between_equivalent_runs():
    # The H200 runs that flipped: 256 streams gave +4% tok/s for 4.7x the E2E P99 of 128.
    first = _ladder((64, 9000, 3.0), (128, 14000, 4.0), (256, 14560, 18.8))
    second = _ladder((64, 9100, 3.1), (128, 14500, 4.1), (256, 14300, 18.0))
    assert lb.operating_point(first, None) == lb.operating_point(second, None) == 1
    assert lb.find_knee(first, 0.10) == lb.find_knee(second, 0.10) == 2


def test_a_level_with_errors_is_invalid_and_keeps_the_servers_words():
    cfg = lb.BenchConfig(base_url="x", max_error_rate=0.01)
    said = "Unexpected fields in the request: {'ignore_eos'}"
    bad = [lb.RequestRecord(1.0 + i, 1.0 + i, 1.1 + i, error="http_422", error_detail=said) for i in range(5)]
    level = lb.judge_level(cfg, 1, [rec(1.0, 0.1, 0.02, 4), *bad], [], 0.1, 0.0, 10.0)
    assert not level.valid and "error rate" in level.invalid_reasons[0]
    assert level.error_messages == {"http_422": [said]}


def test_a_failing_level_stops_early():
    failing = lb._Failing(abort_rate=0.5)
    for _ in range(4):
        failing.count(lb.RequestRecord(0, 0, error="http_500", error_detail="boom"))
    assert failing.reason is None  # not before five requests
    failing.count(lb.RequestRecord(0, 0, error="http_500", error_detail="boom"))
    assert failing.reason and "5 of 5 requests failed (http_500: boom)" in failing.reason


def test_a_window_shorter_than_the_requests_is_flagged():
    level = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [rec(1.0, 1.0, 0.5, 40)], [], 0.1, 1.0, 5.0)
    assert any("shorter than this level's E2E P50" in w for w in level.warnings)


def events(*chunks: str) -> lb.RequestRecord:
    record = lb.RequestRecord(scheduled=0.0, start=0.0)
    for i, chunk in enumerate(chunks):
        lb.classify_event(f"data: {chunk}".encode(), record, 1.0 + i)
    return record


def test_dialect_transformers_serve_usage_beside_a_finish_and_no_done():
    record = events(
        '{"choices":[{"delta":{"role":"assistant"},"index":0}]}',
        '{"choices":[{"delta":{"content":"139"},"index":0}]}',
        '{"choices":[{"delta":{"content":" 97"},"index":0}]}',
        '{"choices":[{"delta":{},"index":0,"finish_reason":"length"}],'
        '"usage":{"completion_tokens":5,"prompt_tokens":23,"total_tokens":28}}',
    )
    assert record.role_only_first and record.finished and not record.done_marker
    assert (record.tokens, record.prompt_tokens, record.content_events) == (5, 23, 2)
    assert record.usage_with_choices and record.first_token == 2.0


def test_dialect_vllm_usage_after_the_choices_and_done():
    record = events(
        '{"choices":[{"index":0,"text":"a b","finish_reason":null}]}',
        '{"choices":[{"index":0,"text":" c","finish_reason":"length"}]}',
        '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}',
        "[DONE]",
    )
    assert record.done_marker and record.finished and not record.usage_with_choices
    assert (record.tokens, record.prompt_tokens, record.cached_tokens, record.content_events) == (3, 9, 4, 2)


def test_a_stream_cut_short_is_not_finished():
    record = events('{"choices":[{"delta":{"content":"x"},"index":0}]}')
    assert not record.finished and record.content_events == 1


def test_server_messages():
    assert lb.server_message(b'{"detail":"Unexpected fields in the request: {\'min_tokens\'}"}') == (
        "Unexpected fields in the request: {'min_tokens'}"
    )
    fastapi = b'{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer"}]}'
    assert lb.server_message(fastapi) == "body.max_tokens: Input should be a valid integer"
    assert lb.server_message(b'{"error":{"message":"model not found","type":"invalid"}}') == "model not found"
    assert lb.server_message(b"<html>Bad   Gateway</html>") == "<html>Bad Gateway</html>"


def test_request_bodies():
    cfg = lb.BenchConfig(base_url="x", model="m", api="chat", max_tokens=7)
    path, body = lb.request_body(cfg, "hi")
    assert path == "/v1/chat/completions" and body["messages"][0]["content"] == "hi"
    assert body["stream_options"] == {"include_usage": True} and "min_tokens" not in body and "ignore_eos" not in body
    path, body = lb.request_body(lb.BenchConfig(base_url="x", model="m", fixed_length="on", max_tokens=7), "hi")
    assert body["min_tokens"] == 7 and body["ignore_eos"]
    path, body = lb.request_body(lb.BenchConfig(base_url="x", model="m", api="completions", stream=False), "p")
    assert path == "/v1/completions" and body["prompt"] == "p" and "stream_options" not in body
    path, body = lb.request_body(
        lb.BenchConfig(base_url="x", model="emb", api="kserve_v2", kserve_inputs=[{"a": 1}]), ""
    )
    assert path == "/v2/models/emb/infer" and body == {"inputs": [{"a": 1}]}


def test_random_prompts_are_seeded_and_unique_from_their_first_word():
    cfg = lb.BenchConfig(base_url="x", prompt_words=(3, 9), seed=4)
    prompts = lb.make_prompts(cfg, 50)
    assert prompts == lb.make_prompts(cfg, 50)
    assert {len(p.split()) for p in prompts} <= set(range(3, 10))
    assert len({p.split()[0] for p in prompts}) == 50  # no prefix cache serves one from another
    assert lb.prompt_for(cfg, 7) != lb.prompt_for(lb.BenchConfig(base_url="x", prompt_words=(3, 9), seed=5), 7)


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


def test_a_drills_stream_is_complete_truncated_or_refused():
    from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench.drill import outcome

    done = lb.RequestRecord(scheduled=0, start=0, end=1, first_token=0.1, tokens=50, finished=True)
    assert outcome(done, 50) == "complete"
    short = lb.RequestRecord(scheduled=0, start=0, end=1, first_token=0.1, tokens=20, finished=True)
    assert outcome(short, 50) == "truncated"  # finished, but fewer tokens than the fixed length
    broken = lb.RequestRecord(scheduled=0, start=0, end=1, first_token=0.1, tokens=20, error="broken_stream")
    assert outcome(broken, 50) == "truncated"
    turned_away = lb.RequestRecord(scheduled=0, start=0, end=1, error="connect_ClientConnectorError")
    assert outcome(turned_away, 50) == "refused"
    never_started = lb.RequestRecord(scheduled=0, start=0, end=10, error="timeout")
    assert outcome(never_started, 50) == "refused"
