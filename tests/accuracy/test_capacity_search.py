"""The SLO capacity search against the CALIBRATION SERVER (the benchmark's own stand-in for vLLM) with a
known number of slots: the search must find exactly them.

With the timing tests, alone on the machine: the search trusts no level whose client fell behind
(client-bound), and beside the lab's suites its first level was, so it found nothing (CI stop 49)."""

import json

from gpufleet import calibration_server


def test_the_slo_capacity_search_finds_the_streams_a_replica_serves_within_the_slo(tmp_path, capsys):
    """A stand-in of 4 slots serving each request in 0.42 s: a fifth stream waits for a slot (E2E P99
    0.56 s measured), so within an E2E of 0.5 s it serves 4 streams. The search finds them and writes the
    capacity file."""
    from gpufleet import cli

    process, url = calibration_server.launch(0, "--ttft", "0.1", "--itl", "0.02", "--max-num-seqs", "4")
    try:
        argv = ["bench", "--url", url, "--model", "calibration", "--search", "streams", "--slo", "e2e_p99=0.5",
                "--max-tokens", "16", "--fixed-length", "on", "--warmup", "0.5", "--duration", "2", "--gpu", "none",
                "--out", str(tmp_path)]  # fmt: skip
        assert cli.main(argv) == cli.EXIT_OK
    finally:
        process.terminate()
    result = json.loads((tmp_path / "benchmark.json").read_text())
    tried = [level["level"] for level in result["levels"]]
    assert tried == sorted(tried) and {1, 2, 4, 8} <= set(tried), tried
    assert result["levels"][result["capacity_index"]]["level"] == 4
    written = json.loads((tmp_path / "capacity.json").read_text())
    assert written["replica"]["streams"] == 4 and written["found_by"] == "capacity search, closed loop"
    assert written["slo"]["e2e_s"] == 0.5 and written["slo"]["goodput_share"] == 0.99
    assert written["slo"]["measured_share"] >= 0.99
    err = capsys.readouterr().err
    assert "capacity: one replica serves 4 streams" in err and "SLO capacity search: the highest level" in err
    assert "Goodput (e2e 0.5 s)" in (tmp_path / "benchmark.html").read_text()
