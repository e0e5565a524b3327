"""Benchmark reports render the ladder, the plots and the TTFT distribution."""

from ansible_collections.gpufleet.platform.plugins.module_utils import llm_bench as lb

from gpufleet import report


def test_html_report_has_table_plots_and_histogram(tmp_path):
    records = [
        lb.RequestRecord(
            scheduled=1.0 + i,
            start=1.0 + i,
            end=1.5 + i,
            first_token=1.1 + i,
            tokens=4,
            content_events=4,
            event_times=[1.1 + i, 1.2 + i, 1.3 + i, 1.4 + i],
        )
        for i in range(3)
    ]
    level = lb.judge_level(lb.BenchConfig(base_url="x"), 2, records, [0.001], 0.1, 1.0, 4.0)
    result = lb.BenchResult({}, [level], None, 0, 0.0, 1.0).as_dict()
    json_path, html_path = report.write_reports(result, tmp_path, "t")
    page = html_path.read_text()
    assert "Output tokens/s" in page and "TTFT distribution per level" in page and page.count("<svg") == 4
    assert "Throughput against latency" in page
    assert "concurrent streams (log scale)" in page and "TPOT p50" in page
    assert "recommended" in report.ladder_table(result)
    assert json_path.exists()


def test_report_shows_errors_with_the_servers_words_power_and_efficiency(tmp_path):
    good = lb.RequestRecord(scheduled=1.0, start=1.0, end=1.5, first_token=1.1, tokens=4, content_events=4,
                            event_times=[1.1, 1.2, 1.3, 1.4])  # fmt: skip
    bad = lb.RequestRecord(scheduled=2.0, start=2.0, end=2.1, error="http_422", error_detail="bad field min_tokens")
    levels = []
    for concurrency in (1, 16, 128):
        level = lb.judge_level(lb.BenchConfig(base_url="x"), concurrency, [good, bad], [], 0.1, 1.0, 4.0)
        level.gpu = {"source": "nvml", "power_mean_w": 100.0 + concurrency, "tokens_per_joule": 2.5}
        levels.append(level)
    result = lb.BenchResult({}, levels, None, None, 0.0, 1.0, gpu_source="nvml").as_dict()
    table = report.ladder_table(result)
    assert "1 x http_422: bad field min_tokens" in table and "INVALID" in table and "GPU figures: nvml" in table
    assert " 228 " in table.splitlines()[3] and "2.50" in table  # power and tok/J columns
    page = report.html_report(result, "t")
    assert "the server said" in page and "bad field min_tokens" in page
    assert "GPU power and efficiency (nvml)" in page and page.count("<svg") == 5


def test_gpu_figures_from_a_stand_in_exporter_are_marked_in_the_table_the_report_and_the_json(monkeypatch):
    from ansible_collections.gpufleet.platform.plugins.module_utils import bench_telemetry, prometheus_verify

    def query(url, promql, at):  # the lab Prometheus' answers for the FIXTURE exporter's series
        if promql.startswith("count by (gpufleet_stand_in)"):
            return [{"metric": {"gpufleet_stand_in": "dcgm-fixture"}, "value": [at, "1"]}]
        return [{"metric": {}, "value": [at, "480"]}]

    monkeypatch.setattr(prometheus_verify, "query", query)
    gpu = bench_telemetry.PrometheusGpu("http://prometheus:9090")
    good = lb.RequestRecord(scheduled=1.0, start=1.0, end=1.5, first_token=1.1, tokens=4, content_events=4,
                            event_times=[1.1, 1.2, 1.3, 1.4])  # fmt: skip
    level = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [good], [], 0.1, 1.0, 4.0)
    gpu(level)
    assert level.gpu["stand_in"] == "dcgm-fixture"
    result = lb.BenchResult({}, [level], None, None, 0.0, 1.0, gpu_source=gpu.source, gpu_stand_in=gpu.stand_in)
    data = result.as_dict()
    assert data["gpu_stand_in"] == "dcgm-fixture" and "STAND-IN" in data["gpu_source"]
    table = report.ladder_table(data)
    assert " 480* " in table and "synthetic values, no GPU was measured" in table
    assert "STAND-IN dcgm-fixture" in report.html_report(data, "t")


def test_a_real_exporters_figures_carry_no_mark(monkeypatch):
    from ansible_collections.gpufleet.platform.plugins.module_utils import bench_telemetry, prometheus_verify

    monkeypatch.setattr(prometheus_verify, "query", lambda url, promql, at: [] if "count by" in promql
                        else [{"metric": {}, "value": [at, "480"]}])  # fmt: skip
    gpu = bench_telemetry.PrometheusGpu("http://prometheus:9090")
    level = lb.judge_level(lb.BenchConfig(base_url="x"), 1, [], [], 0.1, 1.0, 4.0)
    gpu(level)
    assert level.gpu["stand_in"] is None and gpu.source == "prometheus (DCGM)"
    data = lb.BenchResult({}, [level], None, None, 0.0, 1.0, gpu_source=gpu.source).as_dict()
    assert "*" not in report.ladder_table(data).splitlines()[1] and "STAND-IN" not in report.ladder_table(data)


def test_an_open_repeated_ladder_says_its_load_its_intervals_and_its_drop():
    from ansible_collections.gpufleet.platform.plugins.module_utils.llm_bench import repeats

    cfg = lb.BenchConfig(base_url="x", mode="open", arrival="gamma", burstiness=0.5, max_concurrency=64, repeats=3)
    levels = []
    for rate, runs in ((2.0, (9000, 9100, 8900)), (4.0, (14000, 13300, 14600)), (8.0, (10500, 10900, 10200))):
        parts = []
        for tput in runs:
            level = lb.judge_level(cfg, rate, [], [], 0.1, 1.0, 4.0)
            level.output_tokens_per_s, level.e2e = tput, {"p50": 1.0, "p99": rate / 2, "mean": 1.0, "count": 9.0}
            parts.append(level)
        levels.append(repeats.combine(parts))
    drops = lb.find_drops(levels, cfg.knee_gain)
    result = lb.BenchResult({"mode": "open", "arrival": "gamma", "burstiness": 0.5, "max_concurrency": 64,
                             "max_tokens": 128, "repeats": 3}, levels, lb.find_knee(levels, 0.1), None, 0.0, 1.0,
                            drop_indices=list(drops)).as_dict()  # fmt: skip
    table = report.ladder_table(result)
    assert "load: open loop: gamma arrivals of burstiness 0.5 at each level's rate (req/s)" in table
    assert "at most 64 in flight" in table and "each level ran 3 times back to back" in table
    rows = table.splitlines()
    assert rows[2].startswith("4/s (knee)") and " ±" in rows[2]  # 14000 ± the half-width of its interval
    assert rows[3].startswith("8/s (DROP)")
    page = report.html_report(result, "t")
    assert "offered requests/s (log scale)" in page and "95 % interval of the repeats" in page


def test_a_search_ended_by_a_client_bound_level_says_that_is_no_limit_of_the_servers():
    """CI stop 49: beside the lab, the search's first level was client-bound, so it found nothing and the
    note read only "none passed", as if the server could not serve one stream."""
    cfg = lb.BenchConfig(base_url="x", search="streams")
    level = lb.judge_level(cfg, 1, [], [], 0.1, 1.0, 4.0)
    level.valid, level.client_bound, level.goodput_share = False, True, 1.0
    result = lb.BenchResult({"mode": "closed", "search": "streams", "max_tokens": 16}, [level], None, None, 0.0,
                            1.0).as_dict()  # fmt: skip
    line = next(x for x in report.notes(result) if x.startswith("SLO capacity search"))
    assert line.endswith("none passed; tried 1; level 1, where it stopped, was client-bound: no limit of the server's,"
                         " so run it again"), line  # fmt: skip
    result["levels"][0].update(valid=True, client_bound=False)
    line = next(x for x in report.notes(result) if x.startswith("SLO capacity search"))
    assert line.endswith("tried 1"), line
