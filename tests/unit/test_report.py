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
    assert "Output tokens/s" in page and "TTFT distribution at 2" in page and page.count("<rect") == 20
    assert "recommended" in report.ladder_table(result)
    assert json_path.exists()
